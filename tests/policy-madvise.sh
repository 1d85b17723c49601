#!/bin/bash
# The exact madvise calls the allocator makes, for every system setting x thp mode x block
# size, with the system setting injected (tests/policy-shim.c), compared with docs/design.md's
# table; then the machine's own setting, where MADV_NOHUGEPAGE must never be issued unless
# the setting is `always`.
set -u
probe=$TESTS_BUILDDIR/policy-probe
shim=$TESTS_BUILDDIR/.libs/libpolicyshim.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

# want USE MODE -> huge|nohuge|default   (USE: small, piece, tail)
want() {
    case $2 in
    system) echo default ;;
    never) echo nohuge ;;
    always) echo huge ;;
    large) if [ "$1" = piece ]; then echo huge; else echo nohuge; fi ;;
    esac
}
# advice SYS WANT -> huge|nohuge|none  (fresh memory)
advice() {
    case $2 in
    huge) if [ "$1" = never ]; then echo none; else echo huge; fi ;;
    nohuge) if [ "$1" = always ]; then echo nohuge; else echo none; fi ;;
    *) echo none ;;
    esac
}

for sys in always madvise never; do
    case $sys in
    always) echo "[always] madvise never" >"$tmp/enabled" ;;
    madvise) echo "always [madvise] never" >"$tmp/enabled" ;;
    never) echo "always madvise [never]" >"$tmp/enabled" ;;
    esac
    for mode in system never large always; do
        for size in 1572864 2306867 67108864; do
            pieces=$((size / 2097152))
            # 4 KiB-rounded size past the last full 2 MiB piece: a tail chunk exists
            tail=$(( (size + 4095) / 4096 * 4096 - pieces * 2097152 ))
            h=0 nh=0
            for use in small piece tail; do
                [ $use = piece ] && [ $pieces -eq 0 ] && continue
                [ $use = tail ] && [ $tail -eq 0 ] && continue
                case $(advice $sys "$(want $use $mode)") in
                huge) h=$((h + 1)) ;;
                nohuge) nh=$((nh + 1)) ;;
                esac
            done
            rm -f "$tmp/out"
            # timeout must not run under the shim: its own exit would rewrite the counts
            timeout 20 env POLICY_SHIM_ENABLED="$tmp/enabled" POLICY_SHIM_OUT="$tmp/out" \
                THPALLOC_THP=$mode LD_PRELOAD="$shim:$THPALLOC_LIB" "$probe" advise $size
            got=$(cat "$tmp/out" 2>/dev/null)
            [ "$got" = "huge=$h nohuge=$nh other=0" ]
            ok $? "sys=$sys thp=$mode size=$size: $got (want huge=$h nohuge=$nh other=0)"
        done
    done
done

# The THP setting is not read at all in mode system (a file that does not exist is fine).
POLICY_SHIM_ENABLED=/nonexistent POLICY_SHIM_OUT=$tmp/out THPALLOC_THP=system \
    LD_PRELOAD="$shim:$THPALLOC_LIB" strace -f -qq -e trace=openat -o "$tmp/strace" \
    "$probe" advise 67108864
! grep -q transparent_hugepage "$tmp/strace"
ok $? "thp=system never reads the THP setting"

# The machine's own setting: no MADV_NOHUGEPAGE unless it is `always`.
real=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
echo "# this machine's THP setting: ${real:-unavailable}"
for mode in large never always; do
    rm -f "$tmp/out"
    POLICY_SHIM_OUT=$tmp/out THPALLOC_THP=$mode LD_PRELOAD="$shim:$THPALLOC_LIB" \
        "$probe" advise 67108864
    got=$(cat "$tmp/out")
    if [ "$real" = always ]; then
        [ -n "$got" ]
    else
        case $got in *" nohuge=0 "*) true ;; *) false ;; esac
    fi
    ok $? "real kernel ($real), thp=$mode: $got"
done
done_testing
