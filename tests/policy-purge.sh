#!/bin/bash
# Memory goes back to the kernel after purge_delay, with no further allocator call (the
# background purger), as anonymous RSS and LazyFree in /proc/self/smaps_rollup show.
set -u
probe=$TESTS_BUILDDIR/policy-probe
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
get() { sed -n "s/^$1=//p" <<<"$out"; }
run() { out=$(env "$@" LD_PRELOAD="$THPALLOC_LIB" timeout 30 "$probe" purge 512 "$block"); echo "$out" | sed 's/^/# /'; }

t=$(LD_PRELOAD="$THPALLOC_LIB" "$probe" threads | sed -n 's/^threads=//p')
test "$t" = 1
ok $? "a process with little to purge has no purger thread (threads=$t)"

for block in 4194304 1000; do
    echo "# blocks of $block bytes"
    run PROBE_HALF_MS=500
    d=$(get drop_ms); h=$(get half_kb); f=$(get full_kb)
    test "$h" -gt $((f / 2))
    ok $? "purge_delay=1s: memory still resident after 0.5 s (${h} of ${f} kB)"
    test "$d" -ge 950 -a "$d" -le 1800
    ok $? "purge_delay=1s: anonymous RSS below 10 % of 512 MiB after ${d} ms"
    test "$(get lazyfree_max_kb)" = 0
    ok $? "purge=dontneed leaves nothing in LazyFree"
    test "$(get threads)" = 2
    ok $? "the background purger was started (threads=$(get threads))"
    run THPALLOC_PURGE_DELAY=0 PROBE_HALF_MS=0
    d=$(get drop_ms)
    test "$d" -le 200
    ok $? "purge_delay=0: returned at once (${d} ms)"
done
block=4194304
run THPALLOC_PURGE_DELAY=never PROBE_WATCH_MS=1500
test "$(get drop_ms)" = 999999 -a "$(get end_kb)" -gt 500000
ok $? "purge_delay=never keeps the memory ($(get end_kb) kB after 1.5 s)"
# The exception thpalloc.conf(5) states: a block of more than half an arena has a mapping of
# its own, unmapped when it is freed, whatever purge_delay.
block=$((40 << 20))
run THPALLOC_PURGE_DELAY=never PROBE_WATCH_MS=1500
d=$(get drop_ms)
test "$d" -ge 0 -a "$d" -le 200
ok $? "purge_delay=never: a 40 MiB block (a mapping of its own) is unmapped at once (${d} ms)"
block=4194304
run THPALLOC_PURGE=free THPALLOC_PURGE_DELAY=200ms PROBE_WATCH_MS=1500
test "$(get lazyfree_max_kb)" -gt 400000
ok $? "purge=free: the memory shows as LazyFree ($(get lazyfree_max_kb) kB)"
echo "1..$n"
