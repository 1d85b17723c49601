/* thread: the heaps' lives. A heap for each thread at its first allocation: a parked heap
 * of an exited thread, else one from a free list of recycled heaps; the shared late heap of
 * threads past their exit destructor; thread exit (the heap is parked whole, or abandons its
 * chunks and is recycled); the list of heaps the purger walks; fork. The pages and chunks
 * inside a heap are heap.c's. */
#include "thread.h"

#include <errno.h>
#include <string.h>

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *heaps_all, *heaps_free;
static size_t heaps_live; /* heaps of live threads (the late heap too), not the parked ones */

/* Parked heaps: an exiting thread's heap kept whole (chunks, pages, queues, direct slots),
 * oldest first, for the next new thread to take as it stands, the most recent first. A
 * thread that lives a few allocations no longer abandons its chunks page by page at exit
 * and has the next thread adopt them page by page again. To everyone else a parked heap is
 * the heap of an idle thread: in use, frees into it remote ones, the purger reclaiming it
 * after purge_delay (reclaim.c), release_emptied giving back what others emptied in it. A
 * heap whose own chunks are full takes the oldest parked heap apart before it takes a new
 * chunk (thread_unpark_abandon), so that a process whose threads exit for good reuses their
 * memory as with abandoned chunks; and one that no thread took within purge_delay is taken
 * apart by the purger (thread_unpark_due), its chunks then abandoned ones, reclaimed and
 * given back as they were before heaps were parked. At most PARKED_MAX: beyond, exits
 * abandon as before. */
#define PARKED_MAX 16
struct parking {
    heap_t *heap[PARKED_MAX];
    uint32_t at[PARKED_MAX]; /* ms clock when each was parked */
    unsigned n;
};
/* From the meta pool at the first park; only the pointer is a global, in .data beside the
 * other globals every process writes: .bss's first page, written by every process, was
 * full, and three more of its words moved some of them to a page of their own (one more
 * page in every idle thread-using process). */
static struct parking *parking __attribute__((section(".data")));

/* Threads past their heap's exit destructor share one heap, under late_lock: a heap of
 * their own would never be abandoned when the allocation comes in glibc's last destructor
 * pass (a 2 MiB chunk lost per thread). Their frees take the cross-thread path, and the
 * purger reclaims the shared heap like any idle one. Lock order: late_lock, heaps_lock. */
static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *late_heap;

/* The key whose destructor abandons a thread's heap at its exit. */
static pthread_key_t heap_key;
static bool heap_key_ok; /* false when the process ran out of keys: heaps then outlive threads */

static bool thread_unpark_abandon(void);

/* The thread-exit key (init, once; no allocation). */
void thread_key_init(void)
{
    /* Does not allocate: glibc keeps the first keys in static storage. */
    heap_key_ok = pthread_key_create(&heap_key, thread_heap_exit) == 0;
}

/* A heap from the free list or the meta pool, set up and counted; NULL when out of memory. */
static heap_t *heap_new(void)
{
    pthread_mutex_lock(&heaps_lock);
    if (parking && parking->n) {
        /* the newest: its pages the hottest; in use all along, nothing to set up */
        heap_t *heap = parking->heap[--parking->n];
        heaps_live++;
        pthread_mutex_unlock(&heaps_lock);
        return heap;
    }
    heap_t *heap = heaps_free;
    if (heap) {
        heaps_free = heap->next_free;
    } else {
        heap = meta_alloc(sizeof(heap_t));
        if (heap) {
            heap->next_all = heaps_all;
            heaps_all = heap;
        }
    }
    if (heap) {
        /* Set up under the lock: the purger looks at heaps in use under it. */
        if (++heaps_live > 1)
            atomic_store_explicit(&extent_heap_second_made, 1, memory_order_relaxed);
        heap_t *keep_next = heap->next_all;
        memset(heap, 0, sizeof *heap);
        heap->next_all = keep_next;
        for (size_t i = 0; i < DIRECT_SLOTS; i++)
            heap->direct[i] = &page_empty;
        heap->in_use = true;
    }
    pthread_mutex_unlock(&heaps_lock);
    if (!heap)
        errno = ENOMEM;
    return heap;
}

/* The calling thread's new heap (tl_heap, and the exit destructor armed). */
heap_t *thread_heap_create(void)
{
    heap_t *heap = heap_new();
    if (!heap)
        return NULL;
    tl_heap = heap;
    /* The key's destructor abandons the heap at thread exit. */
    if (heap_key_ok)
        pthread_setspecific(heap_key, heap);
    return heap;
}

/* A small block for a thread past its exit destructor, from the shared late heap. */
TEXT_WARM
void *thread_late_malloc(size_t size, bool zero)
{
    pthread_mutex_lock(&late_lock);
    if (!late_heap)
        late_heap = heap_new();
    void *p = late_heap ? heap_malloc_small(late_heap, size, zero) : NULL;
    pthread_mutex_unlock(&late_lock);
    return p;
}

/* Marks a page of the calling thread's heap (or of the shared late heap, for a thread past
 * its exit destructor) as holding aligned blocks, inside the reclaim handshake. */
TEXT_BUSY
void thread_page_set_aligned(page_t *page)
{
    heap_t *heap = tl_heap;
    bool late = heap == &heap_exited;
    if (late) {
        pthread_mutex_lock(&late_lock);
        heap = late_heap; /* the block came from it: thread_late_malloc set it up */
    }
    heap_enter(heap);
    page_set_flags(page, NULL, page->flags | PAGE_HAS_ALIGNED);
    heap_leave(heap);
    if (late)
        pthread_mutex_unlock(&late_lock);
}

/* The heap of a thread that is gone abandons its chunks and goes to the free list (its
 * thread's exit, or a parked heap taken apart). TEXT_BUSY with abandon.c: a thread's exit
 * parks its heap, and only a process with more than PARKED_MAX threads gone at once, or one
 * whose parked heaps outlive purge_delay, takes heaps apart. */
TEXT_BUSY
static void heap_retire(heap_t *heap)
{
    heap_enter(heap);
    extent_cache_flush(heap);
    abandon_heap(heap);
    heap_leave(heap);
    pthread_mutex_lock(&heaps_lock);
    heap->in_use = false; /* the purger claims no more: it picks heaps in use, under the lock */
    pthread_mutex_unlock(&heaps_lock);
    /* A claim taken before that may still be held: the heap is recycled only once it is let
     * go (thread_heap_create's memset would otherwise clear a claim the purger still works under).
     */
    heap_wait_unclaimed(heap);
    pthread_mutex_lock(&heaps_lock);
    heap->next_free = heaps_free;
    heaps_free = heap;
    pthread_mutex_unlock(&heaps_lock);
}

void thread_heap_exit(void *arg)
{
    heap_t *heap = arg;
    if (!heap || heap == &heap_empty || heap == &heap_exited || !heap->in_use)
        return;
    tl_heap = &heap_exited;
    /* Its cached extents go back to the shared runs either way: a parked heap is not their
     * next user's sooner than the runs are. */
    heap_enter(heap);
    extent_cache_flush(heap);
    heap_park_kept(heap);
    chunk_dirty_fold(heap); /* parked: its credit would count until it is taken again */
    heap_leave(heap);
    pthread_mutex_lock(&heaps_lock);
    heaps_live--;
    if (!parking)
        parking = meta_alloc(sizeof *parking); /* NULL: this heap is retired as before */
    if (parking && parking->n < PARKED_MAX) {
        /* set at the first park, not at init: a process whose threads never exit does not
         * write its page */
        heap_unpark = thread_unpark_abandon;
        parking->at[parking->n] = now_ms();
        parking->heap[parking->n++] = heap;
        pthread_mutex_unlock(&heaps_lock);
        purge_note_dirty(); /* a pass comes back for it after purge_delay (thread_unpark_due) */
        return;
    }
    pthread_mutex_unlock(&heaps_lock);
    heap_retire(heap);
}

/* For a heap whose chunks are full (heap_find_page): the oldest parked heap abandons its
 * chunks, for the caller to adopt. False when none is parked. */
TEXT_BUSY
static bool thread_unpark_abandon(void)
{
    pthread_mutex_lock(&heaps_lock);
    heap_t *heap = parking && parking->n ? parking->heap[0] : NULL;
    if (heap) {
        parking->n--;
        memmove(&parking->heap[0], &parking->heap[1], parking->n * sizeof parking->heap[0]);
        memmove(&parking->at[0], &parking->at[1], parking->n * sizeof parking->at[0]);
    }
    pthread_mutex_unlock(&heaps_lock);
    if (!heap)
        return false;
    heap_retire(heap);
    return true;
}

/* The purger's: the heaps parked for purge_delay (all with force) abandon their chunks.
 * Returns when the next is due (0: none parked, or purge_delay = never without force). */
uint32_t thread_unpark_due(uint32_t now, bool force)
{
    if (purge_never() && !force)
        return 0;
    for (;;) {
        pthread_mutex_lock(&heaps_lock);
        /* the oldest first: a heap taken for a new thread leaves the others in order */
        heap_t *heap = NULL;
        uint32_t next = 0;
        if (!parking) {
            pthread_mutex_unlock(&heaps_lock);
            return 0;
        }
        if (parking->n && purge_is_due(parking->at[0], now, force, &next)) {
            heap = parking->heap[0];
            parking->n--;
            memmove(&parking->heap[0], &parking->heap[1], parking->n * sizeof parking->heap[0]);
            memmove(&parking->at[0], &parking->at[1], parking->n * sizeof parking->at[0]);
        }
        pthread_mutex_unlock(&heaps_lock);
        if (!heap)
            return next;
        heap_retire(heap);
    }
}

/* For the statistics: the other threads' frees into the parked heaps' pages collected, as
 * their next owner would, so that the bytes in use are exact as they were when exited
 * threads' frees went into abandoned chunks in place. The heaps are taken off the list
 * while this works on them (a new thread meanwhile makes a heap of its own). */
TEXT_COLD
void thread_collect_parked(void)
{
    heap_t *h[PARKED_MAX];
    uint32_t at[PARKED_MAX];
    pthread_mutex_lock(&heaps_lock);
    if (!parking) {
        pthread_mutex_unlock(&heaps_lock);
        return;
    }
    unsigned n = parking->n;
    memcpy(h, parking->heap, n * sizeof h[0]);
    memcpy(at, parking->at, n * sizeof at[0]);
    parking->n = 0;
    pthread_mutex_unlock(&heaps_lock);
    for (unsigned i = 0; i < n; i++) {
        heap_enter(h[i]); /* a purger's claim is waited out */
        if (atomic_load_explicit(&h[i]->full_has_xfree, memory_order_seq_cst))
            heap_rescue_full(h[i], false);
        for (unsigned cls = 1; cls < SMALL_CLASSES; cls++)
            for (page_t *p = h[i]->queues[cls].first; p; p = p->next)
                page_collect(p);
        heap_leave(h[i]);
    }
    /* Back in front of those parked meanwhile (they are older); what finds no room is
     * taken apart. */
    pthread_mutex_lock(&heaps_lock);
    unsigned keep = n < PARKED_MAX - parking->n ? n : PARKED_MAX - parking->n;
    memmove(&parking->heap[keep], &parking->heap[0], parking->n * sizeof parking->heap[0]);
    memmove(&parking->at[keep], &parking->at[0], parking->n * sizeof parking->at[0]);
    memcpy(parking->heap, &h[n - keep], keep * sizeof h[0]);
    memcpy(parking->at, &at[n - keep], keep * sizeof at[0]);
    parking->n += keep;
    pthread_mutex_unlock(&heaps_lock);
    for (unsigned i = 0; i < n - keep; i++)
        heap_retire(h[i]);
}

/* Calls fn for every heap in use, under the heaps lock (fn must not allocate). */
void thread_foreach_heap(void (*fn)(heap_t *heap, void *arg), void *arg)
{
    pthread_mutex_lock(&heaps_lock);
    for (heap_t *h = heaps_all; h; h = h->next_all)
        if (h->in_use)
            fn(h, arg);
    pthread_mutex_unlock(&heaps_lock);
}

size_t thread_heap_count(bool with_parked)
{
    pthread_mutex_lock(&heaps_lock);
    size_t n = heaps_live + (with_parked && parking ? parking->n : 0);
    pthread_mutex_unlock(&heaps_lock);
    return n;
}

/* The late lock before the heaps lock (the order they nest in); released in reverse. */
TEXT_BUSY
void thread_fork(enum fork_phase phase)
{
    if (phase == FORK_PREPARE)
        fork_mutex(&late_lock, phase);
    fork_mutex(&heaps_lock, phase);
    if (phase != FORK_PREPARE)
        fork_mutex(&late_lock, phase);
    if (phase != FORK_CHILD)
        return;
    /* The other threads' heaps stay as they were: they may have been mid-update when the
     * parent forked, so the child neither adopts nor frees them (their memory is lost to
     * the child only; fork is mostly followed by exec). */
    /* Nor does the purger reclaim them: mark them reclaimed with nothing new since (their
     * owners are gone, so that stays true), instead of claiming them forever, or working
     * on one that was mid-update. */
    for (heap_t *h = heaps_all; h; h = h->next_all) {
        if (h->in_use && h != tl_heap) {
            h->reclaimed = true;
            h->reclaimed_ops = h->slow_ops;
        }
    }
    heap_forget_kept(tl_heap); /* the sentinels have empty queues: nothing written */
    /* Parked heaps were whole when the parent forked (parked and taken under the lock):
     * the child's new threads take them, and their kept pages are trimmed again. */
    for (unsigned i = 0; parking && i < parking->n; i++)
        heap_forget_kept(parking->heap[i]);
}
