#!/usr/bin/python3
"""footprint-idle: what an idle process pays for thpalloc, read from the kernel.

usage: footprint-idle.py LIBRARY

For each idle program (sleep, bash, perl, python3 where present), started under plain glibc
and under LIBRARY: Private_Dirty from /proc/PID/smaps_rollup once the process has settled
(all its threads asleep, the figure unchanged between two looks), medians of three runs.
And, from /proc/PID/pagemap, the pages of the library's writable segment (relro, .data,
.bss) that `sleep` has written: the library's fixed cost in every process.
Prints the lines tests/api-taplib.sh's relay numbers ("thp-only - ok - ...": a stand-in
allocator is not held to thpalloc's footprint), then "end"."""
import os
import struct
import subprocess
import sys
import time

LIB = sys.argv[1]
# The same small environment for every run, in Debian's default locale (python3 under glibc
# takes 136 KiB more heap with LC_ALL=C; under thpalloc the same either way).
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# The target is +64 KiB over glibc for a small idle process; measured here +48-52
# (sleep), +60-64 (bash), +52-60 (perl). The bound leaves 16 KiB for noise (glibc's own
# figure moves by 4-8 KiB between runs) and catches a regression of a few pages.
BOUND_KIB = 80
# python3 misses it (+148-152 KiB: small-class slack and the freed extent runs nothing purges
# without the purger thread, docs/benchmarks.md); +200-204 while a single-threaded process's
# extents still went through the thread cache. The bound catches that regression.
PYTHON_BOUND_KIB = 184
PAGES_MAX = 3  # relro, .data with the first .bss globals, the other globals (the first
# arena's registry entries are registry_hot's: no page of the root)



def tap(good, what):
    print("thp-only - %s - %s" % ("ok" if good else "not ok", what))
    sys.stdout.flush()


def diag(text):
    for line in text.splitlines():
        print("# " + line)


def asleep(pid):
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "S":
                    return False
        return True
    except OSError:
        return False


def private_dirty(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    return None


def start(argv, lib):
    env = dict(ENV)
    if lib:
        env["LD_PRELOAD"] = lib
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)


def settled(p):
    """Private_Dirty of p once it has run 1.5 s, every thread is asleep and the figure held."""
    time.sleep(1.5)
    prev = None
    for _ in range(100):
        cur = private_dirty(p.pid) if asleep(p.pid) else None
        if cur is not None and cur == prev:
            return cur
        prev = cur
        time.sleep(0.1)
    return prev


def measure(argv, lib):
    vals = []
    for _ in range(3):
        p = start(argv, lib)
        try:
            vals.append(settled(p))
        finally:
            p.kill()
            p.wait()
    vals = sorted(v for v in vals if v is not None)
    return vals[len(vals) // 2] if vals else None


def rw_segment(path):
    """(vaddr, memsz) of the library's writable PT_LOAD, from its program headers."""
    with open(path, "rb") as f:
        eh = f.read(64)
        phoff, = struct.unpack_from("<Q", eh, 32)
        phentsize, phnum = struct.unpack_from("<HH", eh, 54)
        f.seek(phoff)
        for _ in range(phnum):
            ph = f.read(phentsize)
            p_type, p_flags = struct.unpack_from("<II", ph, 0)
            vaddr, = struct.unpack_from("<Q", ph, 16)
            memsz, = struct.unpack_from("<Q", ph, 40)
            if p_type == 1 and p_flags & 2:  # PT_LOAD, PF_W
                return vaddr, memsz
    return None


def written_pages(pid, path):
    """Pages of the library's writable segment that pid has written: present, private
    anonymous (pagemap bit 61, file-page or shared-anon, clear) and mapped by pid alone (bit
    56). A page read from the file and mapped by this process only is the page cache's, and a
    .bss page only read maps the shared zero page (anonymous, never exclusive): no cost."""
    real = os.path.realpath(path)
    base = None
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and os.path.realpath(fields[5]) == real and fields[2] == "00000000":
                base = int(fields[0].split("-")[0], 16)
                break
    seg = rw_segment(real)
    if base is None or seg is None:
        return None
    lo = (base + seg[0]) & ~4095
    hi = (base + seg[0] + seg[1] + 4095) & ~4095
    count = 0
    with open("/proc/%d/pagemap" % pid, "rb") as pm:
        for va in range(lo, hi, 4096):
            pm.seek(va // 4096 * 8)
            v, = struct.unpack("<Q", pm.read(8))
            if v >> 63 & 1 and not v >> 61 & 1 and v >> 56 & 1:  # written: own anon page
                count += 1
    return count


# A library file written a moment ago (make check right after the build) has dirty page
# cache pages, which smaps counts as the process's Private_Dirty until they are written
# back (120-140 KiB): write them back first.
fd = os.open(LIB, os.O_RDONLY)
try:
    os.fsync(fd)
finally:
    os.close(fd)

programs = [("sleep", ["sleep", "30"]), ("bash", ["bash", "-c", "sleep 30; :"]),
            ("perl", ["perl", "-e", "sleep 30"]),
            ("python3", ["/usr/bin/python3", "-c", "import time; time.sleep(30)"])]
for name, argv in programs:
    exe = argv[0] if argv[0].startswith("/") else next(
        (os.path.join(d, argv[0]) for d in ENV["PATH"].split(":")
         if os.access(os.path.join(d, argv[0]), os.X_OK)), None)
    if not exe or not os.access(exe, os.X_OK):
        diag("%s: not installed, not measured" % name)
        continue
    g = measure(argv, None)
    t = measure(argv, LIB)
    diag("%s: Private_Dirty %s KiB under glibc, %s KiB under thpalloc" % (name, g, t))
    if name == "python3":
        tap(g is not None and t is not None and t - g <= PYTHON_BOUND_KIB,
            "%s: an idle process costs at most %d KiB of private memory more than under glibc (+%s)"
            % (name, PYTHON_BOUND_KIB, None if g is None or t is None else t - g))
        continue
    tap(g is not None and t is not None and t - g <= BOUND_KIB,
        "%s: an idle process costs at most %d KiB of private memory more than under glibc (+%s)"
        % (name, BOUND_KIB, None if g is None or t is None else t - g))

p = start(["sleep", "30"], LIB)
try:
    time.sleep(1.0)
    pages = written_pages(p.pid, LIB)
finally:
    p.kill()
    p.wait()
diag("sleep: %s pages of the library's writable segment written" % pages)
tap(pages is not None and 1 <= pages <= PAGES_MAX,
    "sleep: the library's relro, .data and .bss cost at most %d written pages (%s)"
    % (PAGES_MAX, pages))
print("end")
