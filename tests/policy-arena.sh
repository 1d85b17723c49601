#!/bin/bash
# arena_size, and what happens when the kernel refuses a reservation (RLIMIT_AS): smaller
# reservations are tried before an allocation fails; stats = exit prints the figures.
set -u
probe=$TESTS_BUILDDIR/policy-probe
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
kib() { sed -n "s/.* $1=\([0-9]*\)K.*/\1/p" <<<"$err"; }

err=$(LD_PRELOAD="$THPALLOC_LIB" "$probe" share 100000 2>&1 >/dev/null)
[ -z "$err" ]
ok $? "stats = no (default): nothing on stderr at exit"
err=$(LD_PRELOAD="$THPALLOC_LIB" THPALLOC_STATS=exit "$probe" share 100000 2>&1 >/dev/null)
echo "# $err"
grep -q '^thpalloc: stats reserved=[0-9]*K committed=[0-9]*K huge_advised=[0-9]*K in_use=[0-9]*K purge_pending=[0-9]*K purged=[0-9]*K dense_huge=[0-9]*K dense_collapses=[0-9]* dense_splits=[0-9]* dense_ahead=[0-9]*$' <<<"$err"
ok $? "stats = exit prints one line of figures at exit"
r=$(kib reserved)
test "${r:-0}" -ge $((64 * 1024)) -a "${r:-0}" -lt $((80 * 1024))
ok $? "arena_size = 64M (default): one 64 MiB arena reserved (reserved=${r}K)"
err=$(LD_PRELOAD="$THPALLOC_LIB" THPALLOC_STATS=exit THPALLOC_ARENA_SIZE=8M "$probe" share 100000 2>&1 >/dev/null)
r=$(kib reserved)
test "${r:-0}" -ge $((8 * 1024)) -a "${r:-0}" -lt $((16 * 1024))
ok $? "arena_size = 8M: an 8 MiB arena (reserved=${r}K)"
# Address space for the program itself plus ~24 MiB: a 64 MiB arena cannot be had.
out=$(prlimit --as=$((48 * 1024 * 1024)) env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_STATS=exit \
    "$probe" share 100000 2>"$TESTS_BUILDDIR/policy-arena.err")
rc=$?
err=$(cat "$TESTS_BUILDDIR/policy-arena.err")
rm -f "$TESTS_BUILDDIR/policy-arena.err"
r=$(kib reserved)
test "$rc" = 0 && grep -q '^share=' <<<"$out" && test "${r:-0}" -gt 0 -a "${r:-0}" -lt $((48 * 1024))
ok $? "RLIMIT_AS of 48 MiB: smaller reservations are tried and the allocation succeeds (reserved=${r}K)"
done_testing
