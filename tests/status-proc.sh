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
P_OUT=$HOLDER_OUT
diag "holder $P: $(grep -c '^block' "$HOLDER_OUT") blocks"
# A second holder with memory charged to the commit limit inside thpalloc's ranges, as the
# library's strict-overcommit mode makes (see status-holder.c), and a mapping across a
# range's end.
if ! start_holder 1 STATUS_HOLDER_CHARGE=1; then
    ok 1 "status-holder runs under thpalloc with STATUS_HOLDER_CHARGE=1"
    done_testing
fi
C=$HOLDER_PID
C_OUT=$HOLDER_OUT
diag "holder $C: $(grep -c '^range' "$C_OUT") ranges, $(grep -c '^charge' "$C_OUT") charged mappings made"

# thpalloc loaded but dormant: jemalloc is preloaded first and owns malloc.
JEMALLOC=$(ls /usr/lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 2>/dev/null | head -n 1)
DORMANT=
if [ -n "$JEMALLOC" ] && HOLDER_PRELOAD="$JEMALLOC $THPALLOC_LIB" start_holder 1; then
    DORMANT=$HOLDER_PID
fi

# A plain process without thpalloc.
sleep 600 &
PLAIN=$!
CLEANUP_PIDS="$CLEANUP_PIDS $PLAIN"

THP_ON=yes
[ "$(sysfs_selected /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)" = never ] && THP_ON=
[ -r /sys/kernel/mm/transparent_hugepage/enabled ] || THP_ON=

# AnonHugePages of the holder's VMAs that contain its blocks, from smaps, by the test.
blocks_huge() {
    awk -v list="$(awk '$1 == "block" { print $2 }' "$P_OUT" | tr '\n' ' ')" '
        BEGIN { n = split(list, b, " "); for (i = 1; i <= n; i++) { sub(/^0x/, "", b[i]); a[i] = b[i] } }
        function hex(s,   i, c, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c } return v }
        /^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); lo = hex(r[1]); hi = hex(r[2]); inb = 0
            for (i = 1; i <= n; i++) { x = hex(a[i]); if (x >= lo && x < hi) inb = 1 } }
        $1 == "AnonHugePages:" && inb { s += $2 }
        END { print s + 0 }' "/proc/$P/smaps"
}

# The address space of process $1 from its smaps, by the test, in kB: inside the ranges the
# holder printed in file $2 (none: /dev/null) the Size and the part charged (an "ac" token
# in VmFlags), the same for the whole process (from the Size lines), and the number of
# mappings only partly inside the ranges.
space() {
    "$PYTHON" - "/proc/$1/smaps" "$2" <<'PY'
import re, sys
ranges = [(int(f[1], 16), int(f[1], 16) + int(f[2])) for f in (l.split() for l in open(sys.argv[2])) if f[:1] == ["range"]]
res = chg = size = charged = partial = 0
for line in open(sys.argv[1]):
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
    if m:
        s, e = int(m.group(1), 16), int(m.group(2), 16)
        inside = sum(max(0, min(e, b) - max(s, a)) for a, b in ranges)
        partial += 0 < inside < e - s
    elif line.startswith("Size:"):
        kb = int(line.split()[1])
    elif line.startswith("VmFlags:"):
        ac = "ac" in line.split()[1:]
        res += inside // 1024
        chg += inside // 1024 if ac else 0
        size += kb
        charged += kb if ac else 0
print(res, chg, size, charged, partial)
PY
}
# run_still TOOL ARGS... (PID in $SP, its ranges in $SP_OUT): runs the tool until the
# test's figures of the process are the same before and after; they are in $SPACE.
run_still() {
    tries=0
    while :; do
        SPACE=$(space "$SP" "$SP_OUT")
        run "$@"
        tries=$((tries + 1))
        [ "$SPACE" = "$(space "$SP" "$SP_OUT")" ] && break
        [ $tries -ge 20 ] && break
        sleep 0.1
    done
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
    lib_pol=$(awk '$1 == "policy" { $1 = ""; sub(/^ /, ""); print }' "$P_OUT")
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
    # The holder's own reading of the block (range lines): more ranges than the block holds
    # itself (THPALLOC_RANGES_INLINE, 4), so the table beyond it is read too.
    own_ranges=$(grep -c '^range' "$P_OUT")
    own_bytes=$(awk '$1 == "range" { s += $3 } END { print s + 0 }' "$P_OUT")
    ok $([ "$reserved" -ge $((4 * 64 * 1048576)) ] && [ "$ranges" -gt 4 ] \
        && [ "$ranges" -eq "$own_ranges" ] && [ "$reserved" -eq "$own_bytes" ]; echo $?) \
        "$t: the arena table covers the 4 x 64 MiB, as the holder reads it ($ranges of $own_ranges ranges, $((reserved >> 20)) of $((own_bytes >> 20)) MiB)"
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

    # Address space and commit charge, inside thpalloc's ranges and in the whole process,
    # equal the test's own sums over smaps: the first holder (what the library charges by
    # itself), the second (2 or 3 MiB charged by hand, one mapping across a range's end).
    for SP in $P $C; do
        SP_OUT=$P_OUT
        [ "$SP" = "$C" ] && SP_OUT=$C_OUT
        run_still "$T" --json "$SP"
        set -- $SPACE
        res=$1 chg=$2 size=$3 charged=$4 partial=$5
        diag "$SP by the test: reserved $res kB, charged $chg kB in the ranges ($partial partly in); process $size kB, charged $charged kB"
        is "$(json "$OUT" "[(a['size_kb'], a['charged_kb']) for a in [d['processes'][0]['thpalloc']['attribution']['arenas']]][0], d['processes'][0]['address_space_kb']['size'], d['processes'][0]['address_space_kb']['charged'], d['processes'][0]['thpalloc']['attribution']['partial_mappings']")" \
            "(($res, $chg), $size, $charged, $partial)" "$t: holder $SP: JSON reserved and charged in the ranges, in the process, as smaps says"
        is "$(json "$OUT" "d['processes'][0]['thpalloc']['introspect']['reserved_bytes'] // 1024")" "$res" \
            "$t: holder $SP: the arenas' mappings cover the arena table ($res kB)"
        run_still "$T" "$SP"
        ok $(grep -qE "^    thpalloc arenas +$1 kB +$2 kB\$" "$OUT" && grep -qE "^    whole process +$3 kB +$4 kB\$" "$OUT"; echo $?) \
            "$t: holder $SP: the text view shows them ($1/$2 kB, $3/$4 kB)"
    done
    made=$(awk '$1 == "charge" { s += $3 } END { print s / 1024 }' "$C_OUT")
    # Its 64 MiB blocks have mappings of their own, charged whole as glibc's would be.
    own=$(awk '$1 == "block" { s += $3 } END { print s / 1024 }' "$C_OUT")
    if [ "$made" -gt 0 ]; then
        ok $([ "$chg" -gt "$own" ] && [ "$chg" -le $((own + made)) ] && [ "$chg" -ge $((own + made - 1024)) ]; echo $?) \
            "$t: the holder's charged mappings ($made kB, 1 MiB of it perhaps outside) and its blocks' own mappings ($own kB) are charged in the ranges ($chg kB)"
    else
        skip "$t: charged memory in the ranges" "status-holder found no free chunk to charge"
    fi

    # A process without thpalloc: its address space only.
    SP=$PLAIN SP_OUT=/dev/null
    run_still "$T" --json "$PLAIN"
    set -- $SPACE
    is "$(json "$OUT" "d['processes'][0]['address_space_kb'], d['processes'][0]['thpalloc']['attribution']")" \
        "({'size': $3, 'charged': $4}, None)" "$t: a process without thpalloc: its address space and charge, no attribution"
    run "$T" "$PLAIN"
    ok $([ "$RC" -eq 0 ] && grep -qE '^  thpalloc +not loaded$' "$OUT" && ! grep -q 'thpalloc arenas' "$OUT" \
        && grep -qE "^    whole process +$3 kB +$4 kB\$" "$OUT"; echo $?) \
        "$t: a process without thpalloc: not loaded, no attribution, the whole process's charge"

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
    ok $([ "$RC" -eq 0 ] && grep -qE "^ *$P +[^ ]+ +status-holder .* yes " "$OUT" && grep -qE 'process(es)? shown' "$OUT" \
        && [ "$(awk '{ print length }' "$OUT" | sort -n | tail -1)" -le 100 ]; echo $?) \
        "$t: --all table: the holder with thpalloc, lines fit a terminal"
    if [ -n "$DORMANT" ]; then
        ok $(grep -qE "^ *$DORMANT +[^ ]+ +status-holder .* dormant +[0-9.]+M\$" "$OUT"; echo $?) \
            "$t: --all table: thpalloc dormant under jemalloc says dormant, not yes"
        run "$T" "$DORMANT"
        ok $(grep -qx '    state          dormant (another allocator owns malloc)' "$OUT"; echo $?) \
            "$t: ... as the PID view does"
    else
        skip "$t: --all: a dormant thpalloc" "no libjemalloc.so.2 (apt-get install libjemalloc2)"
        skip "$t: ... as the PID view does" "no libjemalloc.so.2"
    fi
    run "$T" --all --prometheus --per-process
    ok $(grep -qE "^thp_process_anon_huge_bytes\{pid=\"$P\",comm=\"status-holder\",unit=\"[^\"]*\"\} $((a_huge * 1024))\$" "$OUT" \
        && grep -qE "^thp_process_thpalloc_loaded\{pid=\"$P\",comm=\"status-holder\",unit=\"[^\"]*\"\} 1\$" "$OUT"; echo $?) \
        "$t: --all --prometheus --per-process: the holder's huge pages and thpalloc"
    SP=$C SP_OUT=$C_OUT
    run_still "$T" --all --prometheus --per-process
    set -- $SPACE
    is "$(sed -n "s/^\(thp_process_thpalloc_arena_reserved_bytes\|thp_process_thpalloc_arena_charged_bytes\|thp_process_charged_bytes\){pid=\"$C\",comm=\"status-holder\",unit=\"[^\"]*\"} //p" "$OUT" | tr '\n' ' ')" \
        "$(($1 * 1024)) $(($2 * 1024)) $(($4 * 1024)) " "$t: --all --prometheus --per-process: the charge holder's reserved and charged bytes"
    run_still "$T" --all --json
    is "$(json "$OUT" "[(p['thpalloc']['attribution']['arenas']['charged_kb'], p['address_space_kb']['charged']) for p in d['processes'] if p['pid'] == $C], [p['address_space_kb'] for p in d['processes'] if p['pid'] == $PLAIN]")" \
        "([($2, $4)], [None])" "$t: --all --json: charged figures where smaps is read (processes with thpalloc)"
    sanitizer_clean "$t"
done
done_testing
