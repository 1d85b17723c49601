/* reclaim: the purger gives back memory that a thread's heap keeps inside its own pages,
 * once the thread has made no slow-path call for purge_delay. Chunks and empty page slots
 * are purged elsewhere (arena.c, page.c); what only this file reaches is
 *   - the empty page a heap keeps as the only page of its class (so that a loop of
 *     malloc/free does not take and return pages): purged and reset to no blocks, so the
 *     owner carves it again on its next allocation of that class;
 *   - the OS pages of small pages that hold only free blocks (holes);
 *   - the extents it keeps for its next allocation (extent_cache_flush);
 * and the same (but the handshake: nobody owns them) in the chunks of exited threads that
 * nobody adopted within purge_delay (reclaim_abandoned).
 * Idle threads make no call at all, so the purger must do it while the owner may wake at
 * any moment, without a lock or an atomic read-modify-write on the owner's fast path. The
 * handshake (asymmetric Dekker): the owner stores heap->busy = 1, then loads
 * heap->claimed (heap_enter); the purger stores claimed = 1, runs membarrier() (every
 * running thread of the process passes a full barrier), then loads busy. Either the owner's
 * store is visible and the purger backs off, or the owner's load comes after the barrier,
 * sees claimed and waits in heap_wait_reclaim until the purger is done. Without membarrier
 * (old kernel, a seccomp filter refusing it) nothing here runs. */
#include "reclaim.h"
#include "list.h"

#include <pthread.h>
#include <string.h>

#define RECLAIM_BATCH 64
/* The smallest delay between two looks at the heaps, however short purge_delay is. */
#define RECLAIM_MIN_PERIOD_MS 50

static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;
static int barrier_state; /* 0: not tried, 1: membarrier registered, -1: unavailable */
static uint32_t pass;     /* calls of reclaim_idle_heaps, so that one call looks at a heap once */

/* A split slot whose sub-pages hold no live block: the slot is purged whole and each
 * sub-page reset as page_reset_empty does (its OS pages are shared, so they go together or
 * not at all). */
static size_t reset_split_slot(heap_t *heap, chunk_t *c, page_t *marker, enum os_purge how)
{
    unsigned first = (unsigned)(marker - c->pages) + 1 == c->split[0] ? 0 : SUB_PAGES;
    bool resident = marker->tail_resident;
    for (unsigned j = first; j < first + SUB_PAGES; j++) {
        page_t *p = chunk_sub(c, j);
        if (atomic_load_explicit(&p->in_use, memory_order_acquire) != PAGE_USED)
            continue;
        if (!(p->flags & PAGE_IN_FULL))
            page_collect(p);
        if (p->used != 0)
            return 0; /* a live block: nothing here can go */
        resident |= p->capacity != 0;
    }
    if (resident)
        chunk_dense_lost(c, true);
    if (!resident || !purge_give_back(marker->start, page_size_of(c), how))
        return 0;
    marker->tail_resident = false;
    for (unsigned j = first; j < first + SUB_PAGES; j++) {
        page_t *p = chunk_sub(c, j);
        if (atomic_load_explicit(&p->in_use, memory_order_acquire) != PAGE_USED)
            continue;
        p->free = NULL;
        p->local_free = NULL;
        __atomic_store_n(&p->capacity, 0, __ATOMIC_RELAXED);
        /* until the owner carves again, every free of it is a double free */
        page_set_flags(p, heap, (uint8_t)(p->flags | PAGE_RESET));
    }
    return page_size_of(c);
}

/* Blocks of a page at most (16 B ones in a small page, 1 KiB+ in a medium one), and its OS
 * pages at most (one bit each in holes). */
#define PAGE_BLOCKS_MAX (SMALL_PAGE_SIZE / 16)
#define PAGE_OS_PAGES_MAX (MEDIUM_PAGE_SIZE / OS_PAGE_SIZE)
_Static_assert(PAGE_OS_PAGES_MAX <= 16, "page_t.holes has a bit per OS page");
_Static_assert(MEDIUM_PAGE_SIZE / SMALL_PAGE_BLOCK_MAX <= PAGE_BLOCKS_MAX,
               "is_free[] is too small");

static inline bool bit_test(const uint64_t *m, uint32_t i)
{
    return (m[i / 64] >> (i % 64)) & 1;
}

/* The OS pages of a small page that hold only free blocks become holes: queued in the batch
 * to be purged, their blocks taken off the lists (page_refill_holes gives them back to the
 * owner). Keys of those blocks are cleared first, so that with purge = free (old contents
 * may survive) a block in a hole never looks free to the double-free check. The caller
 * flushes the batch while nobody else may touch the page (the claim, or the chunk off its list):
 * a heap of scattered holes is one call per OS_PURGE_BATCH of them, not one each. */
TEXT_BUSY
static void reclaim_small_page(heap_t *heap, page_t *p, struct os_purge_batch *batch)
{
    size_t bs = p->block_size;
    uint32_t cap = p->capacity;
    uint64_t is_free[PAGE_BLOCKS_MAX / 64];
    const unsigned os_pages = (unsigned)(page_size_of(p->chunk) / OS_PAGE_SIZE);
    memset(is_free, 0, ((cap + 63) / 64) * sizeof(uint64_t));
    uint32_t nfree = 0;
    for (int l = 0; l < 2; l++) {
        for (block_t *b = l ? p->local_free : p->free; b; b = block_next(b)) {
            /* What the owner's pop would abort on: a link led out of the page or off a
             * block (its key: a write after free), or more blocks than carved (a cycle:
             * free(b), free(x), free(b) by the owner). Walked unchecked, a bad link set a
             * bit anywhere past is_free, and a cycle held the purger and its claim (the
             * owner waiting on it) forever. */
            if (unlikely(block_outside(p, b) || b->key != block_key(b) || nfree >= cap))
                page_corrupt(p, b);
            uint32_t j = (uint32_t)((size_t)((uint8_t *)b - p->start) / bs);
            is_free[j / 64] |= (uint64_t)1 << (j % 64);
            nfree++;
        }
    }
    uint16_t old = p->holes, add = 0;
    for (unsigned i = 0; i < os_pages; i++) {
        size_t lo = (size_t)i * OS_PAGE_SIZE;
        if (lo >= (size_t)cap * bs)
            break; /* never carved: not resident */
        if (old & (1u << i))
            continue;
        uint32_t j0 = (uint32_t)(lo / bs), j1 = (uint32_t)((lo + OS_PAGE_SIZE - 1) / bs);
        bool all_free = true;
        for (uint32_t j = j0; j <= j1 && j < cap && all_free; j++) {
            /* free: on a list, or inside an older hole (on no list) */
            void *b = p->start + (size_t)j * bs;
            all_free = bit_test(is_free, j) || block_in_hole(p, b);
        }
        if (all_free)
            add |= (uint16_t)(1u << i);
    }
    if (!add || !nfree)
        return;
    uint16_t holes = (uint16_t)(old | add);
    /* The lists again, in address order, without the blocks in holes. */
    __atomic_store_n(&p->holes, holes, __ATOMIC_RELAXED);
    block_t *head = NULL;
    for (uint32_t j = cap; j-- > 0;) {
        if (!bit_test(is_free, j))
            continue;
        block_t *b = (block_t *)(p->start + (size_t)j * bs);
        if (block_in_hole(p, b)) {
            b->key = 0;
            continue;
        }
        block_set_next(b, head);
        head = b;
    }
    p->free = head;
    p->local_free = NULL;
    page_set_flags(p, heap, p->flags | PAGE_HAS_HOLES);
    chunk_dense_lost(p->chunk, true);
    for (unsigned i = 0; i < os_pages;) {
        if (!(add & (1u << i))) {
            i++;
            continue;
        }
        unsigned n = 1;
        while (i + n < os_pages && (add & (1u << (i + n))))
            n++;
        os_purge_batch_add(batch, p->start + (size_t)i * OS_PAGE_SIZE, (size_t)n * OS_PAGE_SIZE);
        i += n;
    }
}

/* Beyond the carved blocks of a page that took a resident slot: old pages, queued as
 * reclaim_small_page's holes are. */
TEXT_BUSY
static void purge_tail(const chunk_t *c, page_t *page, struct os_purge_batch *batch)
{
    page->tail_resident = false;
    size_t carved = (size_t)page->capacity * page->block_size;
    carved = (carved + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    if (carved >= page_size_of(c))
        return;
    chunk_dense_lost(c, true);
    os_purge_batch_add(batch, page->start + carved, page_size_of(c) - carved);
}

/* The purger holds the heap (claimed, owner not inside): nothing of it moves but remote
 * frees, which only touch xthread_free (left alone here). */
static size_t reclaim_one_heap(heap_t *heap, enum os_purge how)
{
    size_t bytes = 0;
    struct os_purge_batch batch;
    os_purge_batch_init(&batch, how);
    /* Full pages that other threads freed into: collected here as the owner would at its
     * next allocation, which an idle heap (or the shared late heap) may never make. */
    if (atomic_load_explicit(&heap->full_has_xfree, memory_order_seq_cst))
        heap_rescue_full(heap, false);
    /* its cached extents: back to the shared runs, which purge them after purge_delay */
    extent_cache_flush(heap);
    for (int k = 0; k < 2; k++)
        for (chunk_t *c = heap->chunks[k].first; c; c = c->next) {
            for (unsigned i = 0; i < c->npages; i++) {
                page_t *p = &c->pages[i];
                if (atomic_load_explicit(&p->in_use, memory_order_acquire) != PAGE_USED)
                    continue;
                if (p->cls == SPLIT_CLS) {
                    bytes += reset_split_slot(heap, c, p, how);
                    continue;
                }
                /* Other threads' frees, as the owner would take them (not a full page's,
                 * which the owner rescues by looking at xthread_free). */
                if (!(p->flags & PAGE_IN_FULL))
                    page_collect(p);
                if (p->used == 0) {
                    bytes += page_reset_empty(heap, c, p, how);
                    continue;
                }
                if (p->tail_resident)
                    purge_tail(c, p, &batch);
                reclaim_small_page(heap, p, &batch);
            }
        }
    /* still claimed: the owner waits for the holes to be gone before it refills them */
    return bytes + os_purge_batch_flush(&batch);
}

struct pick {
    uint32_t now, delay, next, pass;
    bool force;
    unsigned n, skipped;
    heap_t *heap[RECLAIM_BATCH];
};

/* Under the heaps lock: claims the heaps idle for purge_delay that changed since their
 * last reclaim (every heap with force). */
TEXT_WARM
static void pick_heap(heap_t *h, void *arg)
{
    struct pick *k = arg;
    if (h->reclaim_pass == k->pass)
        return; /* looked at in this call already */
    uint32_t ops = __atomic_load_n(&h->slow_ops, __ATOMIC_RELAXED);
    if (ops != h->seen_ops) {
        h->seen_ops = ops;
        h->seen_at = k->now;
    }
    if (!k->force) {
        /* nothing new since the last reclaim (but other threads' frees into its full pages,
         * which only a reclaim takes while the owner makes no slow-path call) */
        if (h->reclaimed && h->reclaimed_ops == ops &&
            !atomic_load_explicit(&h->full_has_xfree, memory_order_relaxed))
            return;
        uint32_t idle = k->now - h->seen_at;
        if (idle < k->delay) {
            uint32_t due = h->seen_at + k->delay;
            if (k->next == 0 || (int32_t)(due - k->next) < 0)
                k->next = due;
            return;
        }
    }
    if (k->n == RECLAIM_BATCH) {
        k->skipped++;
        return;
    }
    h->reclaim_pass = k->pass;
    atomic_store_explicit(&h->claimed, 1, memory_order_relaxed);
    k->heap[k->n++] = h;
}

static void claim_release(heap_t *h)
{
    if (atomic_exchange_explicit(&h->claimed, 0, memory_order_release) == 2)
        os_wake_all(&h->claimed); /* the owner sleeps in heap_wait_unclaimed */
}

static bool barrier_ready(void)
{
    if (barrier_state == 0)
        barrier_state = os_barrier_register() ? 1 : -1;
    return barrier_state > 0;
}

/* The purger gives back the free memory inside the pages of heaps
 * that have been idle for purge_delay (all heaps with force): empty pages a heap keeps
 * for its next allocation, and the OS pages inside free blocks of 8 KiB and more. Returns
 * the bytes purged and sets *next to when it wants to look again (0: not until woken). */
TEXT_WARM
size_t reclaim_idle_heaps(uint32_t now, bool force, uint32_t *next)
{
    *next = 0;
    long delay = purge_delay();
    /* purge_delay = never: only thpalloc_purge() (force) */
    if ((purge_never() && !force) || purge_chunks_whole())
        return 0;
    pthread_mutex_lock(&reclaim_lock);
    if (!barrier_ready()) {
        pthread_mutex_unlock(&reclaim_lock);
        return 0;
    }
    size_t bytes = 0;
    struct pick k;
    k.now = now;
    k.delay = delay < RECLAIM_MIN_PERIOD_MS ? RECLAIM_MIN_PERIOD_MS : (uint32_t)delay;
    k.next = 0;
    k.force = force;
    k.pass = ++pass ? pass : ++pass; /* never 0, the value of a fresh heap */
    do {
        k.n = k.skipped = 0;
        thread_foreach_heap(pick_heap, &k);
        if (k.n == 0)
            break;
        /* Every owner that had not seen claimed now shows busy if it is inside. Let the
         * busy ones go at once (they are working: look again later), then do the others,
         * each let go as soon as it is done. */
        bool fenced = os_barrier();
        for (unsigned i = 0; i < k.n; i++) {
            heap_t *h = k.heap[i];
            if (fenced && !atomic_load_explicit(&h->busy, memory_order_acquire))
                continue;
            k.heap[i] = NULL;
            claim_release(h);
            uint32_t due = now + k.delay;
            if (k.next == 0 || (int32_t)(due - k.next) < 0)
                k.next = due;
        }
        for (unsigned i = 0; i < k.n; i++) {
            heap_t *h = k.heap[i];
            if (!h)
                continue;
            bytes += reclaim_one_heap(h, purge_how());
            chunk_dirty_fold(h); /* idle: its credit would keep the purger looking */
            h->reclaimed = true;
            h->reclaimed_ops = __atomic_load_n(&h->slow_ops, __ATOMIC_RELAXED);
            claim_release(h);
        }
        if (!fenced)
            break;
    } while (k.skipped);
    pthread_mutex_unlock(&reclaim_lock);
    if (bytes)
        atomic_fetch_add_explicit(&stat_purged, bytes, memory_order_relaxed);
    *next = k.next;
    return bytes;
}

/* ---- on demand: the chunks of idle heaps that other threads emptied ----------------------
 * A thread that allocates, then waits while others free what it allocated (a dispatcher
 * handing work items to workers) keeps chunks whose every block is free, in remote-free
 * lists nobody collects until the purger comes after purge_delay. A heap about to take a
 * chunk from the arena first claims such heaps (the same handshake), collects their frees
 * and gives back what they emptied: a chunk without a block goes to the arena, which hands
 * the caller one of them, resident, instead of a fresh one; an empty page goes back to its
 * chunk and is purged at once, ahead of purge_delay. */

struct pick_emptied {
    heap_t *self;
    unsigned n;
    heap_t *heap[RECLAIM_BATCH];
};

/* Some page of c has frees from other threads waiting (racy: a hint). */
static bool chunk_has_xfree(chunk_t *c)
{
    for (unsigned i = 0; i < chunk_page_count(c); i++) {
        page_t *p = chunk_page(c, i);
        if (page_has_blocks(p, memory_order_relaxed) &&
            atomic_load_explicit(&p->xthread_free, memory_order_relaxed))
            return true;
    }
    return false;
}

/* Under the heaps lock (and reclaim_lock): claims the heaps outside the allocator whose
 * chunks other threads have freed into. */
static void pick_emptied(heap_t *h, void *arg)
{
    struct pick_emptied *k = arg;
    if (h == k->self || k->n == RECLAIM_BATCH ||
        atomic_load_explicit(&h->busy, memory_order_relaxed) ||
        atomic_load_explicit(&h->claimed, memory_order_relaxed) ||
        (!h->chunks[0].first && !h->chunks[1].first))
        return;
    /* Racy, as the owner may enter meanwhile: descriptors are never unmapped, and the walk
     * is bounded. */
    bool hint = atomic_load_explicit(&h->full_has_xfree, memory_order_relaxed);
    unsigned looked = 0;
    for (int kind = 0; kind < 2 && !hint; kind++)
        for (chunk_t *c = h->chunks[kind].first; c && !hint && looked < 64; c = c->next, looked++)
            hint = chunk_has_xfree(c);
    if (!hint)
        return;
    atomic_store_explicit(&h->claimed, 1, memory_order_relaxed);
    k->heap[k->n++] = h;
}

/* Collects the other threads' frees into c's pages (h claimed). Returns whether every block
 * of c is free. */
static bool chunk_collect(chunk_t *c)
{
    bool empty = true;
    for (unsigned i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i)) {
        page_t *p = chunk_page(c, i);
        if (!page_has_blocks(p, memory_order_acquire))
            continue;
        if (!(p->flags & PAGE_IN_FULL))
            page_collect(p);
        if (p->used)
            empty = false;
    }
    return empty;
}

/* Frees the pages of c (h claimed) that hold no block, but one that is all its class has,
 * which the owner keeps (heap_page_retire); all of them, and c with them, when every == true.
 * Returns whether c went back to the arena. */
static bool free_empty_pages(heap_t *h, chunk_t *c, bool every)
{
    for (unsigned i = 0; i < chunk_page_count(c);) {
        page_t *p = chunk_page(c, i);
        page_queue_t *q = &h->queues[p->cls];
        if (!page_has_blocks(p, memory_order_relaxed) || p->used || (!every && page_alone(q, p))) {
            i++;
            continue;
        }
        unsigned before = chunk_page_count(c);
        page_unlink(h, p);
        if (chunk_page_free(every ? NULL : h, p))
            return true;
        /* a split slot's last sub-page frees the slot, and its sub-pages leave the count:
         * look at the same index again */
        if (chunk_page_count(c) == before)
            i++;
    }
    return false;
}

/* Gives back what other threads' frees emptied in h (claimed), as its owner would at its
 * next allocation and more: a chunk with no block left goes to the arena, a page with none
 * back to its chunk, and the chunk's empty slots are purged at once (the owner is idle, and
 * the caller is about to touch a fresh chunk: the peak stays where it was). */
static void release_emptied(heap_t *h)
{
    /* No chunk: an exiting thread's heap, abandoned already (its queues are stale). */
    if (!h->chunks[0].first && !h->chunks[1].first)
        return;
    if (atomic_load_explicit(&h->full_has_xfree, memory_order_seq_cst))
        heap_rescue_full(h, false);
    for (int kind = 0; kind < 2; kind++) {
        chunk_t *cn;
        for (chunk_t *c = h->chunks[kind].first; c; c = cn) {
            cn = c->next;
            if (chunk_collect(c)) {
                /* Off the heap's list first: chunk_page_free without a heap neither keeps it as
                 * the heap's last chunk nor looks at the list. */
                DLIST_REMOVE(&h->chunks[kind], c);
                c->next = c->prev = NULL;
                if (free_empty_pages(h, c, true))
                    continue;
                /* Already without a page (the heap's kept last chunk): it goes now. */
                LIB_ASSERT(c->pages_used == 0);
                if (c->pages_used == 0)
                    chunk_release(c);
                else
                    DLIST_PUSH_FRONT(&h->chunks[kind], c);
                continue;
            }
            if (!free_empty_pages(h, c, false) &&
                atomic_load_explicit(&c->ndirty, memory_order_relaxed))
                chunk_purge_dirty(c);
        }
    }
}

/* For a heap about to take a chunk from the arena (chunk_new_prepare): what other threads'
 * frees emptied in heaps outside the allocator goes back first (whole chunks to the arena,
 * pages to their chunks, purged). Nothing while the process has one heap. */
void reclaim_emptied_chunks(heap_t *self)
{
    if (thread_heap_count(true) < 2 || purge_chunks_whole() || pthread_mutex_trylock(&reclaim_lock))
        return; /* the purger is at work: it does this and more */
    if (!barrier_ready()) {
        pthread_mutex_unlock(&reclaim_lock);
        return;
    }
    struct pick_emptied k;
    k.self = self;
    k.n = 0;
    thread_foreach_heap(pick_emptied, &k);
    if (k.n) {
        bool fenced = os_barrier();
        for (unsigned i = 0; i < k.n; i++) {
            heap_t *h = k.heap[i];
            if (fenced && !atomic_load_explicit(&h->busy, memory_order_acquire))
                release_emptied(h);
            claim_release(h);
        }
    }
    pthread_mutex_unlock(&reclaim_lock);
}

/* An abandoned chunk, off the list (nobody else touches its pages' lists): what is free in it
 * goes back. Returns false when the chunk itself went back to the arena. */
TEXT_BUSY
static bool reclaim_one_abandoned(chunk_t *c, enum os_purge how, size_t *bytes)
{
    struct os_purge_batch batch;
    os_purge_batch_init(&batch, how);
    c->orphan = true; /* waited long enough: purged at once when it empties */
    for (unsigned i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i)) {
        page_t *p = chunk_page(c, i);
        if (!page_has_blocks(p, memory_order_relaxed))
            continue;
        page_collect(p);
        if (p->used == 0) {
            /* the holes queued first: the chunk may go back to the arena with this page,
             * and another thread's chunk be there before a later flush */
            *bytes += os_purge_batch_flush(&batch);
            os_purge_batch_init(&batch, how);
            if (chunk_page_free(NULL, p))
                return false; /* the chunk went with its last page */
            continue;
        }
        if (page_is_sub(p))
            continue; /* its OS pages are shared with other sub-pages */
        if (p->tail_resident)
            purge_tail(c, p, &batch);
        reclaim_small_page(NULL, p, &batch);
    }
    /* still off the list: nobody takes its pages before this */
    *bytes += os_purge_batch_flush(&batch);
    chunk_purge_dirty(c);
    return true;
}

/* The same for the chunks of exited threads that nobody adopted within purge_delay: empty
 * pages freed (the chunk with the last, purged at once), the free OS pages of the others
 * (holes), dirty slots purged. */
size_t reclaim_abandoned(uint32_t now, bool force, uint32_t *next)
{
    if (purge_chunks_whole()) {
        *next = 0;
        return 0;
    }
    chunk_queue_t due = {NULL, NULL};
    if (!abandoned_take_due(now, force, next, &due))
        return 0;
    size_t bytes = 0;
    chunk_t *cn;
    for (chunk_t *c = due.first; c; c = cn) {
        cn = c->next;
        c->next = c->prev = NULL;
        if (reclaim_one_abandoned(c, purge_how(), &bytes))
            abandoned_put_back(c, now); /* live blocks: adoptable still, looked at later */
    }
    if (bytes)
        atomic_fetch_add_explicit(&stat_purged, bytes, memory_order_relaxed);
    return bytes;
}

/* No claim may be held across fork: the child has no purger to release it. */
TEXT_BUSY
void reclaim_fork(enum fork_phase phase)
{
    fork_mutex(&reclaim_lock, phase);
    if (phase == FORK_CHILD)
        barrier_state = 0; /* the child is a new mm: register again (registering twice is fine) */
}
