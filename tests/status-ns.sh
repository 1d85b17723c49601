#!/bin/sh
# A process in another mount namespace and a chroot of the same tree (a recursive bind of
# /): maps shows its library under the tree's path, which names no file in the process's
# root (or, in ours, nothing, or another file). That is not a replacement: the PID view
# reads the table through /proc/PID/map_files (the file it maps, checked by fstat against
# maps' device and inode) and says why, and without CAP_SYS_ADMIN/CAP_CHECKPOINT_RESTORE
# says the table is unavailable and why, never "library replaced ... restart". Needs
# unshare -m (root or a user namespace with mount rights): skips with a reason otherwise.
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "mount namespaces" "THPALLOC_LIB not built"
    done_testing
fi
if ! unshare -m --propagation private true 2>/dev/null || ! command -v chroot >/dev/null; then
    skip "mount namespaces" "unshare -m not permitted here (needs CAP_SYS_ADMIN) or no chroot"
    done_testing
fi
LIMIT=${STATUS_LIMIT:-30}
TREE=$SCRATCH/tree
mkdir -p "$TREE"
OUTF=$SCRATCH/nsholder
# The holder in a private mount namespace, chrooted into a recursive bind of / (exec all
# the way: its PID is $!).
unshare -m --propagation private sh -c \
    "mount --rbind / '$TREE' && exec chroot '$TREE' env LD_PRELOAD='$THPALLOC_LIB' '$HOLDER' 1" \
    >"$OUTF" 2>&1 &
H=$!
CLEANUP_PIDS="$CLEANUP_PIDS $H"
if ! wait_line "$H" "$OUTF"; then
    sed 's/^/#   /' "$OUTF"
    skip "mount namespaces" "the holder did not start in a chroot of a private mount namespace"
    done_testing
fi
MP=$(awk '$6 ~ /libthpalloc/ { print $6; exit }' "/proc/$H/maps")
case $MP in
"$TREE"/*) ok 0 "maps shows the library under the tree's path ($MP)" ;;
*) ok 1 "maps shows the library under the tree's path ($MP)" ;;
esac

VIA="    library        its path is not in the process's root as seen from here (another mount namespace or root): the table read through /proc/$H/map_files"
NOCAP="    arena table    unavailable: $MP is not in the process's root as seen from here (another mount namespace or root), and /proc/$H/map_files cannot be read (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)"
for T in $TOOLS; do
    t=$(basename "$T")
    # nothing at that path in our namespace; then, from a sibling namespace of ours, another
    # file there (a tmpfs over the tree's directory, which the process does not see)
    for here in nothing another; do
        pre=
        [ $here = another ] && pre="unshare -m --propagation private sh -c 'mount -t tmpfs none \"$TREE\" && mkdir -p \"$(dirname "$MP")\" && cp \"$HOLDER\" \"$MP\" && exec \"\$0\" \"\$@\"'"
        eval "run timeout $LIMIT $pre \"\$T\" \"\$H\""
        ok $([ "$RC" -eq 0 ] && grep -qxF "$VIA" "$OUT" && grep -qx '    state          in charge' "$OUT" \
            && ! grep -q 'replaced\|restart' "$OUT"; echo $?) \
            "$t: $here at the path here: read through map_files, not called replaced (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n '/thpalloc /,/memory by/p' "$OUT" | sed 's/^/#   /'
        eval "run timeout $LIMIT $pre \"\$T\" --json \"\$H\""
        is "$(json "$OUT" "d['processes'][0]['thpalloc']['library_replaced'], d['processes'][0]['thpalloc']['introspect']['state']")" \
            "(False, 'active')" "$t: $here at the path here: JSON library_replaced false, the table read"
        eval "run timeout $LIMIT $pre setpriv --bounding-set=-checkpoint_restore,-sys_admin \"\$T\" \"\$H\""
        ok $([ "$RC" -eq 0 ] && grep -qxF "$NOCAP" "$OUT" && ! grep -q 'replaced\|restart' "$OUT"; echo $?) \
            "$t: $here at the path here, map_files not readable: unavailable and why, not called replaced (rc $RC)"
        [ "$RC" -eq 0 ] || sed -n '/thpalloc /,/memory by/p' "$OUT" | sed 's/^/#   /'
    done
    sanitizer_clean "$t"
done
kill "$H"
wait "$H" 2>/dev/null
done_testing
