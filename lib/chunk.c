/* chunk: a heap's chunks of pages (small: 16 KiB, medium: 64 KiB) and their page slots: a new page
 * for a class (an empty page another class keeps, a dirty slot, a free slot, a new chunk from the
 * arena), an empty page given back to its chunk, and the chunk to the arena when it empties.
 * A slot's states and who may move them are in types.h. */
#include "chunk.h"
#include "list.h"

#include <errno.h>
#include <sched.h>

/* Gives a chunk back to the arena once every slot is free (claims dirty slots first). */
void chunk_release(chunk_t *c)
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
                atomic_fetch_sub_explicit(&c->ndirty, 1, memory_order_relaxed);
                atomic_fetch_sub_explicit(&stat_pages_dirty, p->dirty_bytes, memory_order_relaxed);
                break;
            }
            if (st == PAGE_PURGING)
                sched_yield();
        }
    }
#ifdef THPALLOC_DEBUG
    for (unsigned i = 0; i < c->npages; i++) /* every slot FREE before the chunk goes */
        LIB_ASSERT(atomic_load_explicit(&c->pages[i].in_use, memory_order_relaxed) == PAGE_FREE);
#endif
    chunk_dense_lost(c, false); /* the arena takes the huge page whole */
    registry_set(c->base, 1, registry_unused(c->arena));
    if (c->orphan)
        arena_free_chunks_purged(c->arena, c->base, 1);
    else
        arena_free_chunks(c->arena, c->base, 1);
    chunk_desc_free(c);
}

void chunk_purge_dirty(chunk_t *c)
{
    if (!purge_inside_chunks())
        return;
    uint32_t next = 0;
    page_slots_purge(c, 0, true, &next);
}

/* A new chunk for heap, its first slot taken for the caller's page (*dirty: that slot may
 * hold old pages). */
/* 16 KiB pages for the classes up to 1 KiB and for those that leave at most 1/16 of such a
 * page unused (2, 4 and 8 KiB among them: a process's stdio buffer does not need a chunk of
 * 64 KiB pages, which under strict overcommit is charged 2 MiB); 64 KiB pages for the rest
 * (4.5 KiB blocks would leave 15 % of a 16 KiB page unused, resident with the last block). */
static enum chunk_kind kind_of_class(unsigned cls)
{
    size_t bs = sc_block_size(cls);
    return bs <= SMALL_PAGE_BLOCK_MAX || SMALL_PAGE_SIZE % bs <= SMALL_PAGE_SIZE / 16
               ? CHUNK_SMALL
               : CHUNK_MEDIUM;
}

void (*chunk_new_prepare)(heap_t *heap);

/* Full chunks of a heap's kind that make its next one a huge page from its first touch. */
#define AHEAD_FULL 2

/* The heap asks for a chunk of kind with every chunk of that kind full (slot_new found no
 * room), AHEAD_FULL of them at least: it grows, and its next chunk will fill too. Taken
 * huge-advised, its first touch faults a huge page whole (no 4 KiB faults, no collapse's
 * copy later); its slots but the first are dirty, so that what it does not fill goes back
 * after purge_delay (splitting the huge page, chunk_dense_lost) like a resident chunk's. */
static NOINLINE TEXT_BUSY bool chunk_growing(heap_t *heap, enum chunk_kind kind)
{
    if (!dense_percent() || !purge_inside_chunks() || purge_delay() <= 0)
        return false;
    unsigned full = 0;
    for (chunk_t *x = heap->chunks[kind == CHUNK_MEDIUM].last; x && full < AHEAD_FULL;
         x = x->prev) {
        if (x->pages_used != x->npages)
            return false;
        full++;
    }
    return full == AHEAD_FULL;
}

static chunk_t *chunk_new(heap_t *heap, enum chunk_kind kind, bool *dirty_out)
{
    arena_t *arena;
    bool zero;
    if (chunk_new_prepare)
        chunk_new_prepare(heap); /* what other threads emptied in idle heaps, first */
    extents_release_empty();
    /* a heap of one chunk of the kind is not growing yet: the busy text stays untouched */
    const chunk_queue_t *q = &heap->chunks[kind == CHUNK_MEDIUM];
    bool ahead = q->last && q->last->prev && chunk_growing(heap, kind);
    uint8_t *base = arena_alloc_chunks(1, CHUNK_SIZE, ahead ? THP_USE_DENSE : THP_USE_SMALL,
                                       CHUNK_SIZE, &arena, &zero);
    if (!base)
        return NULL;
    chunk_t *c = chunk_desc_alloc();
    if (!c) {
        arena_free_chunks(arena, base, 1);
        return NULL;
    }
    c->base = base;
    c->kind = (uint8_t)kind;
    c->page_shift = kind == CHUNK_SMALL ? SMALL_PAGE_SHIFT : MEDIUM_PAGE_SHIFT;
    c->npages = (uint8_t)(CHUNK_SIZE >> c->page_shift);
    c->pages_used = 0;
    c->used_hi = 0;
    atomic_store_explicit(&c->dense, CHUNK_DENSE_NONE, memory_order_relaxed);
    atomic_store_explicit(&c->dense_advised, ahead, memory_order_relaxed);
    if (ahead) {
        atomic_fetch_add_explicit(&stat_dense_ahead, 1, memory_order_relaxed);
        introspect_set_dense();
    }
    c->arena = arena;
    c->nchunks = 1;
    /* A chunk the arena had not purged yet is resident: its other slots are dirty, so that
     * the purger gives back the ones left unused (and new pages take them first). The
     * first is the caller's: taken here, before the purger can see the chunk. They have
     * waited since the chunk was freed: the rest of purge_delay, not all of it again. A
     * chunk taken ahead is resident whole at its first touch: dirty from now. */
    *dirty_out = !zero;
    bool dirty = (!zero || ahead) && c->npages > 1 && purge_inside_chunks() && purge_delay() > 0;
    uint32_t now = !dirty ? 0 : zero ? now_ms() : arena_freed_at(arena, base);
    atomic_store_explicit(&c->ndirty, dirty ? c->npages - 1 : 0, memory_order_relaxed);
#ifdef THPALLOC_DEBUG
    for (unsigned i = 0; i < c->npages; i++) /* a descriptor is recycled with every slot FREE */
        LIB_ASSERT(atomic_load_explicit(&c->pages[i].in_use, memory_order_relaxed) == PAGE_FREE);
#endif
    /* Only a resident chunk's slots are written (DIRTY): the others are FREE already, and an
     * idle thread's chunk then costs one page of its descriptor, not all 16 KiB of it. */
    for (unsigned i = 0; i < (dirty ? c->npages : 1u); i++) {
        c->pages[i].retired_at = now;
        c->pages[i].dirty_bytes = (uint32_t)page_size_of(c); /* all of it may be resident */
        /* release: the purger reads the descriptor (base, shift) once it sees DIRTY */
        atomic_store_explicit(&c->pages[i].in_use, i == 0 ? PAGE_USED : PAGE_DIRTY,
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
    DLIST_PUSH_FRONT(heap_chunks(heap, c), c);
    if (dirty)
        purge_note_dirty_by(heap);
    return c;
}

/* ---- stat_pages_dirty through the heap's credit -----------------------------------------
 * A loop that empties a page and takes a dirty slot back for its next one wrote the shared
 * counter twice a round, a locked instruction on a line every thread writes (mixed 4 2 256:
 * 21 k times a run). The owner counts through its heap instead: a slot it takes back leaves
 * its bytes in stat_pages_dirty as the heap's credit, which its next dirty slot uses up.
 * stat_pages_dirty is thus never below the bytes of the dirty slots (a purge subtracts what
 * it purges, as before: it never wraps below 0), and above them by the heaps' credits, at
 * most DIRTY_CREDIT_MAX each; exiting, parked and reclaimed heaps fold theirs
 * (chunk_dirty_fold). purger_dirty_now (purger.c) takes the credits off where exactness
 * matters: the purger's sleep, the inline pass's next look, the statistics. Stores are
 * ordered for a reader that loads the counter (acquire), then the credits: it may see more
 * than the slots hold, never less. */
#define DIRTY_CREDIT_MAX ((uint32_t)256 << 10)

/* bytes of a slot of heap's (NULL: no owner's) become dirty, before it shows DIRTY */
static void dirty_count(heap_t *heap, uint32_t bytes)
{
    uint32_t credit = heap ? heap->dirty_credit : 0;
    if (credit >= bytes) {
        __atomic_store_n(&heap->dirty_credit, credit - bytes, __ATOMIC_RELAXED);
        return;
    }
    atomic_fetch_add_explicit(&stat_pages_dirty, bytes - credit, memory_order_release);
    if (credit)
        __atomic_store_n(&heap->dirty_credit, 0, __ATOMIC_RELAXED);
}

/* The owner took back a dirty slot of bytes: they stay counted, as credit, up to a bound. */
static void dirty_uncount(heap_t *heap, uint32_t bytes)
{
    uint32_t credit = heap->dirty_credit + bytes;
    if (credit <= DIRTY_CREDIT_MAX) {
        __atomic_store_n(&heap->dirty_credit, credit, __ATOMIC_RELAXED);
        return;
    }
    /* the credit first: a reader between the two sees more, not less */
    __atomic_store_n(&heap->dirty_credit, DIRTY_CREDIT_MAX / 2, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&stat_pages_dirty, credit - DIRTY_CREDIT_MAX / 2,
                              memory_order_release);
}

/* heap's credit back to stat_pages_dirty: a heap that exits, parks or goes idle (its owner,
 * or the purger under the claim). */
void chunk_dirty_fold(heap_t *heap)
{
    uint32_t credit = heap->dirty_credit;
    if (!credit)
        return;
    __atomic_store_n(&heap->dirty_credit, 0, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&stat_pages_dirty, credit, memory_order_release);
}

static bool chunk_has_dirty(const chunk_t *c)
{
    return atomic_load_explicit(&c->ndirty, memory_order_relaxed) != 0;
}

/* Takes a slot of c for a new page: a dirty one first (its memory is still resident), else a
 * free one. -1 when every unused slot is being purged right now. */
static int slot_take(heap_t *heap, chunk_t *c, bool *was_dirty)
{
    *was_dirty = true;
    for (unsigned i = 0; i < c->npages && chunk_has_dirty(c); i++) {
        /* a load first: a locked CAS on every slot before the first dirty one cost more
         * than the rest of the page's setup */
        if (atomic_load_explicit(&c->pages[i].in_use, memory_order_relaxed) != PAGE_DIRTY)
            continue;
        uint8_t st = PAGE_DIRTY;
        if (atomic_compare_exchange_strong_explicit(&c->pages[i].in_use, &st, PAGE_USED,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&c->ndirty, 1, memory_order_relaxed);
            dirty_uncount(heap, c->pages[i].dirty_bytes);
            return (int)i;
        }
    }
    *was_dirty = false;
    for (unsigned i = 0; i < c->npages; i++)
        if (atomic_load_explicit(&c->pages[i].in_use, memory_order_acquire) == PAGE_FREE)
            return (int)i; /* only the owner leaves FREE: page_init makes it USED */
    return -1;
}

/* An empty page another class keeps (heap_page_retire), to be taken over: its memory is resident
 * already, so a program that moves from one class to the next does not leave a kept page
 * behind in each (docs/benchmarks.md, "Why the code is as it is"). In a busy heap not one
 * kept a moment ago: classes that take and free a block each in turn (scratch buffers of a
 * few sizes) would take each other's page, and set up and carve it, on every call. */
static page_t *kept_page_steal(heap_t *heap, unsigned cls)
{
    if (!heap->kept_mask)
        return NULL; /* none kept since the heap was parked (heap_park_kept) */
    enum chunk_kind kind = kind_of_class(cls);
    for (unsigned k = 1; k < SMALL_CLASSES; k++) {
        /* one page alone in its queue: first == last, read from the queue, not the page */
        page_t *p = heap->queues[k].first;
        if (!p || p != heap->queues[k].last)
            continue;
        LIB_ASSERT(page_alone(&heap->queues[k], p));
        if (k != cls && p->used == 0 && p->chunk->kind == kind && !page_is_sub(p) &&
            (!heap_is_busy(heap) || heap->slow_ops - p->kept_at >= KEPT_STEAL_AGE)) {
            page_queue_remove(&heap->queues[k], p);
            page_queue_direct_update(heap, k);
            if (p->flags & PAGE_TRIMMED) /* trimmed, it is faulted in again: a refault */
                heap->trim_refaulted |= (uint64_t)1 << k;
            return p;
        }
    }
    return NULL;
}

/* One of the heap's first chunks for class cls has a free slot: chunk_page_new needs no new
 * chunk. */
bool chunk_slot_available(heap_t *heap, unsigned cls)
{
    unsigned looked = 0;
    chunk_queue_t *q = &heap->chunks[kind_of_class(cls) == CHUNK_MEDIUM];
    for (chunk_t *x = q->first; x && looked < 8; x = x->next, looked++)
        if (x->pages_used < x->npages)
            return true;
    return false;
}

/* A slot of a chunk of the heap's of kind, for a new page (*dirty: it may hold old pages):
 * a chunk with a dirty slot first, else with room, else a new one. Its index, or -1 when
 * memory is exhausted. */
static int slot_new(heap_t *heap, enum chunk_kind kind, chunk_t **out, bool *was_dirty)
{
    chunk_queue_t *chunks = &heap->chunks[kind == CHUNK_MEDIUM];
    chunk_t *c = chunks->first;
    if (purge_chunks_whole()) {
        /* Huge-advised chunks: fill the fullest first, so huge pages stay full and whole
         * chunks empty out and can be returned (Temeraire's rule). */
        chunk_t *best = NULL;
        for (chunk_t *x = c; x; x = x->next)
            if (x->pages_used < x->npages && (!best || x->pages_used > best->pages_used))
                best = x;
        c = best;
    } else {
        /* A chunk with a dirty slot first (still resident: no new memory touched), else the
         * fullest with room among the first few (full chunks sit at the back, an adopted one
         * may sit in front): chunks fill, and dense.c can make them huge pages. */
        chunk_t *room = NULL;
        unsigned looked = 0;
        for (chunk_t *x = c; x && looked < 8; x = x->next) {
            if (x->pages_used == x->npages)
                continue;
            looked++; /* bounded: a heap may own hundreds of chunks */
            if (!room || x->pages_used > room->pages_used)
                room = x;
            if (chunk_has_dirty(x)) {
                room = x;
                break;
            }
        }
        c = room;
    }
    *was_dirty = false;
    int idx = c && c->pages_used < c->npages ? slot_take(heap, c, was_dirty) : -1;
    if (idx < 0) {
        c = chunk_new(heap, kind, was_dirty);
        if (!c)
            return -1;
        idx = 0;
    }
    ++c->pages_used;
    unsigned dense = dense_percent();
    if (dense && c->pages_used * 100u >= c->npages * dense &&
        atomic_load_explicit(&c->dense, memory_order_relaxed) == CHUNK_DENSE_NONE)
        dense_note(c);
    if (c->pages_used == c->npages && c->next) {
        /* Full chunks go to the back: the front one always has room if any has. */
        DLIST_REMOVE(chunks, c);
        DLIST_PUSH_BACK(chunks, c);
    }
    *out = c;
    return idx;
}

_Static_assert(SPLITS *SUB_PAGES <= 32, "chunk_t.sub_free has a bit per sub-page");
_Static_assert(SMALL_CLASSES <= 64, "heap_t.first_taken has a bit per class");

/* Slot idx of c becomes the heap's current page of class cls. */
static page_t *slot_page_start(heap_t *heap, chunk_t *c, int idx, unsigned cls, bool was_dirty)
{
    page_t *page = &c->pages[idx];
    page_init(page, c, (unsigned)idx, cls);
    page->tail_resident = was_dirty;
    page_queue_push_front(&heap->queues[cls], page);
    page_queue_direct_update(heap, cls);
    return page;
}

/* The sub-pages of split slot s, as bits of sub_free. */
static inline uint32_t split_mask(unsigned s)
{
    return (uint32_t)((1u << SUB_PAGES) - 1) << (s * SUB_PAGES);
}

/* The bits of sub_free that belong to c's split slots. */
static inline uint32_t splits_mask(const chunk_t *c)
{
    uint32_t m = 0;
    for (unsigned s = 0; s < SPLITS; s++)
        if (c->split[s])
            m |= split_mask(s);
    return m;
}

/* A sub-page for class cls: of a split slot with a free one among the heap's first small
 * chunks, or of a new split slot when none of them has one and the heap has fewer than
 * SPLITS. NULL: a page of its own, then. */
static page_t *sub_page_new(heap_t *heap, unsigned cls)
{
    chunk_t *c = NULL;
    unsigned splits_seen = 0, looked = 0;
    for (chunk_t *x = heap->chunks[0].first; x && looked < 8; x = x->next, looked++) {
        uint32_t mine = splits_mask(x);
        splits_seen += (unsigned)__builtin_popcount(mine) / SUB_PAGES;
        if (x->sub_free & mine) {
            c = x;
            break;
        }
    }
    if (!c) {
        if (splits_seen >= SPLITS)
            return NULL;
        bool was_dirty;
        int idx = slot_new(heap, CHUNK_SMALL, &c, &was_dirty);
        if (idx < 0)
            return NULL;
        unsigned s = 0;
        while (s < SPLITS && c->split[s])
            s++;
        if (s == SPLITS) /* a chunk further back that has both: the class's own page */
            return slot_page_start(heap, c, idx, cls, was_dirty);
        page_t *m = &c->pages[idx];
        /* The marker: USED while any sub-page is, never a page to allocate from or free
         * into (pop_max 0: every block but the first is outside it, and that one has no
         * key; PAGE_SPLIT: no fast path). */
        page_init(m, c, (unsigned)idx, 1);
        m->cls = SPLIT_CLS;
        m->reserved = 0;
        m->pop_max = 0;
        m->capacity = 1; /* freed as a slot that was written: purged after purge_delay */
        m->tail_resident = was_dirty;
        page_set_flags(m, NULL, PAGE_SPLIT);
        c->split[s] = (uint8_t)(idx + 1);
        c->sub_free |= split_mask(s);
    }
    unsigned j = (unsigned)__builtin_ctz(c->sub_free & splits_mask(c));
    c->sub_free &= ~((uint32_t)1 << j);
    page_t *page = chunk_sub(c, j);
    page_sub_init(page, c, j, cls);
    page_queue_push_front(&heap->queues[cls], page);
    page_queue_direct_update(heap, cls);
    return page;
}

/* A fresh page of class cls: an empty page kept by another class, a sub-page for the
 * class's first, or a slot of a chunk of this heap with room, or of a new chunk. */
page_t *chunk_page_new(heap_t *heap, unsigned cls)
{
    purge_inline_tick(heap); /* a page to take: the next safe point may look */
    enum chunk_kind kind = kind_of_class(cls);
    page_t *kept = kept_page_steal(heap, cls);
    if (kept) {
        chunk_t *kc = kept->chunk;
        unsigned idx = (unsigned)((size_t)(kept->start - kc->base) >> kc->page_shift);
        page_init(kept, kc, idx, cls);
        kept->tail_resident = true;
        page_queue_push_front(&heap->queues[cls], kept);
        page_queue_direct_update(heap, cls);
        return kept;
    }
    uint64_t bit = (uint64_t)1 << cls;
    if (!(heap->first_taken & bit)) {
        heap->first_taken |= bit;
        if (sc_block_size(cls) <= SUB_BLOCK_MAX) {
            page_t *sub = sub_page_new(heap, cls);
            if (sub)
                return sub;
        } else if (kind == CHUNK_MEDIUM &&
                   (sc_block_size(cls) <= SMALL_PAGE_SIZE / 4 || !heap->medium_in_small)) {
            /* A first page of a medium class in a small chunk (16 KiB), so that a few
             * blocks of 1.6-4.5 KiB do not cost the heap a second chunk: one for each class
             * up to 4 KiB (three classes), and one for all those above. Not one for each of
             * those: pages of every medium class there pinned the small chunks of threads
             * that use them all. */
            if (sc_block_size(cls) > SMALL_PAGE_SIZE / 4)
                heap->medium_in_small = true;
            kind = CHUNK_SMALL;
        }
    } else if (!(heap->second_taken & bit)) {
        /* A second sub-page, for the few blocks more that a small process has of its
         * commonest classes (a page of their own would cost an OS page for them). */
        heap->second_taken |= bit;
        if (sc_block_size(cls) <= SUB_BLOCK_MAX) {
            page_t *sub = sub_page_new(heap, cls);
            if (sub)
                return sub;
        }
    }
    chunk_t *c;
    bool was_dirty;
    int idx = slot_new(heap, kind, &c, &was_dirty);
    return idx < 0 ? NULL : slot_page_start(heap, c, idx, cls, was_dirty);
}

/* A sub-page is free: back to its slot, and the slot to its chunk once all of them are.
 * Returns the marker to free as a page, or NULL. */
static page_t *sub_page_free(page_t *page)
{
    chunk_t *c = page->chunk;
    unsigned j = sub_index(page), s = j / SUB_PAGES;
    page_set_flags(page, NULL, 0);
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
    c->sub_free |= (uint32_t)1 << j;
    if ((c->sub_free & split_mask(s)) != split_mask(s))
        return NULL;
    c->sub_free &= ~split_mask(s);
    page_t *m = &c->pages[c->split[s] - 1];
    c->split[s] = 0;
    return m;
}

/* What of an empty page's slot may be resident: its carved blocks, to the OS page; the whole
 * slot for a split marker (its sub-pages carved all over it) or a page that took a resident
 * slot (an older use's pages beyond the carved ones). A slot counted at its whole size made
 * a page of one 4 KiB block of a 64 KiB medium slot count 64 KiB waiting, toward the 16 MiB
 * that starts the purger thread. */
static size_t page_resident_bound(const chunk_t *c, const page_t *page)
{
    size_t psize = page_size_of(c);
    if (page->tail_resident || page->cls == SPLIT_CLS)
        return psize;
    size_t carved = (size_t)page->capacity * page->block_size;
    carved = (carved + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    return carved < psize ? carved : psize;
}

/* Gives an empty page back to its chunk, and the chunk to the arena when it is empty (true
 * then). */
bool chunk_page_free(heap_t *heap, page_t *page)
{
    chunk_t *c = page->chunk;
    if (page_is_sub(page)) {
        LIB_ASSERT(page->used == 0);
        page = sub_page_free(page);
        if (!page)
            return false;
    }
    LIB_ASSERT(atomic_load_explicit(&page->in_use, memory_order_relaxed) == PAGE_USED);
    LIB_ASSERT(c->pages_used >= 1 && page->used == 0);
    page_set_flags(page, NULL, 0);
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    /* The heap's only chunk stays, empty (its pages purged after purge_delay), so that a
     * loop of one block does not take and return a chunk per call. */
    bool keep_chunk = heap && heap_chunks(heap, c)->first == c && !c->next && !purge_chunks_whole();
    if (--c->pages_used == 0 && !keep_chunk) {
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
        if (heap)
            DLIST_REMOVE(heap_chunks(heap, c), c);
        chunk_release(c);
        return true;
    }
    /* The chunk lives on: its empty page goes back to the kernel after purge_delay (not in
     * mode always, whose chunks are huge pages that a page's purge would split). */
    if (page->capacity == 0 || !purge_inside_chunks()) {
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
    } else if (purge_delay() == 0) {
        chunk_dense_lost(c, true);
        purge_give_back(page->start, page_size_of(c), purge_how());
        atomic_store_explicit(&page->in_use, PAGE_FREE, memory_order_release);
    } else {
        page->retired_at = now_ms();
        page->dirty_bytes = (uint32_t)page_resident_bound(c, page);
        dirty_count(heap, page->dirty_bytes);
        /* counted before it shows: a purger that takes it at once never counts below 0 */
        atomic_fetch_add_explicit(&c->ndirty, 1, memory_order_relaxed);
        atomic_store_explicit(&page->in_use, PAGE_DIRTY, memory_order_release);
        purge_note_dirty_by(heap);
    }
    if (heap && heap_chunks(heap, c)->first != c) {
        DLIST_REMOVE(heap_chunks(heap, c), c);
        DLIST_PUSH_FRONT(heap_chunks(heap, c), c);
    }
    return false;
}
