/* heap: one per thread (DESIGN.md, layer 5). Pages of each size class in queues, full pages
 * aside, chunks owned by the heap; heaps of exited threads abandon their chunks, which
 * other heaps adopt. Large blocks belong to no heap: large.c. */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

page_t page_empty; /* free == NULL: every fast path through it falls to the slow path */
/* The heap of a thread that has not allocated yet: every direct slot leads to the slow path. */
heap_t heap_empty = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty}};
/* The same for a thread whose heap was abandoned at exit: it may still allocate in a later
 * TLS destructor, and must not start the purger (see arena.c). */
heap_t heap_exited = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty}};
__thread heap_t *tl_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk_t *abandoned;
static _Atomic size_t abandoned_count;

/* ---- queues ---------------------------------------------------------------------------- */

static void queue_remove(page_queue_t *q, page_t *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        q->first = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        q->last = p->prev;
    p->next = p->prev = NULL;
}

static void queue_push_front(page_queue_t *q, page_t *p)
{
    p->prev = NULL;
    p->next = q->first;
    if (q->first)
        q->first->prev = p;
    else
        q->last = p;
    q->first = p;
}

static void queue_push_back(page_queue_t *q, page_t *p)
{
    p->next = NULL;
    p->prev = q->last;
    if (q->last)
        q->last->next = p;
    else
        q->first = p;
    q->last = p;
}

/* Points the direct slots of class cls at the queue's first page. */
static void direct_update(heap_t *heap, unsigned cls)
{
    if (sc_block_size(cls) > DIRECT_MAX)
        return;
    page_t *p = heap->queues[cls].first ? heap->queues[cls].first : &page_empty;
    size_t lo = cls == 1 ? 0 : (sc_block_size(cls - 1) >> 4) + 1;
    size_t hi = sc_block_size(cls) >> 4;
    for (size_t w = lo; w <= hi; w++)
        heap->direct[w] = p;
}

/* ---- chunks of pages ---------------------------------------------------------------------- */

static enum chunk_kind kind_of_class(unsigned cls)
{
    size_t b = sc_block_size(cls);
    return b <= SMALL_MAX ? CHUNK_SMALL : b <= MEDIUM_MAX ? CHUNK_MEDIUM : CHUNK_BIG;
}

static void chunk_list_remove(chunk_t **list, chunk_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

static void chunk_list_push(chunk_t **list, chunk_t *c)
{
    c->prev = NULL;
    c->next = *list;
    if (*list)
        (*list)->prev = c;
    *list = c;
}

static void chunk_release(chunk_t *c)
{
    /* Claim every dirty slot (the purger must not touch this memory once the arena may hand
     * it out again) and wait for a purge in progress. */
    for (unsigned i = 0; i < c->npages; i++) {
        page_t *p = &c->pages[i];
        for (;;) {
            uint8_t st = atomic_load_explicit(&p->in_use, memory_order_acquire);
            if (st == PAGE_FREE)
                break;
            if (st == PAGE_DIRTY &&
                atomic_compare_exchange_strong_explicit(
                    &p->in_use, &st, PAGE_FREE, memory_order_acq_rel, memory_order_relaxed)) {
                atomic_fetch_sub_explicit(&stat_pages_dirty, page_size_of(c), memory_order_relaxed);
                break;
            }
            if (st == PAGE_PURGING)
                sched_yield();
        }
    }
    registry_set(c->base, 1, registry_unused(c->arena));
    arena_free_chunks(c->arena, c->base, 1);
    chunk_desc_free(c);
}

/* A new chunk for heap, its first slot taken for the caller's page (*dirty: that slot may
 * hold old pages). */
static chunk_t *chunk_new(heap_t *heap, enum chunk_kind kind, bool *dirty_out)
{
    arena_t *arena;
    bool zero;
    uint8_t *base = arena_alloc_chunks(1, CHUNK_SIZE, THP_USE_SMALL, CHUNK_SIZE, &arena, &zero);
    if (!base)
        return NULL;
    chunk_t *c = chunk_desc_alloc();
    if (!c) {
        arena_free_chunks(arena, base, 1);
        return NULL;
    }
    c->base = base;
    c->kind = (uint8_t)kind;
    c->page_shift = kind == CHUNK_SMALL ? 16 : kind == CHUNK_MEDIUM ? 19 : 21;
    c->npages = (uint8_t)(CHUNK_SIZE >> c->page_shift);
    c->pages_used = 0;
    c->arena = arena;
    c->nchunks = 1;
    /* A chunk the arena had not purged yet is resident: its other slots are dirty, so that
     * the purger gives back the ones left unused (and new pages take them first). The
     * first is the caller's: taken here, before the purger can see the chunk. */
    *dirty_out = !zero;
    bool dirty = !zero && c->npages > 1 && policy_in_force.purge_delay_ms > 0 &&
                 policy_in_force.thp.mode != THP_MODE_ALWAYS;
    uint32_t now = dirty ? now_ms() : 0;
    for (unsigned i = 0; i < c->npages; i++) {
        c->pages[i].retired_at = now;
        /* release: the purger reads the descriptor (base, shift) once it sees DIRTY */
        atomic_store_explicit(&c->pages[i].in_use,
                              i == 0  ? PAGE_USED
                              : dirty ? PAGE_DIRTY
                                      : PAGE_FREE,
                              memory_order_release);
    }
    if (dirty)
        atomic_fetch_add_explicit(&stat_pages_dirty, CHUNK_SIZE - page_size_of(c),
                                  memory_order_relaxed);
    atomic_store_explicit(&c->owner, heap, memory_order_relaxed);
    if (!registry_set(base, 1, c)) {
        atomic_store_explicit(&c->pages[0].in_use, PAGE_FREE, memory_order_relaxed);
        chunk_release(c); /* claims the dirty slots back, and frees the chunk */
        errno = ENOMEM;
        return NULL;
    }
    chunk_list_push(&heap->chunks[kind], c);
    if (dirty)
        purge_note_dirty();
    return c;
}

static bool chunk_has_dirty(const chunk_t *c)
{
    for (unsigned i = 0; i < c->npages; i++)
        if (atomic_load_explicit(&c->pages[i].in_use, memory_order_relaxed) == PAGE_DIRTY)
            return true;
    return false;
}

/* Takes a slot of c for a new page: a dirty one first (its memory is still resident), else a
 * free one. -1 when every unused slot is being purged right now. */
static int slot_take(chunk_t *c, bool *was_dirty)
{
    *was_dirty = true;
    for (unsigned i = 0; i < c->npages; i++) {
        uint8_t st = PAGE_DIRTY;
        if (atomic_compare_exchange_strong_explicit(&c->pages[i].in_use, &st, PAGE_USED,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&stat_pages_dirty, page_size_of(c), memory_order_relaxed);
            return (int)i;
        }
    }
    *was_dirty = false;
    for (unsigned i = 0; i < c->npages; i++)
        if (atomic_load_explicit(&c->pages[i].in_use, memory_order_acquire) == PAGE_FREE)
            return (int)i; /* only the owner leaves FREE: page_init makes it USED */
    return -1;
}

/* An empty page another class of the same kind keeps (page_retire), to be taken over: its
 * memory is resident already. Without this, a buffer growing through the classes left a
 * kept page behind in each and touched new memory for the next (python3's peak +7 %). */
static page_t *kept_page_steal(heap_t *heap, enum chunk_kind kind, unsigned cls)
{
    unsigned lo = kind == CHUNK_SMALL    ? 1
                  : kind == CHUNK_MEDIUM ? sc_class_of(SMALL_MAX) + 1
                                         : sc_class_of(MEDIUM_MAX) + 1;
    unsigned hi = kind == CHUNK_SMALL    ? sc_class_of(SMALL_MAX)
                  : kind == CHUNK_MEDIUM ? sc_class_of(MEDIUM_MAX)
                                         : SC_COUNT - 1;
    for (unsigned k = lo; k <= hi; k++) {
        page_t *p = heap->queues[k].first;
        if (k != cls && p && !p->next && p->used == 0) {
            queue_remove(&heap->queues[k], p);
            direct_update(heap, k);
            return p;
        }
    }
    return NULL;
}

/* A fresh page of class cls: an empty page kept by another class, or a slot of a chunk of
 * this heap with room, or of a new chunk. */
static page_t *page_new(heap_t *heap, unsigned cls)
{
    enum chunk_kind kind = kind_of_class(cls);
    page_t *kept = kept_page_steal(heap, kind, cls);
    if (kept) {
        chunk_t *kc = kept->chunk;
        unsigned idx = (unsigned)((size_t)(kept->start - kc->base) >> kc->page_shift);
        page_init(kept, kc, idx, cls);
        kept->tail_resident = true;
        queue_push_front(&heap->queues[cls], kept);
        direct_update(heap, cls);
        return kept;
    }
    chunk_t *c = heap->chunks[kind];
    if (policy_in_force.thp.mode == THP_MODE_ALWAYS) {
        /* Huge-advised chunks: fill the fullest first, so huge pages stay full and whole
         * chunks empty out and can be returned (Temeraire's rule). */
        chunk_t *best = NULL;
        for (chunk_t *x = c; x; x = x->next)
            if (x->pages_used < x->npages && (!best || x->pages_used > best->pages_used))
                best = x;
        c = best;
    } else {
        /* A chunk with a dirty slot first (still resident: no new memory touched; 4.6 MB of
         * dirty slots sat beside new pages at larson's peak), else the first with room
         * (full chunks sit at the back, an adopted one may sit in front). */
        chunk_t *room = NULL;
        unsigned looked = 0;
        for (chunk_t *x = c; x && looked < 8; x = x->next) {
            if (x->pages_used == x->npages)
                continue;
            looked++; /* bounded: a heap may own hundreds of chunks */
            if (!room)
                room = x;
            if (chunk_has_dirty(x)) {
                room = x;
                break;
            }
        }
        c = room;
    }
    bool was_dirty = false;
    int idx = c && c->pages_used < c->npages ? slot_take(c, &was_dirty) : -1;
    if (idx < 0) {
        c = chunk_new(heap, kind, &was_dirty);
        if (!c)
            return NULL;
        idx = 0;
    }
    page_t *page = &c->pages[idx];
    page_init(page, c, idx, cls);
    page->tail_resident = was_dirty;
    if (++c->pages_used == c->npages && c->next) {
        /* Full chunks go to the back: the front one always has room if any has. */
        chunk_t **list = &heap->chunks[kind];
        chunk_list_remove(list, c);
        chunk_t *last = *list;
        while (last->next)
            last = last->next;
        last->next = c;
        c->prev = last;
    }
    queue_push_front(&heap->queues[cls], page);
    direct_update(heap, cls);
    return page;
}

/* Gives an empty page back to its chunk, and the chunk to the arena when it is empty. */
static void page_free(heap_t *heap, page_t *page)
{
    chunk_t *c = page->chunk;
    page_set_flags(page, NULL, 0);
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    enum chunk_kind kind = (enum chunk_kind)c->kind;
    /* The heap's only chunk of its kind stays, empty (its pages purged after purge_delay):
     * a loop that allocates and frees one medium or big block took and returned a chunk
     * on every call (two arena locks, the registry: 110-160 ns). */
    bool keep_chunk =
        heap && heap->chunks[kind] == c && !c->next && policy_in_force.thp.mode != THP_MODE_ALWAYS;
    if (--c->pages_used == 0 && !keep_chunk) {
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
        if (heap)
            chunk_list_remove(&heap->chunks[kind], c);
        chunk_release(c);
        return;
    }
    /* The chunk lives on: its empty page goes back to the kernel after purge_delay (not in
     * mode always, whose chunks are huge pages that a 64 KiB purge would split). */
    long delay = policy_in_force.purge_delay_ms;
    if (page->capacity == 0 || delay < 0 || policy_in_force.thp.mode == THP_MODE_ALWAYS) {
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
    } else if (delay == 0) {
        os_purge(page->start, page_size_of(c), policy_in_force.purge);
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
    } else {
        page->retired_at = now_ms();
        atomic_fetch_add_explicit(&stat_pages_dirty, page_size_of(c), memory_order_relaxed);
        atomic_store_explicit(&page->in_use, PAGE_DIRTY, memory_order_release);
        purge_note_dirty();
    }
    if (heap && heap->chunks[kind] != c) {
        chunk_list_remove(&heap->chunks[kind], c);
        chunk_list_push(&heap->chunks[kind], c);
    }
}

/* Takes a page off whichever list holds it. */
static void page_unlink(heap_t *heap, page_t *page)
{
    if (page->flags & PAGE_IN_FULL) {
        queue_remove(&heap->full, page);
        page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_IN_FULL);
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    } else {
        queue_remove(&heap->queues[page->cls], page);
        direct_update(heap, page->cls);
    }
}

/* The owner freed the last block of a page. The page is kept when it is all its class has
 * and has carved at most KEEP_PAGE_MAX, so that a loop of malloc/free does not take and
 * return a page on every call (110-160 ns a call for medium and big blocks when only small
 * pages were kept, 12-16 ns now); another class that needs a page takes a kept one over
 * first (kept_page_steal). Kept pages with more carved (big blocks, several at a time) held
 * memory no other class could use: python3's peak was 7 % higher keeping them all, 2 %
 * with stealing alone. Kept pages of a thread that goes idle are purged by the reclaimer
 * (reclaim.c) after purge_delay. */
#define KEEP_PAGE_MAX ((size_t)256 << 10)
void page_retire(heap_t *heap, page_t *page)
{
    heap->slow_ops++;
    /* (mode always: small pages only, as reclaim, which would purge the others, is off) */
    if ((size_t)page->capacity * page->block_size <= KEEP_PAGE_MAX &&
        (page->chunk->kind == CHUNK_SMALL || policy_in_force.thp.mode != THP_MODE_ALWAYS) &&
        !(page->flags & PAGE_IN_FULL)) {
        page_queue_t *q = &heap->queues[page->cls];
        if (q->first == page && !page->next)
            return;
    }
    page_unlink(heap, page);
    page_free(heap, page);
}

/* Moves a page without free blocks to the full list. Dekker with free_slow: publish
 * in_full, then look at xthread_free; a racing remote free either is seen here or sees
 * in_full and flags the heap. Returns false when a remote free arrived (collect again). */
static bool page_to_full(heap_t *heap, page_t *page)
{
    atomic_store_explicit(&page->in_full, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&page->xthread_free, memory_order_seq_cst)) {
        atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
        return false;
    }
    queue_remove(&heap->queues[page->cls], page);
    direct_update(heap, page->cls);
    page_set_flags(page, heap, page->flags | PAGE_IN_FULL);
    queue_push_back(&heap->full, page);
    return true;
}

/* Other threads freed into full pages: bring those pages back to their queues. */
void heap_rescue_full(heap_t *heap, bool may_free)
{
    atomic_store_explicit(&heap->full_has_xfree, 0, memory_order_seq_cst);
    page_t *next;
    for (page_t *p = heap->full.first; p; p = next) {
        next = p->next;
        if (!atomic_load_explicit(&p->xthread_free, memory_order_relaxed))
            continue;
        queue_remove(&heap->full, p);
        page_set_flags(p, heap, p->flags & (uint8_t)~PAGE_IN_FULL);
        atomic_store_explicit(&p->in_full, 0, memory_order_seq_cst);
        page_collect(p);
        queue_push_back(&heap->queues[p->cls], p);
        if (may_free && p->used == 0 && heap->queues[p->cls].first != p) {
            queue_remove(&heap->queues[p->cls], p);
            page_free(heap, p);
        } else {
            direct_update(heap, p->cls);
        }
    }
}

/* ---- abandoned chunks ---------------------------------------------------------------------- */

/* Takes c off the abandoned list (abandoned_lock held). */
static void abandoned_unlink(chunk_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        abandoned = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    atomic_store_explicit(&c->abandoned, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
}

static void adopt_chunk(heap_t *heap, chunk_t *c);

/* Takes one chunk that an exited thread left behind. Returns false when there is none. */
static bool heap_adopt_one(heap_t *heap)
{
    if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&abandoned_lock);
    chunk_t *c = abandoned;
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
static bool heap_reclaim(heap_t *heap, chunk_t *c)
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

static void adopt_chunk(heap_t *heap, chunk_t *c)
{
    atomic_store_explicit(&c->owner, heap, memory_order_release);
    enum chunk_kind kind = (enum chunk_kind)c->kind;
    chunk_list_push(&heap->chunks[kind], c);
    for (unsigned i = 0; i < c->npages; i++) {
        page_t *p = &c->pages[i];
        if (atomic_load_explicit(&p->in_use, memory_order_relaxed) != PAGE_USED)
            continue;
        page_set_flags(p, heap, p->flags);
        page_collect(p);
        if (p->used == 0) {
            /* page_free may release the chunk with its last page: stop looking then. */
            bool last = c->pages_used == 1;
            page_free(heap, p);
            if (last)
                break;
            continue;
        }
        queue_push_back(&heap->queues[p->cls], p);
        direct_update(heap, p->cls);
    }
}

/* ---- the slow path of malloc --------------------------------------------------------------- */

/* A page of class cls with a free block, or NULL when memory is exhausted. */
static page_t *heap_find_page(heap_t *heap, unsigned cls)
{
    if (atomic_load_explicit(&heap->full_has_xfree, memory_order_relaxed))
        heap_rescue_full(heap, true);
    page_queue_t *q = &heap->queues[cls];
    for (int adopted = 0;; adopted++) {
        page_t *page = q->first;
        while (page) {
            page_collect(page);
            if (!page->free && page->holes)
                page_refill_holes(heap, page);
            if (page->flags & PAGE_RESET)
                page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_RESET);
            if (!page->free && page->capacity < page->reserved)
                page_extend(page);
            if (page->free) {
                if (page != q->first) {
                    queue_remove(q, page);
                    queue_push_front(q, page);
                }
                direct_update(heap, cls);
                return page;
            }
            page_t *next = page->next;
            if (!page_to_full(heap, page))
                continue; /* a remote free just arrived: collect it */
            page = next;
        }
        if (adopted >= 4 || !heap_adopt_one(heap))
            break;
    }
    page_t *page = page_new(heap, cls);
    if (page)
        page_extend(page);
    return page;
}

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
    if (!page || !page->free)
        page = heap_find_page(heap, cls);
    if (unlikely(!page)) {
        heap_leave(heap);
        errno = ENOMEM;
        return NULL;
    }
    block_t *b = page->free;
    if (unlikely(block_outside(page, b) || b->key != block_key(b)))
        malloc_corrupt(page, b);
    page->free = block_next(b);
    page->used++;
    b->key = 0;
    if (page->block_size >= 2 * OS_PAGE_SIZE)
        ((uintptr_t *)b)[2] = 0; /* the purged-inside mark (reclaim.c) */
    heap_leave(heap);
    if (zero)
        memset(b, 0, page->block_size);
    return b;
}

/* ---- the slow path of free ------------------------------------------------------------------ */

void heap_free_slow(chunk_t *c, page_t *page, void *p)
{
    if (unlikely(c->kind == CHUNK_FREE))
        lib_fatal("free(): double free or invalid pointer", p);
    if (unlikely(atomic_load_explicit(&page->in_use, memory_order_relaxed) != PAGE_USED))
        lib_fatal("free(): invalid pointer", p);
    if (page->flags & PAGE_HAS_ALIGNED)
        p = block_start(page, p);
    else if (unlikely(block_misaligned(page, p)))
        lib_fatal("free(): invalid pointer", p);
    if (unlikely(block_in_hole(page, p)))
        lib_fatal("free(): double free detected", p);
    /* beyond the carved blocks: free already (a page the reclaimer reset) */
    if (unlikely((size_t)((uint8_t *)p - page->start) >=
                 (size_t)__atomic_load_n(&page->capacity, __ATOMIC_RELAXED) * page->block_size))
        lib_fatal("free(): double free detected", p);
    block_t *b = p;
    heap_t *heap = tl_heap;
    bool has_heap = heap != &heap_empty && heap != &heap_exited;
    if (has_heap)
        heap_enter(heap);
    heap_t *owner = atomic_load_explicit(&c->owner, memory_order_acquire);
    if (!owner && has_heap && atomic_load_explicit(&c->abandoned, memory_order_relaxed) &&
        heap_reclaim(heap, c))
        owner = heap;
    if (owner == heap) {
        heap->slow_ops++;
        /* Our own page, but full or with aligned blocks. */
        if (unlikely(b->key == block_key(b)))
            free_check_double(page, p);
        b->key = block_key(b);
        block_set_next(b, page->local_free);
        page->local_free = b;
        if (page->flags & PAGE_IN_FULL) {
            queue_remove(&heap->full, page);
            page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_IN_FULL);
            atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
            queue_push_back(&heap->queues[page->cls], page);
            direct_update(heap, page->cls);
        }
        if (--page->used == 0)
            page_retire(heap, page);
        heap_leave(heap);
        return;
    }
    if (has_heap)
        heap_leave(heap);
    b->key = block_key(b);
    block_t *head = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    do {
        block_set_next(b, head);
    } while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &head, b,
                                                    memory_order_seq_cst, memory_order_relaxed));
    if (atomic_load_explicit(&page->in_full, memory_order_seq_cst) && owner)
        atomic_store_explicit(&owner->full_has_xfree, 1, memory_order_relaxed);
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

/* ---- thread exit and fork ------------------------------------------------------------------ */

void heap_abandon(heap_t *heap)
{
    /* Give back every page that is empty once remote frees are counted. */
    for (unsigned cls = 1; cls < SC_COUNT; cls++) {
        page_t *next;
        for (page_t *p = heap->queues[cls].first; p; p = next) {
            next = p->next;
            page_collect(p);
            if (p->used == 0) {
                queue_remove(&heap->queues[cls], p);
                page_free(heap, p);
            }
        }
    }
    page_t *next;
    for (page_t *p = heap->full.first; p; p = next) {
        next = p->next;
        page_collect(p);
        if (p->used == 0) {
            queue_remove(&heap->full, p);
            page_free(heap, p);
        }
    }
    /* What is left has live blocks: hand the chunks to whoever allocates next. */
    for (int kind = CHUNK_SMALL; kind <= CHUNK_BIG; kind++) {
        chunk_t *cn;
        for (chunk_t *c = heap->chunks[kind]; c; c = cn) {
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
            c->prev = NULL;
            c->next = abandoned;
            if (abandoned)
                abandoned->prev = c;
            abandoned = c;
            atomic_store_explicit(&c->abandoned, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
            pthread_mutex_unlock(&abandoned_lock);
        }
        heap->chunks[kind] = NULL;
    }
}

void heap_fork_prepare(void)
{
    pthread_mutex_lock(&abandoned_lock);
}

void heap_fork_parent(void)
{
    pthread_mutex_unlock(&abandoned_lock);
}

void heap_fork_child(void)
{
    pthread_mutex_init(&abandoned_lock, NULL);
}
