#!/bin/bash
# Multithreaded stress under LD_PRELOAD=$THPALLOC_LIB: one TAP line per mode of
# tests/stress-threads (see the comment at the top of tests/stress-threads.c).
# Every mode also insists that thpalloc is the malloc in charge and that its in_use
# statistic comes back to the start value (no leaks). Two modes run again in
# stress-threads-nopie: a non-PIE build that takes malloc's address, which makes the
# executable's PLT entry malloc's canonical address (Debian's python3.11 is such a
# program); thpalloc must not mistake that for another allocator being in charge.
set -u

LIB=${THPALLOC_LIB:-}
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
PROG=$BUILD/stress-threads
TIMEOUT=${THPALLOC_TEST_TIMEOUT:-60}
SOAK_SECONDS=${THPALLOC_SOAK_SECONDS:-5}

modes=(prodcons manythreads fork realloc soak)
declare -A what=(
    [prodcons]="producer/consumer threads pass pattern-filled blocks (16 B..4 MiB) both ways"
    [manythreads]="20000 short-lived threads hand blocks to later threads; heaps bounded, nothing leaks"
    [fork]="300 forks while 4 threads allocate; every child allocates, checks, exits 0"
    [realloc]="realloc chains 1 B -> 6 MiB -> 1 B in 4 threads keep their contents"
    [soak]="${SOAK_SECONDS} s randomized soak of stamped live blocks: no overlap, no corruption"
    [nopie-manythreads]="non-PIE program taking &malloc (like python3.11): thpalloc active, 20000 threads, heaps bounded"
    [nopie-fork]="non-PIE program taking &malloc: thpalloc active, 300 forks from a threaded parent"
)

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-stress.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

[ -n "$LIB" ] && [ -f "$LIB" ] && [ -x "$PROG" ] && [ -x "$PROG-nopie" ]
rc=$?
[ $rc -eq 0 ] || echo "# THPALLOC_LIB='$LIB', $PROG or $PROG-nopie is missing"
ok $rc "the library, tests/stress-threads and tests/stress-threads-nopie exist"

# The test program itself must be sound: a short soak under plain glibc.
timeout -k 5 "$TIMEOUT" env -u LD_PRELOAD "$PROG" -g -s 1 soak >"$tmp/control" 2>&1
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/control"
ok $rc "control: stress-threads soak passes under plain glibc"

for m in "${modes[@]}" nopie-manythreads nopie-fork; do
    prog=$PROG mode=$m
    tmo=$TIMEOUT
    case $m in nopie-*) prog=$PROG-nopie mode=${m#nopie-} ;; esac
    start=$(date +%s.%N)
    timeout -k 5 "$tmo" env LD_PRELOAD="$LIB" "$prog" -s "$SOAK_SECONDS" "$mode" \
        >"$tmp/$m.out" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0) ;;
    124 | 137) echo "# $m: timed out after $tmo s (deadlock?)" ;;
    *) [ $rc -gt 128 ] && echo "# $m: killed by signal $((rc - 128))" ||
        echo "# $m: exit status $rc" ;;
    esac
    # The program's own diagnostics start with "# "; prefix everything else (FAIL lines).
    sed -e '/^# /!s/^/# /' "$tmp/$m.out" | head -n 60
    ok $rc "$m: ${what[$m]} (${secs} s)"
done
done_testing
