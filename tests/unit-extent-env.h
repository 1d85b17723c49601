/* The layers above the extents, stood in for, for the extents' unit tests (unit-extent,
 * unit-extent-lock, unit-extent-cache): the policy (purge_delay 1 s, trims late) and the
 * fatal paths; and their count of the extents' bytes out. Included by one source of each. */
#ifndef THPALLOC_UNIT_EXTENT_ENV_H
#define THPALLOC_UNIT_EXTENT_ENV_H
#include "chunk.h"

#include <stdio.h>
#include <stdlib.h>

struct policy policy_in_force = {
    .thp = {.mode = THP_MODE_LARGE, .threshold = (size_t)2 << 20},
    .arena_size = (size_t)64 << 20,
    .purge_delay_ms = 1000,
    .purge = OS_PURGE_DONTNEED,
    .trim_threshold = 0, /* the delayed purge first; the trim at the end */
    .trim_burst = 1000,  /* the trims at once; the storm's batches at the very end */
};
void policy_ensure_loaded(void) {}
void introspect_add_range(void *base, size_t size)
{
    (void)base;
    (void)size;
}
void introspect_remove_range(void *base)
{
    (void)base;
}
void lib_fatal(const char *msg, const void *p)
{
    fprintf(stderr, "thpalloc: %s (%p)\n", msg, p);
    abort();
}
void lib_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "thpalloc: invariant failed: %s at %s:%d\n", expr, file, line);
    abort();
}

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
