/* thpalloc internals, layer 9: the slow paths on a heap, a thread's extent cache (base.h
 * says how the headers go). */
#ifndef THPALLOC_HEAP_H
#define THPALLOC_HEAP_H

#include "abandon.h"

/* ---- heap.c: the slow paths on a heap, the owner's side of the reclaim handshake -------- */
extern HIDDEN heap_t heap_empty, heap_exited;
extern HIDDEN __thread heap_t *tl_heap __attribute__((tls_model("initial-exec")));
HIDDEN void *heap_malloc_small(heap_t *heap, size_t size, bool zero);
HIDDEN void *heap_malloc_dry(heap_t *heap, page_t *page, size_t size,
                             void *(*slow)(heap_t *heap, size_t size));
HIDDEN void heap_free_slow(chunk_t *c, page_t *page, void *p);
HIDDEN void heap_free_full(void *p, page_t *page, heap_t *heap);
HIDDEN void heap_free_remote(void *p, page_t *page, heap_t *owner);
HIDDEN bool heap_realloc_live(chunk_t *c, page_t *page, block_t *b, void *p);
HIDDEN void heap_rescue_full(heap_t *heap, bool may_free);
HIDDEN void heap_page_retire(heap_t *heap, page_t *page);
HIDDEN void heap_forget_kept(heap_t *heap);
HIDDEN void heap_park_kept(heap_t *heap);
HIDDEN void heap_wait_reclaim(heap_t *heap);
HIDDEN void heap_wait_unclaimed(heap_t *heap);
extern HIDDEN bool (*heap_unpark)(void);

/* The owner's look at claimed, with acquire (after busy = 1 and a signal fence). On x86 a
 * compare with memory and a compiler barrier: gcc loads an atomic into a register first,
 * an instruction more on each fast path; a plain load there is an acquire load already. */
static inline bool heap_claimed(heap_t *heap)
{
#if defined(__x86_64__) || defined(__i386__)
    bool claimed;
    __asm__ volatile("cmpl $0, %1"
                     : "=@ccne"(claimed)
                     : "m"(*(const int *)&heap->claimed)
                     : "memory");
    return claimed;
#else
    return atomic_load_explicit(&heap->claimed, memory_order_acquire);
#endif
}

/* Brackets the owner's use of its heap: two plain stores and a load, no fence (the purger
 * supplies the barrier with membarrier: see reclaim.c). */
static inline void heap_enter(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (unlikely(heap_claimed(heap)))
        heap_wait_reclaim(heap);
}

static inline void heap_leave(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 0, memory_order_release);
}

/* ---- extent-cache.c: a thread's cache in front of the extents --------------------------- */
/* The owner looks at its cache's age every EXT_CACHE_LOOK_OPS slow_ops (extent_cache_age). */
#define EXT_CACHE_LOOK_OPS 256
HIDDEN void *extent_malloc_cached(size_t size, size_t align, bool zero);
HIDDEN void extent_free_cached(chunk_t *c, void *p);
HIDDEN void extent_cache_flush(heap_t *heap);
HIDDEN void extent_cache_age(heap_t *heap);

/* Whether the owner's next look is due (owner-only counts, read outside the handshake as
 * hints: the look re-reads inside). */
static inline bool extent_cache_look_due(const heap_t *heap)
{
    return heap->ext_cache_n && heap->slow_ops - heap->ext_cache_looked >= EXT_CACHE_LOOK_OPS;
}

#endif
