#!/bin/sh
# thp-status against a hostile ELF file: any user can map a file named libthpalloc.so.1
# whose header claims many 64 MiB .dynsym sections (a sparse 64 MiB file). Reading each
# whole took thp-status 12 s for 16 of them and about an hour for 4096: a user could blind
# root's monitoring. Now every size read is bounded by the file and by 1 MiB, an ELF file
# has one .dynsym, and such a file is given up on as "implausible ELF": the PID view,
# --json and --all --prometheus finish in well under a second (asserted: 2 s, for loaded
# machines; the old code took 5 s to 50 s for 64 sections, minutes for 4096).
. "$TESTS_SRCDIR/status-lib.sh"

# elf FILE NSECT: a sparse 64 MiB ELF64 file with one PT_LOAD and NSECT section headers,
# each a 64 MiB SHT_DYNSYM whose string table is itself.
elf() {
    "$PYTHON" - "$1" "$2" <<'PY'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
size = 64 << 20
shoff = 4096
ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
eh = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, shoff, 0, 64, 56, 1, 64, n, 0)
ph = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 4096, 4096, 4096)
f = open(path, "wb")
f.write(eh + ph)
f.seek(shoff)
for i in range(n):
    # name, type DYNSYM, flags, addr, offset 0, size 64 MiB, link i, info, align, entsize 24
    f.write(struct.pack("<IIQQQQIIQQ", 0, 11, 2, 0, 0, size, i, 0, 8, 24))
f.truncate(size)
PY
}
# mapper FILE: a process that maps FILE (at offset 0) and waits; sets MPID.
mapper() {
    "$PYTHON" -c 'import mmap, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print("ready", flush=True)
time.sleep(600)' "$1" >"$1.out" 2>&1 &
    MPID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $MPID"
    i=0
    while ! grep -q ready "$1.out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
}
# timed ARGS...: run under a 20 s timeout; sets MS, the wall time in milliseconds.
timed() {
    t0=$(date +%s%N)
    run timeout 20 "$@"
    MS=$((($(date +%s%N) - t0) / 1000000))
}
LIMIT_MS=${STATUS_ELF_LIMIT_MS:-2000}

for nsect in 64 4096; do
    d=$SCRATCH/elf$nsect
    mkdir -p "$d"
    elf "$d/libthpalloc.so.1" $nsect
    mapper "$d/libthpalloc.so.1"
    M=$MPID
    for T in $TOOLS; do
        t=$(basename "$T")
        timed "$T" "$M"
        ok $([ "$RC" -eq 0 ] && [ $MS -lt $LIMIT_MS ] &&
            grep -qxF "    arena table    unavailable: implausible ELF: more than one dynamic symbol table" "$OUT"
            echo $?) "$t: $nsect sections of 64 MiB: the PID view says implausible ELF (rc $RC, $MS ms)"
        [ "$RC" -eq 0 ] || sed -n 's/^/#   /; /arena table/p' "$OUT"
        timed "$T" --json "$M"
        is "$(json "$OUT" "d['processes'][0]['thpalloc']['introspect_error']") $([ $MS -lt $LIMIT_MS ] && echo fast)" \
            "implausible ELF: more than one dynamic symbol table fast" "$t: $nsect sections: --json ($MS ms)"
        timed "$T" --all --prometheus
        ok $([ "$RC" -eq 0 ] && [ $MS -lt $LIMIT_MS ]; echo $?) "$t: $nsect sections: --all --prometheus finishes (rc $RC, $MS ms)"
    done
    kill "$M"
    wait "$M" 2>/dev/null
done

# One .dynsym of 64 MiB: more than a library's, not read either.
d=$SCRATCH/elf1
mkdir -p "$d"
elf "$d/libthpalloc.so.1" 1
mapper "$d/libthpalloc.so.1"
for T in $TOOLS; do
    t=$(basename "$T")
    timed "$T" "$MPID"
    ok $([ "$RC" -eq 0 ] && [ $MS -lt $LIMIT_MS ] &&
        grep -qxF "    arena table    unavailable: implausible ELF: a dynamic symbol table larger than 1 MiB or beyond the file" "$OUT"
        echo $?) "$t: one 64 MiB .dynsym: implausible ELF (rc $RC, $MS ms)"
    [ "$RC" -eq 0 ] || sed -n 's/^/#   /; /arena table/p' "$OUT"
    sanitizer_clean "$t"
done
done_testing
