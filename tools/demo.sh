#!/bin/sh
# The main job: a real program (python3 filling 4 x 64 MiB buffers) run once under glibc
# and once under thpalloc, each showing its huge pages from /proc/PID/smaps_rollup.
set -eu
lib=${THPALLOC_LIB:-$(dirname "$0")/../lib/.libs/libthpalloc.so.1}
[ -e "$lib" ] || { echo "demo: $lib not built; run make first" >&2; exit 1; }
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib") # children may change directory
prog='
import os
bufs = [bytearray(64 << 20) for _ in range(4)]
for b in bufs:
    b[::4096] = b"\x01" * (len(b) // 4096)   # touch every page
with open("/proc/%d/smaps_rollup" % os.getpid()) as f:
    v = {l.split(":")[0]: int(l.split()[1]) for l in f if l.endswith("kB\n")}
print("  pid %d: Rss %6d kB  Anonymous %6d kB  AnonHugePages %6d kB (%d %% of anonymous)"
      % (os.getpid(), v["Rss"], v["Anonymous"], v["AnonHugePages"],
         100 * v["AnonHugePages"] // max(v["Anonymous"], 1)))
'
echo "THP setting: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unavailable)"
echo "python3 under glibc malloc:"
python3 -c "$prog"
echo "python3 under thpalloc (LD_PRELOAD=$lib):"
LD_PRELOAD="$lib" python3 -c "$prog"
