/* abandon: the chunks of exited threads. When an exited thread's parked heap is taken apart
 * (thread.c: a full heap needs a chunk, purge_delay passed, thpalloc_purge, too many parked)
 * it puts every chunk it owns on the abandoned list as it stands, owned by nobody: its pages keep
 * their class and their carved free blocks, empty or not. The next heap that needs a page and has
 * no room in its own chunks adopts the most recent one whole, and so reuses exactly the memory the
 * exited thread had touched (a page at a time on fresh slots instead spread the next owner's pages
 * over every slot any owner had used, all of it resident; giving it back at exit cost a page
 * fault for each OS page the next thread touched). Frees into an abandoned chunk are done in
 * place, under the abandoned lock, so the chunk stays whole for the next thread and the
 * bytes in use stay exact. What nobody adopts within purge_delay the purger gives back
 * (reclaim_abandoned, reclaim.c): free pages and OS pages, and the chunk once it is empty. */
#include "abandon.h"
#include "list.h"

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk_queue_t abandoned;
static _Atomic size_t abandoned_count;

/* TEXT_BUSY: what only a process whose parked heaps are taken apart runs (thread.c,
 * heap_retire), kept off the text every small process maps (lib/README.md). */

/* Takes c off the abandoned list (abandoned_lock held). */
TEXT_BUSY
static void abandoned_unlink(chunk_t *c)
{
    atomic_fetch_sub_explicit(&stat_pages_dirty, c->abandoned_idle, memory_order_relaxed);
    c->abandoned_idle = 0;
    DLIST_REMOVE(&abandoned, c);
    atomic_store_explicit(&c->abandoned, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
}

/* Puts c on the abandoned list (most recent first: the hottest for the next adopter). The
 * free blocks of its pages count as waiting to be purged (stat_pages_dirty), so that the
 * purger comes for them when nobody adopts the chunk. */
TEXT_BUSY
static void abandoned_push(chunk_t *c, uint32_t now)
{
    size_t idle = 0;
    for (unsigned i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i)) {
        page_t *p = chunk_page(c, i);
        if (page_has_blocks(p, memory_order_relaxed))
            idle += (size_t)(p->capacity - p->used) * p->block_size;
    }
    c->abandoned_idle = (uint32_t)idle;
    atomic_fetch_add_explicit(&stat_pages_dirty, idle, memory_order_relaxed);
    c->abandoned_at = now;
    pthread_mutex_lock(&abandoned_lock);
    DLIST_PUSH_FRONT(&abandoned, c);
    atomic_store_explicit(&c->abandoned, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&abandoned_lock);
}

/* Makes heap the owner of c: its pages, empty ones too, join the heap's queues. */
static void adopt_chunk(heap_t *heap, chunk_t *c)
{
    atomic_store_explicit(&c->owner, heap, memory_order_release);
    DLIST_PUSH_FRONT(heap_chunks(heap, c), c);
    for (unsigned i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i)) {
        page_t *p = chunk_page(c, i);
        if (!page_has_blocks(p, memory_order_relaxed))
            continue;
        page_set_flags(p, heap, p->flags);
        p->alloc_seen = false; /* kept by this heap only once it allocates from it */
        page_collect(p);
        page_queue_push_back(&heap->queues[p->cls], p);
        page_queue_direct_update(heap, p->cls);
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

/* A free into an abandoned chunk, done in place (true), unless it was adopted meanwhile. */
TEXT_BUSY
bool abandoned_free(chunk_t *c, page_t *page, block_t *b)
{
    pthread_mutex_lock(&abandoned_lock);
    bool mine = atomic_load_explicit(&c->abandoned, memory_order_relaxed);
    if (mine) {
        /* nobody owns c while it is on the list: its lists are ours under the lock */
        if (unlikely(block_mark_free(b)))
            lib_fatal("free(): double free detected", b);
        block_set_next(b, page->local_free);
        page->local_free = b;
        page->used--;
    }
    bool emptied = mine && page->used == 0;
    pthread_mutex_unlock(&abandoned_lock);
    /* A chunk put back with live blocks is looked at again only when something says so:
     * a page of it emptied is worth a look after purge_delay. */
    if (emptied)
        purge_note_dirty();
    return mine;
}

/* At thread exit: puts the heap's chunks on the abandoned list as they stand. */
TEXT_BUSY
void abandon_heap(heap_t *heap)
{
    uint32_t now = now_ms();
    page_t *next;
    for (page_t *p = heap->full.first; p; p = next) {
        next = p->next;
        page_collect(p);
    }
    for (unsigned cls = 1; cls < SMALL_CLASSES; cls++)
        for (page_t *p = heap->queues[cls].first; p; p = p->next)
            page_collect(p);
    chunk_t *cn;
    for (int k = 0; k < 2; k++)
        for (chunk_t *c = heap->chunks[k].first; c; c = cn) {
            cn = c->next;
            c->next = c->prev = NULL;
            if (c->pages_used == 0) {
                chunk_release(c); /* the empty chunk chunk_page_free keeps */
                continue;
            }
            for (unsigned i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i)) {
                page_t *p = chunk_page(c, i);
                /* Only slots in use have an owner to drop: a free or dirty one was left
                 * unowned when it emptied (chunk_page_free), and writing every descriptor of a
                 * fresh chunk would make its untouched descriptor pages resident.
                 * USED is set and cleared by the owner only. */
                if (atomic_load_explicit(&p->in_use, memory_order_relaxed) != PAGE_USED)
                    continue;
                p->next = p->prev = NULL;
                page_set_flags(p, NULL, p->flags & (uint8_t)~PAGE_IN_FULL); /* no owner now */
                atomic_store_explicit(&p->in_full, 0, memory_order_relaxed);
            }
            atomic_store_explicit(&c->owner, NULL, memory_order_release);
            abandoned_push(c, now);
        }
    for (int k = 0; k < 2; k++)
        heap->chunks[k].first = heap->chunks[k].last = NULL;
    /* Nothing of the heap points into the chunks on the abandoned list now: a claim taken
     * before the heap leaves the in-use list (reclaim.c) finds it empty, and does not walk
     * pages that an adopter owns meanwhile. */
    heap->full.first = heap->full.last = NULL;
    for (unsigned cls = 1; cls < SMALL_CLASSES; cls++)
        heap->queues[cls].first = heap->queues[cls].last = NULL;
    for (unsigned w = 0; w < DIRECT_SLOTS; w++)
        heap->direct[w] = &page_empty;
    atomic_store_explicit(&heap->full_has_xfree, 0, memory_order_relaxed);
    purge_note_dirty();
}

/* The purger's: takes the abandoned chunks nobody adopted within purge_delay (all with
 * force) off the list into out (returns how many; *next: when the next is due), and puts
 * one back, adoptable again, when reclaim_abandoned is done with it. */
size_t abandoned_take_due(uint32_t now, bool force, uint32_t *next, chunk_queue_t *out)
{
    size_t n = 0;
    *next = 0;
    if ((purge_never() && !force) || !atomic_load_explicit(&abandoned_count, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&abandoned_lock);
    chunk_t *cn;
    for (chunk_t *c = abandoned.first; c; c = cn) {
        cn = c->next;
        if (!purge_is_due(c->abandoned_at, now, force, next))
            continue;
        abandoned_unlink(c);
        DLIST_PUSH_BACK(out, c);
        n++;
    }
    pthread_mutex_unlock(&abandoned_lock);
    return n;
}

TEXT_WARM
void abandoned_put_back(chunk_t *c, uint32_t now)
{
    abandoned_push(c, now);
}

TEXT_BUSY
void abandon_fork(enum fork_phase phase)
{
    fork_mutex(&abandoned_lock, phase);
}
