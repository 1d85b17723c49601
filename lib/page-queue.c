/* page-queue: a heap's page queues (one per size class, and the full pages aside) and the
 * direct slots the malloc fast path reads: which page a class allocates from next. Only
 * the owner, or the purger holding the heap by its claim, changes them. */
#include "internal.h"
#include "list.h"

page_t page_empty; /* free == NULL: every fast path through it falls to the slow path */

void page_queue_remove(page_queue_t *q, page_t *p)
{
    DLIST_REMOVE(q, p);
}

void page_queue_push_front(page_queue_t *q, page_t *p)
{
    DLIST_PUSH_FRONT(q, p);
}

void page_queue_push_back(page_queue_t *q, page_t *p)
{
    DLIST_PUSH_BACK(q, p);
}

/* Points the direct slots of class cls at the queue's first page. */
void direct_update(heap_t *heap, unsigned cls)
{
    if (sc_block_size(cls) > DIRECT_MAX)
        return;
    page_t *p = heap->queues[cls].first ? heap->queues[cls].first : &page_empty;
    size_t lo = cls == 1 ? 0 : (sc_block_size(cls - 1) >> 4) + 1;
    size_t hi = sc_block_size(cls) >> 4;
    for (size_t w = lo; w <= hi; w++)
        heap->direct[w] = p;
}

/* Takes a page off whichever list holds it. */
void page_unlink(heap_t *heap, page_t *page)
{
    if (page->flags & PAGE_IN_FULL) {
        page_queue_remove(&heap->full, page);
        page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_IN_FULL);
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    } else {
        page_queue_remove(&heap->queues[page->cls], page);
        direct_update(heap, page->cls);
    }
}

/* Moves a page without free blocks to the full list. Dekker with free_slow: publish
 * in_full, then look at xthread_free; a racing remote free either is seen here or sees
 * in_full and flags the heap. Returns false when a remote free arrived (collect again). */
bool page_to_full(heap_t *heap, page_t *page)
{
    atomic_store_explicit(&page->in_full, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&page->xthread_free, memory_order_seq_cst)) {
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
        return false;
    }
    page_queue_remove(&heap->queues[page->cls], page);
    direct_update(heap, page->cls);
    page_set_flags(page, heap, page->flags | PAGE_IN_FULL);
    page_queue_push_back(&heap->full, page);
    return true;
}
