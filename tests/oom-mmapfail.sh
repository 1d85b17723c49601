#!/bin/sh
# oom-mmapfail: LD_PRELOAD="oom-mmapfail-interpose.so:$THPALLOC_LIB" makes anonymous mmap (and
# mremap, mprotect; madvise in a second pass) fail from the Nth call, N = 1..40. Each run
# must end normally (no crash, no hang: each runs under `timeout`); every NULL must come
# with ENOMEM; blocks keep their contents; calloc memory is zero; once the program turns
# the failures off (mmapfail_set(0), found with dlsym) every allocation works again.
# Across all N, the interposer must have seen and failed some of thpalloc's calls (else
# this test tests nothing) and some allocations must have returned NULL.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/oom-mmapfail
interposer=$TESTS_BUILDDIR/.libs/oom-mmapfail-interpose.so
test -x "$prog" || bail "$prog not built"
test -r "$interposer" || bail "$interposer not built"

# glibc's malloc calls mmap internally (not through the interposer): these runs only show
# that the program itself is sound.
for n in 1 5; do
    relay "glibc N=$n" 20 env MMAPFAIL_AFTER=$n LD_PRELOAD="$interposer" "$prog"
done

injected=0
nulls=0
tally() {
    _s=$(sed -n 's/^stat injected=\([0-9]*\) nulls=\([0-9]*\)$/\1 \2/p' "$tap_tmp/relay.out")
    if test -n "$_s"; then
        injected=$((injected + ${_s% *}))
        nulls=$((nulls + ${_s#* }))
    fi
}
n=1
while test $n -le 40; do
    relay "thpalloc mmap fails from call $n" 20 \
        env MMAPFAIL_AFTER=$n LD_PRELOAD="$interposer:$THPALLOC_LIB" "$prog"
    tally
    n=$((n + 1))
done
for n in 1 2 3 5 8 13 21 34; do
    relay "thpalloc mmap+madvise fail from call $n" 20 \
        env MMAPFAIL_AFTER=$n MMAPFAIL_MADVISE=1 LD_PRELOAD="$interposer:$THPALLOC_LIB" "$prog"
    tally
done
diag "over all runs: $injected calls failed by the interposer, $nulls allocations returned NULL"
check "the interposer failed some of the allocator's mapping calls ($injected)" test "$injected" -gt 0
check "some allocations returned NULL, so the failure paths ran ($nulls)" test "$nulls" -gt 0
done_testing
