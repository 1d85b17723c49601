/* extent-cache: the thread's cache in front of the shared extents (extent.c). A thread keeps
 * the last few blocks of up to CACHE_LEN_MAX granules it freed (its own or other threads'),
 * up to CACHE_BYTES, and takes a block of the same length (or a little longer) from there
 * first: a malloc/free
 * loop, or a thread that frees and allocates again, pays no lock. The cache goes back to
 * the shared runs under one lock when it fills, at thread exit, when the purger reclaims
 * an idle thread (reclaim.c) and, for a busy thread, once a block has sat there for a whole
 * purge_delay (extent_cache_age), so what one thread frees is never held from the others or
 * from the purge for long; and before its thread would take fresh memory. Until a second thread
 * allocates, there is no cache: one thread's extents go to the runs at once. A cached block is
 * marked so in the extent map (extent_cache_in): a second free of it is caught whichever thread
 * makes it, however the block was written since. It keeps the free key in its second word, as a
 * small block does: a write after free is caught when it is handed out again. The cache is the
 * heap's, used inside the reclaim handshake (heap_enter). */
#include "extent-map.h"
#include "heap.h"

#include <string.h>

#define CACHE_LEN_MAX EXT_CACHE_LEN_MAX /* granules: blocks up to 64 KiB */
/* A few blocks of the sizes a thread passes around: a smaller cache is flushed every few
 * frees and most requests miss it; a larger one keeps from the other threads what it holds
 * (the peak grows). The measurements: docs/benchmarks-log.md, "extent-cache". */
#define CACHE_BYTES ((size_t)256 << 10)

static inline heap_t *cache_heap(void)
{
    heap_t *heap = tl_heap;
    return heap == &heap_empty || heap == &heap_exited ? NULL : heap;
}

static inline void cache_bytes_set(heap_t *heap, size_t bytes)
{
    __atomic_store_n(&heap->ext_cache_bytes, bytes, __ATOMIC_RELAXED); /* stats read it */
}

/* The cached block that fits len granules best, up to CACHE_SLACK(len) longer, the newest
 * of that length: with the exact length alone, a thread that frees and allocates blocks of
 * many lengths mostly missed, each miss costing a lock and a run split, and later a lock
 * and a merge. The block keeps its length (tags and usable size): a quarter at most of it
 * unused while it is handed out. */
#define CACHE_SLACK(len) (((len) + 3) / 4)

static void *cache_take(heap_t *heap, unsigned len)
{
    unsigned best = EXT_CACHE_SLOTS, best_len = len + CACHE_SLACK(len) + 1;
    for (unsigned i = heap->ext_cache_n; i-- > 0;) {
        unsigned l = heap->ext_cache_len[i];
        if (l >= len && l < best_len) {
            best = i;
            best_len = l;
            if (l == len)
                break;
        }
    }
    if (best == EXT_CACHE_SLOTS)
        return NULL;
    block_t *b = heap->ext_cache[best];
    unsigned last = --heap->ext_cache_n;
    heap->ext_cache[best] = heap->ext_cache[last];
    heap->ext_cache_len[best] = heap->ext_cache_len[last];
    heap->ext_cache_era[best] = heap->ext_cache_era[last];
    cache_bytes_set(heap, heap->ext_cache_bytes - ((size_t)best_len << EXT_GRANULE_SHIFT));
    if (unlikely(b->key != block_key(b)))
        page_corrupt(NULL, b);
    b->key = 0;
    extent_cache_out(registry_lookup(b), b);
    return b;
}

/* Gives a heap's cached extents back to the shared runs (its owner, or the purger holding
 * it): at thread exit and when the purger reclaims an idle heap. */
void extent_cache_flush(heap_t *heap)
{
    if (!heap->ext_cache_n)
        return;
    extent_free_many(heap->ext_cache, heap->ext_cache_n);
    heap->ext_cache_n = 0;
    cache_bytes_set(heap, 0);
}

/* The owner, outside its handshake, now and then from malloc's slow path (every
 * EXT_CACHE_LOOK_OPS slow_ops): blocks that have sat in its cache for a whole purge_delay go
 * back to the shared runs, so that a thread that stays busy does not hold what it freed from
 * the others and from the purge (an idle one's cache the purger flushes, reclaim.c).
 * Eras of purge_delay, counted by the owner's looks: a block that came in two eras ago has
 * sat a whole purge_delay (at most two) and goes to the runs, which purge it after one more.
 * No clock on the paths that fill and take from the cache. */
TEXT_BUSY
void extent_cache_age(heap_t *heap)
{
    heap->ext_cache_looked = heap->slow_ops;
    if (purge_never())
        return; /* purge_delay = never: kept as the runs are */
    uint32_t now = now_ms();
    heap_enter(heap);
    if (!heap->ext_cache_n || !purge_is_due(heap->ext_cache_era_at, now, false, NULL)) {
        heap_leave(heap);
        return;
    }
    heap->ext_cache_era_at = now;
    uint8_t era = ++heap->ext_cache_eras;
    void *old[EXT_CACHE_SLOTS];
    unsigned n_old = 0, kept = 0;
    size_t bytes = heap->ext_cache_bytes;
    for (unsigned i = 0; i < heap->ext_cache_n; i++) {
        if ((uint8_t)(era - heap->ext_cache_era[i]) >= 2) {
            old[n_old++] = heap->ext_cache[i];
            bytes -= (size_t)heap->ext_cache_len[i] << EXT_GRANULE_SHIFT;
            continue;
        }
        heap->ext_cache[kept] = heap->ext_cache[i];
        heap->ext_cache_len[kept] = heap->ext_cache_len[i];
        heap->ext_cache_era[kept] = heap->ext_cache_era[i];
        kept++;
    }
    if (n_old) {
        heap->ext_cache_n = kept;
        cache_bytes_set(heap, bytes);
        extent_free_many(old, n_old);
    }
    heap_leave(heap);
}

/* An extent from the calling thread's cache, or from the shared runs (a thread without a
 * heap goes there directly). */
TEXT_BUSY
void *extent_malloc_cached(size_t size, size_t align, bool zero)
{
    unsigned len = (unsigned)((size + ((size_t)1 << EXT_GRANULE_SHIFT) - 1) >> EXT_GRANULE_SHIFT);
    heap_t *heap = cache_heap();
    if (heap && heap->ext_cache_n) {
        if (len <= CACHE_LEN_MAX && align <= OS_PAGE_SIZE) { /* no handshake for the others */
            heap_enter(heap);
            void *p = cache_take(heap, len);
            heap_leave(heap);
            if (p) {
                if (zero)
                    memset(p, 0, size);
                return p;
            }
        }
        /* The cache never makes its thread touch fresh memory: with no resident run that
         * fits, what it holds goes back first, to be reused (merged) by this request. */
        bool fresh;
        void *p = extent_alloc_resident(size, align, zero, &fresh);
        if (!fresh)
            return p;
        heap_enter(heap);
        extent_cache_flush(heap);
        heap_leave(heap);
    }
    return extent_alloc(size, align, zero);
}

TEXT_BUSY
void extent_free_cached(chunk_t *c, void *p)
{
    heap_t *heap = cache_heap();
    /* The cache spares threads the extent lock and one another; a process that has only
     * ever had one allocating thread frees into the shared runs, where its requests of
     * other lengths reuse the memory (a start-up that freed extents into the cache then
     * took new ones, leaving the cached ones resident), at no cost in instructions. */
    unsigned max = heap && atomic_load_explicit(&extent_heap_second_made, memory_order_relaxed)
                       ? CACHE_LEN_MAX
                       : 0;
    unsigned len = extent_cache_in(c, p, max); /* checked, and marked cached up to max */
    if (len > max) {
        extent_free(c, p);
        return;
    }
    block_t *b = p;
    heap_enter(heap);
    size_t bytes = (size_t)len << EXT_GRANULE_SHIFT;
    if (heap->ext_cache_n == EXT_CACHE_SLOTS || heap->ext_cache_bytes + bytes > CACHE_BYTES)
        extent_cache_flush(heap);
    b->key = block_key(b);
    heap->ext_cache[heap->ext_cache_n] = p;
    heap->ext_cache_len[heap->ext_cache_n] = (uint16_t)len;
    heap->ext_cache_era[heap->ext_cache_n] = heap->ext_cache_eras;
    heap->ext_cache_n++;
    cache_bytes_set(heap, heap->ext_cache_bytes + bytes);
    heap_leave(heap);
}
