/* thpalloc internals, layer 5: a page's blocks (base.h says how the headers go). */
#ifndef THPALLOC_PAGE_H
#define THPALLOC_PAGE_H

#include "arena.h"

/* A purge inside chunk c (a page's slot, a hole, a tail), or c itself going back: a chunk
 * dense.c collapsed is a huge page no more (the kernel splits it at the purge, or the arena
 * takes it whole). split: count it as a split. */
static inline void chunk_dense_lost(const chunk_t *c, bool split)
{
    if (likely(atomic_load_explicit(&c->dense, memory_order_relaxed) != CHUNK_DENSE_HUGE &&
               !atomic_load_explicit(&c->dense_advised, memory_order_relaxed)))
        return;
    arena_dense_lost(c, split);
}

/* ---- page.c ----------------------------------------------------------------------------- */
HIDDEN void page_init(page_t *page, chunk_t *c, unsigned idx, unsigned cls);
HIDDEN void page_sub_init(page_t *page, chunk_t *c, unsigned j, unsigned cls);
HIDDEN void page_extend(page_t *page);
HIDDEN uint32_t page_collect(page_t *page);
#ifdef THPALLOC_DEBUG
HIDDEN void page_check(const page_t *page);
#endif
HIDDEN void page_refill_holes(heap_t *heap, page_t *page);
HIDDEN size_t page_reset_empty(heap_t *heap, const chunk_t *c, page_t *page, enum os_purge how);
HIDDEN void *page_block_start(page_t *page, void *p);
HIDDEN void *page_block_named(page_t *page, void *p);
HIDDEN void page_check_double(page_t *page, void *p, const char *msg);
HIDDEN void page_corrupt(page_t *page, void *b) __attribute__((noreturn, cold));
HIDDEN void *page_corrupt_tail(void *b, page_t *page) __attribute__((cold));
HIDDEN size_t pages_purge(uint32_t now, bool force, uint32_t *next);
HIDDEN size_t page_slots_purge(chunk_t *c, uint32_t now, bool force, uint32_t *next);

static inline size_t page_size_of(const chunk_t *c)
{
    return (size_t)1 << c->page_shift;
}

/* Pops page's first free block (page->free is not empty), checked as every pop is: inside
 * the page and carrying its key. */
static inline block_t *page_pop(page_t *page)
{
    block_t *b = page->free;
    if (unlikely(block_outside(page, b) || b->key != block_key(b)))
        page_corrupt(page, b);
    page->free = block_next(b);
    page->used++;
    b->key = 0;
    return b;
}

#endif
