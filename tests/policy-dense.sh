#!/bin/bash
# thp_dense (thpalloc.conf(5)): small-object memory nearly all in use becomes huge pages,
# collapsed by the background purge (the purger thread, which 16 MiB of them start) once
# the chunks filled, at no more than
# the part not in use yet in resident size; a thread that fills chunk after chunk gets its
# next one as a huge page from the first touch, and gives back what it did not fill after
# purge_delay; freed, it goes back to 4 KiB pages and to the kernel after purge_delay.
# Figures from the real kernel (smaps_rollup, smaps' VmFlags) and the library's
# statistics. thp_dense = off and thp = never collapse nothing.
set -u
# status-lib.sh: tap.sh, and promtool_check for the Prometheus view below
. "$TESTS_SRCDIR/status-lib.sh"
probe=$TESTS_BUILDDIR/policy-dense-probe
test -x "$probe" || bail "$probe not built"
enabled=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
case $enabled in
*"[never]"* | "") skip_all "the kernel gives no huge pages (THP enabled: ${enabled:-absent})" ;;
esac
can=$("$probe" can-collapse)
case $can in
collapse=1) ;;
*) skip_all "this kernel does not collapse a range on request (MADV_COLLAPSE: $can)" ;;
esac
get() { sed -n "s/^$1=//p" <<<"$out"; }
run() {
    out=$(env "$@" LD_PRELOAD="$THPALLOC_LIB" timeout 60 "$probe" 256 48)
    rc=$?
    sed 's/^/# /' <<<"$out"
}

run THPALLOC_PURGE_DELAY=500ms
is "$rc" 0 "the probe ran: every block kept its contents through the collapses"
c=$(get busy_collapses)
test "$c" -ge 20
ok $? "thp_dense 90% (the default): 48 MiB of 256-byte blocks, $c chunks collapsed (at least 20 of 24)"
test "$(get busy_anonhuge_kb)" -ge $((40 * 1024))
ok $? "the kernel backs them with huge pages: AnonHugePages $(get busy_anonhuge_kb) kB (at least 40 MiB)"
test "$(get busy_dense_huge_kb)" -eq $((c * 2048))
ok $? "the statistics count them: dense_huge $(get busy_dense_huge_kb) kB = $c x 2 MiB"
grow=$(($(get busy_rss_kb) - $(get filled_rss_kb)))
test "$grow" -le $((48 * 1024 / 10))
ok $? "resident size grew by $grow kB, at most the 10 % of 48 MiB not yet in use"
test "$(get freed_dense_huge_kb)" -eq 0
ok $? "freed and idle past purge_delay: no collapsed chunk left (dense_huge $(get freed_dense_huge_kb) kB)"
test "$(get freed_anonhuge_kb)" -le 2048
ok $? "freed and idle: the kernel's huge pages are gone too (AnonHugePages $(get freed_anonhuge_kb) kB)"
test "$(get freed_rss_kb)" -le $((16 * 1024))
ok $? "freed and idle: resident size back to $(get freed_rss_kb) kB (at most 16 MiB)"
a=$(get filled_ahead)
test "$a" -ge 20 -a "$a" -le 23
ok $? "a thread filling chunk after chunk: $a of its 24 chunks huge-advised before their first touch (20 to 23: not its first two)"
test "$(get filled_anonhuge_kb)" -ge $((40 * 1024))
ok $? "they are huge pages as soon as they are written, before any collapse: AnonHugePages $(get filled_anonhuge_kb) kB at the fill's end (at least 40 MiB)"

# A thread that stops growing inside its chunk taken ahead: the chunk's part it did not
# fill goes back after purge_delay, and the chunk loses its huge advice (khugepaged would
# make it a huge page again, however sparse).
out=$(LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=500ms timeout 60 "$probe" 256 5)
sed 's/^/# /' <<<"$out"
is "$(get filled_ahead) $(get filled_hg_kb)" "1 2048" "5 MiB of 256-byte blocks: the third chunk taken ahead, huge-advised (2048 kB of VmFlags hg)"
is "$(get busy_hg_kb)" 0 "past purge_delay, half of it unused: no huge advice left (VmFlags hg 0 kB)"
test "$(get busy_rss_kb)" -le $(($(get filled_rss_kb) - 512))
ok $? "and its unused part given back: resident $(get filled_rss_kb) -> $(get busy_rss_kb) kB"
test "$(get busy_anonhuge_kb)" -le 4096
ok $? "its huge page split: AnonHugePages $(get busy_anonhuge_kb) kB, the two full chunks' at most"

# thp-status's PID view says what the process reports (its introspection block).
tool=$TESTS_BUILDDIR/../tools/thp-status/thp-status
if test -x "$tool"; then
    held=$(mktemp)
    LD_PRELOAD="$THPALLOC_LIB" "$probe" 256 48 hold >"$held" &
    hp=$!
    for _ in $(seq 600); do grep -q '^held' "$held" && break; sleep 0.05; done
    n=$(sed -n 's/^busy_collapses=//p' "$held")
    line=$("$tool" "$hp" | grep '^    dense ')
    a=$(sed -n 's/^busy_ahead=//p' "$held")
    is "$line" "    dense          $((n * 2)) MiB of small objects in huge pages (thp_dense: $n collapsed, $a taken ahead, 0 split back; their zeros: --scan)" \
        "thp-status PID: the process's dense huge pages"
    "$tool" --all --prometheus --per-process >"$SCRATCH/dense.prom"
    got=$(sed -n "s/^thp_process_thpalloc_dense_huge_bytes{pid=\"$hp\",[^}]*} //p" "$SCRATCH/dense.prom")
    is "$got" "$((n * 2 * 1048576))" "thp-status --all --prometheus --per-process: thp_process_thpalloc_dense_huge_bytes of the process"
    total=$(sed -n 's/^thp_thpalloc_dense_huge_bytes //p' "$SCRATCH/dense.prom")
    test "${total:-0}" -ge "$((n * 2 * 1048576))"
    ok $? "the total, thp_thpalloc_dense_huge_bytes ${total:-absent}, counts it"
    promtool_check "$SCRATCH/dense.prom" "the view with the dense figures"
    json=$("$tool" --json "$hp" | python3 -c 'import json,sys; i=json.load(sys.stdin)["processes"][0]["thpalloc"]["introspect"]; print(i["dense_huge_bytes"], i["dense_collapses"], i["dense_splits"], i["dense_ahead"])')
    is "$json" "$((n * 2 * 1048576)) $n 0 $a" "thp-status --json PID: dense_huge_bytes, dense_collapses, dense_splits, dense_ahead"
    kill "$hp"
    wait "$hp" 2>/dev/null
    rm -f "$held"
else
    skip "thp-status PID's dense line" "tools/thp-status/thp-status not built"
fi

run THPALLOC_PURGE_DELAY=500ms THPALLOC_THP_DENSE=off
is "$(get busy_collapses) $(get busy_dense_huge_kb)" "0 0" "thp_dense = off: nothing collapsed"
test "$(get busy_anonhuge_kb)" -le 4096
ok $? "thp_dense = off: small objects on 4 KiB pages (AnonHugePages $(get busy_anonhuge_kb) kB)"
run THPALLOC_PURGE_DELAY=500ms THPALLOC_THP=never
is "$(get busy_collapses) $(get busy_dense_huge_kb)" "0 0" "thp = never: nothing collapsed"
run THPALLOC_PURGE_DELAY=500ms THPALLOC_THP_DENSE=40%
test "$(get busy_collapses)" -ge 20
ok $? "a value out of range (40%) is refused and the default 90% applies ($(get busy_collapses) collapsed)"
done_testing
