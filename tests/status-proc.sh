#!/bin/sh
# thp-status PID and --all, on a process under thpalloc that holds 4 x 64 MiB
# (tests/status-holder): thpalloc is shown loaded and in charge, the policy equals what the
# library itself reports (thpalloc_policy(), printed by the holder), the memory figures
# equal the process's smaps_rollup, and the huge pages are attributed to thpalloc's arenas
# (found with the arena table the library exports, read with process_vm_readv).
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "process view" "THPALLOC_LIB not built"
    done_testing
fi
LIB_REAL=$(readlink -f "$THPALLOC_LIB")
# (a rebuild of the library while the test runs shows as "PATH (deleted)" in maps)

# The holder gets its threshold from a [program] section (file:line) and its purge delay
# from the environment: both must come back in thp-status's explanation.
CONF=$SCRATCH/holder.conf
printf '# status-proc test\n[global]\nthp = large\n[program status-holder]\nthp_threshold = 4M\n' >"$CONF"
chmod 644 "$CONF"
if ! start_holder 4 THPALLOC_CONF="$CONF" THPALLOC_PURGE_DELAY=250ms; then
    ok 1 "status-holder runs under thpalloc"
    done_testing
fi
P=$HOLDER_PID
diag "holder $P: $(grep -c '^block' "$HOLDER_OUT") blocks"

# A plain process without thpalloc.
sleep 600 &
PLAIN=$!
CLEANUP_PIDS="$CLEANUP_PIDS $PLAIN"

THP_ON=yes
[ "$(sysfs_selected /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)" = never ] && THP_ON=
[ -r /sys/kernel/mm/transparent_hugepage/enabled ] || THP_ON=

# AnonHugePages of the holder's VMAs that contain its blocks, from smaps, by the test.
blocks_huge() {
    awk -v list="$(awk '$1 == "block" { print $2 }' "$HOLDER_OUT" | tr '\n' ' ')" '
        BEGIN { n = split(list, b, " "); for (i = 1; i <= n; i++) { sub(/^0x/, "", b[i]); a[i] = b[i] } }
        function hex(s,   i, c, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c } return v }
        /^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); lo = hex(r[1]); hi = hex(r[2]); inb = 0
            for (i = 1; i <= n; i++) { x = hex(a[i]); if (x >= lo && x < hi) inb = 1 } }
        $1 == "AnonHugePages:" && inb { s += $2 }
        END { print s + 0 }' "/proc/$P/smaps"
}

for T in $TOOLS; do
    t=$(basename "$T")

    # Text view.
    run "$T" "$P"
    ok $([ "$RC" -eq 0 ]; echo $?) "$t: PID view exits 0 (rc $RC)"
    cp "$OUT" "$SCRATCH/text"
    ok $(grep -q "^PID $P  status-holder\$" "$SCRATCH/text" \
        && grep -qE "^  executable +$(readlink -f "$HOLDER")\$" "$SCRATCH/text"; echo $?) \
        "$t: name and executable"
    ok $(grep -qE "^  thpalloc +loaded: $LIB_REAL( \(deleted\))?\$" "$SCRATCH/text" \
        && grep -qE '^    state +in charge$' "$SCRATCH/text"; echo $?) "$t: thpalloc loaded and in charge"
    want=$(awk '$1 == "THP_enabled:" { print $2 }' "/proc/$P/status")
    ok $(grep -qE "^  THP_enabled +$want " "$SCRATCH/text"; echo $?) "$t: THP_enabled $want as in /proc/PID/status"
    ok $(grep -qE "^    thp_threshold +4M +$CONF:5 \[program status-holder\]\$" "$SCRATCH/text" \
        && grep -qE '^    purge_delay +250ms +environment THPALLOC_PURGE_DELAY$' "$SCRATCH/text"; echo $?) \
        "$t: the policy and why: [program] section with file:line, environment override"
    ok $(grep -qE '^    in force +thp=large thp_threshold=4M arena_size=64M purge_delay=250ms purge=dontneed$' "$SCRATCH/text"; echo $?) \
        "$t: the policy in force, read from the process"

    # JSON: figures equal smaps_rollup (the holder is idle; read until still).
    tries=0
    while :; do
        b_rss=$(rollup "$P" Rss) b_anon=$(rollup "$P" Anonymous) b_huge=$(rollup "$P" AnonHugePages)
        run "$T" --json "$P"
        a_rss=$(rollup "$P" Rss) a_anon=$(rollup "$P" Anonymous) a_huge=$(rollup "$P" AnonHugePages)
        tries=$((tries + 1))
        [ "$b_rss $b_anon $b_huge" = "$a_rss $a_anon $a_huge" ] && break
        [ $tries -ge 20 ] && break
        sleep 0.1
    done
    cp "$OUT" "$SCRATCH/json"
    ok $([ "$RC" -eq 0 ] && json_valid "$SCRATCH/json"; echo $?) "$t: --json PID parses"
    is "$(json "$SCRATCH/json" "d['processes'][0]['memory_kb']['rss'], d['processes'][0]['memory_kb']['anonymous'], d['processes'][0]['memory_kb']['anon_huge']")" \
        "($a_rss, $a_anon, $a_huge)" "$t: Rss, Anonymous, AnonHugePages equal smaps_rollup"
    ok $(grep -qE "^    AnonHugePages +$a_huge kB\$" "$SCRATCH/text" || [ "$b_huge" != "$a_huge" ]; echo $?) \
        "$t: the text view shows the same AnonHugePages ($a_huge kB)"
    is "$(json "$SCRATCH/json" "d['processes'][0]['thpalloc']['loaded'], d['processes'][0]['thpalloc']['library'].replace(' (deleted)', ''), d['processes'][0]['thpalloc']['introspect']['state']")" \
        "(True, '$LIB_REAL', 'active')" "$t: JSON: loaded, library, active"

    # The policy equals what the library itself says (thpalloc_policy()).
    lib_pol=$(awk '$1 == "policy" { $1 = ""; sub(/^ /, ""); print }' "$HOLDER_OUT")
    tool_pol=$("$PYTHON" - "$SCRATCH/json" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["processes"][0]["policy"]["settings"]:
    o = s["origin"]
    where = "default" if o == "default" else "environment " + s["variable"] if o == "environment" else "%s:%d [%s]" % (s["file"], s["line"], s["section"])
    print(s["key"], s["value"], where)
PY
)
    ok $([ -n "$lib_pol" ] && [ "$lib_pol" = "$tool_pol" ]; echo $?) \
        "$t: the explained policy equals the library's own thpalloc_policy(), key by key"
    [ "$lib_pol" = "$tool_pol" ] || { diag "library:"; echo "$lib_pol" | sed 's/^/#   /'; diag "tool:"; echo "$tool_pol" | sed 's/^/#   /'; }

    # Attribution: arenas + rest = the whole; the blocks' huge pages are in the arenas.
    attr=$("$PYTHON" - "$SCRATCH/json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
a, r, m = p["thpalloc"]["attribution"]["arenas"], p["thpalloc"]["attribution"]["rest"], p["memory_kb"]
print(p["thpalloc"]["attribution"]["method"], a["rss_kb"] + r["rss_kb"] == m["rss"],
      a["anon_huge_kb"] + r["anon_huge_kb"] == m["anon_huge"], a["anon_huge_kb"], a["rss_kb"],
      p["thpalloc"]["introspect"]["reserved_bytes"], p["thpalloc"]["introspect"]["ranges"])
PY
)
    set -- $attr
    is "$1" introspect "$t: attribution through the library's arena table"
    ok $([ "$2" = True ] && [ "$3" = True ]; echo $?) "$t: arenas + rest = the process's Rss and AnonHugePages"
    arena_huge=$4 arena_rss=$5 reserved=$6 ranges=$7
    ok $([ "$reserved" -ge $((4 * 64 * 1048576)) ] && [ "$ranges" -ge 1 ]; echo $?) \
        "$t: the arena table covers the 4 x 64 MiB ($ranges ranges, $((reserved >> 20)) MiB)"
    ok $([ "$arena_rss" -ge $((4 * 65536)) ]; echo $?) "$t: the 256 MiB held are resident in the arenas ($arena_rss kB)"
    if [ -n "$THP_ON" ]; then
        bh=$(blocks_huge)
        diag "AnonHugePages in the VMAs of the blocks (by the test): $bh kB; in the arenas (tool): $arena_huge kB"
        ok $([ "$bh" -gt 0 ] && [ "$arena_huge" -ge "$bh" ]; echo $?) \
            "$t: the blocks' huge pages ($bh kB) are inside thpalloc's arenas ($arena_huge kB)"
        is "$arena_huge" "$a_huge" "$t: every huge page of the holder is in thpalloc's arenas"
    else
        skip "$t: huge pages in the arenas" "THP is off on this machine"
        skip "$t: every huge page in the arenas" "THP is off on this machine"
    fi
    ok $(grep -qE "^    thpalloc arenas +$arena_rss kB +[0-9]+ kB +$arena_huge kB" "$SCRATCH/text"; echo $?) \
        "$t: the text view shows the arenas' Rss and AnonHugePages"

    # A process without thpalloc.
    run "$T" "$PLAIN"
    ok $([ "$RC" -eq 0 ] && grep -qE '^  thpalloc +not loaded$' "$OUT" && ! grep -q 'thpalloc arenas' "$OUT"; echo $?) \
        "$t: a process without thpalloc: not loaded, no attribution"

    # Two PIDs at once.
    run "$T" --json "$P" "$PLAIN"
    is "$(json "$OUT" "[(p['pid'], p['thpalloc']['loaded']) for p in d['processes']]")" \
        "[[$P, true], [$PLAIN, false]]" "$t: several PIDs in one JSON document"

    # --all: the holder is there with the same figures, rows sorted by AnonHugePages.
    run "$T" --all --json
    cp "$OUT" "$SCRATCH/all"
    all=$("$PYTHON" - "$SCRATCH/all" "$P" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ps = d["processes"]
h = [p for p in ps if p["pid"] == int(sys.argv[2])]
huge = [p["memory_kb"]["anon_huge"] for p in ps if p["memory_kb"]]
print(len(h), h[0]["thpalloc"]["loaded"] if h else None, h[0]["memory_kb"]["anon_huge"] if h else None,
      h[0]["thpalloc"]["attribution"]["arenas"]["anon_huge_kb"] if h else None,
      huge == sorted(huge, reverse=True), isinstance(d["unreadable"], int))
PY
)
    is "$all" "1 True $a_huge $arena_huge True True" "$t: --all --json: the holder, its figures, sorted by AnonHugePages"
    run "$T" --all
    ok $([ "$RC" -eq 0 ] && grep -qE "^ *$P +[^ ]+ +status-holder .* yes " "$OUT" && grep -q 'processes shown' "$OUT" \
        && [ "$(awk '{ print length }' "$OUT" | sort -n | tail -1)" -le 100 ]; echo $?) \
        "$t: --all table: the holder with thpalloc, lines fit a terminal"
    run "$T" --all --prometheus
    ok $(grep -qE "^thp_process_anon_huge_bytes\{pid=\"$P\",comm=\"status-holder\"\} $((a_huge * 1024))\$" "$OUT" \
        && grep -qE "^thp_process_thpalloc_loaded\{pid=\"$P\",comm=\"status-holder\"\} 1\$" "$OUT"; echo $?) \
        "$t: --all --prometheus: the holder's huge pages and thpalloc"
    sanitizer_clean "$t"
done
done_testing
