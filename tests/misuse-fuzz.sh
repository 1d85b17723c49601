#!/bin/sh
# misuse-fuzz: heap misuse injected at random points of random multithreaded traffic
# (tests/misuse-fuzz.c says how): double frees (same thread, after other frees, other
# threads, after the owner exited, after malloc_trim, after the purger ran, two frees at
# once), interior, freed and foreign pointers to free, realloc and malloc_usable_size, of
# small, aligned, extent, large and huge blocks. Each misuse runs in a fork child, which
# must stop with an allocator's message or go on with every live block intact and no
# allocation inside one (issue 46 item 4: never two owners).
# Under thpalloc (purge_delay 50 ms, so that the purger reclaims idle heaps within the
# wait): a bounded run for each seed of $MISUSE_FUZZ_SEEDS, every (misuse x block) pair
# once, each pair an assertion: no child BROKEN. Under plain glibc, in the same run, the
# same seed: report only (its table as diagnostics: glibc lets some through), but its
# control children (no misuse) and its parent (no misuse at all) must pass, which checks
# the oracle itself.
#   MISUSE_FUZZ_SECONDS=N  a soak (make soak): N seconds under thpalloc with one seed,
#                          $MISUSE_FUZZ_SEED or a random one (printed), then N/4 under glibc
#   MISUSE_FUZZ_KNOWN      pairs whose BROKEN is reported as SKIP (known, not fixed yet;
#                          "kind/block", either may be *); default: none
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/misuse-fuzz
test -x "$prog" || bail "$prog not built"
ulimit -c 0 2>/dev/null
# glibc's messages on stderr, never /dev/tty
LIBC_FATAL_STDERR_=1
export LIBC_FATAL_STDERR_
known=${MISUSE_FUZZ_KNOWN-""}
# stand-in mode: another allocator's messages are not thpalloc's; its table is a report
only=
standin && only=--report-only

secs=${MISUSE_FUZZ_SECONDS:-0}
case $secs in '' | *[!0-9]*) secs=0 ;; esac
if test "$secs" -gt 0; then
    seed=${MISUSE_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
    diag "soak: --seed $seed, $secs s under thpalloc, $((secs / 4 + 1)) s under glibc;" \
        "again: make soak MISUSE_FUZZ_SEED=$seed MISUSE_SOAK_SECONDS=$secs"
    relay "thpalloc --seed $seed --seconds $secs" $((secs + 300)) env LD_PRELOAD="$THPALLOC_LIB" \
        THPALLOC_PURGE_DELAY=50ms "$prog" --seed "$seed" --seconds "$secs" --threads 4 \
        --purge-wait 200 --known "$known" $only
    relay "glibc --seed $seed --seconds $((secs / 4 + 1)) (report only)" $((secs / 4 + 300)) \
        env -u LD_PRELOAD "$prog" --seed "$seed" --seconds $((secs / 4 + 1)) --threads 4 \
        --purge-wait 200 --allocator glibc
    done_testing
fi

for seed in ${MISUSE_FUZZ_SEEDS:-12 4}; do
    relay "thpalloc --seed $seed" 180 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=50ms \
        "$prog" --seed "$seed" --steps 20000 --threads 4 --purge-wait 200 --known "$known" $only
done
seed=${MISUSE_FUZZ_SEEDS:-12}
relay "glibc --seed ${seed%% *} (report only)" 180 env -u LD_PRELOAD "$prog" --seed "${seed%% *}" \
    --steps 20000 --threads 4 --purge-wait 200 --allocator glibc
done_testing
