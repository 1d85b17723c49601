/* page: blocks of one size class inside a chunk, with three free lists: `free` to allocate from,
 * `local_free` for the owner's frees and the atomic `xthread_free` for everyone else's. Only the
 * owning thread touches anything but xthread_free, or the purger while it holds the owner's heap
 * (reclaim.c). The size classes' tables are defined here, the lowest layer that reads them
 * (sizeclass.h). */
#define SC_TABLES_DEFINE
#include "page.h"

#include <string.h>

struct block_secret block_secret;

void block_secret_init(void)
{
    uint64_t r[2];
    os_startup_random(r);
    block_secret.link = (uintptr_t)r[0];
    /* odd: a key never equals 0 ("not free") for a block, whose address is even; bit 63:
     * nor a 32-bit memalign mark, which leaves the key's upper half 0 (aligned_mark_set) */
    block_secret.key = r[1] | 1 | (uint64_t)1 << 63;
}

static void page_setup(page_t *page, chunk_t *c, uint8_t *start, size_t psize, unsigned cls)
{
    /* A slot becomes USED only from FREE, or by the owner's CAS from DIRTY (slot_take). */
    LIB_ASSERT(atomic_load_explicit(&page->in_use, memory_order_relaxed) != PAGE_PURGING);
    page->free = NULL;
    page->local_free = NULL;
    page->used = 0;
    page->block_size = (uint32_t)sc_block_size(cls);
    page_set_flags(page, atomic_load_explicit(&c->owner, memory_order_relaxed), 0);
    atomic_store_explicit(&page->in_use, PAGE_USED, memory_order_relaxed);
    page->cls = (uint8_t)cls;
    atomic_store_explicit(&page->in_full, 0, memory_order_relaxed);
    page->capacity = 0;
    page->reserved = (uint32_t)(psize / page->block_size);
    atomic_store_explicit(&page->xthread_free, 0, memory_order_relaxed);
    page->next = page->prev = NULL;
    page->start = start;
    page->chunk = c;
    page->alloc_seen = true;
    page->is_sub = false;
    page->sub_keeps = 0;
    page->kept_at = 0;
    page->kept_quiet = false;
    page->tail_resident = false;
    page->div_check = UINT64_MAX / page->block_size + 1;
    page->pop_max = page->reserved * page->block_size - (uint32_t)sizeof(block_t);
    __atomic_store_n(&page->holes, 0, __ATOMIC_RELAXED);
    LIB_ASSERT(page->reserved >= 1);
}

void page_init(page_t *page, chunk_t *c, unsigned idx, unsigned cls)
{
    page_setup(page, c, c->base + ((size_t)idx << c->page_shift), page_size_of(c), cls);
    if (idx >= c->used_hi)
        c->used_hi = (uint8_t)(idx + 1);
}

/* The same for sub-page j of c (chunk_sub). */
void page_sub_init(page_t *page, chunk_t *c, unsigned j, unsigned cls)
{
    unsigned s = j / SUB_PAGES;
    LIB_ASSERT(s < SPLITS && c->split[s] && sc_block_size(cls) <= SUB_BLOCK_MAX);
    uint8_t *slot = c->base + ((size_t)(c->split[s] - 1) << c->page_shift);
    page_setup(page, c, slot + ((size_t)(j % SUB_PAGES) << SUB_PAGE_SHIFT), SUB_PAGE_SIZE, cls);
    page->is_sub = true;
}

/* Threads blocks into the free list a few KiB at a time, so that a page of a rarely used
 * class does not make the whole page resident at once. */
void page_extend(page_t *page)
{
    LIB_ASSERT(page->free == NULL && page->capacity < page->reserved);
    size_t bsize = page->block_size;
    /* One OS page's worth at a time (one block from 4 KiB up): a block's link and key are
     * written when it is carved, so carving four 4 KiB blocks made 16 KiB resident for one
     * stdio buffer. OS_PAGE_SIZE / bsize by the page's reciprocal (exact for a numerator
     * below 2^32, as block_misaligned's), not a division's latency on every carve; a
     * target without 128-bit products (i386) divides. */
#ifdef __SIZEOF_INT128__
    uint32_t n = (uint32_t)(((unsigned __int128)OS_PAGE_SIZE * page->div_check) >> 64);
#else
    uint32_t n = (uint32_t)(OS_PAGE_SIZE / bsize);
#endif
    LIB_ASSERT(n == OS_PAGE_SIZE / bsize);
    if (n < 1)
        n = 1;
    if (n > page->reserved - page->capacity)
        n = page->reserved - page->capacity;
    uint8_t *first = page->start + (size_t)page->capacity * bsize;
    uint8_t *last = first + (size_t)(n - 1) * bsize;
    /* an end pointer: no count beside it */
    for (uint8_t *p = first; p != last; p += bsize) {
        block_set_next((block_t *)p, (block_t *)(p + bsize));
        ((block_t *)p)->key = block_key((block_t *)p);
    }
    block_set_next((block_t *)last, NULL);
    ((block_t *)last)->key = block_key((block_t *)last);
    page->free = (block_t *)first;
    page->capacity += n;
}

#ifdef THPALLOC_DEBUG
/* The page list partition (types.h): every block on free and local_free lies inside
 * the page at a block boundary, carries its key and is carved; those lists and the blocks
 * handed out (used, remote frees not yet collected included) are the carved blocks, less
 * the ones in holes, which are on no list. The owner's view, or the purger's under claim. */
void page_check(const page_t *page)
{
    uint32_t listed = 0;
    for (int l = 0; l < 2; l++)
        for (const block_t *b = l ? page->local_free : page->free; b; b = block_next(b)) {
            LIB_ASSERT(!block_outside(page, b) && b->key == block_key(b));
            LIB_ASSERT((size_t)((const uint8_t *)b - page->start) <
                       (size_t)page->capacity * page->block_size);
            LIB_ASSERT(++listed <= page->capacity);
        }
    LIB_ASSERT(listed + page->used <= page->capacity);
    LIB_ASSERT(page->holes || (page->flags & PAGE_RESET) || listed + page->used == page->capacity);
}
#endif

/* Takes the other threads' frees, and moves local_free to free when free is empty.
 * Returns how many blocks other threads had freed. The remote list becomes whichever of
 * free and local_free is empty, as it is (its end is the first push's NULL, and every pop
 * checks its block's place and key as for the owner's frees); only when both hold blocks
 * is it walked to its tail. The walk is a chain of cache misses on blocks another CPU has
 * just written, and a dry page's local_free, left waiting behind it, becomes free at its
 * next dry pop as the fast path's swap. */
uint32_t page_collect(page_t *page)
{
    uint32_t n = 0;
    if (atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) {
        uint64_t v = atomic_exchange_explicit(&page->xthread_free, 0, memory_order_acquire);
        block_t *head = xfree_head(page, v);
        if (head) {
            n = xfree_count(v);
            if (unlikely(n > page->used))
                page_corrupt(page, head); /* more frees listed than blocks handed out */
            if (!page->free) {
                page->free = head;
            } else if (!page->local_free) {
                page->local_free = head;
            } else {
                block_t *tail = head;
                /* The walk only has to stay inside the page and end (a cycle): a link
                 * that lands off a block boundary is caught when malloc pops it (its key). */
                for (uint32_t k = 1; k < n; k++) {
                    tail = block_next(tail);
                    if (unlikely((uint64_t)((uint8_t *)tail - page->start) > page->pop_max))
                        page_corrupt(page, tail); /* a remote free's link was overwritten */
                }
                block_set_next(tail, page->local_free);
                page->local_free = head;
            }
            page->used -= n;
        }
    }
    if (!page->free && page->local_free) {
        page->free = page->local_free;
        page->local_free = NULL;
    }
#ifdef THPALLOC_DEBUG
    page_check(page);
#endif
    return n;
}

/* An empty page its owner keeps: purge what was carved, and forget its blocks (the purger's
 * reclaim of an idle heap, and the owner's trim, heap.c). used == 0
 * also means no remote free is pending (they count in used until collected). */
size_t page_reset_empty(heap_t *heap, const chunk_t *c, page_t *page, enum os_purge how)
{
    if (page->capacity == 0 && !page->tail_resident)
        return 0;
    size_t len = (size_t)page->capacity * page->block_size;
    len = (len + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    if (len > page_size_of(c) || page->tail_resident)
        len = page_size_of(c);
    chunk_dense_lost(c, true);
    if (!purge_give_back(page->start, len, how))
        return 0; /* nothing changed: the blocks are all still there */
    page->tail_resident = false;
    __atomic_store_n(&page->holes, 0, __ATOMIC_RELAXED);
    page->free = NULL;
    page->local_free = NULL;
    __atomic_store_n(&page->capacity, 0, __ATOMIC_RELAXED);
    /* until the owner carves again, every free of this page is a double free: slow path */
    page_set_flags(page, heap, (uint8_t)((page->flags & ~PAGE_HAS_HOLES) | PAGE_RESET));
    return len;
}

/* The owner takes back the blocks in the page's holes (all free: the purger kept only
 * free blocks' OS pages), in address order, before it carves new ones. Writing their
 * links brings the OS pages back. */
TEXT_BUSY
void page_refill_holes(heap_t *heap, page_t *page)
{
    size_t bs = page->block_size;
    uint16_t holes = page->holes;
    block_t *head = page->free;
    uint32_t lowest = UINT32_MAX; /* blocks from here up are on the list already */
    for (int i = 15; i >= 0; i--) {
        if (!(holes & (1u << i)))
            continue;
        size_t lo = (size_t)i * OS_PAGE_SIZE;
        uint32_t j0 = (uint32_t)(lo / bs);
        uint32_t j1 = (uint32_t)((lo + OS_PAGE_SIZE - 1) / bs);
        if (j1 >= page->capacity)
            j1 = page->capacity - 1;
        for (uint32_t j = j1 + 1; j-- > j0;) {
            if (j >= lowest)
                continue;
            block_t *b = (block_t *)(page->start + (size_t)j * bs);
            block_set_next(b, head);
            b->key = block_key(b);
            head = b;
            lowest = j;
        }
    }
    page->free = head;
    __atomic_store_n(&page->holes, 0, __ATOMIC_RELAXED);
    page_set_flags(page, heap, page->flags & (uint8_t)~PAGE_HAS_HOLES);
}

/* A freed-looking block is freed (or reallocated) again: abort with msg if it really is on
 * the page's free lists. The owner's, or the abandoned lock holder's. */
TEXT_COLD
void page_check_double(page_t *page, void *p, const char *msg)
{
    /* Bounded walks: a list that already holds a block twice has a cycle. Other threads'
     * frees only push in front of the head read here, and only the caller (the owner, or
     * the abandoned lock's holder) takes them. */
    for (int l = 0; l < 3; l++) {
        uint32_t n = 0;
        block_t *b =
            l == 0 ? page->free
            : l == 1
                ? page->local_free
                : xfree_head(page, atomic_load_explicit(&page->xthread_free, memory_order_acquire));
        for (; b && n <= page->capacity; b = block_next(b), n++) {
            if (b == p)
                lib_fatal(msg, p);
            if (block_outside(page, b))
                break; /* a corrupted link: malloc aborts when it gets there */
        }
    }
    /* Not on the page's lists: user data that happened to look like a key. */
}

/* malloc popped a block without the free key: a double free or a write after free. */
TEXT_COLD
void page_corrupt(page_t *page, void *b)
{
    (void)page;
    lib_fatal("malloc(): free block corrupted (double free or write after free)", b);
}

/* The same, for the malloc fast path's tail call: a noreturn function is called, not jumped
 * to, and the call made the fast path set up a stack frame. */
TEXT_COLD
void *page_corrupt_tail(void *b, page_t *page)
{
    page_corrupt(page, b);
}

/* The block that contains p (p may be an aligned interior pointer). */
TEXT_BUSY
void *page_block_start(page_t *page, void *p)
{
    size_t off = (size_t)((uint8_t *)p - page->start);
    return page->start + off - off % page->block_size;
}

/* In a page with aligned blocks: the start of the block p names (p is a block's start that
 * memalign did not move, or the pointer memalign handed out, as its mark says), or NULL when
 * p names none (an interior pointer). Reads the first word of p's block. */
TEXT_BUSY
void *page_block_named(page_t *page, void *p)
{
    uint8_t *s = page_block_start(page, p);
    size_t off = (size_t)((uint8_t *)p - s);
    /* off where memalign marked the block (aligned_mark_set), anything else otherwise */
    uintptr_t mark = aligned_mark_off(s);
    if (off == 0)
        return mark < page->block_size ? NULL : s; /* memalign moved this block's pointer */
    return mark == off ? s : NULL;
}

/* ---- purging page slots of live chunks ------------------------------------------------ */

/* Gives back the slots [first, end) of c that the caller holds (PAGE_PURGING), len bytes from
 * the first one's start: one madvise for neighbouring slots. Returns the bytes purged; a
 * purge the kernel refused leaves the slots DIRTY, for a later pass. */
static size_t purge_slots(chunk_t *c, unsigned first, unsigned end, size_t len)
{
    chunk_dense_lost(c, true);
    bool done = purge_give_back(c->base + ((size_t)first << c->page_shift), len, purge_how());
    size_t purged = 0;
    for (unsigned i = first; i < end; i++) {
        page_t *p = &c->pages[i];
        if (!done) {
            atomic_fetch_add_explicit(&c->ndirty, 1, memory_order_relaxed);
            atomic_store_explicit(&p->in_use, PAGE_DIRTY, memory_order_release);
            continue;
        }
        purged += p->dirty_bytes;
        atomic_fetch_sub_explicit(&stat_pages_dirty, p->dirty_bytes, memory_order_relaxed);
        atomic_store_explicit(&p->in_use, PAGE_FREE, memory_order_release);
    }
    atomic_fetch_add_explicit(&stat_purged, purged, memory_order_relaxed);
    return purged;
}

/* The one slot purge: c's DIRTY slots retired purge_delay before now (every one with force)
 * go DIRTY -> PURGING -> FREE, neighbours in one call, every one but the last of a range
 * dirty whole (a compiler's freed slots lie side by side: one call each was most of its
 * madvise calls). Held, a slot keeps the chunk
 * from going back to the arena (chunk_release waits), so its descriptor stays this chunk's.
 * *next: the earliest due time of those left (unchanged when none). Returns bytes. */
size_t page_slots_purge(chunk_t *c, uint32_t now, bool force, uint32_t *next)
{
    unsigned first = 0, end = 0; /* the slots held, not yet purged */
    size_t len = 0, purged = 0;
    for (unsigned i = 0;
         i < MAX_PAGES_PER_CHUNK && atomic_load_explicit(&c->ndirty, memory_order_relaxed); i++) {
        page_t *p = &c->pages[i];
        if (atomic_load_explicit(&p->in_use, memory_order_acquire) != PAGE_DIRTY)
            continue;
        if (!purge_is_due(p->retired_at, now, force, next))
            continue;
        uint8_t expect = PAGE_DIRTY;
        if (!atomic_compare_exchange_strong_explicit(&p->in_use, &expect, PAGE_PURGING,
                                                     memory_order_acq_rel, memory_order_relaxed))
            continue; /* the owner took it back */
        atomic_fetch_sub_explicit(&c->ndirty, 1, memory_order_relaxed);
        /* only what may be resident: the rest of the slot was never touched */
        if (end == i && end > first && len == (size_t)(i - first) << c->page_shift) {
            len += p->dirty_bytes; /* the slots before it dirty whole: one range */
            end = i + 1;
            continue;
        }
        if (end > first)
            purged += purge_slots(c, first, end, len);
        first = i;
        end = i + 1;
        len = p->dirty_bytes;
    }
    if (end > first)
        purged += purge_slots(c, first, end, len);
    return purged;
}

struct page_purge_walk {
    uint32_t now, next;
    bool force;
    size_t purged;
};

static void purge_chunk_pages(chunk_t *c, void *arg)
{
    struct page_purge_walk *w = arg;
    uint8_t kind = __atomic_load_n(&c->kind, __ATOMIC_RELAXED);
    if (kind == CHUNK_SMALL || kind == CHUNK_MEDIUM)
        w->purged += page_slots_purge(c, w->now, w->force, &w->next);
}

/* Purges DIRTY page slots of live chunks older than purge_delay (all when force); returns
 * the bytes purged and sets *next to the time the next one is due (0: none). */
size_t pages_purge(uint32_t now, bool force, uint32_t *next)
{
    struct page_purge_walk w = {now, 0, force, 0};
    if (atomic_load_explicit(&stat_pages_dirty, memory_order_relaxed))
        chunk_desc_foreach(purge_chunk_pages, &w);
    *next = w.next;
    return w.purged;
}
