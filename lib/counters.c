/* counters: the process-wide byte counters that every layer updates (relaxed atomics, no
 * lock) and stats.c reads for thpalloc_get_stats() and mallinfo2(). Defined here, below
 * every layer that counts, so that no layer reaches up to the statistics to count. */
#include "base.h"

_Atomic uint64_t stat_reserved, stat_huge_advised, stat_purged, stat_purge_pending, stat_committed;
/* The unused parts of live large blocks' padded tails that keep a huge page until
 * purge_delay passes (arena.c, under its lock): waiting too, for purge-signal's count. */
_Atomic uint64_t stat_pages_dirty, stat_tail_padded;
/* dense.c's collapses of nearly full small-object chunks: bytes now, collapses, splits. */
_Atomic uint64_t stat_dense_huge, stat_dense_collapses, stat_dense_splits, stat_dense_ahead;
