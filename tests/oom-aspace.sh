#!/bin/sh
# oom-aspace: address space comes back. With RLIMIT_AS at VmSize + 768 MiB, a process fills
# its address space with blocks of one size, frees them, and must then get a block of every
# size, 64 MiB and 256 MiB included, in the thread that filled it and in another one (the
# wholly free arenas are unmapped when a reservation fails). Then 1000 phases of
# alternating sizes keep VmSize within 2 arenas of where it started, and realloc of a
# block with a mapping of its own moves its pages instead of copying them. glibc runs the same
# cases first, as the test's own sanity (not with 16-byte blocks: glibc keeps that address
# space, and a new thread then gets no stack).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/oom-aspace
test -x "$prog" || bail "$prog not built"

sizes="16 1000 8192 65536 524288 1048576 4194304 33554432 67108864"
for size in 65536 4194304; do
    relay "glibc" 60 "$prog" exhaust $size
done
for size in $sizes; do
    relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" exhaust $size
done
# a large block's tail that reuses a huge page keeps it, and gives back what the block does
# not use after purge_delay
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" tailpad
# realloc of a block with a mapping of its own: mremap, as glibc's, not a copy
relay "glibc" 60 "$prog" remap
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" remap
relay "glibc" 120 "$prog" phases 1000
relay "thpalloc" 120 env LD_PRELOAD="$THPALLOC_LIB" "$prog" phases 1000
done_testing
