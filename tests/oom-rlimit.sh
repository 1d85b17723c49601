#!/bin/sh
# oom-rlimit: with RLIMIT_AS at VmSize + 256 MiB, allocating until failure gives NULL +
# ENOMEM (posix_memalign: ENOMEM returned) in every size range and through every entry
# point, never a crash or hang; blocks keep their contents; after freeing, allocation works
# again (same size, and a mix of sizes); the same from 4 threads at once. Each case runs
# in its own process under LD_PRELOAD=thpalloc; a subset also under glibc (the test's
# own sanity).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/oom-rlimit
test -x "$prog" || bail "$prog not built"

sizes="16 1024 65536 524288 4194304 67108864"
kinds="malloc calloc realloc posix_memalign aligned_alloc"
# glibc: a subset (every size with malloc, every kind at 1K and 4M), the test's own sanity.
for size in $sizes; do
    relay "glibc" 30 "$prog" one malloc $size
done
for size in 1024 4194304; do
    for kind in calloc realloc posix_memalign aligned_alloc; do
        relay "glibc" 30 "$prog" one $kind $size
    done
done
relay "glibc" 30 "$prog" grow
relay "glibc" 30 "$prog" threads
# thpalloc: every kind at every size
for size in $sizes; do
    for kind in $kinds; do
        relay "thpalloc" 30 env LD_PRELOAD="$THPALLOC_LIB" "$prog" one $kind $size
    done
done
relay "thpalloc" 30 env LD_PRELOAD="$THPALLOC_LIB" "$prog" grow
relay "thpalloc" 30 env LD_PRELOAD="$THPALLOC_LIB" "$prog" threads
done_testing
