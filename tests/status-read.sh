#!/bin/sh
# thp-status reading processes that resist it (tests/status-read-prog.c), every check on both
# builds (plain, ASan+UBSan):
#  - a range registered with userfaultfd and dropped after the scan listed it: the reader
#    waits in the kernel; --timeout gives the process up, says so, and the scan goes on;
#  - 12,000 mappings of a file named libthpalloc.so.1 under a 3,880-byte path (maps 47 MB,
#    smaps 55 MB): the reads are cut at their caps, said so, in bounded memory and time;
#  - a forked family sharing huge pages copy-on-write: each physical page counted once in
#    the totals, the sharing said, and the pages still shared after the scan;
#  - a process not read is never figures of zero; thp-status is not in its own --all.
. "$TESTS_SRCDIR/status-lib.sh"

PROG=$TESTS_BUILDDIR/status-read-prog
THP=/sys/kernel/mm/transparent_hugepage

# start MODE ARGS...: PROG_PID (the pid it says), PROG_OUT; 1 when it could not start
start() {
    PROG_SEQ=$((${PROG_SEQ:-0} + 1))
    PROG_OUT=$SCRATCH/prog.$PROG_SEQ
    "$PROG" "$@" >"$PROG_OUT" 2>&1 &
    _bg=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $_bg"
    wait_line "$_bg" "$PROG_OUT" || return 1
    PROG_PID=$(awk '$1 == "ready" { print $2 }' "$PROG_OUT")
    return 0
}
field() { awk -v k="$1" '$1 == k { print $2 }' "$PROG_OUT"; }
stop() { kill -9 "$1" 2>/dev/null; }
# maxrss CMD...: runs CMD (stdout $OUT, stderr $ERR, status $RC); $SECS, and $KB: the largest
# resident set of it and of the readers it started
maxrss() {
    "$PYTHON" - "$OUT" "$ERR" "$@" >"$SCRATCH/rss" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[3:], stdout=open(sys.argv[1], "w"), stderr=open(sys.argv[2], "w"))
print(r.returncode, "%.2f" % (time.monotonic() - t), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
    read -r RC SECS KB <"$SCRATCH/rss"
    if grep -qE 'Sanitizer|runtime error:' "$ERR"; then { echo "== $*"; cat "$ERR"; } >>"$SANLOG"; fi
}

# --- probes ---------------------------------------------------------------------------------
UFFD=
if start uffd; then
    if [ "$(field huge)" = 4096 ]; then UFFD=yes; else UFFD_WHY="no huge pages granted to the userfaultfd range ($(field huge) kB)"; fi
    stop "$PROG_PID"
else
    UFFD_WHY="no userfaultfd for kernel faults here: $(cat "$PROG_OUT") (root, CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1)"
fi
HUGE_OK=
if [ -r "$THP/enabled" ] && [ "$(sysfs_selected "$THP/enabled")" != never ] && start fork 0 4; then
    [ "$(field huge)" = 4096 ] && HUGE_OK=yes
    stop "$PROG_PID"
fi

# A path of 3,880 bytes ending in libthpalloc.so.1, a page long.
LONG=$SCRATCH
SEG=$(printf '%0240d' 0 | tr 0 d)
while [ ${#LONG} -lt $((3880 - 260)) ]; do LONG=$LONG/$SEG; done
mkdir -p "$LONG"
LONG=$LONG/$(printf '%0*d' $((3880 - ${#LONG} - 18)) 0 | tr 0 e)/libthpalloc.so.1
mkdir -p "$(dirname "$LONG")"
head -c 4096 /dev/zero >"$LONG"

for T in $TOOLS; do
    t=$(basename "$T")

    # --- userfaultfd: a deadline per process ---------------------------------------------
    if [ -n "$UFFD" ]; then
        # stalled PID|ALL ARGS...: thp-status ARGS (PID: and the userfaultfd process) with a
        # pause after its first page of that process, during which the second is dropped
        stalled() {
            _how=$1
            shift
            start uffd || bail "status-read-prog uffd did not start: $(cat "$PROG_OUT")"
            U=$PROG_PID
            rm -f "$SCRATCH/st.err"
            _t0=$(date +%s)
            [ "$_how" = PID ] && set -- "$@" "$U"
            THP_STATUS_TEST_PAUSE=scan-$U:500 "$T" "$@" >"$OUT" 2>"$SCRATCH/st.err" &
            _tp=$!
            i=0
            while ! grep -q "test pause before scan-$U" "$SCRATCH/st.err" 2>/dev/null && [ $i -lt 400 ]; do
                sleep 0.05
                i=$((i + 1))
            done
            kill -USR1 "$U"
            # never more than the bound: a stalled tool is killed and fails the check
            ( sleep 30 && kill -9 $_tp 2>/dev/null ) &
            _w=$!
            wait $_tp
            RC=$?
            kill $_w 2>/dev/null
            SECS=$(($(date +%s) - _t0))
            grep -qE 'Sanitizer|runtime error:' "$SCRATCH/st.err" && cat "$SCRATCH/st.err" >>"$SANLOG"
            stop "$U"
        }
        stalled PID --scan --timeout 2
        is "$RC $(grep '^  huge pages not scanned' "$OUT")" \
            "1   huge pages not scanned: no answer within 2 s (--timeout): its memory blocks readers (userfaultfd?)" \
            "$t: --scan PID of a stalled userfaultfd range: given up after --timeout 2, said, exit 1"
        ok $([ "$SECS" -le 10 ]; echo $?) "$t: --scan PID: finished in $SECS s (bound 10 s)"
        stalled PID --scan --json --timeout 2
        is "$RC $(json "$OUT" "' '.join(str(d['processes'][0]['scan'][k]) for k in ('read', 'not_read', 'owners_known', 'rest'))")" \
            "1 False time-out None None" "$t: JSON: read false, not_read time-out, no figures"
        # --all: the others are read, the stalled one is counted as not read
        stalled ALL --all --prometheus --scan --timeout 2
        ok $([ "$SECS" -le 20 ] && grep -q '^thp_scan_processes_not_read{reason="time-out"} [1-9]' "$OUT" \
            && grep -q '^thp_processes [1-9]' "$OUT"; echo $?) \
            "$t: --all --prometheus --scan: finished in $SECS s, the stalled process counted as time-out"
        cp "$OUT" "$SCRATCH/uffd.prom"
        promtool_check "$SCRATCH/uffd.prom" "$t: --all --prometheus --scan with a time-out"
    else
        skip "$t: userfaultfd stall (--scan PID)" "$UFFD_WHY"
        skip "$t: userfaultfd stall (time)" "$UFFD_WHY"
        skip "$t: userfaultfd stall (JSON)" "$UFFD_WHY"
        skip "$t: userfaultfd stall (--all)" "$UFFD_WHY"
        skip "$t: userfaultfd stall (promtool)" "$UFFD_WHY"
    fi

    # --- 12,000 long-named mappings: bounded reads ----------------------------------------
    # the floor: what the measuring itself reaches (python before it runs the tool); ASan's
    # shadow memory and quarantine: a looser bound for that build
    maxrss true
    case $t in *asan*) BOUND=$((KB + 150000)) ;; *) BOUND=$((KB + 16000)) ;; esac
    start maps 12000 "$LONG" || bail "status-read-prog maps did not start: $(cat "$PROG_OUT")"
    M=$PROG_PID
    maxrss "$T" "$M"
    ok $([ "$KB" -le $BOUND ] && [ "${SECS%.*}" -lt 10 ]; echo $?) \
        "$t: PID view of 12,000 long-named mappings: $KB kB at most (bound $BOUND), $SECS s"
    ok $(grep -qx '  ! maps cut at 8 MiB (the read is bounded): mappings past it not seen' "$OUT" \
        && grep -qx '  ! smaps cut at 32 MiB (the read is bounded): figures by mapping cover those read only' "$OUT"; echo $?) \
        "$t: the PID view says maps and smaps were cut"
    maxrss "$T" --all --json
    is "$RC $([ "$KB" -le $BOUND ] && echo bounded) $(json "$OUT" "[(p['maps_cut'], p['smaps_cut']) for p in d['processes'] if p['pid'] == $M] + [d['read_cut'] >= 1]")" \
        "0 bounded [[true, true], true]" "$t: --all --json: cut said ($KB kB, $SECS s)"
    stop "$M"

    # --- a forked family: each physical huge page once ------------------------------------
    if [ -n "$HUGE_OK" ] && start fork 4 8 && [ "$(field huge)" = 8192 ]; then
        F=$PROG_PID
        FAM="$F $(awk '$1 == "child" { print $2 }' "$PROG_OUT" | tr '\n' ' ')"
        run "$T" --all --scan --json
        cp "$OUT" "$SCRATCH/fam.json"
        vis=$(json "$OUT" "all(p['scan']['frames_visible'] for p in d['processes'] if p['pid'] in ($(echo $FAM | tr ' ' ',')))")
        if [ "$vis" = true ]; then
            is "$RC $(json "$OUT" "' '.join(str(x) for x in (sorted(p['scan']['counted_before'] for p in d['processes'] if p['pid'] in ($(echo $FAM | tr ' ' ','))), sorted(p['scan']['shared_huge_pages'] for p in d['processes'] if p['pid'] in ($(echo $FAM | tr ' ' ','))), d['scan']['shared_counted_once'] >= 16))")" \
                "0 [0, 4, 4, 4, 4] [4, 4, 4, 4, 4] True" \
                "$t: --all --scan: 4 huge pages shared by 5 processes, counted once (16 counted before)"
            run "$T" --all --scan
            ok $(grep -qE '^  [0-9]+ huge pages shared between processes \(copy-on-write\): counted once$' "$OUT"; echo $?) \
                "$t: --all --scan text: the sharing said"
        else
            skip "$t: shared huge pages counted once" "page frames hidden from pagemap (needs root: CAP_SYS_ADMIN)"
            skip "$t: shared huge pages said" "page frames hidden from pagemap"
        fi
        is "$(rollup "$F" AnonHugePages) $(rollup "$(echo $FAM | cut -d' ' -f2)" AnonHugePages)" "8192 8192" \
            "$t: the family's huge pages still there (read without unsharing them)"
        run "$T" --scan "$(echo $FAM | cut -d' ' -f2)"
        ok $(grep -qx '    (4 of these huge pages shared with other processes, copy-on-write: the totals of --all count each once)' "$OUT" \
            || grep -qx '    (4 of these huge pages shared with other processes, copy-on-write: page frames hidden (CAP_SYS_ADMIN), --all counts them in each)' "$OUT"; echo $?) \
            "$t: --scan PID of a child: its shared pages said"

        # --- not read is not zero (skipped) ---------------------------------------------------
        run "$T" --scan --scan-max 1M --prometheus "$F"
        cp "$OUT" "$SCRATCH/skip.prom"
        is "$RC $(grep -E '^thp_process_scan_(complete|not_read)|^thp_scan_processes_not_read\{reason="skipped"\}' "$OUT" | sed 's/,comm="[^"]*",unit="[^"]*"//' | tr '\n' ' ')" \
            "0 thp_process_scan_complete{pid=\"$F\"} 0 thp_process_scan_not_read{pid=\"$F\",reason=\"skipped\"} 1 thp_scan_processes_not_read{reason=\"skipped\"} 1 " \
            "$t: --scan --scan-max 1M --prometheus PID: not complete, not read (skipped), counted"
        promtool_check "$SCRATCH/skip.prom" "$t: --scan --prometheus PID, skipped"
        stop "$F"
    else
        for c in "counted once" "said" "still shared" "child" "skipped prometheus" "promtool"; do
            skip "$t: forked family: $c" "no huge pages granted (THP never, or none to be had)"
        done
    fi

    # --- a process that refuses us: no figures -------------------------------------------
    if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        run setpriv --reuid=65534 --regid=65534 --clear-groups "$T" --scan --json 1
        is "$RC $(json "$OUT" "' '.join(str(d['processes'][0]['scan'][k]) for k in ('read', 'not_read', 'owners_known', 'arenas', 'rest'))")" \
            "1 False refused None None None" "$t: as uid 65534 about PID 1: not read (refused), no figures"
    else
        skip "$t: a process that refuses us" "needs root and setpriv"
    fi

    # --- thp-status is not among its own results -----------------------------------------
    run sh -c 'echo $$ >"$0"; exec "$@"' "$SCRATCH/self" "$T" --all --json
    me=$(cat "$SCRATCH/self")
    is "$RC $(json "$OUT" "[p['pid'] for p in d['processes'] if p['pid'] == $me]")" "0 []" \
        "$t: --all leaves thp-status's own process out"
    sanitizer_clean "$t"
done

done_testing
