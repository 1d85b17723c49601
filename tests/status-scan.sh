#!/bin/sh
# thp-status --scan: the zero-filled part of each process's huge pages, checked against
# processes that say what they wrote (tests/status-scan-prog.c): a 64 MiB block under
# thpalloc (thp = large) with one byte every 2 MiB is 32 huge pages in thpalloc's arenas,
# 511 of 512 pieces zero in each (splittable when max_ptes_none < 511); written in full,
# no zeros; a glibc MADV_HUGEPAGE mapping half written, in "rest". A process that exits or
# unmaps during the scan, or that the caller may not read: a clean result and exit status.
# --all: totals, top processes, Prometheus (promtool). Both builds (plain, ASan+UBSan).
. "$TESTS_SRCDIR/status-lib.sh"

THP=/sys/kernel/mm/transparent_hugepage
PROG=$TESTS_BUILDDIR/status-scan-prog
HUGE=2097152

[ -r "$THP/enabled" ] || skip_all "no $THP (kernel without THP)"
[ "$(sysfs_selected "$THP/enabled")" != never ] || skip_all "THP enabled = never"
[ "$(cat "$THP/hpage_pmd_size")" = $HUGE ] || skip_all "huge pages are not 2 MiB here"

# start_prog MODE MIB [ENV...]: PROG_PID, PROG_OUT; field KEY: a line of its report.
start_prog() {
    _m=$1 _s=$2
    shift 2
    PROG_SEQ=$((${PROG_SEQ:-0} + 1))
    PROG_OUT=$SCRATCH/prog.$PROG_SEQ
    env "$@" "$PROG" "$_m" "$_s" >"$PROG_OUT" 2>&1 &
    PROG_PID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $PROG_PID"
    wait_line "$PROG_PID" "$PROG_OUT" || bail "status-scan-prog $_m did not start: $(cat "$PROG_OUT")"
}
field() { awk -v k="$1" '$1 == k { print $2 }' "$PROG_OUT"; }
# granted KB: the last program got KB of huge pages (under load or fragmentation the
# kernel may fall back to small pages: what depends on it is skipped then)
granted() { [ "$(field huge)" = "$1" ]; }
stop_prog() { kill -9 "$1" 2>/dev/null && wait "$1" 2>/dev/null; }

# The kernel must grant huge pages, not merely allow them.
start_prog half 4
[ "$(field huge)" = 4096 ] || skip_all "no huge pages granted (AnonHugePages of a 4 MiB MADV_HUGEPAGE mapping: $(field huge) kB)"
stop_prog $PROG_PID

TL="THPALLOC_THP=large LD_PRELOAD=$THPALLOC_LIB"
# start_granted KB MODE MIB [ENV...]: start_prog, once more if the kernel did not give
# it KB of huge pages; the whole script is skipped if it still did not.
start_granted() {
    _kb=$1
    shift
    start_prog "$@"
    granted "$_kb" && return
    stop_prog "$PROG_PID"
    start_prog "$@"
    granted "$_kb" || skip_all "status-scan-prog $1 $2 got $(field huge) kB of huge pages, not $_kb (thp = large under thpalloc? memory fragmented?)"
}
start_granted 65536 sparse 64 $TL
SPARSE=$PROG_PID
SPARSE_ZERO=$((32 * HUGE - $(field written) * 4096))
start_granted 65536 full 64 $TL
FULL=$PROG_PID
start_granted 16384 half 16
HALF=$PROG_PID
HALF_ZERO=$((8 * HUGE - $(field written) * 4096))
MPN=$(cat "$THP/khugepaged/max_ptes_none" 2>/dev/null || echo 511)
SPLIT=0
[ "$MPN" -lt 511 ] && SPLIT=32

# sc FILE KEY...: members of the first process's "scan" object (a.b: nested), space-separated
sc() {
    _f=$1
    shift
    "$PYTHON" - "$_f" "$@" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))['processes'][0]['scan']
out = []
for k in sys.argv[2:]:
    v = s
    for part in k.split('.'):
        v = v[part]
    out.append(str(v))
print(' '.join(out))
PY
}
# paused TOOL PID SIGNAL-CMD...: --scan --json PID with a pause after the first page read,
# during which SIGNAL-CMD PID runs; $RC, $SCRATCH/paused.json
paused() {
    _t=$1 _p=$2
    shift 2
    # the old file gone first: the background job truncates it only when it starts
    rm -f "$SCRATCH/paused.err" "$SCRATCH/paused.json"
    THP_STATUS_TEST_PAUSE=scan:1500 "$_t" --scan --json "$_p" >"$SCRATCH/paused.json" 2>"$SCRATCH/paused.err" &
    _tp=$!
    i=0
    while ! grep -q 'test pause before scan' "$SCRATCH/paused.err" && [ $i -lt 400 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    "$@" "$_p"
    [ "$1" = kill ] && [ "$2" = -9 ] && wait "$_p" 2>/dev/null
    wait $_tp
    RC=$?
    grep -qE 'Sanitizer|runtime error:' "$SCRATCH/paused.err" && cat "$SCRATCH/paused.err" >>"$SANLOG"
}
# owner FILE KEY: "huge_pages scanned_bytes zero_bytes splittable" of the first process
owner() { json "$1" "' '.join(str(d['processes'][0]['scan']['$2'][k]) for k in ('huge_pages', 'scanned_bytes', 'zero_bytes', 'splittable'))"; }

for T in $TOOLS; do
    t=$(basename "$T")

    run "$T" --scan --json "$SPARSE"
    cp "$OUT" "$SCRATCH/sparse.json"
    is "$RC" 0 "$t: sparse block: exit 0"
    is "$(owner "$SCRATCH/sparse.json" arenas)" "32 $((32 * HUGE)) $SPARSE_ZERO $SPLIT" \
        "$t: sparse block: 32 huge pages in thpalloc's arenas, $SPARSE_ZERO bytes zero-filled, $SPLIT splittable (max_ptes_none $MPN)"
    z=$(json "$SCRATCH/sparse.json" "d['processes'][0]['scan']['arenas']['zero_bytes']")
    ok $(awk -v z="$z" 'BEGIN { w = 63.9 * 1048576; exit !(z >= w * 0.99 && z <= w * 1.01) }'; echo $?) \
        "$t: sparse block: 63.9 MiB ± 1 % zero-filled (got $z bytes)"
    is "$(sc "$SCRATCH/sparse.json" method complete rest.huge_pages)" "pagemap-scan True 0" \
        "$t: sparse block: found by PAGEMAP_SCAN, complete, no huge page elsewhere"
    THP_STATUS_TEST_NO_PAGEMAP_SCAN=1 run "$T" --scan --json "$SPARSE"
    # The tool keeps no CAP_SYS_ADMIN, so pagemap hides the frames: aligned runs (kpageflags
    # where a build without libcap kept it).
    m=$(sc "$OUT" method)
    case $m in aligned-runs | kpageflags) k=fallback ;; *) k=$m ;; esac
    is "$RC $k $(owner "$OUT" arenas)" "0 fallback 32 $((32 * HUGE)) $SPARSE_ZERO $SPLIT" \
        "$t: without PAGEMAP_SCAN (kernels before 6.7): the same figures ($m)"
    THP_STATUS_TEST_MAX_PTES_NONE=510 run "$T" --scan --json "$SPARSE"
    is "$(owner "$OUT" arenas) $(json "$OUT" "d['processes'][0]['scan']['max_ptes_none']")" \
        "32 $((32 * HUGE)) $SPARSE_ZERO 32 510" "$t: max_ptes_none 510: all 32 splittable (511 zero pieces each)"
    run "$T" --scan "$SPARSE"
    ok $([ "$RC" -eq 0 ] && grep -qE "^    thpalloc arenas +32 +65536 kB +$((SPARSE_ZERO / 1024)) kB +99\.8% +$SPLIT\$" "$OUT" \
        && grep -qE "^    \(split: (none, as the shrinker splits none at max_ptes_none = 511|more than max_ptes_none = $MPN zero-filled 4 KiB pieces)\)\$" "$OUT"; echo $?) \
        "$t: text: the arenas' row, and what splittable means"

    run "$T" --scan --json "$FULL"
    is "$RC $(owner "$OUT" arenas)" "0 32 $((32 * HUGE)) 0 0" "$t: block written in full: 32 huge pages, no zeros"

    run "$T" --scan --json "$HALF"
    is "$RC $(owner "$OUT" rest) $(owner "$OUT" arenas)" "0 8 $((8 * HUGE)) $HALF_ZERO 0 0 0 0 0" \
        "$t: glibc MADV_HUGEPAGE mapping half written: 8 huge pages, half zeros, under rest"

    run "$T" --scan --scan-max 1M "$SPARSE"
    ok $([ "$RC" -eq 0 ] && grep -q '^  huge pages not scanned: 65536 kB, more than --scan-max 1M$' "$OUT"; echo $?) \
        "$t: --scan-max 1M: skipped with a line"
    run "$T" --scan --json --scan-rate 32M "$HALF"
    secs=$(sc "$OUT" seconds)
    ok $(awk -v s="$secs" 'BEGIN { exit !(s >= 0.45) }'; echo $?) \
        "$t: --scan-rate 32M: 16 MiB take at least half a second (took $secs s)"

    # The process exits during the scan: what was read until then, exit 0.
    start_prog half 16
    if granted 16384; then
        paused "$T" "$PROG_PID" kill -9
        is "$RC $(sc "$SCRATCH/paused.json" exited_during_scan complete rest.huge_pages)" \
            "0 True False 1" "$t: exited during the scan: partial (the 1 page read), exit 0"
    else
        skip "$t: exited during the scan" "no huge pages granted ($(field huge) kB)"
    fi
    # It unmaps the block during the scan: the pages read, the rest counted as changed.
    start_prog half 16
    if granted 16384; then
        paused "$T" "$PROG_PID" kill -USR1
        got="$RC $(sc "$SCRATCH/paused.json" exited_during_scan complete rest.huge_pages changed_during_scan)"
        is "$got" "0 False False 1 7" "$t: unmapped during the scan: 1 page read, 7 changed, exit 0"
        [ "$got" = "0 False False 1 7" ] || diag "$(cat "$SCRATCH/paused.err" "$PROG_OUT" "$SCRATCH/paused.json")"
    else
        skip "$t: unmapped during the scan" "no huge pages granted ($(field huge) kB)"
    fi
    stop_prog "$PROG_PID"

    # A process the caller may not read: said, and the exit status of the PID view.
    if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
        run $NOBODY "$T" --scan "$HALF"
        ok $([ "$RC" -eq 1 ] && grep -q '^  huge pages not scanned: smaps_rollup unreadable (EACCES)$' "$OUT"; echo $?) \
            "$t: as uid 65534 about a root process: not scanned, said, exit 1 as without --scan"
        run $NOBODY "$T" --scan --json "$HALF"
        is "$RC $(sc "$OUT" method error error_in complete)" "1 None EACCES smaps_rollup False" \
            "$t: JSON: not scanned, EACCES"
        run $NOBODY "$T" --all --scan
        ok $([ "$RC" -eq 0 ] && grep -q '^Huge pages by content' "$OUT"; echo $?) \
            "$t: --all --scan as uid 65534: exit 0, totals of what it could read"
    else
        skip "$t: a process the caller may not read" "needs root and setpriv"
        skip "$t: JSON: not scanned" "needs root and setpriv"
        skip "$t: --all --scan unprivileged" "needs root and setpriv"
    fi

    # --all: totals and top processes; Prometheus.
    run "$T" --all --scan --json
    is "$RC $(json "$OUT" "' '.join(str(x) for x in (d['scan']['arenas']['zero_bytes'] >= $SPARSE_ZERO, d['scan']['rest']['zero_bytes'] >= $HALF_ZERO, [p['zero_bytes'] for p in d['scan']['top'] if p['pid'] == $SPARSE]))")" \
        "0 True True [$SPARSE_ZERO]" "$t: --all --scan --json: totals by owner, the sparse process among the top"
    run "$T" --all --scan
    ok $([ "$RC" -eq 0 ] && grep -q '^Top processes by zero-filled huge-page memory$' "$OUT" \
        && grep -qE "^ +$SPARSE status-scan-pro +64\.0M +63\.9M +99\.8% +$SPLIT\$" "$OUT"; echo $?) \
        "$t: --all --scan: the sparse process's line in the top list"
    run "$T" --all --scan --prometheus
    cp "$OUT" "$SCRATCH/scan.prom"
    promtool_check "$SCRATCH/scan.prom" "$t: --all --scan --prometheus"
    ok $(awk -v w=$SPARSE_ZERO '$1 == "thp_huge_zero_bytes{owner=\"thpalloc\"}" && $2 + 0 >= w { f = 1 } END { exit !f }' "$SCRATCH/scan.prom" \
        && grep -qE '^thp_unit_huge_scanned_bytes\{unit="[^"]*",owner="rest"\} ' "$SCRATCH/scan.prom"; echo $?) \
        "$t: --prometheus: thp_huge_zero_bytes by owner, per unit too"
    ok $(! grep -q 'pid="' "$SCRATCH/scan.prom"; echo $?) "$t: --prometheus: no pid label (bounded)"
    D=$SCRATCH/textfile
    rm -rf "$D" && mkdir "$D"
    THP_STATUS=$T THP_STATUS_TEXTFILE_SCAN=1 THP_STATUS_TEXTFILE_SCAN_RATE=0 \
        sh "$TOP_SRCDIR/examples/node-exporter/thp-status-textfile" "$D" 2>"$SCRATCH/textfile.err"
    ok $([ $? -eq 0 ] && grep -q '^thp_huge_zero_bytes{owner="thpalloc"} ' "$D/thp-status.prom"; echo $?) \
        "$t: the textfile example with THP_STATUS_TEXTFILE_SCAN=1: the scan's series"
    promtool_check "$D/thp-status.prom" "$t: the textfile example with the scan"

    # The PID view in Prometheus's format (with --scan only).
    run "$T" --scan --prometheus "$SPARSE" "$HALF"
    cp "$OUT" "$SCRATCH/pid.prom"
    promtool_check "$SCRATCH/pid.prom" "$t: --scan --prometheus PID PID"
    is "$RC $(grep -E "^thp_process_huge_(zero_bytes|scanned_bytes)\{pid=\"($SPARSE|$HALF)\",comm=\"status-scan-pro\",unit=\"[^\"]*\",owner=\"(thpalloc|rest)\"\} " "$SCRATCH/pid.prom" | sed 's/,comm=.*owner=/ /; s/^thp_process_huge_//' | tr '\n' ' ')" \
        "0 scanned_bytes{pid=\"$SPARSE\" \"thpalloc\"} $((32 * HUGE)) scanned_bytes{pid=\"$SPARSE\" \"rest\"} 0 scanned_bytes{pid=\"$HALF\" \"thpalloc\"} 0 scanned_bytes{pid=\"$HALF\" \"rest\"} $((8 * HUGE)) zero_bytes{pid=\"$SPARSE\" \"thpalloc\"} $SPARSE_ZERO zero_bytes{pid=\"$SPARSE\" \"rest\"} 0 zero_bytes{pid=\"$HALF\" \"thpalloc\"} 0 zero_bytes{pid=\"$HALF\" \"rest\"} $HALF_ZERO " \
        "$t: --scan --prometheus PID: exit 0, the figures per process and owner"
    run "$T" --prometheus "$SPARSE"
    is "$RC $(head -1 "$ERR")" "2 thp-status: --prometheus is for the system view, --all, and PID... with --scan" \
        "$t: --prometheus PID without --scan: still a usage error"

    # Options.
    run "$T" --scan
    is "$RC $(head -1 "$ERR")" "2 thp-status: --scan goes with PID... or --all" "$t: --scan alone: usage error"
    run "$T" --scan --scan-rate 1X "$SPARSE"
    is "$RC $(head -1 "$ERR")" "2 thp-status: --scan-rate: not a size: '1X' (a whole number of bytes, with K, M, G or T: 512M, 512MiB, 2G)" "$t: --scan-rate 1X: usage error"
    run "$T" --scan-max 1G "$SPARSE"
    is "$RC $(head -1 "$ERR")" "2 thp-status: --scan-rate and --scan-max go with --scan" "$t: --scan-max without --scan"

    # The system view shows what the shrinker goes by.
    run "$T"
    ok $(grep -qE '^  max_ptes_none +[0-9]+$' "$OUT" \
        && { [ ! -e "$THP/shrink_underused" ] || grep -qE '^  shrink_underused +[01]$' "$OUT"; } \
        && { ! grep -q '^thp_underused_split_page ' /proc/vmstat || grep -qE '^  thp_underused_split_page +[0-9]+$' "$OUT"; }; echo $?) \
        "$t: system view: max_ptes_none, shrink_underused, thp_underused_split_page"
    sanitizer_clean "$t"
done

done_testing
