#!/bin/sh
# stress-fork: thousands of fork()s and posix_spawn()s from a threaded process whose other
# threads allocate, free across threads and exit, with the purger thread busy
# (purge_delay=5ms); a watchdog inside tests/stress-fork dumps every thread's stack (gdb) and
# fails when progress stops (issue 38's hang). See the comment at the top of stress-fork.c.
#   SOAK=N  N times the forks and spawns (long runs; the time limit grows with it)
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

PROG=$TESTS_BUILDDIR/stress-fork
test -x "$PROG" || bail "$PROG is missing"
soak=${SOAK:-1}
case $soak in '' | *[!0-9]*) soak=1 ;; esac
test "$soak" -ge 1 || soak=1

# The program itself under plain glibc: the same checks must hold.
relay "glibc control" 120 env -u LD_PRELOAD SOAK= "$PROG" -g -n 150 -w 20

start=$(date +%s)
relay "thpalloc" $((150 * soak)) env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=5ms \
    SOAK="$soak" "$PROG" -w 20
diag "thpalloc soak: $(($(date +%s) - start)) s"

# The watchdog's own test: the 4th fork child blocks on a mutex a parent thread held across
# the fork. The soak must stop, say where, show the child's stack and fail, in seconds.
start=$(date +%s)
tap_timeout 90 env LD_PRELOAD="$THPALLOC_LIB" SOAK_FORK_SELFTEST=deadlock SOAK= \
    "$PROG" -n 60 -w 3 >"$tap_tmp/self.out" 2>"$tap_tmp/self.err"
rc=$?
secs=$(($(date +%s) - start))
check "self-test: a deadlocked child makes the soak fail (exit 1, got $rc, ${secs}s)" \
    test "$rc" -eq 1
check "self-test: the watchdog names the stalled count (forks stuck at 3)" \
    grep -q '^# STALL: forks stuck at 3 ' "$tap_tmp/self.out"
check "self-test: it reports the stall as a failed assertion" \
    grep -q '^not ok - no stall' "$tap_tmp/self.out"
if command -v gdb >/dev/null 2>&1; then
    # gdb may be refused (no ptrace in a container): then the wchan lines must be there.
    if grep -q 'in fork_child ' "$tap_tmp/self.out"; then
        check "self-test: the stuck child's stack shows fork_child in pthread_mutex_lock" \
            grep -q 'pthread_mutex_lock.*held_across_fork' "$tap_tmp/self.out"
    else
        diag "gdb could not attach: $(grep -m1 -i 'ptrace\|attach' "$tap_tmp/self.out")"
        check "self-test: without gdb's stacks, each thread's state and wchan is shown" \
            grep -q '^#   [0-9]* stress-fork S ' "$tap_tmp/self.out"
    fi
else
    skip "self-test: the stuck child's stack (gdb is not installed)"
fi
if test "$rc" -ne 1; then
    diag "self-test output:"
    head -n 40 "$tap_tmp/self.out" | sed 's/^/#   /'
fi
done_testing
