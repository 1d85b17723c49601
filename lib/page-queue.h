/* thpalloc internals, layer 6: a heap's page queues and direct slots (base.h says how the
 * headers go). */
#ifndef THPALLOC_PAGE_QUEUE_H
#define THPALLOC_PAGE_QUEUE_H

#include "page.h"

/* ---- page-queue.c: a heap's page queues and direct slots (the owner, or the purger holding
 * the heap) -------------------------------------------------------------------------------- */
extern HIDDEN page_t page_empty;
HIDDEN void page_queue_remove(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_front(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_back(page_queue_t *q, page_t *p);
HIDDEN void page_queue_direct_update(heap_t *heap, unsigned cls);
HIDDEN void page_unlink(heap_t *heap, page_t *page);
HIDDEN void page_unfull(heap_t *heap, page_t *page);
HIDDEN bool page_to_full(heap_t *heap, page_t *page);
/* Each class's direct slots [lo, hi] (none: hi 0), by (size + 15) / 16. */
extern HIDDEN const uint8_t direct_range[SMALL_CLASSES][2];

/* Points the direct slots of class cls at page p. */
static inline void direct_set(heap_t *heap, unsigned cls, page_t *p)
{
    unsigned hi = direct_range[cls][1];
    for (unsigned w = direct_range[cls][0]; hi && w <= hi; w++)
        heap->direct[w] = p;
}

#endif
