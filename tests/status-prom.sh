#!/bin/sh
# thp-status --prometheus and --all --prometheus follow the exposition format's
# conventions, so that promtool check metrics (its lint included) accepts every output:
# counters named *_total, one type per family, base units (seconds, bytes) in the names;
# --all is per systemd service and in total by default (no pid label), per process only
# with --per-process, and the two agree; the node_exporter textfile example writes a file
# promtool accepts, atomically. Both builds (plain, ASan+UBSan).
. "$TESTS_SRCDIR/status-lib.sh"

THP=/sys/kernel/mm/transparent_hugepage
TEXTFILE=$TOP_SRCDIR/examples/node-exporter/thp-status-textfile

# Fake kernel files (THP_STATUS_TEST_PROC): vmstat gauges in huge pages and in base pages,
# a counter, a gauge of unknown unit.
mkdir -p "$SCRATCH/proc"
printf 'nr_anon_transparent_hugepages 3\nnr_hugetlb 5\nnr_file_hugepages 0\nthp_fault_alloc 7\nnr_new_hugething 9\n' \
    >"$SCRATCH/proc/vmstat"
printf 'MemTotal: 1000 kB\n' >"$SCRATCH/proc/meminfo"
PAGE=$(getconf PAGESIZE)
PMD=$(cat "$THP/hpage_pmd_size" 2>/dev/null || echo)

HOLDER_OK=
start_holder 1 && HOLDER_OK=$HOLDER_PID

for T in $TOOLS; do
    t=$(basename "$T")

    # The system view.
    run "$T" --prometheus
    cp "$OUT" "$SCRATCH/sys.prom"
    promtool_check "$SCRATCH/sys.prom" "$t: --prometheus"
    ok $(! grep -qE '^thp_(vmstat|mthp_stat|khugepaged)\{|knob="hpage_pmd_size"' "$SCRATCH/sys.prom"; echo $?) \
        "$t: none of the families that mixed types or units"
    if [ -d "$THP" ]; then
        want=$(printf 'thp_hpage_pmd_size_bytes %s\nthp_khugepaged_scan_sleep_seconds %s\nthp_khugepaged_alloc_sleep_seconds %s' \
            "$PMD" "$(awk '{ printf "%.9g", $1 / 1000 }' "$THP/khugepaged/scan_sleep_millisecs")" \
            "$(awk '{ printf "%.9g", $1 / 1000 }' "$THP/khugepaged/alloc_sleep_millisecs")")
        is "$(grep -E '^thp_(hpage_pmd_size_bytes|khugepaged_(scan|alloc)_sleep_seconds) ' "$SCRATCH/sys.prom")" "$want" \
            "$t: hpage_pmd_size in bytes, khugepaged's intervals in seconds"
        is "$(grep -E '^# TYPE thp_khugepaged_(full_scans|pages_collapsed)_total ' "$SCRATCH/sys.prom")" \
            "$(printf '# TYPE thp_khugepaged_full_scans_total counter\n# TYPE thp_khugepaged_pages_collapsed_total counter')" \
            "$t: khugepaged's counters are counters named _total"
        d=$THP/hugepages-2048kB/stats
        if [ -r "$d/nr_anon" ] && [ -r "$d/anon_fault_alloc" ]; then
            ok $(grep -qx "thp_mthp_folios{size=\"2M\",kind=\"anon\"} [0-9]*" "$SCRATCH/sys.prom" \
                && grep -qx "thp_mthp_events_total{size=\"2M\",event=\"anon_fault_alloc\"} [0-9]*" "$SCRATCH/sys.prom" \
                && grep -qx '# TYPE thp_mthp_events_total counter' "$SCRATCH/sys.prom" \
                && grep -qx '# TYPE thp_mthp_folios gauge' "$SCRATCH/sys.prom"; echo $?) \
                "$t: per-size stats: nr_* as a gauge of folios, the rest as counters"
        else
            skip "$t: per-size stats" "no $d/nr_anon"
        fi
    else
        skip "$t: THP settings" "no $THP"
        skip "$t: khugepaged counters" "no $THP"
        skip "$t: per-size stats" "no $THP"
    fi
    THP_STATUS_TEST_PROC=$SCRATCH/proc run "$T" --prometheus
    cp "$OUT" "$SCRATCH/fake.prom"
    want="# TYPE thp_vmstat_events_total counter
thp_vmstat_events_total{event=\"thp_fault_alloc\"} 7
# TYPE thp_vmstat_bytes gauge"
    [ -n "$PMD" ] && want="$want
thp_vmstat_bytes{item=\"nr_anon_transparent_hugepages\"} $((3 * PMD))"
    want="$want
thp_vmstat_bytes{item=\"nr_hugetlb\"} $((5 * PAGE))"
    [ -n "$PMD" ] && want="$want
thp_vmstat_bytes{item=\"nr_file_hugepages\"} 0"
    is "$(grep -E '^(# TYPE )?thp_vmstat' "$SCRATCH/fake.prom")" "$want" \
        "$t: fake vmstat: events as a counter, gauges in bytes, one of unknown unit left out"
    promtool_check "$SCRATCH/fake.prom" "$t: --prometheus on fake figures"

    # --all: by service and in total; per process on request, and they agree.
    run "$T" --all --prometheus
    cp "$OUT" "$SCRATCH/all.prom"
    promtool_check "$SCRATCH/all.prom" "$t: --all --prometheus"
    ok $(! grep -q 'pid="' "$SCRATCH/all.prom" && grep -q '^thp_unit_rss_bytes{unit="' "$SCRATCH/all.prom"; echo $?) \
        "$t: --all --prometheus: per systemd service, no pid label"
    if [ -n "$HOLDER_OK" ]; then
        ok $(grep -qE '^thp_thpalloc_processes\{state="active"\} [1-9]' "$SCRATCH/all.prom" \
            && [ "$(grep -c '^thp_thpalloc_processes{state=' "$SCRATCH/all.prom")" = 3 ]; echo $?) \
            "$t: --all --prometheus: processes on thpalloc by state (the holder is active)"
    else
        skip "$t: processes on thpalloc" "status-holder did not start"
    fi
    run "$T" --all --prometheus --per-process
    cp "$OUT" "$SCRATCH/per.prom"
    promtool_check "$SCRATCH/per.prom" "$t: --all --prometheus --per-process"
    agree=$("$PYTHON" - "$SCRATCH/per.prom" <<'PY'
import re, sys
per, unit, tot = {}, {}, {}
for line in open(sys.argv[1], encoding="utf-8"):
    m = re.match(r'(thp_(process|unit|thpalloc)_([a-z_]+))(\{(.*)\})? (\S+)$', line)
    if not m:
        continue
    labels = dict(re.findall(r'([a-z]+)="((?:[^"\\]|\\.)*)"', m.group(5) or ""))
    v = float(m.group(6))
    if m.group(2) == "process" and "unit" in labels:
        key = (m.group(3), labels["unit"])
        per[key] = per.get(key, 0) + v
        tot[m.group(3)] = tot.get(m.group(3), 0) + v
    elif m.group(2) == "unit" and "state" not in labels:
        unit[(m.group(3), labels["unit"])] = v
bad = [k for k in unit if k[0] != "processes" and per.get(k, 0) != unit[k]]
for f in ("arena_rss_bytes", "arena_huge_bytes", "arena_reserved_bytes", "arena_charged_bytes"):
    total = re.search(r'^thp_thpalloc_%s (\S+)$' % f, open(sys.argv[1]).read(), re.M)
    if not total or float(total.group(1)) != tot.get("thpalloc_" + f, 0):
        bad.append(f)
print("yes" if unit and not bad else "no: %r" % bad[:4])
PY
)
    is "$agree" yes "$t: the sums per service and the totals equal the per-process series of the same run"

    # The node_exporter example: a whole file that promtool accepts, or the old one.
    D=$SCRATCH/textfile
    rm -rf "$D"
    mkdir -p "$D"
    THP_STATUS=$T sh "$TEXTFILE" "$D"
    rc=$?
    ok $([ $rc -eq 0 ] && [ "$(ls -A "$D")" = thp-status.prom ] && [ "$(stat -c %a "$D/thp-status.prom")" = 644 ] \
        && grep -q '^thp_setting_info{' "$D/thp-status.prom" && grep -q '^thp_processes ' "$D/thp-status.prom"; echo $?) \
        "$t: examples/node-exporter/thp-status-textfile writes thp-status.prom (0644), the system and --all, nothing else (rc $rc)"
    promtool_check "$D/thp-status.prom" "$t: the textfile example's output"
    cp "$D/thp-status.prom" "$SCRATCH/before.prom"
    THP_STATUS=false sh "$TEXTFILE" "$D" 2>/dev/null
    rc=$?
    ok $([ $rc -ne 0 ] && [ "$(ls -A "$D")" = thp-status.prom ] && cmp -s "$D/thp-status.prom" "$SCRATCH/before.prom"; echo $?) \
        "$t: a failed run leaves the last file as it was and no temporary file (rc $rc)"
    sanitizer_clean "$t"
done

# The example's units, as systemd reads them (ExecStart pointed at the script here).
if command -v systemd-analyze >/dev/null 2>&1; then
    mkdir -p "$SCRATCH/units"
    sed "s|^ExecStart=/usr/local/sbin/thp-status-textfile|ExecStart=$TEXTFILE|" \
        "$TOP_SRCDIR/examples/node-exporter/thp-status-textfile.service" >"$SCRATCH/units/thp-status-textfile.service"
    cp "$TOP_SRCDIR/examples/node-exporter/thp-status-textfile.timer" "$SCRATCH/units/"
    (cd "$SCRATCH/units" && systemd-analyze verify --man=no ./thp-status-textfile.service ./thp-status-textfile.timer) \
        >"$SCRATCH/verify.out" 2>&1
    rc=$?
    ok $([ $rc -eq 0 ] && [ ! -s "$SCRATCH/verify.out" ]; echo $?) "the example's service and timer pass systemd-analyze verify (rc $rc)"
    sed 's/^/#   /' "$SCRATCH/verify.out" | head -5
else
    skip "the example's service and timer" "no systemd-analyze"
fi
done_testing
