/* stats: process-wide figures for thpalloc_get_stats() and mallinfo2(). Counters kept at
 * chunk level; bytes in use are summed on demand from the descriptors (a racy but
 * memory-safe walk), so the fast paths count nothing. */
#include "alloc.h"
#include "thpalloc.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>

struct walk {
    uint64_t in_use, large_bytes, large_count;
};

TEXT_WARM
static void walk_chunk(chunk_t *c, void *arg)
{
    struct walk *w = arg;
    uint8_t kind = __atomic_load_n(&c->kind, __ATOMIC_RELAXED);
    if (kind == CHUNK_LARGE) {
        w->large_bytes += c->large_size;
        w->large_count++;
        return;
    }
    if (kind == CHUNK_FREE)
        return;
    /* racy: npages and split are read once each, and bounded */
    unsigned slots = __atomic_load_n(&c->npages, __ATOMIC_RELAXED);
    if (slots > MAX_PAGES_PER_CHUNK)
        slots = MAX_PAGES_PER_CHUNK;
    unsigned subs = __atomic_load_n(&c->split[1], __ATOMIC_RELAXED)   ? 2 * SUB_PAGES
                    : __atomic_load_n(&c->split[0], __ATOMIC_RELAXED) ? SUB_PAGES
                                                                      : 0;
    for (unsigned i = 0; i < slots + subs; i++) {
        page_t *p = i < slots ? &c->pages[i] : chunk_sub(c, i - slots);
        if (atomic_load_explicit(&p->in_use, memory_order_relaxed) == PAGE_USED)
            w->in_use += (uint64_t)__atomic_load_n(&p->used, __ATOMIC_RELAXED) * p->block_size;
    }
}

/* Extents in the threads' caches are free, not in use. */
TEXT_WARM
static void sum_cached(heap_t *h, void *arg)
{
    *(uint64_t *)arg += __atomic_load_n(&h->ext_cache_bytes, __ATOMIC_RELAXED);
}

TEXT_COLD
void stats_collect(struct thpalloc_stats *s)
{
    struct walk w = {0, 0, 0};
    thread_collect_parked();
    chunk_desc_foreach(walk_chunk, &w);
    memset(s, 0, sizeof *s);
    s->reserved = atomic_load_explicit(&stat_reserved, memory_order_relaxed);
    s->committed = atomic_load_explicit(&stat_committed, memory_order_relaxed) +
                   atomic_load_explicit(&stat_purge_pending, memory_order_relaxed);
    s->huge_advised = atomic_load_explicit(&stat_huge_advised, memory_order_relaxed);
    s->dense_huge = atomic_load_explicit(&stat_dense_huge, memory_order_relaxed);
    s->dense_collapses = atomic_load_explicit(&stat_dense_collapses, memory_order_relaxed);
    s->dense_splits = atomic_load_explicit(&stat_dense_splits, memory_order_relaxed);
    s->dense_ahead = atomic_load_explicit(&stat_dense_ahead, memory_order_relaxed);
    uint64_t cached = 0;
    thread_foreach_heap(sum_cached, &cached);
    uint64_t ext;
    int64_t ext_dirty;
    extent_stats(&ext, &ext_dirty);
    s->in_use = w.in_use + w.large_bytes + (ext > cached ? ext - cached : 0);
    /* without the heaps' credits (chunk.c): the dirty slots' bytes */
    s->purge_pending = atomic_load_explicit(&stat_purge_pending, memory_order_relaxed) +
                       (uint64_t)((int64_t)purger_dirty_now() + ext_dirty);
    s->purged = atomic_load_explicit(&stat_purged, memory_order_relaxed);
    s->large_count = w.large_count;
    s->heaps = thread_heap_count(false);
}

TEXT_COLD
API int thpalloc_get_stats(struct thpalloc_stats *out, size_t size)
{
    if (!out) {
        errno = EINVAL;
        return -1;
    }
    struct thpalloc_stats s;
    stats_collect(&s);
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

TEXT_COLD
API struct mallinfo2 mallinfo2(void)
{
    if (unlikely(lib_passthrough())) {
        /* on the stack: .rodata stays one page (purger.c) */
        char name[] = "mallinfo2";
        struct mallinfo2 (*next)(void) = (struct mallinfo2(*)(void))passthrough_next(name);
        if (next)
            return next();
    }
    struct thpalloc_stats s;
    stats_collect(&s);
    struct mallinfo2 m;
    memset(&m, 0, sizeof m);
    m.arena = s.committed;
    m.uordblks = s.in_use;
    m.fordblks = s.committed > s.in_use ? s.committed - s.in_use : 0;
    m.hblks = s.large_count;
    m.keepcost = s.purge_pending;
    return m;
}

/* The obsolete int version: values saturate instead of wrapping. */
TEXT_COLD
API struct mallinfo mallinfo(void)
{
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo m;
    memset(&m, 0, sizeof m);
#define SAT(x) ((x) > (size_t)__INT_MAX__ ? __INT_MAX__ : (int)(x))
    m.arena = SAT(m2.arena);
    m.ordblks = SAT(m2.ordblks);
    m.smblks = SAT(m2.smblks);
    m.hblks = SAT(m2.hblks);
    m.hblkhd = SAT(m2.hblkhd);
    m.usmblks = SAT(m2.usmblks);
    m.fsmblks = SAT(m2.fsmblks);
    m.uordblks = SAT(m2.uordblks);
    m.fordblks = SAT(m2.fordblks);
    m.keepcost = SAT(m2.keepcost);
#undef SAT
    return m;
}

TEXT_COLD
API size_t thpalloc_purge(void)
{
    return purge_all(true);
}

/* ---- stats = exit ------------------------------------------------------------------------- */

/* " name=N" (a count), or " name=NK" for bytes */
TEXT_COLD
static void put_field_as(const char *name, uint64_t value, bool bytes)
{
    char num[21];
    os_format_u64(num, bytes ? value >> 10 : value);
    os_write_stderr(" ");
    os_write_stderr(name);
    os_write_stderr("=");
    os_write_stderr(num);
    if (bytes)
        os_write_stderr("K");
}

TEXT_COLD
static void put_field(const char *name, uint64_t bytes)
{
    put_field_as(name, bytes, true);
}

TEXT_COLD __attribute__((destructor)) static void stats_at_exit(void)
{
    if (!policy_in_force.stats_at_exit || !introspect_in_charge())
        return;
    struct thpalloc_stats s;
    stats_collect(&s);
    os_write_stderr("thpalloc: stats");
    put_field("reserved", s.reserved);
    put_field("committed", s.committed);
    put_field("huge_advised", s.huge_advised);
    put_field("in_use", s.in_use);
    put_field("purge_pending", s.purge_pending);
    put_field("purged", s.purged);
    put_field("dense_huge", s.dense_huge);
    put_field_as("dense_collapses", s.dense_collapses, false);
    put_field_as("dense_splits", s.dense_splits, false);
    put_field_as("dense_ahead", s.dense_ahead, false);
    os_write_stderr("\n");
}
