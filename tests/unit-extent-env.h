/* The layers above the extents, stood in for, for the extents' unit tests (unit-extent,
 * unit-extent-lock, unit-extent-cache): the policy (purge_delay 1 s, trims late), the rest
 * as standins.h has it; and their count of the extents' bytes out. Included by one source of each.
 */
#ifndef THPALLOC_UNIT_EXTENT_ENV_H
#define THPALLOC_UNIT_EXTENT_ENV_H
#include "chunk.h"
#include "standins.h"

struct policy policy_in_force = {
    .thp = {.mode = THP_MODE_LARGE, .threshold = (size_t)2 << 20},
    .arena_size = (size_t)64 << 20,
    .purge_delay_ms = 1000,
    .purge = OS_PURGE_DONTNEED,
    .trim_threshold = 0, /* the delayed purge first; the trim at the end */
    .trim_burst = 1000,  /* the trims at once; the storm's batches at the very end */
};

#define KIB ((size_t)1 << 10)
#define G ((size_t)4096) /* a granule */

/* The extents' bytes in use (in threads' caches included). */
static inline uint64_t ext_used(void)
{
    uint64_t used;
    int64_t uncounted;
    extent_stats(&used, &uncounted);
    return used;
}
#endif
