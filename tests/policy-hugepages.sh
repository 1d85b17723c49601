#!/bin/bash
# Huge pages the real kernel gives, read from /proc/self/smaps for the block itself, with
# this machine's THP setting: per mode and size, set from the environment and from a file.
set -u
probe=$TESTS_BUILDDIR/policy-probe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
share() { env "$@" LD_PRELOAD="$THPALLOC_LIB" "$probe" share "$size" | sed -n 's/^share=//p'; }
real=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
echo "# this machine's THP setting: ${real:-unavailable}"
# Free memory gets fragmented on a busy machine; compact it first (ours only: a hint).
MiB=1048576
for spec in "64 ge 90" "1.5 eq 0" "2.2 range 85-95" "8 ge 90"; do
    set -- $spec
    size=$(awk "BEGIN{printf \"%d\", $1 * $MiB}")
    s=$(share)
    case "$real:$2" in
    never:*) test "$s" = 0 ;;
    *:ge) test "$s" -ge "$3" ;;
    *:eq) test "$s" -eq "$3" ;;
    *:range) test "$s" -ge "${3%-*}" -a "$s" -le "${3#*-}" ;;
    esac
    ok $? "thp=large (default), $1 MiB block: ${s}% huge (want $2 $3)"
done
size=$((64 * MiB))
printf '[global]\nthp = never\n' >"$tmp/never.conf"
printf '[global]\nthp = system\n' >"$tmp/system.conf"
for how in env file; do
    for mode in never system; do
        if [ $how = env ]; then s=$(share THPALLOC_THP=$mode); else s=$(share THPALLOC_CONF=$tmp/$mode.conf); fi
        if [ "$mode" = system ] && [ "$real" = always ]; then
            test -n "$s"
        else
            test "$s" = 0
        fi
        ok $? "thp=$mode from the $how: 64 MiB block ${s}% huge"
    done
done
s=$(share THPALLOC_THP=always)
[ "$real" = never ] && want=0 || want=90
test "$s" -ge "$want"
ok $? "thp=always: 64 MiB block ${s}% huge"
size=$((16 * MiB))
s=$(share THPALLOC_THP_THRESHOLD=32M)
test "$s" = 0
ok $? "thp_threshold=32M: a 16 MiB block gets no huge page (${s}%)"
done_testing
