/* heap: one per thread, for the small classes (up to 8 KiB). The slow paths on a heap: a page with
 * a free block for a class (collecting frees, refilling holes, extending, adopting an abandoned
 * chunk, a new page), a block from it, a free that the fast path did not take (the owner's into a
 * full page or a page of aligned blocks, a remote free, a free into an abandoned chunk), a page
 * whose last block was freed, full pages other threads freed into; and the owner's side of the
 * reclaim handshake. Queues are page-queue.c's, pages and chunks chunk.c's, abandoned
 * chunks abandon.c's, the heaps' lives thread.c's; extents and large blocks belong to no
 * heap. */
#include "heap.h"
#include "list.h"

#include <errno.h>
#include <string.h>

/* The heap of a thread that has not allocated yet: every direct slot leads to the slow path. */
heap_t heap_empty = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty}};
/* The same for a thread whose heap was abandoned at exit: it may still allocate in a later
 * TLS destructor, and must not start the purger (see purger.c). */
heap_t heap_exited = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty}};
__thread heap_t *tl_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;
/* thread.c's: the oldest parked heap abandons its chunks (false: none parked). Set at the
 * first park; in .data, as thread.c's parking (.bss's first page is full). */
bool (*heap_unpark)(void) __attribute__((section(".data")));

/* Trim a page kept empty (the extents' trim, extent.c): with no purger thread, nothing
 * would purge it if the process went idle now. A
 * sub-page shares its OS pages, and is left alone, as the reclaimer leaves it. A class whose
 * trimmed page is refilled (page_ready) is a class in use: its kept pages stay resident from
 * then on, so the trims cost a heap at most a refault per class.
 * Returns true when the page is not trimmed for a reason that lasts: the policy, a refault,
 * the purger thread (it stops only in a fork's child, thread_fork_child, or when it could
 * not start, and is tried again then). */
static bool page_trim_kept(heap_t *heap, page_t *page)
{
    if (page->is_sub)
        return false; /* counted on every retire (sub_keeps) */
    if (!policy_in_force.trim_threshold || !purge_inside_chunks() ||
        (heap->trim_refaulted & ((uint64_t)1 << page->cls)) || purger_thread_started())
        return true;
    size_t bytes = page_reset_empty(heap, page->chunk, page, purge_how());
    if (bytes) {
        page_set_flags(page, heap, (uint8_t)(page->flags | PAGE_TRIMMED));
        atomic_fetch_add_explicit(&stat_purged, bytes, memory_order_relaxed); /* as reclaim's */
    }
    return false;
}

/* The owner freed the last block of a page. The page is kept when it is all its class has,
 * so that a loop of malloc/free does not take and return a page per call; another class that
 * needs a page takes a kept one over first (kept_page_steal). Kept pages of an idle thread
 * are purged by the reclaimer after purge_delay. */
void heap_page_retire(heap_t *heap, page_t *page)
{
    heap->slow_ops++;
    if (!(page->flags & PAGE_IN_FULL)) {
        page_queue_t *q = &heap->queues[page->cls];
        /* Only a page this heap allocates from: pages of chunks adopted from exited threads
         * that it merely freed into, kept, held those chunks and their resident free slots
         * away from every other heap (a thread that joins workers and frees what they left
         * gathered one per class). */
        if (page_alone(q, page) && page->alloc_seen) {
            LIB_ASSERT(page->is_sub == page_is_sub(page));
            page->kept_at = heap->slow_ops;
            heap->kept_mask |= (uint64_t)1 << page->cls;
            if (likely(!page->is_sub) || !heap_is_busy(heap) || ++page->sub_keeps < SUB_KEEPS_MAX) {
                /* The next retire would do just the count above: free_inline does it. */
                page->kept_quiet = page_trim_kept(heap, page);
                return;
            }
            /* Every free into a sub-page takes the slow path (its slot's descriptor is a
             * marker). A class that empties its sub-page again and again, a buffer taken
             * and freed in a loop, takes no more sub-pages: it moves to a page of its own,
             * whose frees take the fast path. */
            uint64_t bit = (uint64_t)1 << page->cls;
            heap->first_taken |= bit;
            heap->second_taken |= bit;
        }
    }
    page_unlink(heap, page);
    chunk_page_free(heap, page);
}

/* A fork's child has no purger thread: its kept pages are trimmed at their next retire
 * again (page_trim_kept), so none may skip it. */
TEXT_BUSY
void heap_forget_kept(heap_t *heap)
{
    for (unsigned cls = 1; cls < SMALL_CLASSES; cls++)
        if (heap->queues[cls].first)
            heap->queues[cls].first->kept_quiet = false;
}

/* An exiting thread's heap, about to be parked: the empty pages its classes keep go back to
 * their chunks as dirty slots (resident, no system call). The next thread to take the heap
 * sets up pages for the classes it uses on those slots, the lowest first (slot_take), so
 * that a parked heap holds the slots its threads use at once, not one per class any of them
 * ever used, an OS page each. Sub-pages stay: they share their OS pages. */
void heap_park_kept(heap_t *heap)
{
    uint64_t kept = heap->kept_mask;
    heap->kept_mask = 0;
    while (kept) {
        unsigned cls = (unsigned)__builtin_ctzll(kept);
        kept &= kept - 1;
        page_t *p = heap->queues[cls].first;
        /* Not a trimmed or reset page: it holds no memory, and its refill is what tells
         * the trim that its class is in use (trim_refaulted; released too, every thread
         * trimmed again); out of kept_mask, a class that needs a page takes a resident
         * dirty slot rather than fault it in. Nor a page carved beyond an OS page, a busy
         * class's, which its class's next blocks need whole: another class on its slot left
         * that class to carve fresh pages; it stays kept, out of kept_mask until a page is
         * kept again (kept_page_steal's walk skipped in between). */
        if (p && !p->next && p->used == 0 && !p->is_sub && !(p->flags & PAGE_RESET) &&
            (size_t)p->capacity * p->block_size <= OS_PAGE_SIZE) {
            page_unlink(heap, p);
            chunk_page_free(heap, p);
        }
    }
}

/* Pages emptied by other threads' frees while their owner makes no slow-path call (a
 * server's main thread idle after a background thread freed its data) are seen by nobody
 * but the purger's reclaim of idle heaps: the purger is asked for once 16 MiB were emptied
 * so, as for any memory that waits, and woken if it sleeps. */
#define REMOTE_EMPTIED_WANT ((uint64_t)16 << 20)
static _Atomic uint64_t remote_emptied;

static NOINLINE TEXT_COLD void note_remote_emptied(const page_t *page)
{
    uint64_t bytes = (uint64_t)page->reserved * page->block_size;
    if (atomic_fetch_add_explicit(&remote_emptied, bytes, memory_order_relaxed) + bytes >=
            REMOTE_EMPTIED_WANT &&
        atomic_exchange_explicit(&remote_emptied, 0, memory_order_relaxed) >= REMOTE_EMPTIED_WANT)
        purge_want_thread();
    purge_note_active();
}

/* The owner (or the purger) collected a page that other threads' frees emptied: it no longer
 * waits, so a busy owner's producer-consumer traffic does not add up to a purger thread. A
 * hint, floored at 0. */
static void remote_emptied_collected(const page_t *page)
{
    uint64_t bytes = (uint64_t)page->reserved * page->block_size;
    uint64_t cur = atomic_load_explicit(&remote_emptied, memory_order_relaxed);
    while (cur && !atomic_compare_exchange_weak_explicit(
                      &remote_emptied, &cur, cur > bytes ? cur - bytes : 0, memory_order_relaxed,
                      memory_order_relaxed))
        ;
}

/* Other threads freed into full pages: bring those pages back to their queues, their frees
 * collected. may_free: empty ones go (the owner), but one that its class needs next (its
 * queue was empty, or held only a page without a block): given back, it was followed by a
 * new page of the same class, slot and carving set up again. Every other emptied page goes:
 * kept with its class, it saved a little time and raised the peak, while the slots given back
 * serve every class. Else they stay for the caller to reset
 * (the purger, holding the heap by its claim: no chunk may go back to the arena there). */
void heap_rescue_full(heap_t *heap, bool may_free)
{
    atomic_store_explicit(&heap->full_has_xfree, 0, memory_order_seq_cst);
    page_t *next;
    for (page_t *p = heap->full.first; p; p = next) {
        next = p->next;
        if (!atomic_load_explicit(&p->xthread_free, memory_order_relaxed))
            continue;
        page_queue_t *q = &heap->queues[p->cls];
        const page_t *first = q->first;
        /* the class's next page: its queue holds a page without a block at most */
        bool needed = !first || (!first->next && !first->free && !first->local_free);
        page_unfull(heap, p);
        page_collect(p);
        if (p->used == 0)
            remote_emptied_collected(p);
        page_queue_push_back(q, p);
        if (may_free && p->used == 0 && !needed) {
            page_queue_remove(q, p);
            chunk_page_free(heap, p);
        } else {
            page_queue_direct_update(heap, p->cls);
        }
    }
}

/* Whether page_ready could give page a free block: a list, other threads' frees, holes, or
 * blocks left to carve (a reset page has none carved). heap_malloc_dry hands a dry page over
 * only when this says no; the debug build's page_ready checks that it agrees. */
static inline bool page_may_ready(const page_t *page)
{
    return page->free || page->local_free ||
           atomic_load_explicit(&page->xthread_free, memory_order_relaxed) || page->holes ||
           (page->flags & PAGE_RESET) || page->capacity < page->reserved;
}

/* page_may_ready's looks at what only the owner changes: its result stays true between the
 * owner's looks, while a remote free can arrive at any moment. */
static inline bool page_may_ready_owned(const page_t *page)
{
    return page->free || page->local_free || page->holes || (page->flags & PAGE_RESET) ||
           page->capacity < page->reserved;
}

/* Makes page ready to allocate from, if it can be: the owner's frees, other threads', its
 * holes, the reclaimer's reset, a few more blocks carved. Returns whether it has a free
 * block. */
static inline bool page_ready(heap_t *heap, page_t *page)
{
#ifndef THPALLOC_DEBUG
    if (!atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) {
        if (!page->free && page->local_free) {
            page->free = page->local_free;
            page->local_free = NULL;
        }
    } else
        page_collect(page);
#else
    bool may = page_may_ready(page);
    uint32_t remote = page_collect(page);
#endif
    bool ready = true;
    if (unlikely(!page->free || (page->flags & PAGE_RESET))) {
        if (!page->free && page->holes)
            page_refill_holes(heap, page);
        if (page->flags & PAGE_RESET) {
            if (page->flags & PAGE_TRIMMED)
                heap->trim_refaulted |= (uint64_t)1 << page->cls;
            page_set_flags(page, heap, page->flags & (uint8_t) ~(PAGE_RESET | PAGE_TRIMMED));
        }
        if (!page->free && page->capacity < page->reserved)
            page_extend(page);
        ready = page->free != NULL;
    }
    /* page_may_ready's no holds: nothing came of the page but a remote free since */
    LIB_ASSERT(may || remote || !ready);
    return ready;
}

/* The first page of the class's queue that can be made ready, moved to the front; the ones
 * before it go to the full list. NULL when none can. */
static page_t *queue_take(heap_t *heap, page_queue_t *q)
{
    page_t *page = q->first;
    while (page) {
        if (page_ready(heap, page)) {
            if (page != q->first) {
                page_queue_remove(q, page);
                page_queue_push_front(q, page);
            }
            return page;
        }
        page_t *next = page->next;
        if (!page_to_full(heap, page))
            continue; /* a remote free just arrived: collect it */
        page = next;
    }
    return NULL;
}

/* A page of class cls with a free block, at the front of its queue (the direct slots
 * updated), or NULL when memory is exhausted. */
static page_t *heap_find_page(heap_t *heap, unsigned cls)
{
    if (atomic_load_explicit(&heap->full_has_xfree, memory_order_relaxed))
        heap_rescue_full(heap, true);
    page_queue_t *q = &heap->queues[cls];
    page_t *page;
    for (int adopted = 0;; adopted++) {
        page = queue_take(heap, q);
        if (page) {
            page->alloc_seen = true;
            break;
        }
        /* A chunk an exited thread left only when this heap's own chunks are full: adopting
         * one per class spread a new thread's pages over every abandoned chunk, none of
         * which could empty. */
        if (adopted >= 4 || chunk_slot_available(heap, cls) ||
            (!abandoned_adopt_one(heap) &&
             !(heap_unpark && heap_unpark() && abandoned_adopt_one(heap)))) {
            page = chunk_page_new(heap, cls);
            if (page)
                page_extend(page);
            break;
        }
    }
    page_queue_direct_update(heap, cls); /* once: pages that went to the full list left it stale */
    return page;
}

#ifdef THPALLOC_DEBUG
/* The fast path's slot for size leads to first, the class queue's first page, or to
 * page_empty when the queue is empty: what every change of a queue keeps
 * (page_queue_direct_update). */
static bool direct_slot_is(const heap_t *heap, size_t size, const page_t *first)
{
    return size > DIRECT_MAX || heap->direct[(size + 15) >> 4] == (first ? first : &page_empty);
}
#endif

/* A block of a small class from the heap's pages (the caller owns the heap, or holds
 * late_lock for the shared late heap). */
void *heap_malloc_small(heap_t *heap, size_t size, bool zero)
{
    unsigned cls = sc_class_of(size);
    heap_enter(heap);
    heap->slow_ops++;
    if (unlikely(heap->reclaimed)) {
        /* Reclaimed while idle, busy again: the purger may be asleep with nothing due. */
        heap->reclaimed = false;
        purge_note_active();
    }
    page_t *page = heap->queues[cls].first;
    LIB_ASSERT(direct_slot_is(heap, size, page));
    if (!page || !page->free)
        page = heap_find_page(heap, cls);
    LIB_ASSERT(direct_slot_is(heap, size, heap->queues[cls].first));
    if (unlikely(!page)) {
        heap_leave(heap);
        errno = ENOMEM;
        return NULL;
    }
    block_t *b = page_pop(page);
    heap_leave(heap);
    if (zero)
        memset(b, 0, page->block_size);
    return b;
}

/* The slow paths' share of a full page's round trip (the page runs dry, a free brings it
 * back), inline in the one caller each way, without the general functions' looks: in a
 * churning heap it is the most frequent slow path. The dry first page to the full list, its
 * next page first; false when a remote free arrived (collect it). */
static inline __attribute__((always_inline)) bool page_to_full_first(heap_t *heap, page_t *page)
{
    page_queue_t *q = &heap->queues[page->cls];
    page_t *next = page->next;
    LIB_ASSERT(q->first == page && next && !page->kept_quiet && !next->kept_quiet);
    atomic_store_explicit(&page->in_full, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&page->xthread_free, memory_order_seq_cst)) {
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
        return false;
    }
    q->first = next; /* page_queue_remove of the first page */
    next->prev = NULL;
    page->next = NULL;
    page_set_flags(page, heap, page->flags | PAGE_IN_FULL);
    DLIST_PUSH_BACK(&heap->full, page); /* no kept page on the full list */
    direct_set(heap, page->cls, next);
    return true;
}

/* A full page the owner freed into back to the end of its queue; flags: its flags (a
 * constant where the caller knows them). */
static inline __attribute__((always_inline)) void page_requeue(heap_t *heap, page_t *page,
                                                               uint8_t flags)
{
    LIB_ASSERT(!page->kept_quiet && flags == page->flags && (flags & PAGE_IN_FULL));
    /* page_unfull's DLIST_REMOVE (no kept page on the full list), without clearing the
     * links that the push below sets */
    page_t *prev = page->prev, *next = page->next;
    if (prev)
        prev->next = next;
    else
        heap->full.first = next;
    if (next)
        next->prev = prev;
    else
        heap->full.last = prev;
    page_set_flags(page, heap, flags & (uint8_t)~PAGE_IN_FULL);
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    page_queue_t *q = &heap->queues[page->cls];
    /* page_queue_push_back's, where it can be set: a kept_quiet page is alone in its queue
     * (a queue of two or more has none), so the first page's line is not written for it */
    if (q->first && q->first == q->last)
        q->first->kept_quiet = false;
    DLIST_PUSH_BACK(q, page);
    if (q->first == page)
        direct_set(heap, page->cls, page); /* the queue was empty */
}

/* The fast path's page ran dry and the owner's frees were not taken (there were none, or
 * other threads freed into it or into a full page). When the page has nothing to collect or
 * carve and the next page of its queue has blocks of its own, this does what heap_find_page
 * would (the dry page to the full list, the next one to allocate from) without the general
 * path's looks; else it changes nothing and tail-calls slow(heap, size), the caller's slow
 * path (alloc.c's malloc_slow, which is above this file: given, not called by name; a
 * wrapper there that called this one and then the slow path cost a frame on every dry
 * page). Called inside the fast path's handshake (busy set, claimed seen clear), which
 * it ends. A safe point with work waiting (purger_wanted) is left to the slow path, which
 * starts with one: the block handed out here needs none after it. */
void *heap_malloc_dry(heap_t *heap, page_t *page, size_t size,
                      void *(*slow)(heap_t *heap, size_t size))
{
    page_t *next = page->next;
    /* page_empty and heap_empty have no next page: nothing is written to them */
    /* page_may_ready's looks less three: free is empty (the fast path saw it, inside this
     * handshake), local_free too (below), and holes come with PAGE_HAS_HOLES (the purger
     * sets both under its claim) */
    LIB_ASSERT(!page->free && (page->holes == 0) == !(page->flags & PAGE_HAS_HOLES));
    /* The fast path took the owner's frees unless another thread's were waiting (in this
     * page, or in a full page: full_has_xfree), which only the owner takes: local_free
     * is empty unless one of those two looks below sends it to the slow path. */
    LIB_ASSERT(!page->local_free ||
               atomic_load_explicit(&page->xthread_free, memory_order_relaxed) ||
               atomic_load_explicit(&heap->full_has_xfree, memory_order_relaxed));
    /* other threads' frees into page: page_to_full_first's look after it publishes in_full,
     * the one that counts, sends them to the slow path (a look here first saved nothing but
     * an xchg in the rare case, at a cost to every dry page) */
    if (!next || (page->flags & (PAGE_HAS_HOLES | PAGE_RESET)) || page->capacity < page->reserved ||
        heap->reclaimed || atomic_load_explicit(&heap->full_has_xfree, memory_order_relaxed) ||
        atomic_load_explicit(&purger_wanted, memory_order_relaxed))
        goto slow;
    /* not page_may_ready: a remote free may have come since the fast path's look (the
     * page's move to the full list finds it). With one there, local_free may hold the
     * owner's frees (the fast path left them): the move finds it too. Else there was none
     * at the fast path's look either (only the owner takes them). */
    LIB_ASSERT(atomic_load_explicit(&page->xthread_free, memory_order_relaxed) ||
               !page_may_ready_owned(page));
    /* the next page ready as it is: page_ready's first case, nothing to collect or carve */
    if (atomic_load_explicit(&next->xthread_free, memory_order_relaxed) ||
        (next->flags & PAGE_RESET) || (!next->free && !next->local_free))
        goto slow;
    if (extent_cache_look_due(heap))
        goto slow; /* malloc_slow looks */
    if (!page_to_full_first(heap, page))
        goto slow; /* a remote free arrived just now: the slow path collects it */
    heap->slow_ops++;
    if (!next->free) {
        next->free = next->local_free;
        next->local_free = NULL;
    }
#ifdef THPALLOC_DEBUG
    page_check(next);
#endif
    next->alloc_seen = true;
    LIB_ASSERT(heap->queues[next->cls].first == next);
    LIB_ASSERT(direct_slot_is(heap, next->block_size, next));
    block_t *b = page_pop(next);
    heap_leave(heap);
    return b;
slow:
    heap_leave(heap);
    return slow(heap, size);
}

/* p, a block's start, lies in a hole or beyond the carved blocks (a page the reclaimer
 * reset): it is free already. */
static inline __attribute__((always_inline)) bool block_freed(const page_t *page, const void *p)
{
    return block_in_hole(page, p) ||
           (size_t)((const uint8_t *)p - page->start) >=
               (size_t)__atomic_load_n(&page->capacity, __ATOMIC_RELAXED) * page->block_size;
}

/* realloc's check that p (block b of page, b == p unless memalign moved p) is live, as
 * free's: aborts when b is in a hole, beyond the carved blocks, or on the lists of the
 * caller's own page; false when it carries its free key on another heap's page (only the
 * move, whose free applies free's rules, may follow), else true. */
TEXT_WARM
bool heap_realloc_live(chunk_t *c, page_t *page, block_t *b, void *p)
{
    if (unlikely(block_freed(page, b)))
        lib_fatal("realloc(): invalid pointer", p);
    if (likely(b->key != block_key(b)))
        return true; /* a free block carries its key (a hole's or a reset page's are above) */
    heap_t *heap = tl_heap;
    if (atomic_load_explicit(&c->owner, memory_order_acquire) != heap)
        return false;
    heap_enter(heap);
    page_check_double(page, b, "realloc(): invalid pointer");
    heap_leave(heap);
    return true;
}

/* Another thread's free of block b (checked) into page: pushed on its xthread_free; the
 * owner, if any, told when the page is on its full list. A block that carries its free key
 * is free already (malloc clears the key of every block it hands out; only a write of
 * the secret-derived value could forge it): caught here, at the second free, as the frees
 * into an exited thread's abandoned chunk always were, now that such a thread's heap is
 * parked and its blocks' frees are remote ones; else only the owner's collection would. */
static inline __attribute__((always_inline)) void free_push_remote(page_t *page, block_t *b,
                                                                   heap_t *owner)
{
    /* the owner's frees mark with the same exchange: of two frees one reads the other's key */
    if (unlikely(block_mark_free(b))) {
        lib_fatal_tail("free(): double free detected", b);
        return;
    }
    uint64_t head = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    uint64_t mine = (uint64_t)((uint8_t *)b - page->start) + 1;
    do {
        /* more listed than the page holds: a cycle, as the owner's walk used to find */
        if (unlikely(xfree_count(head) >= page->reserved)) {
            lib_fatal_tail("free(): double free detected", b);
            return;
        }
        block_set_next(b, xfree_head(page, head));
    } while (!atomic_compare_exchange_weak_explicit(
        &page->xthread_free, &head, (head & ~(uint64_t)UINT32_MAX) + (1ull << 32) + mine,
        memory_order_seq_cst, memory_order_relaxed));
    if (atomic_load_explicit(&page->in_full, memory_order_seq_cst) && owner) {
        atomic_store_explicit(&owner->full_has_xfree, 1, memory_order_relaxed);
        /* The last block of a full page (a hint: used is the owner's) */
        if (unlikely(xfree_count(head) + 1 == __atomic_load_n(&page->used, __ATOMIC_RELAXED)))
            note_remote_emptied(page);
    }
}

/* The owner's free of block b (checked) into its page: the key, the local list, a full
 * page back to its queue, the last block's retire. Inside the handshake. (heap_free_full
 * does the same for a page whose flags are PAGE_IN_FULL alone.) */
static inline __attribute__((always_inline)) void free_own(heap_t *heap, page_t *page, block_t *b)
{
    heap->slow_ops++;
    if (unlikely(block_mark_free(b)))
        lib_fatal("free(): double free detected", b);
    block_set_next(b, page->local_free);
    page->local_free = b;
    uint8_t flags = page->flags;
    if (flags & PAGE_IN_FULL)
        page_requeue(heap, page, flags);
    if (--page->used == 0)
        heap_page_retire(heap, page);
}

/* heap_free_full's last block: the retire and the handshake's end, out of line, so that
 * heap_free_full makes no call of its own and saves no register (a frame on every free
 * into a full page). */
static NOINLINE void free_full_retire(heap_t *heap, page_t *page)
{
    heap_page_retire(heap, page);
    heap_leave(heap);
}

/* The owner's free of p into its full page (fast_owner_full said so, outside the
 * handshake): heap_free_slow's checks and work for that case, without its other looks.
 * Claimed by the purger, or the page changed since: heap_free_slow, which waits. */
void heap_free_full(void *p, page_t *page, heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 1, memory_order_relaxed); /* heap_enter's */
    atomic_signal_fence(memory_order_seq_cst);
    /* read again inside the handshake: the purger may have changed the page since */
    if (unlikely(heap_claimed(heap) || page->flags != PAGE_IN_FULL)) {
        heap_leave(heap);
        heap_free_slow(page->chunk, page, p);
        return;
    }
    /* heap_free_slow's checks that the page's flags leave: no aligned blocks, no holes (the
     * purger sets holes and PAGE_HAS_HOLES together, under its claim), not reset. Of
     * block_freed, the tail past the last block stays: a page goes to the full list only
     * when every block is carved (page_ready carves before it gives up on a page, and
     * heap_malloc_dry moves none with blocks left), so for a block's start off >= capacity
     * * block_size is off > pop_max, one compare with memory. */
    uint64_t off = (uint64_t)((uint8_t *)p - page->start);
    if (unlikely(block_misaligned(page, p))) {
        lib_fatal_tail("free(): invalid pointer", p);
        return;
    }
    LIB_ASSERT(!page->holes && page->capacity == page->reserved);
    if (unlikely(off > page->pop_max)) {
        lib_fatal_tail("free(): double free detected", p);
        return;
    }
    block_t *b = p;
    if (unlikely(block_mark_free(b))) {
        lib_fatal_tail("free(): double free detected", p);
        return;
    }
    heap->slow_ops++;
    block_set_next(b, page->local_free);
    page->local_free = b;
    page_requeue(heap, page, PAGE_IN_FULL);
    if (unlikely(--page->used == 0)) {
        free_full_retire(heap, page);
        return;
    }
    heap_leave(heap);
}

/* free of a block of a small-object chunk off the fast path: the owner's (full page,
 * aligned blocks), a remote free, an abandoned chunk taken over, or a bad pointer. */
void heap_free_slow(chunk_t *c, page_t *page, void *p)
{
    if (unlikely(c->kind == CHUNK_FREE))
        lib_fatal("free(): double free or invalid pointer", p);
    page = page_sub_of(c, page, p); /* a split slot's block: its sub-page */
    if (unlikely(atomic_load_explicit(&page->in_use, memory_order_relaxed) != PAGE_USED))
        lib_fatal("free(): invalid pointer", p);
    if (page->flags & PAGE_HAS_ALIGNED) {
        void *s = page_block_named(page, p);
        if (unlikely(!s))
            lib_fatal("free(): invalid pointer", p);
        p = s;
    } else if (unlikely(block_misaligned(page, p))) {
        lib_fatal("free(): invalid pointer", p);
    }
    if (unlikely(block_freed(page, p)))
        lib_fatal("free(): double free detected", p);
    block_t *b = p;
    heap_t *heap = tl_heap;
    /* Only this thread makes its heap a chunk's owner, or takes it away; and while p is
     * live nothing gives its chunk back. So the owner is read outside the handshake, and a
     * remote free, which touches nothing of the freeing thread's heap, stays out of it. */
    heap_t *owner = atomic_load_explicit(&c->owner, memory_order_acquire);
    if (owner == heap) { /* never heap_empty or heap_exited: they own no chunk */
        heap_enter(heap);
        free_own(heap, page, b); /* our own page, but full or with aligned blocks */
        heap_leave(heap);
        return;
    }
    if (!owner && atomic_load_explicit(&c->abandoned, memory_order_relaxed) &&
        abandoned_free(c, page, b))
        return;
    free_push_remote(page, b, owner);
}

/* Another thread's free of p into page, which owner owns with no flag but PAGE_IN_FULL
 * (fast_owner said so). */
void heap_free_remote(void *p, page_t *page, heap_t *owner)
{
    /* heap_free_slow's checks that a page another heap owns with no flag but PAGE_IN_FULL
     * still needs (the holes read as there, atomically: the purger may have made some) */
    if (unlikely(block_misaligned(page, p))) {
        lib_fatal_tail("free(): invalid pointer", p);
        return;
    }
    if (unlikely(block_freed(page, p))) {
        lib_fatal_tail("free(): double free detected", p);
        return;
    }
    free_push_remote(page, p, owner);
}

/* ---- the owner's side of the reclaim handshake (reclaim.c is the purger's)
 * ------------------------------------------------------------------ */

/* Sleeps (futex) rather than spins: a real-time owner spinning on the purger's CPU would
 * never let it finish. claimed 2 says someone sleeps: the purger wakes it. */
void heap_wait_unclaimed(heap_t *heap)
{
    for (;;) {
        int c = atomic_load_explicit(&heap->claimed, memory_order_acquire);
        if (!c)
            return;
        if (c == 1 && !atomic_compare_exchange_strong_explicit(
                          &heap->claimed, &c, 2, memory_order_acq_rel, memory_order_acquire))
            continue;
        os_wait_while(&heap->claimed, 2);
    }
}

/* The purger holds this heap: wait until it lets go (reclaim.c). */
TEXT_BUSY
void heap_wait_reclaim(heap_t *heap)
{
    for (;;) {
        atomic_store_explicit(&heap->busy, 0, memory_order_release);
        heap_wait_unclaimed(heap);
        atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&heap->claimed, memory_order_acquire))
            return;
    }
}
