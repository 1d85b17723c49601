#!/bin/sh
# build-tsan: the library's threaded handshakes that ThreadSanitizer can follow, built with
# clang -fsanitize=thread and run with no ThreadSanitizer report:
#  - unit-extent-lock: the extent shards' lock (a CAS word, futex sleeps) under threads that
#    take and free blocks at once, and across a fork (the sources of tests/unit.am);
#  - build-tsan-signal: purge-signal.c's notes from several threads against a purger that counts
#    the wake-ups and sleeps on them (its atomics, signal_lock, the Dekker pairs).
# Not the allocator itself: TSan's runtime must own malloc (its interceptors record every
# allocation, and the runtime allocates before the program's malloc could), and the reclaim
# handshake's asymmetric fences (membarrier against a signal fence) are invisible to it;
# docs/design.md says so ("Race checking"). The other unit tests are single-threaded.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

top=$(cd "$TESTS_SRCDIR/.." && pwd)
# lib/thpalloc.h is made by configure: in the build tree (not the source tree in a VPATH build).
btop=$(cd "${TESTS_BUILDDIR:-$TESTS_SRCDIR}/.." && pwd)
CLANG=${CLANG:-clang}
cflags="-std=gnu11 -g -O1 -fsanitize=thread -fno-omit-frame-pointer -pthread -D_GNU_SOURCE=1
 -I$btop/lib -I$top/lib -I$top/tests"
export TSAN_OPTIONS=halt_on_error=0:exitcode=66

# clang 14's runtime refuses the high mmap randomisation of newer kernels ("unexpected memory
# mapping"): then the programs run with ASLR off (setarch -R), or the test is skipped.
echo 'int main(void){return 0;}' | $CLANG -x c -fsanitize=thread - -o "$tap_tmp/probe" 2>/dev/null ||
    skip_all "needs $CLANG with ThreadSanitizer's runtime (libclang-rt-14-dev)"
run=
if ! "$tap_tmp/probe" 2>/dev/null; then
    run="setarch $(uname -m) -R"
    $run "$tap_tmp/probe" 2>/dev/null || skip_all "ThreadSanitizer programs do not run on this kernel"
fi

l=$top/lib
below_signal="$l/arena.c $l/arena-advice.c $l/purge-signal.c $l/purge-rules.c $l/registry.c
 $l/meta.c $l/os.c $l/counters.c $l/thp.c"
# tsan NAME SRC...: builds NAME with -fsanitize=thread, runs it: its TAP all ok, exit 0 and
# no ThreadSanitizer report.
tsan() {
    _n=$1
    shift
    # shellcheck disable=SC2086 # word-split on purpose: flags and source lists
    $CLANG $cflags "$@" -o "$tap_tmp/$_n" >"$tap_tmp/$_n.cc" 2>&1
    check "tsan: $_n builds with -fsanitize=thread" test -x "$tap_tmp/$_n"
    test -x "$tap_tmp/$_n" || {
        head -n 5 "$tap_tmp/$_n.cc" | diag
        return
    }
    # shellcheck disable=SC2086 # $run: empty, or setarch and its arguments
    tap_timeout 120 $run "$tap_tmp/$_n" >"$tap_tmp/$_n.out" 2>"$tap_tmp/$_n.err"
    _rc=$?
    _ok=$(grep -c '^ok ' "$tap_tmp/$_n.out")
    check "tsan: $_n passes ($_ok assertions, exit $_rc)" \
        test "$_rc" -eq 0 -a "$_ok" -gt 0 -a "$(grep -c '^not ok' "$tap_tmp/$_n.out")" -eq 0
    if grep -q 'WARNING: ThreadSanitizer' "$tap_tmp/$_n.err"; then
        fail "tsan: $_n: no ThreadSanitizer report"
        grep -E 'WARNING: ThreadSanitizer|^  [A-Z].* (of|by)|#[01] ' "$tap_tmp/$_n.err" |
            head -n 12 | diag
    else
        pass "tsan: $_n: no ThreadSanitizer report"
    fi
}
# shellcheck disable=SC2086
tsan unit-extent-lock -DTHPALLOC_DEBUG "$top/tests/unit-extent-lock.c" "$l/extent.c" \
    "$l/extent-purge.c" "$l/extent-run.c" $below_signal
# shellcheck disable=SC2086
tsan build-tsan-signal "$top/tests/build-tsan-signal.c" $below_signal
done_testing
