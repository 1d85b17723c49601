# Shared by tests/status-*.sh (sourced): TAP output (tests/tap.sh), the two builds of thp-status, and
# helpers to read the kernel's own figures. Needs TESTS_BUILDDIR and TESTS_SRCDIR (make
# check exports them) and python3 for JSON.
set -u
: "${TESTS_BUILDDIR:?run through make check}" "${TESTS_SRCDIR:?run through make check}"
TOP_BUILDDIR=$(cd "$TESTS_BUILDDIR/.." && pwd)
TOP_SRCDIR=$(cd "$TESTS_SRCDIR/.." && pwd)
# The tool as installed, and the same sources under ASan + UBSan.
TOOLS="$TOP_BUILDDIR/tools/thp-status/thp-status $TESTS_BUILDDIR/status-thp-status-asan"
HOLDER=$TESTS_BUILDDIR/status-holder
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:exitcode=99}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=98}
PYTHON=${PYTHON:-python3}

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/thp-status-test.XXXXXX")
chmod 755 "$SCRATCH"
SANLOG=$SCRATCH/sanitizer.log
: >"$SANLOG"
CLEANUP_PIDS=
cleanup() {
    for p in $CLEANUP_PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

. "$TESTS_SRCDIR/tap.sh"

# run TOOL ARGS...: stdout in $OUT, stderr in $ERR, status in $RC. Sanitizer reports are
# collected for sanitizer_clean.
OUT=$SCRATCH/out
ERR=$SCRATCH/err
run() {
    "$@" >"$OUT" 2>"$ERR"
    RC=$?
    if grep -qE 'Sanitizer|runtime error:' "$ERR"; then
        { echo "== $*"; cat "$ERR"; } >>"$SANLOG"
    fi
    return 0
}
sanitizer_clean() { # one assertion per tool build
    if [ -s "$SANLOG" ]; then
        ok 1 "$1: no ASan/UBSan report"
        sed 's/^/#   /' "$SANLOG" | head -40
    else
        ok 0 "$1: no ASan/UBSan report"
    fi
    : >"$SANLOG"
}
# "crashed" = killed by a signal or a sanitizer exit status
not_crashed() { [ "$1" -lt 98 ] || [ "$1" -gt 99 ] && [ "$1" -lt 128 ]; }

# json FILE PYTHON-EXPRESSION-OVER-d: prints the value (JSON for containers)
json() {
    "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
PY
}
json_valid() { "$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }

sysfs_selected() { sed -n 's/.*\[\([^]]*\)\].*/\1/p' "$1"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
# sampled FILE KEY CMD...: runs CMD (as run does: $OUT, $ERR, $RC) while a sampler reads
# KEY of FILE (/proc/meminfo, /proc/vmstat) in a loop without forking, from before CMD
# starts until after it ends; sets LO and HI, the least and greatest figure seen. Other
# processes on the machine change these figures at any moment, and back again (a neighbour
# that maps and unmaps 64 MiB): a figure the tool printed must lie within what the kernel
# showed while it ran; equal to it when nothing moved (LO = HI).
sampled() {
    _sf=$1 _sk=$2
    shift 2
    rm -f "$SCRATCH/sampled.go" "$SCRATCH/sampled.stop" "$SCRATCH/sampled.out"
    (
        lo= hi= last=
        while :; do
            while read -r k v _; do
                if [ "$k" = "$_sk:" ] || [ "$k" = "$_sk" ]; then break; fi
            done <"$_sf"
            if [ -z "$lo" ] || [ "$v" -lt "$lo" ]; then lo=$v; fi
            if [ -z "$hi" ] || [ "$v" -gt "$hi" ]; then hi=$v; fi
            [ -n "$last" ] && break
            [ -e "$SCRATCH/sampled.go" ] || : >"$SCRATCH/sampled.go"
            # One more read after the stop is seen: the last one follows CMD's end.
            [ -e "$SCRATCH/sampled.stop" ] && last=1
        done
        echo "$lo $hi" >"$SCRATCH/sampled.out"
    ) &
    _spid=$!
    while [ ! -e "$SCRATCH/sampled.go" ]; do sleep 0.01; done
    run "$@"
    : >"$SCRATCH/sampled.stop"
    wait "$_spid"
    read -r LO HI <"$SCRATCH/sampled.out"
}
# in_sampled GOT [SLACK]: GOT lies within the last sampled LO..HI, widened by SLACK.
in_sampled() {
    [ -n "$1" ] && [ "$1" -ge $((LO - ${2:-0})) ] 2>/dev/null && [ "$1" -le $((HI + ${2:-0})) ]
}
# within GOT DESCRIPTION [SLACK]: one assertion that GOT lies within the last sampled
# LO..HI (widened by SLACK); equality when nothing moved and there is no slack.
within() {
    if [ "$LO" = "$HI" ] && [ "${3:-0}" = 0 ]; then
        is "$1" "$LO" "$2 (nothing moved)"
    else
        ok $(in_sampled "$1" "${3:-0}"; echo $?) \
            "$2 (got $1; the kernel showed $LO..$HI while the tool ran${3:+, ± $3})"
    fi
}
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
rollup() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/smaps_rollup"; }

# wait_line PID FILE [PATTERN [TRIES]]: waits, 0.05 s a try, until FILE has a line that
# matches PATTERN (a grep pattern, ^ready unless given); 1 when PID ends first or TRIES
# tries (300 unless given) are spent.
wait_line() {
    _wtry=0
    while ! grep -q "${3:-^ready}" "$2" 2>/dev/null; do
        _wtry=$((_wtry + 1))
        if [ $_wtry -gt "${4:-300}" ] || ! kill -0 "$1" 2>/dev/null; then
            return 1
        fi
        sleep 0.05
    done
}

# start_holder [N] [ENV...]: a status-holder under thpalloc ($HOLDER_PRELOAD when set, else
# $THPALLOC_LIB); sets HOLDER_PID, HOLDER_OUT.
start_holder() {
    n=${1:-4}
    shift || true
    HOLDER_SEQ=$((${HOLDER_SEQ:-0} + 1))
    HOLDER_OUT=$SCRATCH/holder.$HOLDER_SEQ
    env "$@" LD_PRELOAD="${HOLDER_PRELOAD:-$THPALLOC_LIB}" "$HOLDER" "$n" >"$HOLDER_OUT" 2>&1 &
    HOLDER_PID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $HOLDER_PID"
    if ! wait_line "$HOLDER_PID" "$HOLDER_OUT"; then
        diag "status-holder did not start:"
        sed 's/^/#   /' "$HOLDER_OUT"
        return 1
    fi
}

# start_bogus self|lib MODE [ENV...]: a status-bogus (tests/status-bogus.c) lying in MODE,
# run as a copy named libthpalloc.so.1 (self) or with the real library preloaded (lib);
# sets BPID and BOUT, its output (shown when it does not start: 1).
start_bogus() {
    _bhow=$1 _bmode=$2
    shift 2
    BOGUS_EXE=$SCRATCH/bogus/libthpalloc.so.1
    if [ ! -e "$BOGUS_EXE" ]; then
        mkdir -p "$SCRATCH/bogus"
        cp "$TESTS_BUILDDIR/status-bogus" "$BOGUS_EXE"
    fi
    BOUT=$SCRATCH/bogus.$_bhow.$_bmode
    # The file is the previous run's otherwise: its "ready" line, read before the new
    # shell truncates it, sent thp-status to a PID that was still sh, not yet exec'd.
    rm -f "$BOUT"
    if [ "$_bhow" = self ]; then
        env "$@" "$BOGUS_EXE" self "$_bmode" >"$BOUT" 2>&1 &
    else
        env "$@" LD_PRELOAD="$THPALLOC_LIB" "$TESTS_BUILDDIR/status-bogus" lib "$_bmode" >"$BOUT" 2>&1 &
    fi
    BPID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $BPID"
    wait_line "$BPID" "$BOUT" "^ready $BPID\$" 200 || { sed 's/^/#   /' "$BOUT"; return 1; }
}

# promtool (Prometheus's checker): $PROMTOOL, on PATH, or where tools/dev/install-build-deps
# puts it (tools/dev/fetch-promtool). promtool_check FILE DESCRIPTION: one assertion that
# `promtool check metrics` accepts FILE (lint included); a skip where there is no promtool,
# a failure instead under THPALLOC_REQUIRE_PROMTOOL=1 (CI, as .ci/run sets it).
for PROMTOOL in "${PROMTOOL:-}" "$(command -v promtool 2>/dev/null)" \
    "${THPALLOC_CI_CACHE:-/var/cache/thpalloc-ci}/promtool/promtool" ""; do
    [ -n "$PROMTOOL" ] && [ -x "$PROMTOOL" ] && break
done
promtool_check() {
    if [ -z "$PROMTOOL" ]; then
        if [ "${THPALLOC_REQUIRE_PROMTOOL:-0}" = 1 ]; then
            ok 1 "$2: promtool check metrics (no promtool: tools/dev/fetch-promtool)"
        else
            skip "$2: promtool check metrics" "no promtool (tools/dev/fetch-promtool)"
        fi
        return
    fi
    "$PROMTOOL" check metrics <"$1" >"$SCRATCH/promtool.out" 2>&1
    prc=$?
    ok $prc "$2: promtool check metrics"
    [ $prc -eq 0 ] || sed 's/^/#   /' "$SCRATCH/promtool.out" | head -10
}
# text_clean FILE: prints what in FILE a terminal would act on or a reader cannot see
# (control characters but newlines, C1 controls, format characters such as bidirectional
# controls and zero-width spaces, line and paragraph separators, default-ignorable code
# points, bytes that are not UTF-8); nothing if it is clean.
text_clean() {
    "$PYTHON" - "$1" <<'PY'
import re, sys, unicodedata
b = open(sys.argv[1], "rb").read()
try:
    t = b.decode("utf-8")
except UnicodeDecodeError as e:
    print("not UTF-8 at byte %d: %r" % (e.start, b[max(0, e.start - 20):e.start + 4])); sys.exit()
# Invisible: general categories Cc (but newline), Cf, Zl, Zp, and the default-ignorable code
# points that are not Cf (Python's unicodedata has no such property: listed here).
ignorable = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
                       "\ufff0-\ufff8\U000e0000-\U000e0fff\u2065]")
for i, c in enumerate(t):
    if (c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")) or ignorable.match(c):
        print("raw U+%04X at %d: %r" % (ord(c), i, t[max(0, i - 20):i + 4]))
        break
PY
}
