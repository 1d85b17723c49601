# Shared TAP helpers of the tests that run C programs (relay of tests/relay-report.h lines,
# timeouts, a scratch directory, stand-in mode). Sourced (POSIX sh).
#
# Environment (exported by `make check`, see Makefile.am):
#   THPALLOC_LIB     absolute path of the built libthpalloc.so.1
#   TESTS_BUILDDIR   the build's tests/ directory (programs, tests/.libs/*.so)
#   TESTS_SRCDIR     the source tests/ directory
# Developer switch, never set by make check:
#   THPALLOC_TEST_STANDIN=1  THPALLOC_LIB is another allocator (e.g. mimalloc) standing in
#                            for thpalloc: thpalloc-only checks are skipped instead of failed.

set -u

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

standin() { test "${THPALLOC_TEST_STANDIN:-0}" = 1; }
# thp_check DESC CMD...: a check that only thpalloc can pass (skipped in stand-in mode).
thp_check() {
    if standin; then skip "$1 (stand-in allocator)"; else check "$@"; fi
}

: "${THPALLOC_LIB:?THPALLOC_LIB is not set (run through make check)}"
: "${TESTS_BUILDDIR:?TESTS_BUILDDIR is not set (run through make check)}"
: "${TESTS_SRCDIR:=$TESTS_BUILDDIR}"
test -r "$THPALLOC_LIB" || bail "THPALLOC_LIB=$THPALLOC_LIB does not exist"

tap_tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-test.XXXXXX") || bail "mktemp failed"
trap 'rm -rf "$tap_tmp"' EXIT
trap 'exit 130' INT TERM HUP

# tap_timeout SECONDS CMD...: runs CMD, killed (SIGKILL 5 s after SIGTERM) when it hangs.
# Exit status 124 = timed out, 128+N = killed by signal N.
tap_timeout() { timeout -k 5 "$@"; }

# relay LABEL SECONDS CMD...: runs CMD (a C test program) under a timeout and turns its
# output into numbered TAP: lines "ok - D", "not ok - D"; "thp-only - ok - D" and
# "thp-only - not ok - D" for checks only thpalloc can pass (skipped in stand-in mode);
# "end" marks completion; anything else is a diagnostic. Then one more assertion: CMD
# exited 0 within SECONDS and printed "end". Its stderr is shown as diagnostics; relay_rc
# is CMD's exit status.
relay() {
    _label=$1
    _secs=$2
    shift 2
    tap_timeout "$_secs" "$@" >"$tap_tmp/relay.out" 2>"$tap_tmp/relay.err"
    _rc=$?
    _end=0
    while IFS= read -r _line; do
        case $_line in
        "ok - "*) pass "$_label: ${_line#ok - }" ;;
        "not ok - "*) fail "$_label: ${_line#not ok - }" ;;
        "thp-only - "*)
            # an assertion that holds only for thpalloc: "thp-only - ok|not ok - DESC"
            _rest=${_line#thp-only - }
            if standin; then
                skip "$_label: ${_rest#*ok - } (stand-in allocator)"
            else
                case $_rest in
                "ok - "*) pass "$_label: ${_rest#ok - }" ;;
                *) fail "$_label: ${_rest#not ok - }" ;;
                esac
            fi
            ;;
        "end") _end=1 ;;
        "# "*) printf '%s\n' "$_line" ;;
        *) diag "$_line" ;;
        esac
    done <"$tap_tmp/relay.out"
    if test -s "$tap_tmp/relay.err"; then
        diag "stderr of $_label:"
        head -n 20 "$tap_tmp/relay.err" | sed 's/^/#   /'
    fi
    if test "$_rc" -eq 124; then
        fail "$_label: finished within ${_secs}s (it hung: timed out)"
    elif test "$_rc" -eq 0 && test "$_end" -eq 1; then
        pass "$_label: ran to completion, exit 0"
    else
        fail "$_label: ran to completion, exit 0 (exit status $_rc, end marker $_end)"
    fi
    relay_rc=$_rc
}
