#!/bin/sh
# rel-misuse-race: a small block freed by two threads at the same moment, neither of them
# its owner, gives one "free(): double free detected" in the second free, not a block that
# is listed twice among the page's remote frees (to be caught, or not, when the owner pops
# it). The race is made certain under gdb: each freeing thread is stopped by a hardware
# watchpoint right after its first access to the word the free block's key lives in
# (tests/rel-misuse.c, case remote-race-double), the second thread run to that point while
# the first waits, then both let go. A free that loads the key and stores it later lets
# both loads come first; one atomic exchange cannot. Also the case without gdb.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/rel-misuse
test -x "$prog" || bail "$prog not built"
ulimit -c 0 2>/dev/null
want_tail="free(): double free detected"

tap_timeout 30 env LD_PRELOAD="$THPALLOC_LIB" "$prog" remote-race-double >"$tap_tmp/out" 2>"$tap_tmp/err"
rc=$?
ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/out")
check "at full speed: SIGABRT (exit $rc)" test "$rc" -eq 134
check "at full speed: stderr says 'thpalloc: $want_tail ($ptr)'" \
    test "$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)" = "thpalloc: $want_tail ($ptr)"

if ! command -v gdb >/dev/null 2>&1; then
    skip "the forced interleaving under gdb" "gdb is not installed"
    done_testing
fi
# Thread 1 is main (in pthread_join), 2 and 3 the freeing threads: the first stop is in
# one of them, "5 - $_thread" is the other.
cat >"$tap_tmp/race.gdb" <<GDBEOF
set pagination off
set confirm off
set breakpoint pending on
set env LD_PRELOAD=$THPALLOC_LIB
break race_armed
run
awatch -l *key_word
delete 1
continue
set scheduler-locking on
eval "thread %d", 5 - \$_thread
continue
echo RACE-BOTH-STOPPED\\n
info threads
set scheduler-locking off
delete
continue
GDBEOF
tap_timeout 120 gdb -q -batch -nx -x "$tap_tmp/race.gdb" --args "$prog" remote-race-double \
    >"$tap_tmp/gdb.out" 2>&1
grep -v '^\[New Thread' "$tap_tmp/gdb.out" | tail -n 40 >"$tap_tmp/gdb.tail"
stops=$(grep -c 'Hardware access (read/write) watchpoint 2' "$tap_tmp/gdb.out")
if test "$stops" -lt 2; then
    # no ptrace here, no debug registers, or a build without debug information
    why=$(grep -m1 -E 'ptrace|Could not insert|No symbol|not defined|Cannot|cannot' "$tap_tmp/gdb.out")
    skip "the forced interleaving under gdb" "gdb did not stop both threads at the key: ${why:-$stops stops}"
    while IFS= read -r l; do diag "gdb: $l"; done <"$tap_tmp/gdb.tail"
    done_testing
fi
ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/gdb.out" | head -n 1)
line=$(grep '^thpalloc: ' "$tap_tmp/gdb.out" | head -n 1)
check "under gdb: both freeing threads stopped after their access to the key word ($stops watchpoint lines)" \
    grep -q RACE-BOTH-STOPPED "$tap_tmp/gdb.out"
check "under gdb: the process got SIGABRT" grep -q 'received signal SIGABRT' "$tap_tmp/gdb.out"
check "under gdb: the second free says 'thpalloc: $want_tail ($ptr)'" \
    test "$line" = "thpalloc: $want_tail ($ptr)"
check "under gdb: no 'misuse went undetected'" sh -c '! grep -q "misuse went undetected" "$1"' sh "$tap_tmp/gdb.out"
test "$line" = "thpalloc: $want_tail ($ptr)" || while IFS= read -r l; do diag "gdb: $l"; done <"$tap_tmp/gdb.tail"
done_testing
