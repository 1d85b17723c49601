#!/bin/bash
# Multithreaded stress under LD_PRELOAD=$THPALLOC_LIB: each mode of tests/stress-threads
# (see the comment at the top of tests/stress-threads.c), its result relayed.
# Every mode also insists that thpalloc is the malloc in charge and that its in_use
# statistic comes back to the start value (no leaks). Two modes run again in
# stress-threads-nopie: a non-PIE build that takes malloc's address, which makes the
# executable's PLT entry malloc's canonical address (Debian's python3.11 is such a
# program); thpalloc must not mistake that for another allocator being in charge.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

LIB=$THPALLOC_LIB
PROG=$TESTS_BUILDDIR/stress-threads
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

check "tests/stress-threads and tests/stress-threads-nopie exist" \
    test -x "$PROG" -a -x "$PROG-nopie"

# The test program itself must be sound: a short soak under plain glibc.
relay "control: stress-threads soak under plain glibc" "$TIMEOUT" \
    env -u LD_PRELOAD "$PROG" -g -s 1 soak

for m in "${modes[@]}" nopie-manythreads nopie-fork; do
    prog=$PROG mode=$m
    case $m in nopie-*) prog=$PROG-nopie mode=${m#nopie-} ;; esac
    start=$(date +%s.%N)
    relay "$m: ${what[$m]}" "$TIMEOUT" env LD_PRELOAD="$LIB" "$prog" -s "$SOAK_SECONDS" "$mode"
    diag "$m: $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
done
done_testing
