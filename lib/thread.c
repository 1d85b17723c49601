/* thread: the heaps' lives. A heap for each thread at its first
 * allocation, from a free list of recycled heaps; the shared late heap of threads past their
 * exit destructor; thread exit (the heap abandons its chunks and is recycled); the list of
 * heaps the purger walks; fork. The pages and chunks inside a heap are heap.c's. */
#include "internal.h"

#include <errno.h>
#include <string.h>

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *heaps_all, *heaps_free;
static size_t heaps_live;

/* Threads past their heap's exit destructor share one heap, under late_lock: a heap of
 * their own would never be abandoned when the allocation comes in glibc's last destructor
 * pass (a 2 MiB chunk lost per thread). Their frees take the cross-thread path, and the
 * purger reclaims the shared heap like any idle one. Lock order: late_lock, heaps_lock. */
static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *late_heap;

/* The key whose destructor abandons a thread's heap at its exit. */
static pthread_key_t heap_key;
static bool heap_key_ok; /* false when the process ran out of keys: heaps then outlive threads */

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
            atomic_store_explicit(&heap_second_made, 1, memory_order_relaxed);
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

void thread_heap_exit(void *arg)
{
    heap_t *heap = arg;
    if (!heap || heap == &heap_empty || heap == &heap_exited || !heap->in_use)
        return;
    tl_heap = &heap_exited;
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
    heaps_live--;
    pthread_mutex_unlock(&heaps_lock);
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

size_t thread_heap_count(void)
{
    pthread_mutex_lock(&heaps_lock);
    size_t n = heaps_live;
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
}
