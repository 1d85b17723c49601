#!/bin/sh
# purge-lazyfree: memory that a background thread frees for an owner thread that then waits
# idle, making no allocator call (a server's lazy free: redis's FLUSHALL ASYNC), goes back
# to the kernel (lib/heap.c's note_remote_emptied, lib/reclaim.c). See tests/purge-lazyfree.c.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/purge-lazyfree
test -x "$prog" || bail "$prog not built"
relay "default purge_delay" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" 64
relay "a busy owner" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" 4 busy
relay "purge_delay=200ms" 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" 64 twice
done_testing
