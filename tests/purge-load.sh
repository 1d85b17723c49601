#!/bin/sh
# purge-load: memory returned under changing load. tests/purge-load alternates busy
# phases (4 threads, ~200 MiB of mixed-size blocks allocated and freed, a long-lived set
# of 0-120 MiB kept) and 1.5 s idle phases (no allocator call at all); with
# THPALLOC_PURGE_DELAY=200ms every idle phase must end with the anonymous RSS above the
# start within 10 % of the live bytes (+ 4 MiB fixed, + the unused tail of the last huge
# page of each live block of thp_threshold or more, set to 2 MiB here). One TAP line per phase; the same
# program under glibc is shown for comparison only (glibc keeps freed memory in its
# arenas and is not held to the bound).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

#   REL_PURGE_PHASES=N  phases (default 6; check-long: 60)
prog=$TESTS_BUILDDIR/purge-load
test -x "$prog" || bail "$prog not built"
phases=${REL_PURGE_PHASES:-6}
relay "glibc (for comparison)" $((60 + 3 * phases)) "$prog" -g -p "$phases"
relay "thpalloc" $((60 + 3 * phases)) env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms THPALLOC_THP_THRESHOLD=2M \
    "$prog" -p "$phases"
done_testing
