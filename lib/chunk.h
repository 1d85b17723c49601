/* thpalloc internals, layer 7: a heap's chunks, the extents, the large blocks (base.h says
 * how the headers go). */
#ifndef THPALLOC_CHUNK_H
#define THPALLOC_CHUNK_H

#include "page-queue.h"

/* ---- chunk.c: pages from the heap's chunks, chunks from the arena ----------------------- */
extern HIDDEN void (*chunk_new_prepare)(heap_t *heap);
HIDDEN page_t *chunk_page_new(heap_t *heap, unsigned cls);
HIDDEN bool chunk_slot_available(heap_t *heap, unsigned cls);
HIDDEN bool chunk_page_free(heap_t *heap, page_t *page);
HIDDEN void chunk_release(chunk_t *c);
HIDDEN void chunk_dirty_fold(heap_t *heap);
/* Purges the chunk's dirty slots now (an exited thread's chunk, abandoned). */
HIDDEN void chunk_purge_dirty(chunk_t *c);

/* The heap's chunk list that holds chunks of c's kind. */
static inline chunk_queue_t *heap_chunks(heap_t *heap, const chunk_t *c)
{
    return &heap->chunks[c->kind == CHUNK_MEDIUM];
}

/* ---- dense.c: nearly full small-object chunks collapsed into huge pages ------------------ */
/* The owner's note: c's slots are nearly all taken (chunk.c, slot_new). */
HIDDEN void dense_note(chunk_t *c);
extern HIDDEN _Atomic unsigned dense_noted;
HIDDEN uint32_t dense_pass_ring(uint32_t now, unsigned max_collapses);
/* A purge pass's look at the noted chunks: collapses up to max_collapses of those noted a
 * purge_delay ago and resident enough. Returns when the next look is due (0: none noted).
 * Inline: a pass with nothing noted stays in its own text (the ring's work is rare text). */
static inline uint32_t dense_pass(uint32_t now, unsigned max_collapses)
{
    if (!atomic_load_explicit(&dense_noted, memory_order_relaxed))
        return 0;
    return dense_pass_ring(now, max_collapses);
}

/* ---- extent-run.c: the extents' shards, bins, chunks and runs --------------------------- */
#define EXT_GRANULE_SHIFT 12
/* The bytes of extents handed out (in threads' caches included), and the pending bytes
 * stat_pages_dirty does not count yet (it lags each shard by up to a chunk); read without
 * the shards' locks. */
HIDDEN void extent_stats(uint64_t *used, int64_t *dirty_uncounted);
/* Set by thread.c when a second heap is made, never cleared (extent-run.c says why). */
extern HIDDEN _Atomic int extent_heap_second_made;
/* Empty extent chunks kept resident go back to the arena, for a caller about to take a chunk
 * from it (a heap's new chunk, a large block): reused there before a fresh one is touched.
 * All but one besides the spare. */
HIDDEN void extents_release_empty(void);
HIDDEN void extent_fork(enum fork_phase phase);

/* ---- extent-purge.c: free extent runs back to the kernel -------------------------------- */
/* The purger's: free runs resident for purge_delay (all with force) go back to the kernel;
 * *next is when the next one is due (0: none). */
HIDDEN size_t extents_purge(uint32_t now, bool force, uint32_t *next);

/* ---- extent.c: blocks above SMALL_MAX up to SC_MAX_SIZE in runs of 4 KiB granules, shared
 * by all threads ---------------------------------------------------------------------------- */
/* align: a power of two up to CHUNK_SIZE / 2 (blocks are 4 KiB-aligned anyway). */
HIDDEN void *extent_alloc(size_t size, size_t align, bool zero);
HIDDEN void *extent_alloc_resident(size_t size, size_t align, bool zero, bool *fresh);
HIDDEN void extent_free(chunk_t *c, void *p);
/* Frees the blocks of a thread's cache (extent_cache_in) under one lock; aborts on any that
 * is not one (always checked). */
HIDDEN void extent_free_many(void *const *blocks, unsigned n);
/* The granules of the block p starts, or 0 when p starts none (safe without the lock for a
 * block the caller holds, and memory-safe for any pointer into an extent chunk). */
HIDDEN unsigned extent_block_len(const chunk_t *c, const void *p);
HIDDEN void extent_bad_pointer(const chunk_t *c, const void *p, const char *invalid)
    __attribute__((noreturn, cold));
HIDDEN int extent_owns(const chunk_t *c, const void *p);
/* The block's usable bytes; aborts with `invalid` unless p starts a block (0 for a freed
 * one when asked by malloc_usable_size, as glibc says for a freed chunk). */
HIDDEN size_t extent_usable_size(chunk_t *c, void *p, const char *invalid);
/* Grows or shrinks the block in place; false when the run after it is not free and long
 * enough (the caller moves it). */
HIDDEN bool extent_resize(chunk_t *c, void *p, size_t size);

/* ---- large.c: blocks with chunks of their own ------------------------------------------- */
HIDDEN void *large_alloc(size_t size, size_t align, bool zero);
HIDDEN void large_free(chunk_t *c, void *p);
HIDDEN void *large_resize(chunk_t *c, void *p, size_t size);

#endif
