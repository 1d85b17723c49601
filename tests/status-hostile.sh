#!/bin/sh
# thp-status against processes that lie or set traps, as any user can make them:
#   - the library file a process mapped is replaced (a FIFO, a symbolic link to a FIFO or
#     to a device node, another copy): the PID view, --all, --all --json and
#     --all --prometheus finish, open nothing but the file the process mapped (read
#     through /proc/PID/map_files), and without CAP_CHECKPOINT_RESTORE say why the arena
#     table is unavailable;
#   - a process whose introspection block lies (tests/status-bogus: its own exported block,
#     run as a file named libthpalloc.so.1, or the real library's block overwritten): range
#     sizes that wrap, a count beyond the table, a range where nothing is mapped, fields out
#     of range, overlapping ranges, slots beyond the block in a table where nothing is
#     mapped, values no policy can give (arena_size 12345, a purge delay of 2^40 ms, a
#     threshold of 2^57 - 1), ranges over files and the stack instead of anonymous memory:
#     "implausible introspection data" and why, in text and JSON, instead of the
#     figures; a block that tells the truth is still believed, in version 2's layout (with
#     ranges in the table beyond the block too) and in version 1's (thpalloc 0.1.0); and a
#     library whose block was pointed at an unmapped table goes on recording its ranges in
#     its own (it never reads the block back).
# Both builds (plain, ASan+UBSan); every run under timeout.
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "hostile processes" "THPALLOC_LIB not built"
    done_testing
fi
LIMIT=${STATUS_LIMIT:-30}

# A copy of the library that a holder maps, replaced below while the holder runs.
LIBDIR=$SCRATCH/libcopy
mkdir -p "$LIBDIR"
COPY=$LIBDIR/libthpalloc.so.1
mkfifo "$SCRATCH/fifo"

# replace KIND: puts something else where the holder's library was.
replace() {
    rm -f "$COPY"
    case $1 in
    fifo) mkfifo "$COPY" ;;
    link-fifo) ln -s "$SCRATCH/fifo" "$COPY" ;;
    link-device) ln -s /dev/zero "$COPY" ;;
    copy) cp "$THPALLOC_LIB" "$COPY" ;;
    esac
}
# The line the PID view prints for each (the path in maps has " (deleted)" after it).
why() {
    case $1 in
    fifo | link-fifo | link-device) echo "$COPY is not a regular file now: not opened, and /proc/$H/map_files cannot be read (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)" ;;
    copy) echo "$COPY is another file now: not read, and /proc/$H/map_files cannot be read (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)" ;;
    esac
}

# What thp-status finds wrong with each lie.
lie() {
    case $1 in
    sizes) echo "range 0 is not an address range of a process" ;;
    count) echo "1099511627776 ranges (the table has 1024)" ;;
    outside) echo "range 0 is not mapped in the process" ;;
    fields) echo "state 7 (0, 1 or 2)" ;;
    overlap) echo "ranges 0 and 1 overlap" ;;
    more) echo "ranges 4 to 5 are said to be at 0x10000000000, which is not mapped in the process" ;;
    values) echo "thp_threshold 144115188075855871, which thpalloc cannot hold (a size such as 4096, 512K, 2M or 1G)" ;;
    files) echo "range 0 is not anonymous memory of the process, as an arena is" ;;
    esac
}

for T in $TOOLS; do
    t=$(basename "$T")
    rm -f "$COPY"
    cp "$THPALLOC_LIB" "$COPY"
    if ! HOLDER_PRELOAD=$COPY start_holder 1; then
        ok 1 "$t: status-holder runs under a copy of the library"
        continue
    fi
    H=$HOLDER_PID
    # Untouched, the copy is read, with openat2 or without (component by component).
    for no2 in 0 1; do
        THP_STATUS_TEST_NO_OPENAT2=$no2 run timeout $LIMIT "$T" "$H"
        ok $([ "$RC" -eq 0 ] && grep -qxF "  thpalloc         loaded: $COPY" "$OUT" \
            && grep -qx '    state          in charge' "$OUT"; echo $?) \
            "$t: the copy in place (THP_STATUS_TEST_NO_OPENAT2=$no2): its table is read (rc $RC)"
    done
    for kind in fifo link-fifo link-device copy; do
        replace $kind
        # The file the process still maps, through /proc/PID/map_files (root keeps
        # CAP_CHECKPOINT_RESTORE for it); without that capability, why not.
        run timeout $LIMIT "$T" "$H"
        ok $([ "$RC" -eq 0 ] && grep -qx '    state          in charge' "$OUT" \
            && grep -qxF "    library        replaced since the process loaded it: the table read through /proc/$H/map_files (restart it to run the new one)" "$OUT"; echo $?) \
            "$t: the library replaced by a $kind: the table is read from the file the process maps (rc $RC)"
        run timeout $LIMIT setpriv --bounding-set=-checkpoint_restore,-sys_admin "$T" "$H"
        ok $([ "$RC" -eq 0 ] && grep -qxF "    arena table    unknown (library replaced: restart PID $H to refresh): $(why $kind)" "$OUT"; echo $?) \
            "$t: the library replaced by a $kind, map_files not readable: the PID view says why the table is unavailable (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n 's/^/#   /; /arena table/p' "$OUT"
        bad=
        for args in "--all" "--all --json" "--all --prometheus"; do
            # shellcheck disable=SC2086
            run timeout $LIMIT "$T" $args
            [ "$RC" -eq 0 ] || bad="$bad '$args' rc $RC"
        done
        ok $([ -z "$bad" ]; echo $?) "$t: the library replaced by a $kind: --all, --json, --prometheus finish${bad:+ (wrong:$bad)}"
    done
    # Without openat2, a link is not followed at all.
    replace link-device
    THP_STATUS_TEST_NO_OPENAT2=1 run timeout $LIMIT "$T" "$H"
    ok $([ "$RC" -eq 0 ] && grep -qxF "    arena table    unavailable: cannot open $COPY: a symbolic link (not followed: this kernel has no openat2)" "$OUT"; echo $?) \
        "$t: without openat2, a link where the library was is not followed (rc $RC)"
    kill "$H"
    wait "$H" 2>/dev/null

    # Lying introspection blocks.
    for how in self lib; do
        for mode in sizes count outside fields overlap more values files valid many v1; do
            case $how:$mode in lib:valid | lib:many | lib:v1) continue ;; esac
            if ! start_bogus $how $mode; then
                ok 1 "$t: status-bogus $how $mode starts"
                continue
            fi
            run timeout $LIMIT "$T" "$BPID"
            if [ $mode = valid ] || [ $mode = v1 ]; then
                ok $([ "$RC" -eq 0 ] && grep -qx '    arenas         1 range, 4 MiB reserved' "$OUT"; echo $?) \
                    "$t: a $mode block that tells the truth is believed (1 range, 4 MiB) (rc $RC)"
                # what it said instead, and the maps it judged (a CI run once missed the line)
                grep -qx '    arenas         1 range, 4 MiB reserved' "$OUT" || {
                    sed -n '/thpalloc /,/policy/p' "$OUT" | sed 's/^/#   /'
                    sed 's/^/#   stderr: /' "$ERR"
                    sed 's/^/#   maps: /' "/proc/$BPID/maps" 2>/dev/null
                }
            elif [ $mode = many ]; then
                ok $([ "$RC" -eq 0 ] && grep -qx '    arenas         6 ranges, 6 MiB reserved' "$OUT"; echo $?) \
                    "$t: six ranges, two in the table beyond the block, are read (6 MiB) (rc $RC)"
                [ "$RC" -eq 0 ] || sed -n 's/^/#   /; /arena/p' "$OUT"
            else
                ok $([ "$RC" -eq 0 ] && grep -qxF "    arena table    unavailable: implausible introspection data: $(lie $mode)" "$OUT" \
                    && ! grep -q '^    arenas ' "$OUT"; echo $?) \
                    "$t: $how, $mode: implausible introspection data, said why (rc $RC)"
                [ "$RC" -eq 0 ] || sed -n 's/^/#   /; /arena/p' "$OUT"
                run timeout $LIMIT "$T" --json "$BPID"
                is "$(json "$OUT" "d['processes'][0]['thpalloc']['introspect'], d['processes'][0]['thpalloc']['introspect_error']")" \
                    "(None, 'implausible introspection data: $(lie $mode)')" "$t: $how, $mode: JSON"
            fi
            kill "$BPID"
            wait "$BPID" 2>/dev/null
        done
    done
    # The library keeps its own count and table: a block pointed elsewhere is not written
    # through when the process records more ranges.
    if start_bogus lib more-map; then
        run timeout $LIMIT "$T" "$BPID"
        ok $([ "$RC" -eq 0 ] && kill -0 "$BPID" 2>/dev/null && grep -q '^    state          in charge$' "$OUT"; echo $?) \
            "$t: a lying 'more', then six new ranges: the process lives on, the tool reads it (rc $RC)"
        kill "$BPID"
        wait "$BPID" 2>/dev/null
    else
        ok 1 "$t: status-bogus lib more-map starts and maps six ranges"
    fi
    sanitizer_clean "$t"
done
done_testing
