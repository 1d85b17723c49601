/* page-queue: a heap's page queues (one per size class, and the full pages aside) and the
 * direct slots the malloc fast path reads: which page a class allocates from next. Only
 * the owner, or the purger holding the heap by its claim, changes them. */
#include "page-queue.h"
#include "list.h"

page_t page_empty; /* free == NULL: every fast path through it falls to the slow path */

/* A page kept_quiet is alone in its queue, so its first: a page pushed beside it, or the
 * page taken off, ends that (types.h). */
void page_queue_remove(page_queue_t *q, page_t *p)
{
    p->kept_quiet = false;
    DLIST_REMOVE(q, p);
}

void page_queue_push_front(page_queue_t *q, page_t *p)
{
    if (q->first)
        q->first->kept_quiet = false;
    p->kept_quiet = false;
    DLIST_PUSH_FRONT(q, p);
}

void page_queue_push_back(page_queue_t *q, page_t *p)
{
    if (q->first)
        q->first->kept_quiet = false;
    p->kept_quiet = false;
    DLIST_PUSH_BACK(q, p);
}

/* The direct slots of each class, [lo, hi] by (size + 15) / 16, as constants: the slow
 * paths call page_queue_direct_update on every page that fills or comes back, and working the
 * bounds out of sc_block_size there cost more than the update itself. */
#define SC_BS(c) ((c) <= 8 ? (size_t)(c) << 4 : (size_t)(8 + ((c)-9) % 8 + 1) << (4 + ((c)-9) / 8))
#define DIRECT_HI(c) (SC_BS(c) <= DIRECT_MAX ? SC_BS(c) >> 4 : 0)
#define DIRECT_LO(c) ((c) == 1 ? 0 : DIRECT_HI((c)-1) + 1)
#define DX4(c) X(c) X((c) + 1) X((c) + 2) X((c) + 3)
#define DX16(c) DX4(c) DX4((c) + 4) DX4((c) + 8) DX4((c) + 12)
#define X(c) {(uint8_t)DIRECT_LO(c), (uint8_t)DIRECT_HI(c)},
const uint8_t direct_range[SMALL_CLASSES][2] = {{0, 0}, DX16(1) DX16(17) DX16(33) DX4(49) DX4(53)};
#undef X
_Static_assert(SMALL_CLASSES == 57, "direct_range lists classes 1..56");

/* Points the direct slots of class cls at the queue's first page. */
void page_queue_direct_update(heap_t *heap, unsigned cls)
{
    unsigned hi = direct_range[cls][1];
    LIB_ASSERT(hi == (sc_block_size(cls) <= DIRECT_MAX ? sc_block_size(cls) >> 4 : 0));
    LIB_ASSERT(cls == 1 || !hi || direct_range[cls][0] == (sc_block_size(cls - 1) >> 4) + 1);
    if (!hi)
        return; /* above DIRECT_MAX */
    page_t *p = heap->queues[cls].first ? heap->queues[cls].first : &page_empty;
    if (heap->direct[hi] == p)
        return; /* the class's slots change together */
    for (unsigned w = direct_range[cls][0]; w <= hi; w++)
        heap->direct[w] = p;
}

/* Takes a page off whichever list holds it. */
void page_unlink(heap_t *heap, page_t *page)
{
    if (page->flags & PAGE_IN_FULL) {
        page_unfull(heap, page);
    } else {
        page_queue_remove(&heap->queues[page->cls], page);
        page_queue_direct_update(heap, page->cls);
    }
}

/* Takes a page off the full list (the caller puts it back in its queue). */
void page_unfull(heap_t *heap, page_t *page)
{
    page_queue_remove(&heap->full, page);
    page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_IN_FULL);
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
}

/* Moves a page without free blocks to the full list. Dekker with free_slow: publish
 * in_full, then look at xthread_free; a racing remote free either is seen here or sees
 * in_full and flags the heap. Returns false when a remote free arrived (collect again).
 * The caller updates the direct slots (one walk may move several pages). */
bool page_to_full(heap_t *heap, page_t *page)
{
    atomic_store_explicit(&page->in_full, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&page->xthread_free, memory_order_seq_cst)) {
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
        return false;
    }
    page_queue_remove(&heap->queues[page->cls], page);
    page_set_flags(page, heap, page->flags | PAGE_IN_FULL);
    page_queue_push_back(&heap->full, page);
    return true;
}
