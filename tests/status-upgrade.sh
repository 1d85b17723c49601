#!/bin/sh
# After an upgrade (issue 34): a process started under a library whose file was then
# replaced (a new file renamed over it, as dpkg does) or deleted still runs the old one.
# thp-status reads that one's arena table through /proc/PID/map_files, so the arenas'
# figures stay measurements; where it cannot (without CAP_CHECKPOINT_RESTORE), they are
# "unknown (library replaced: restart PID to refresh)", never 0 kB: no number in the PID
# view, null in JSON, "-" in --all, no series in Prometheus.
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "upgrade" "THPALLOC_LIB not built"
    done_testing
fi
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
    skip "upgrade" "needs root (map_files) and setpriv"
    done_testing
fi
NOCAP="setpriv --bounding-set=-checkpoint_restore,-sys_admin"
LIBDIR=$SCRATCH/lib
mkdir -p "$LIBDIR"
LIB=$LIBDIR/libthpalloc.so.1

# arena_rss FILE: the Rss of "thpalloc arenas" in a PID view, or "none".
arena_rss() { awk '$1 == "thpalloc" && $2 == "arenas" && $4 == "kB" { print $3; f = 1 } END { if (!f) print "none" }' "$1" | head -n 1; }

for how in rename delete; do
    cp "$(readlink -f "$THPALLOC_LIB")" "$LIB"
    if ! HOLDER_PRELOAD=$LIB start_holder 1; then
        ok 1 "$how: status-holder runs under a copy of the library"
        continue
    fi
    H=$HOLDER_PID
    set -- $TOOLS
    "$1" "$H" >"$SCRATCH/before"
    before=$(arena_rss "$SCRATCH/before")
    ok $([ "$before" != none ] && [ "$before" -ge 65536 ]; echo $?) \
        "$how: before: the arenas hold the 64 MiB block ($before kB)"
    if [ "$how" = rename ]; then
        cp "$LIB" "$LIB.new"
        mv -f "$LIB.new" "$LIB"
    else
        rm -f "$LIB"
    fi
    named=$(grep -c 'anon:thpalloc' "/proc/$H/maps")

    for T in $TOOLS; do
        t="$how: $(basename "$T")"
        # As root: the file the process maps, through map_files.
        run "$T" "$H"
        rss=$(arena_rss "$OUT")
        ok $([ "$RC" -eq 0 ] && [ "$rss" != none ] && [ "$rss" -ge 65536 ] \
            && grep -qxF "    library        replaced since the process loaded it: the table read through /proc/$H/map_files (restart it to run the new one)" "$OUT" \
            && grep -qx '    state          in charge' "$OUT"; echo $?) \
            "$t: the old library's table is read through map_files (arenas $rss kB, rc $RC)"
        run "$T" --json "$H"
        is "$(json "$OUT" "d['processes'][0]['thpalloc']['library_replaced'], d['processes'][0]['thpalloc']['attribution']['arenas']['rss_kb'] >= 65536")" \
            "(True, True)" "$t: JSON: library_replaced, and the arenas' figures"

        # Without the capability, and without [anon:thpalloc] names: unknown, no number.
        run $NOCAP "$T" "$H"
        if [ "$named" -gt 0 ]; then
            rss=$(arena_rss "$OUT")
            ok $([ "$rss" != none ] && [ "$rss" -ge 65536 ]; echo $?) \
                "$t: without map_files, the [anon:thpalloc] names still give the arenas ($rss kB)"
            continue
        fi
        u="unknown (library replaced: restart PID $H to refresh)"
        ok $([ "$RC" -eq 0 ] && [ "$(arena_rss "$OUT")" = none ] \
            && [ "$(grep -cxF "    thpalloc arenas  $u" "$OUT")" -eq 2 ] \
            && grep -q "^    arena table    $u: " "$OUT"; echo $?) \
            "$t: without map_files: the arenas are \"$u\", no figure (rc $RC)"
        grep -q "thpalloc arenas  $u" "$OUT" || sed -n '/thpalloc/,$p' "$OUT" | sed 's/^/#   /'
        run $NOCAP "$T" --json "$H"
        is "$(json "$OUT" "d['processes'][0]['thpalloc']['library_replaced'], d['processes'][0]['thpalloc']['attribution']")" \
            "(True, None)" "$t: JSON without map_files: library_replaced, attribution null"
        run $NOCAP "$T" --scan --json "$H"
        is "$RC $(json "$OUT" "d['processes'][0]['scan']['owners_known'], d['processes'][0]['scan']['arenas']['huge_pages']")" \
            "0 (False, 0)" "$t: --scan without map_files: owners unknown, every huge page under rest"
        run $NOCAP "$T" --all
        is "$(awk -v p="$H" '$1 == p { print $7, $8 }' "$OUT")" "loaded -" "$t: --all without map_files: ARENAHUGE '-', not 0.0M"
        run $NOCAP "$T" --all --prometheus --per-process
        ok $([ "$RC" -eq 0 ] && grep -q "^thp_process_thpalloc_loaded{pid=\"$H\"" "$OUT" \
            && ! grep -q "^thp_process_thpalloc_arena_[a-z_]*{pid=\"$H\"" "$OUT"; echo $?) \
            "$t: Prometheus without map_files: no arena series for the process (rc $RC)"
    done
    kill "$H"
    wait "$H" 2>/dev/null
done
for T in $TOOLS; do sanitizer_clean "$(basename "$T")"; done
done_testing
