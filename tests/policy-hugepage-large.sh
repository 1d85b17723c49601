#!/bin/bash
# Large blocks get transparent huge pages under thpalloc; small ones do not.
# Runs tests/policy-hugepage-probe under LD_PRELOAD=$THPALLOC_LIB with the default policy
# (thp = large, threshold 2M) and the machine's own THP setting, which decides what
# to expect:
#   madvise / always: a 64 MiB block, fully written, is >= 90 % AnonHugePages and
#                     >= 90 % inside MADV_HUGEPAGE ("hg") mappings; thpalloc counts it
#                     in huge_advised.
#   never:            0 % AnonHugePages and no advice at all.
#   1 MiB block:      ~0 % AnonHugePages whatever the setting.
# Plain glibc is run for comparison (diagnostic only).
set -u

LIB=${THPALLOC_LIB:-}
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
PROBE=$BUILD/policy-hugepage-probe
TIMEOUT=${THPALLOC_TEST_TIMEOUT:-60}

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-hugepage.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# --- the system's THP state -----------------------------------------------------------
sys=/sys/kernel/mm/transparent_hugepage
bracketed() { sed -n 's/.*\[\([a-z+]*\)\].*/\1/p' "$1" 2>/dev/null; }
setting=$(bracketed $sys/enabled)
[ -n "$setting" ] || setting=never # no THP support in this kernel
# Per-size (mTHP) control for PMD-sized pages overrides the top level unless "inherit".
pmd=$(bracketed $sys/hugepages-2048kB/enabled)
if [ -n "$pmd" ] && [ "$pmd" != inherit ]; then
    echo "# hugepages-2048kB/enabled = $pmd overrides enabled = $setting"
    setting=$pmd
fi
# A process can have THP switched off (prctl PR_SET_THP_DISABLE, inherited): then no
# huge pages whatever the system says.
if grep -q '^THP_enabled:[[:space:]]*0' /proc/self/status 2>/dev/null; then
    echo "# THP_enabled: 0 for this process tree (PR_SET_THP_DISABLE): expecting never"
    setting=never
fi
echo "# THP setting: $setting (enabled: $(cat $sys/enabled 2>/dev/null || echo n/a);" \
    "defrag: $(cat $sys/defrag 2>/dev/null || echo n/a))"

# --- run the probe -----------------------------------------------------------------------
# The default policy, whatever /etc/thpalloc.conf or the caller's environment say.
empty=$tmp/empty.conf
: >"$empty"
probe() { # probe OUTFILE PRELOAD SIZE
    local out=$1 pre=$2 size=$3
    local -a envs=(-u LD_PRELOAD)
    local v
    for v in $(env | sed -n 's/^\(THPALLOC_[A-Z_]*\)=.*/\1/p'); do envs+=(-u "$v"); done
    [ -n "$pre" ] && envs+=(LD_PRELOAD="$pre" THPALLOC_CONF="$empty" THPALLOC_THP=large)
    timeout -k 5 "$TIMEOUT" env "${envs[@]}" "$PROBE" "$size" >"$out" 2>"$out.err"
    local rc=$?
    [ $rc -eq 0 ] || echo "# probe $size (preload: ${pre:-none}) exited with $rc" \
        "$(head -c 300 "$out.err")"
    diag <"$out"
    return $rc
}
get() { sed -n "s/^$1=//p" "$2"; }

MiB=$((1024 * 1024))
if [ -z "$LIB" ] || [ ! -e "$LIB" ]; then
    echo "# THPALLOC_LIB='$LIB' does not exist"
fi
[ -x "$PROBE" ] || echo "# $PROBE is not built"

echo "# --- 64 MiB under thpalloc"
probe "$tmp/big" "$LIB" $((64 * MiB))
rc=$?
act=$(get thpalloc_active "$tmp/big")
[ $rc -eq 0 ] && [ "$act" = 1 ]
ok $? "policy-hugepage-probe runs under LD_PRELOAD=\$THPALLOC_LIB with thpalloc_active() = 1 (got '${act:-none}')"

pct=$(get huge_pct "$tmp/big"); pct=${pct:--1}
hg=$(get hg_pct "$tmp/big"); hg=${hg:--1}
adv=$(get huge_advised_delta "$tmp/big"); adv=${adv:--1}
fallback=$(get thp_fault_fallback "$tmp/big")
if [ "$setting" = never ]; then
    [ "$pct" -eq 0 ]
    ok $? "64 MiB block: 0 % AnonHugePages with system THP 'never' (got $pct %)"
    [ "$hg" -eq 0 ]
    ok $? "64 MiB block: no MADV_HUGEPAGE advice with system THP 'never' (got $hg %)"
    skip "huge_advised accounting" "system THP is never"
else
    [ "$pct" -ge 90 ]
    ok $? "64 MiB block: >= 90 % AnonHugePages with system THP '$setting' (got $pct %)"
    if [ "$pct" -lt 90 ] && [ "${fallback:-0}" -gt 0 ]; then
        echo "# the kernel fell back to small pages $fallback times (thp_fault_fallback):" \
            "memory too fragmented for huge pages right now?"
    fi
    [ "$hg" -ge 90 ]
    ok $? "64 MiB block: >= 90 % of it inside MADV_HUGEPAGE mappings (got $hg %)"
    [ "$adv" -ge $((64 * MiB * 9 / 10)) ]
    ok $? "64 MiB block: thpalloc_get_stats huge_advised grew by >= 90 % of 64 MiB (got $adv bytes)"
fi

echo "# --- 1 MiB under thpalloc"
probe "$tmp/small" "$LIB" $((1 * MiB))
rc=$?
spct=$(get huge_pct "$tmp/small"); spct=${spct:--1}
[ $rc -eq 0 ] && [ "$spct" -ge 0 ] && [ "$spct" -lt 10 ]
ok $? "1 MiB block: ~0 % AnonHugePages (got $spct %; a single huge page would be 200 %)"

echo "# --- for comparison: 64 MiB under plain glibc (no preload)"
probe "$tmp/glibc" "" $((64 * MiB))
rc=$?
gpct=$(get huge_pct "$tmp/glibc")
echo "# glibc: ${gpct:-?} % AnonHugePages for a 64 MiB block with system THP '$setting'" \
    "(expected ~0 % under madvise/never: glibc never asks for huge pages)"
[ $rc -eq 0 ]
ok $? "policy-hugepage-probe runs under plain glibc"
done_testing
