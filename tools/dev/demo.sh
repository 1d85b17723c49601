#!/bin/sh
# The main job: a real program (python3 filling 4 x 64 MiB buffers) under glibc and under
# thpalloc, each showing its huge pages from /proc/PID/smaps_rollup; then thp-status shows
# the thpalloc process: huge pages inside thpalloc's arenas and the policy in force.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
lib=${THPALLOC_LIB:-$top/lib/.libs/libthpalloc.so.1}
status=${THP_STATUS:-$top/tools/thp-status/thp-status}
[ -e "$lib" ] || { echo "demo: $lib not built; run make first" >&2; exit 1; }
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib") # children may change directory
prog='
import os, sys, time
bufs = [bytearray(64 << 20) for _ in range(4)]
for b in bufs:
    b[::4096] = b"\x01" * (len(b) // 4096)   # touch every page
with open("/proc/%d/smaps_rollup" % os.getpid()) as f:
    v = {l.split(":")[0]: int(l.split()[1]) for l in f if l.endswith("kB\n")}
print("  pid %d: Rss %6d kB  Anonymous %6d kB  AnonHugePages %6d kB (%d %% of anonymous)"
      % (os.getpid(), v["Rss"], v["Anonymous"], v["AnonHugePages"],
         100 * v["AnonHugePages"] // max(v["Anonymous"], 1)), flush=True)
if len(sys.argv) > 1:
    sys.stdin.read()   # hold the memory until told to go
'
echo "THP setting: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unavailable)"
echo "python3 under glibc malloc:"
python3 -c "$prog"
echo "python3 under thpalloc (LD_PRELOAD=$lib):"
fifo=$(mktemp -u)
mkfifo "$fifo"
trap 'rm -f "$fifo"' EXIT
LD_PRELOAD="$lib" python3 -c "$prog" hold <"$fifo" >"$fifo.out" &
pid=$!
exec 3>"$fifo"  # keeps python3's stdin open until we close it
while ! [ -s "$fifo.out" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
cat "$fifo.out"
rm -f "$fifo.out"
if [ -x "$status" ]; then
    echo
    echo "thp-status $pid:"
    "$status" "$pid" || true
fi
exec 3>&-
wait "$pid"
