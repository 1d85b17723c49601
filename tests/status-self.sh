#!/bin/sh
# What a process says of itself is labelled as such (the introspection block is its own
# memory, which any code in it can write):
#   - the PID view says that state, arenas and the settings in force are as the process
#     reports them;
#   - a block whose settings are not what the configuration gives the process (a faked
#     arena_size=128M beside the files' 64M default, in a block of its own or written
#     into the real library's) is said to differ, in text and JSON;
#   - a range table that lists the process's own unnamed anonymous mappings passes the
#     plausibility checks (tests/status-hostile.sh) but each range that does not look like
#     a thpalloc arena (not on 2 MiB chunk boundaries; not named [anon:thpalloc] where the
#     kernel names mappings) is flagged, in text and JSON;
#   - the real library's arenas and settings raise neither remark.
# Both builds (plain, ASan+UBSan); every run under timeout.
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "self-reported data" "THPALLOC_LIB not built"
    done_testing
fi
LIMIT=${STATUS_LIMIT:-30}
CONF=$SCRATCH/empty.conf # the configuration of every process here: the defaults
: >"$CONF"

stop() {
    kill "$BPID"
    wait "$BPID" 2>/dev/null
}

LABEL='    (state, arenas and in force: as the process reports them, from its own memory, which any code in it can write)'
DIFFERS='    ! the process reports arena_size=128M where its configuration gives 64M'
WHY='    (the configuration changed since it started, it was started with other settings, or its report is false)'
FORCE128='    in force       thp=large thp_threshold=2M arena_size=128M purge_delay=1s purge=dontneed'
INTRO="d['processes'][0]['thpalloc']['introspect']"

for T in $TOOLS; do
    t=$(basename "$T")
    # The real library, untouched: labelled, and no remark.
    if HOLDER_PRELOAD=$THPALLOC_LIB start_holder 4 THPALLOC_CONF="$CONF"; then
        run timeout $LIMIT "$T" "$HOLDER_PID"
        ok $([ "$RC" -eq 0 ] && grep -qxF "$LABEL" "$OUT" && ! grep -q '^    ! ' "$OUT"; echo $?) \
            "$t: the real library: labelled as self-reported, its arenas and settings raise no remark (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n '/thpalloc /,/memory by/p' "$OUT" | sed 's/^/#   /'
        run timeout $LIMIT "$T" --json "$HOLDER_PID"
        is "$(json "$OUT" "[$INTRO['self_reported'], $INTRO['ranges_unlike_arenas'], $INTRO['differs_from_policy']]")" \
            "[true, [], []]" "$t: the real library: JSON self_reported, no range unlike an arena, no difference"
        kill "$HOLDER_PID"
        wait "$HOLDER_PID" 2>/dev/null
    else
        ok 1 "$t: status-holder starts"
    fi

    # arena_size=128M where the files give 64M: in a block of its own, and in the library's.
    for how in self lib; do
        if ! start_bogus $how arena128 THPALLOC_CONF="$CONF"; then
            ok 1 "$t: status-bogus $how arena128 starts"
            continue
        fi
        run timeout $LIMIT "$T" "$BPID"
        ok $([ "$RC" -eq 0 ] && grep -qxF "$FORCE128" "$OUT" && grep -qxF "$LABEL" "$OUT" \
            && [ "$(grep -c '^    ! ' "$OUT")" -eq 1 ] \
            && [ "$(grep -xF -A1 "$DIFFERS" "$OUT")" = "$DIFFERS
$WHY" ]; echo $?) \
            "$t: $how, arena_size=128M beside the files' 64M: said to differ (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n '/thpalloc /,/memory by/p' "$OUT" | sed 's/^/#   /'
        run timeout $LIMIT "$T" --json "$BPID"
        is "$(json "$OUT" "[$INTRO['self_reported'], $INTRO['arena_size'], $INTRO['differs_from_policy'], $INTRO['ranges_unlike_arenas_count']]")" \
            '[true, 134217728, [{"key": "arena_size", "reported": "128M", "policy": "64M"}], 0]' \
            "$t: $how, arena_size=128M: JSON"
        stop
    done

    # A table of the process's unnamed anonymous mappings: believed as its word, each range
    # flagged; range 0 (3 MiB and a page) at least, as the process printed it.
    if start_bogus self anon THPALLOC_CONF="$CONF"; then
        r0=$(sed -n 's/^range0 //p' "$BOUT")
        unnamed=
        grep -qx 'names 1' "$BOUT" && unnamed=", not named [anon:thpalloc]"
        run timeout $LIMIT "$T" "$BPID"
        ok $([ "$RC" -eq 0 ] && grep -qxF "$LABEL" "$OUT" \
            && grep -qxF "    ! range 0 ($r0, 3076 KiB) does not look like a thpalloc arena: not on 2 MiB chunk boundaries$unnamed" "$OUT"; echo $?) \
            "$t: a table of unnamed anonymous mappings: range 0 flagged as unlike an arena (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n '/thpalloc /,/memory by/p' "$OUT" | sed 's/^/#   /'
        run timeout $LIMIT "$T" --json "$BPID"
        is "$(json "$OUT" "[$INTRO['self_reported'], $INTRO['ranges_unlike_arenas'][0], $INTRO['ranges_unlike_arenas_count'] >= 1]")" \
            "[true, {\"index\": 0, \"base\": $(printf %d "$r0"), \"size\": 3149824, \"why\": \"not on 2 MiB chunk boundaries$unnamed\"}, true]" \
            "$t: a table of unnamed anonymous mappings: JSON"
        stop
    else
        ok 1 "$t: status-bogus self anon starts"
    fi
    sanitizer_clean "$t"
done
done_testing
