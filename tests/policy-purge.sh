#!/bin/bash
# Memory goes back to the kernel after purge_delay, with no further allocator call (the
# background purger), or, in a process too small for the purger, at its own allocator calls
# after purge_delay; as anonymous RSS and LazyFree in /proc/self/smaps_rollup show.
set -u
probe=$TESTS_BUILDDIR/policy-probe
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
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
# Below the 16 MiB that start the purger thread, the process's own allocator calls give back
# what purge_delay has made due: 8 MiB in small blocks (pages) with purge_delay=300ms. Watched
# idle for 200 ms first (nothing may go before the delay), then with a malloc and a free every
# 10 ms. The library's clock is CLOCK_MONOTONIC_COARSE, a tick (4 ms here) behind the
# probe's: the drop is checked from 250 ms, the idle look is what shows nothing went early.
# Extents (12000- and 60000-byte blocks) do not wait in such a process: a free that leaves
# 64 KiB or more of resident run gives it back at once (the trim), as glibc trims the top of
# its heap, since a process that goes idle would otherwise keep it.
small() { out=$(env "$@" LD_PRELOAD="$THPALLOC_LIB" timeout 30 "$probe" small 8 "$block"); echo "$out" | sed 's/^/# /'; }
for block in 2000 12000 60000; do
    echo "# 8 MiB in blocks of $block bytes"
    small THPALLOC_PURGE_DELAY=300ms PROBE_IDLE_MS=200 PROBE_WATCH_MS=3000
    d=$(get drop_ms); b=$(get base_kb); f=$(get full_kb); i=$(get idle_kb)
    if [ "$block" = 2000 ]; then
        test "$i" -gt $(((b + f) / 2))
        ok $? "small process, $block-byte blocks: still resident before purge_delay (${i} kB; ${b} -> ${f})"
        test "$d" -ge 250 -a "$d" -le 1500
        ok $? "small process, $block-byte blocks: back at its own calls after purge_delay (${d} ms, ${b} -> $(get end_kb) kB)"
    else
        test "$f" -gt $((b + 6000)) -a "$i" -lt $((b + (f - b) / 8))
        ok $? "small process, $block-byte blocks: given back at the frees, before purge_delay (${i} kB idle; ${b} -> ${f})"
    fi
    test "$(get threads)" = 1
    ok $? "small process, $block-byte blocks: no purger thread (threads=$(get threads))"
done
block=2000
small THPALLOC_PURGE_DELAY=300ms PROBE_IDLE_MS=200 PROBE_WATCH_MS=3000 PROBE_FORK=1
d=$(get drop_ms)
test "$(get idle_kb)" -gt $((($(get base_kb) + $(get full_kb)) / 2)) -a "$d" -ge 250 -a "$d" -le 1500
ok $? "small process, forked child: what the parent left waiting goes back at the child's calls (${d} ms)"
# A real program: python3 builds ~20 MiB of strings and lists (less than 16 MiB waits at
# once as it frees them), drops them, and goes on with light work for 1.5 s. What it freed
# comes back at its own calls, with no second thread.
if test -x /usr/bin/python3; then
    out=$(THPALLOC_PURGE_DELAY=300ms LD_PRELOAD="$THPALLOC_LIB" timeout 30 /usr/bin/python3 -c '
import time
def status(key):
    for l in open("/proc/self/status"):
        if l.startswith(key + ":"): return int(l.split()[1])
base = status("VmRSS")
big = [("x" * (1000 + i % 5000)) for i in range(1500)]
lists = [list(range(i % 2000)) for i in range(1200)]
phase = status("VmRSS")
del big, lists
freed = status("VmRSS")
t = time.time()
while time.time() - t < 1.5:
    s = [("y" * (500 + i % 3000)) for i in range(50)]
    d = {i: str(i) * 10 for i in range(200)}
    time.sleep(0.005)
print("base_kb=%d\nphase_kb=%d\nfreed_kb=%d\nend_kb=%d\nthreads=%d" % (base, phase, freed, status("VmRSS"), status("Threads")))
')
    echo "$out" | sed 's/^/# /'
    b=$(get base_kb); p=$(get phase_kb); f=$(get freed_kb); e=$(get end_kb)
    test -n "$e" && test $((f - b)) -gt $(((p - b) / 4)) -a $((e - b)) -lt $(((p - b) / 4)) -a "$(get threads)" = 1
    ok $? "python3: a phase's memory, resident after the frees (${f} kB), comes back during light work (${e} kB; ${b} -> ${p} kB), one thread"
fi
# The thread cannot be created (RLIMIT_NPROC: as nobody, with a limit of one process): 24 MiB
# freed, more than starts the thread, still comes back at the process's own calls.
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v prlimit >/dev/null &&
    nobody test -r "$THPALLOC_LIB" -a -x "$probe"; then
    out=$(THPALLOC_PURGE_DELAY=300ms PROBE_IDLE_MS=200 PROBE_WATCH_MS=3000 LD_PRELOAD="$THPALLOC_LIB" \
        timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=1:1 \
        "$probe" small 24 2000)
    echo "$out" | sed 's/^/# /'
    d=$(get drop_ms)
    test "$(get threads)" = 1 -a "$d" -ge 250 -a "$d" -le 1500
    ok $? "no thread to be had (RLIMIT_NPROC): 24 MiB freed comes back at the process's own calls (${d} ms, threads=$(get threads))"
else
    skip "no thread to be had (RLIMIT_NPROC)" "needs root, setpriv and prlimit, and a build nobody can read"
fi
# Empty extent chunks go back to the arena; only those known to read as zero go back as
# purged, so calloc on the chunks they become is zero under every setting (the build at
# 03c8814 handed written chunks out as zero with purge_delay=never and with thp=always).
for set in "THPALLOC_PURGE_DELAY=1s" "THPALLOC_PURGE_DELAY=never" "THPALLOC_PURGE_DELAY=0" \
    "THPALLOC_THP=always" "THPALLOC_PURGE=free"; do
    out=$(env "$set" LD_PRELOAD="$THPALLOC_LIB" timeout 30 "$probe" calloc-reuse)
    test "$(get nonzero)" = 0
    ok $? "$set: calloc on chunks the extents gave back is zero ($(get nonzero) of 786432 sampled bytes not)"
done
small THPALLOC_PURGE_DELAY=never PROBE_WATCH_MS=1000
test "$(get drop_ms)" = 999999 -a "$(get end_kb)" -gt $(($(get base_kb) + 6000))
ok $? "small process, purge_delay=never: kept ($(get end_kb) kB after 1 s of calls)"
done_testing
