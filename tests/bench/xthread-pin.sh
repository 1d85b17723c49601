#!/bin/sh
# TAP test: xthread's XTHREAD_PIN places its threads as asked (docs/benchmarks-log.md,
# 2026-12-05: left to the scheduler its time depends on where the threads land), on the
# CPUs the process may use, and refuses what it cannot do.
# Environment (exported by make check): TESTS_BUILDDIR.

bench="${TESTS_BUILDDIR:-$(dirname "$0")/..}/bench"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-xthread-pin.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! command -v taskset >/dev/null 2>&1; then
    echo "1..0 # SKIP no taskset"
    exit 0
fi
# two CPUs this process may use, the placements' CPUs below
set -- $(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' | while IFS=- read -r a b; do
    seq "$a" "${b:-$a}"; done | head -2)
c1=$1 c2=$2
echo "1..6"
n=0

# check DESCRIPTION WANT_RC WANT_STDERR CPUS [ENV...]: xthread 0.02 under taskset -c CPUS
check() {
    desc=$1 want_rc=$2 want_err=$3 cpus=$4
    shift 4
    n=$((n + 1))
    if [ -z "$cpus" ]; then
        echo "ok $n - $desc # SKIP one CPU"
        return
    fi
    env "$@" taskset -c "$cpus" "$bench/xthread" 0.02 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    err=$(cat "$tmp/err")
    if [ "$rc" -eq "$want_rc" ] && [ "$err" = "$want_err" ] &&
        { [ "$want_rc" -ne 0 ] || grep -q '^bench=xthread ' "$tmp/out"; }; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc: exit $rc, stderr '$err'; want $want_rc, '$want_err'"
    fi
}

check "unpinned: nothing said" 0 "" "$c1"
check "one: every thread on the first CPU allowed" 0 \
    "xthread: pinned (one): consumers on CPUs $c1 $c1, producers on $c1 $c1" "$c1${c2:+,$c2}" XTHREAD_PIN=one
check "split: consumers on the first CPU, producers on the second" 0 \
    "xthread: pinned (split): consumers on CPUs $c1 $c1, producers on $c2 $c2" "${c2:+$c1,$c2}" XTHREAD_PIN=split
check "pairs: consumer and producer i on CPU i" 0 \
    "xthread: pinned (pairs): consumers on CPUs $c1 $c2, producers on $c1 $c2" "${c2:+$c1,$c2}" XTHREAD_PIN=pairs
check "split on one CPU: refused" 2 "xthread: XTHREAD_PIN=split needs 2 CPUs" "$c1" XTHREAD_PIN=split
check "an unknown placement: refused" 2 "xthread: XTHREAD_PIN=spread: one, split or pairs" "$c1" \
    XTHREAD_PIN=spread
