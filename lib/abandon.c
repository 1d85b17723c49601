/* abandon: the chunks of exited threads. At thread exit a heap gives back its empty pages
 * and chunks and puts the chunks that still hold live blocks on the abandoned list, owned
 * by nobody; the next heap that needs a page adopts one, and so does a thread that frees
 * into one (the memory of exited threads comes back even when the freeing thread allocates
 * nothing more). */
#include "internal.h"
#include "list.h"

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk_queue_t abandoned;
static _Atomic size_t abandoned_count;

/* Takes c off the abandoned list (abandoned_lock held). */
static void abandoned_unlink(chunk_t *c)
{
    DLIST_REMOVE(&abandoned, c);
    atomic_store_explicit(&c->abandoned, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
}

/* Makes heap the owner of c: its pages join the heap's queues, empty ones are freed. */
static void adopt_chunk(heap_t *heap, chunk_t *c)
{
    atomic_store_explicit(&c->owner, heap, memory_order_release);
    enum chunk_kind kind = (enum chunk_kind)c->kind;
    DLIST_PUSH_FRONT(&heap->chunks[kind], c);
    for (unsigned i = 0; i < c->npages; i++) {
        page_t *p = &c->pages[i];
        if (atomic_load_explicit(&p->in_use, memory_order_relaxed) != PAGE_USED)
            continue;
        page_set_flags(p, heap, p->flags);
        p->alloc_seen = false; /* kept by this heap only once it allocates from it */
        page_collect(p);
        if (p->used == 0) {
            /* page_free may release the chunk with its last page: stop looking then. */
            bool last = c->pages_used == 1;
            page_free(heap, p);
            if (last)
                break;
            continue;
        }
        page_queue_push_back(&heap->queues[p->cls], p);
        direct_update(heap, p->cls);
    }
}

/* Takes one chunk that an exited thread left behind. Returns false when there is none. */
bool abandoned_adopt_one(heap_t *heap)
{
    if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&abandoned_lock);
    chunk_t *c = abandoned.first;
    if (c)
        abandoned_unlink(c);
    pthread_mutex_unlock(&abandoned_lock);
    if (!c)
        return false;
    adopt_chunk(heap, c);
    return true;
}

/* A thread frees into a chunk nobody owns: it takes the chunk, so that the memory of exited
 * threads comes back even when the freeing thread allocates nothing more. */
bool abandoned_adopt_freed(heap_t *heap, chunk_t *c)
{
    pthread_mutex_lock(&abandoned_lock);
    bool mine = atomic_load_explicit(&c->abandoned, memory_order_relaxed);
    if (mine)
        abandoned_unlink(c);
    pthread_mutex_unlock(&abandoned_lock);
    if (mine)
        adopt_chunk(heap, c);
    return mine;
}

/* At thread exit: gives back the heap's empty pages and chunks, and puts the chunks with
 * live blocks on the abandoned list. */
void heap_abandon(heap_t *heap)
{
    /* Give back every page that is empty once remote frees are counted. */
    for (unsigned cls = 1; cls < SC_COUNT; cls++) {
        page_t *next;
        for (page_t *p = heap->queues[cls].first; p; p = next) {
            next = p->next;
            page_collect(p);
            if (p->used == 0) {
                page_queue_remove(&heap->queues[cls], p);
                page_free(heap, p);
            }
        }
    }
    page_t *next;
    for (page_t *p = heap->full.first; p; p = next) {
        next = p->next;
        page_collect(p);
        if (p->used == 0) {
            page_queue_remove(&heap->full, p);
            page_free(heap, p);
        }
    }
    /* What is left has live blocks: hand the chunks to whoever allocates next. */
    for (int kind = CHUNK_SMALL; kind <= CHUNK_BIG; kind++) {
        chunk_t *cn;
        for (chunk_t *c = heap->chunks[kind].first; c; c = cn) {
            cn = c->next;
            if (c->pages_used == 0) {
                chunk_release(c); /* the empty chunk page_free keeps */
                continue;
            }
            for (unsigned i = 0; i < c->npages; i++) {
                page_t *p = &c->pages[i];
                p->next = p->prev = NULL;
                page_set_flags(p, NULL, p->flags & (uint8_t)~PAGE_IN_FULL); /* no owner now */
                atomic_store_explicit(&p->in_full, 0, memory_order_relaxed);
            }
            atomic_store_explicit(&c->owner, NULL, memory_order_release);
            pthread_mutex_lock(&abandoned_lock);
            DLIST_PUSH_FRONT(&abandoned, c);
            atomic_store_explicit(&c->abandoned, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
            pthread_mutex_unlock(&abandoned_lock);
        }
        heap->chunks[kind].first = heap->chunks[kind].last = NULL;
    }
}

void abandon_fork_prepare(void)
{
    pthread_mutex_lock(&abandoned_lock);
}

void abandon_fork_parent(void)
{
    pthread_mutex_unlock(&abandoned_lock);
}

void abandon_fork_child(void)
{
    pthread_mutex_init(&abandoned_lock, NULL);
}
