/* thpalloc's types: every data structure of the allocator and its invariants, in one place
 * (as musl's mallocng keeps them), with the inlines that read them. What each layer does
 * with them is declared in the layers' headers (base.h and up, one a layer: docs/design.md,
 * "The library, bottom to top"). */
#ifndef THPALLOC_TYPES_H
#define THPALLOC_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "os.h"
#include "sizeclass.h"
#include "thp.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define HIDDEN __attribute__((visibility("hidden")))
#define NOINLINE __attribute__((noinline))

#define API __attribute__((visibility("default")))

/* Invariant checks: compiled in with -DTHPALLOC_DEBUG, free otherwise. */
#ifdef THPALLOC_DEBUG
void lib_assert_fail(const char *expr, const char *file, int line);
#define LIB_ASSERT(e) ((e) ? (void)0 : lib_assert_fail(#e, __FILE__, __LINE__))
#else
#define LIB_ASSERT(e) ((void)0)
#endif

/* ---- geometry ---------------------------------------------------------------------- */
#define CHUNK_SHIFT 21
#define CHUNK_SIZE ((size_t)1 << CHUNK_SHIFT) /* 2 MiB: the unit of THP advice and purge */
#define CHUNK_MASK (CHUNK_SIZE - 1)
#define OS_PAGE_SIZE ((size_t)4096)
/* Pages: a thread takes one per size class it uses, so their size sets what a thread that
 * allocates little costs; the classes above 1 KiB that a 16 KiB page fits badly take 64 KiB
 * pages (chunk.c, kind_of_class; docs/benchmarks.md, "Why the code is as it is"). */
/* 16 KiB: classes up to SMALL_PAGE_BLOCK_MAX, and those that fit such a page well */
#define SMALL_PAGE_SHIFT 14
#define MEDIUM_PAGE_SHIFT 16 /* 64 KiB: the other classes up to SMALL_MAX */
#define SMALL_PAGE_SIZE ((size_t)1 << SMALL_PAGE_SHIFT)
#define MEDIUM_PAGE_SIZE ((size_t)1 << MEDIUM_PAGE_SHIFT)
#define SMALL_PAGE_BLOCK_MAX ((size_t)1024)
#define MAX_PAGES_PER_CHUNK (CHUNK_SIZE >> SMALL_PAGE_SHIFT)
/* Split slots: the first page a heap takes for a class up to SUB_BLOCK_MAX is a sub-page of
 * 1 KiB, sixteen of which share one 16 KiB slot of a small chunk, so that a process or a
 * thread with a few blocks in each of many classes touches an OS page per four classes, not
 * one per class (docs/design.md, "Split slots"). The slot's own descriptor is a marker
 * (cls SPLIT_CLS, flags PAGE_SPLIT: never on a fast path); the sub-pages' descriptors are
 * the chunk's sub[] and sub2[]. Each class takes at most two sub-pages in a heap's life
 * (heap_t). */
#define SUB_PAGE_SHIFT 10
#define SUB_PAGE_SIZE ((size_t)1 << SUB_PAGE_SHIFT)
#define SUB_PAGES (SMALL_PAGE_SIZE / SUB_PAGE_SIZE)
#define SUB_BLOCK_MAX SUB_PAGE_SIZE
#define SPLITS 2    /* split slots a chunk (and a heap) has at most */
#define SPLIT_CLS 0 /* no size class is 0 */
/* A heap past this many slow-path calls is a busy one: what keeps a small process small
 * (sub-pages for every class, another class's kept page taken over) gives way to what
 * keeps frees on the fast path. */
#define HEAP_BUSY_OPS 4096
/* Times a sub-page of a busy heap is kept empty for its class before the class moves to
 * pages of its own. */
#define SUB_KEEPS_MAX 32
/* In a busy heap, a page kept empty this few slow-path calls ago is not taken over by
 * another class. */
#define KEPT_STEAL_AGE 256

/* A chunk of small objects is cut into pages of one size class each. */
enum chunk_kind {
    CHUNK_FREE = 0, /* descriptor on the free list */
    CHUNK_SMALL,    /* pages of 16 KiB: classes up to 1 KiB and some above, one heap's */
    CHUNK_MEDIUM,   /* pages of 64 KiB: the other classes up to 8 KiB, one heap's */
    CHUNK_LARGE,    /* one block of its own, spanning one or more chunks */
    CHUNK_EXTENT,   /* blocks above 8 KiB up to 1 MiB in runs of 4 KiB granules (extent.c) */
};
#define SMALL_MAX ((size_t)8 << 10)
/* The size classes a heap's pages serve: 1 .. sc_class_of(SMALL_MAX) (tests/unit-sizeclass). */
#define SMALL_CLASSES 57
#define LARGE_MIN (SC_MAX_SIZE + 1) /* above the extents' range */

/* Sizes up to DIRECT_MAX find their page in one load (heap->direct). */
#define DIRECT_MAX ((size_t)1024)
#define DIRECT_SLOTS (DIRECT_MAX / 16 + 1)

/* Requests above this fail with ENOMEM, as glibc's do (PTRDIFF_MAX). Up to it, rounding
 * to pages and chunks cannot wrap, and in a 32-bit process a 2 GiB block can be had. */
#define ALLOC_MAX ((size_t)PTRDIFF_MAX)

/* A free block: the list link and a key that marks it free, both mangled with a per-process
 * secret (block_secret, from the kernel's AT_RANDOM) and the block's own address, as
 * glibc's safe-linking does: an overflow into a free block or a write after free cannot
 * aim the list at an address of the attacker's choosing without knowing the secret, and
 * every pop checks that the block lies in its page and carries its key (page_corrupt
 * otherwise; only a block's start can carry it). The key also catches a block freed twice
 * before it is handed out twice. Only block_next/block_set_next/block_key touch them. Every block
 * is at least 16 bytes.
 * The key is 64 bits on 32-bit systems too, at offset 8: a live block's data there is the
 * caller's, and a free of a block whose second word held random data (a hash, say) read as
 * a double free once in 2^32 frees with a one-word key (2^-64 with this one, as on 64 bits). */
typedef struct block {
    uintptr_t link; /* next ^ secret.link ^ &block */
#if UINTPTR_MAX == 0xffffffffu
    uint32_t unused;
#endif
    uint64_t key; /* secret.key ^ &block while free */
} __attribute__((aligned(8))) block_t;
_Static_assert(offsetof(block_t, key) == 8 && sizeof(block_t) == 16, "the key's place in a block");
struct block_secret {
    uintptr_t link;
    uint64_t key; /* bit 63 set: never a live block's key, nor a memalign mark's (below) */
};
extern HIDDEN struct block_secret block_secret;
/* Reads AT_RANDOM once (init.c, before any block exists). */
HIDDEN void block_secret_init(void);

static inline uint64_t block_key(const block_t *b)
{
    return block_secret.key ^ (uintptr_t)b;
}
static inline block_t *block_next(const block_t *b)
{
    return (block_t *)(b->link ^ block_secret.link ^ (uintptr_t)b);
}
static inline void block_set_next(block_t *b, const block_t *next)
{
    b->link = (uintptr_t)next ^ block_secret.link ^ (uintptr_t)b;
}
/* Marks b free with its key and says whether it carried the key already. Every free of a
 * small block, whoever frees it, marks with this one atomic exchange: of two frees of b, in
 * one thread or two, at the same moment or not, the second reads the first's key and stops
 * the process (a load then a store let two racing frees both pass). Malloc clears the key of
 * every block it hands out, so only a free puts it in a live block, or a write of the
 * secret-derived value, which needs a read of a freed block first. */
static inline bool block_mark_free(block_t *b)
{
    uint64_t key = block_key(b);
    return __atomic_exchange_n(&b->key, key, __ATOMIC_RELAXED) == key;
}
/* memalign's mark at the start of a block whose pointer it moved off the start by off (16
 * bytes or more: those bytes are never the caller's): the first word mangled as a link is,
 * with ~off in place of next, so that no free block's link reads as one (next is NULL or a
 * pointer, ~off is neither), and no live block's data without the secret (page_block_named).
 * On 32 bits one word is not enough: a live block's first word of random data read as a
 * mark once in block_size / 2^32 (a free of a plain 8 KiB block beside memalign's stopped as
 * an invalid pointer about once in 500,000). There the third word, never the caller's
 * either, carries the same offset under the other secret, and both must agree: it is the
 * key's lower half, whose upper half malloc cleared, so the block never reads as free. */
static inline void aligned_mark_set(void *b, size_t off)
{
    uintptr_t *w = b;
    w[0] = ~(uintptr_t)off ^ block_secret.link ^ (uintptr_t)b;
#if UINTPTR_MAX == 0xffffffffu
    w[2] = ~(uintptr_t)off ^ (uintptr_t)block_secret.key ^ (uintptr_t)b;
#endif
}
/* The offset memalign's mark at b says (aligned_mark_set); anything from a block without
 * one. */
static inline uintptr_t aligned_mark_off(const void *b)
{
    const uintptr_t *w = b;
    uintptr_t off = ~(w[0] ^ block_secret.link ^ (uintptr_t)b);
#if UINTPTR_MAX == 0xffffffffu
    if (w[2] != (~off ^ (uintptr_t)block_secret.key ^ (uintptr_t)b))
        return UINTPTR_MAX;
#endif
    return off;
}
typedef struct heap heap_t;
typedef struct chunk chunk_t;
typedef struct arena arena_t;

/* A page: blocks of one size class.
 * Invariants: used = blocks handed out and not yet freed by the owner (blocks on
 * xthread_free still count); free, local_free, xthread_free and the blocks handed out
 * partition the first `capacity` blocks; capacity <= reserved, == reserved on the full list
 * (heap_free_full's tail check relies on it). */
typedef struct page {
    /* First cache line: what the fast paths read. */
    /* The owning heap while the page takes the fast free path (owned, flags == 0), the
     * owner + 1 when PAGE_IN_FULL is its only flag (fast_owner_full), else NULL: free
     * compares it with its own heap, one load for ownership and flags. */
    _Atomic(heap_t *) fast_owner;
    block_t *free;       /* the owner allocates from here */
    block_t *local_free; /* the owner's frees; becomes `free` when that runs dry */
    uint8_t *start;
    /* ceil(2^64 / block_size): off % block_size == 0 iff off * div_check < div_check */
    uint64_t div_check;
    uint32_t used;
    uint32_t block_size;
    /* reserved * block_size - sizeof(block_t): a free block with its link and key starts
     * at or below this offset (block_outside, one compare with memory; 0 for a split
     * slot's marker). 64 bits, as the offset it is compared with: a 32-bit one took a
     * load of its own in malloc's fast path. */
    uint64_t pop_max;
    uint8_t flags;          /* owner-only: PAGE_HAS_ALIGNED, PAGE_IN_FULL; 0 on the fast path */
    _Atomic uint8_t in_use; /* enum page_state */
    uint8_t cls;
    _Atomic uint8_t in_full; /* on the heap's full list (see page-queue.c) */
    /* Owner-only: the last heap_page_retire kept the page empty, alone in its queue, with
     * nothing to trim then or later (page_trim_kept's reasons that last), and no queue
     * change since (page-queue.c clears it): the fast free that empties it again only
     * counts, as that retire would (free_inline). */
    bool kept_quiet;
    /* Second cache line: the slow paths'. */
    uint32_t capacity;
    uint32_t reserved;
    /* Other threads' frees: 0, or the list's head as its offset from start + 1 in the low 32
     * bits and the number of blocks listed in the high 32 (xfree_*): the owner takes the
     * count with the list, without a walk that would miss on every block they wrote. */
    _Atomic uint64_t xthread_free;
    struct page *next, *prev; /* in a heap queue */
    chunk_t *chunk;
    uint32_t retired_at; /* ms clock when the page became PAGE_DIRTY */
    /* PAGE_DIRTY: the bytes it counts in stat_pages_dirty, what may be resident (the
     * carved part of a page, the whole slot when more was: a marker, an older tail). */
    uint32_t dirty_bytes;
    /* Small pages: OS pages the purger gave back while the page had live blocks (bit i:
     * the i-th 4 KiB). Every block overlapping one is free and on no list; the owner takes
     * them back (page_refill_holes) before it carves new blocks. Written under the
     * reclaim handshake; read by remote frees (double free check). */
    uint16_t holes;
    /* The slot was resident when the page took it (a dirty slot or chunk): beyond the
     * carved blocks there may be old pages, which the purger gives back (reclaim.c). */
    bool tail_resident;
    /* The owner has allocated from it since it took the page (a new page, or one its slow
     * path chose): only such a page is kept empty for the next allocation (heap_page_retire). */
    bool alloc_seen;
    bool is_sub; /* a sub-page of a split slot (page_is_sub, in one load) */
    /* A sub-page: how often it was kept empty as its class's only page (heap_page_retire). */
    uint8_t sub_keeps;
    uint32_t kept_at; /* the heap's slow_ops when it was last kept empty (heap_page_retire) */
} __attribute__((aligned(128))) page_t; /* a power of two: the page index is a shift */
_Static_assert(sizeof(page_t) == 128, "page_t: the page index is a shift of 7");

static inline block_t *xfree_head(const page_t *page, uint64_t v)
{
    return v ? (block_t *)(page->start + (uint32_t)v - 1) : NULL;
}
static inline uint32_t xfree_count(uint64_t v)
{
    return (uint32_t)(v >> 32);
}

/* A page slot's life. Only the owner heap moves a slot to PAGE_USED (from FREE or, by CAS,
 * from DIRTY) and out of it; the purger (any thread) moves DIRTY -> PURGING -> FREE by CAS,
 * so a slot is never purged while in use; a chunk goes back to the arena only once every
 * slot is FREE (chunk_release claims DIRTY slots and waits out PURGING ones). */
enum page_state {
    PAGE_FREE = 0,    /* unused; its memory may or may not be resident */
    PAGE_USED = 1,    /* holds blocks of one class */
    PAGE_DIRTY = 2,   /* unused, resident, to be purged after purge_delay */
    PAGE_PURGING = 3, /* the purger is giving its memory back */
};

#define PAGE_HAS_ALIGNED 1 /* memalign moved the pointer of some blocks (page_block_named) */
#define PAGE_IN_FULL 2     /* on the heap's full list (owner's copy of in_full) */
#define PAGE_HAS_HOLES 4   /* holes != 0: frees take the slow path, which checks them */
#define PAGE_RESET 8       /* reset by the reclaimer: frees take the slow path until refilled */
#define PAGE_SPLIT 16      /* a split slot's marker: its blocks are its sub-pages' */
#define PAGE_TRIMMED 32    /* reset by its owner's trim (heap_page_retire): refilled, a refault */

/* fast_owner of an owned page whose only flag is PAGE_IN_FULL: the owner + 1 (never a heap's
 * address), so that the owner's free into it goes to heap_free_full, not the general slow
 * path (every other thread's compare fails). */
static inline heap_t *fast_owner_full(const heap_t *owner)
{
    return (heap_t *)((uintptr_t)owner + 1);
}

/* fast_owner == heap, read relaxed. On x86 a compare with memory: gcc loads an atomic into
 * a register first, an instruction more on free's fast path. */
static inline bool page_fast_owned(const page_t *page, const heap_t *heap)
{
#if defined(__x86_64__) || defined(__i386__)
    bool owned;
    __asm__("cmp %1, %2" : "=@cce"(owned) : "r"(heap), "m"(*(heap_t *const *)&page->fast_owner));
    return owned;
#else
    return atomic_load_explicit(&page->fast_owner, memory_order_relaxed) == heap;
#endif
}

/* Sets the owner-only flags and, with them, whether frees take the fast path. */
static inline void page_set_flags(page_t *page, heap_t *owner, uint8_t flags)
{
    page->flags = flags;
    heap_t *fast = !flags ? owner : flags == PAGE_IN_FULL && owner ? fast_owner_full(owner) : NULL;
    atomic_store_explicit(&page->fast_owner, fast, memory_order_relaxed);
}

/* true when p is not the start of a block of page (an interior or stray pointer): one
 * multiplication (Lemire, Kaser, Kurz: divisibility by direct computation; exact for
 * offsets and block sizes below 2^32). */
static inline bool block_misaligned(const page_t *page, const void *p)
{
    uint64_t off = (uint64_t)((const uint8_t *)p - page->start);
#if defined(__x86_64__)
    /* the multiplication from memory: gcc loads div_check into a register for both uses,
     * one instruction more on free's fast path */
    __asm__("imulq %1, %0" : "+r"(off) : "m"(page->div_check) : "cc");
    return off >= page->div_check;
#else
    return off * page->div_check >= page->div_check;
#endif
}

/* true unless b lies inside page with room for its link and key: what a pop checks before
 * it reads a block a link led to (a corrupted link that lands elsewhere aborts, not reads).
 * A b inside the page but off a block boundary fails the key check instead: its key would
 * have to be forged with the secret. One comparison, no multiplication: it is on the
 * malloc fast path. */
static inline bool block_outside(const page_t *page, const block_t *b)
{
    uint64_t off = (uint64_t)((const uint8_t *)b - page->start);
    return off > page->pop_max;
}

/* true when block p of a small page overlaps one of its holes (so it is free already). */
static inline bool block_in_hole(const page_t *page, const void *p)
{
    uint16_t holes = __atomic_load_n(&page->holes, __ATOMIC_RELAXED);
    if (!holes)
        return false;
    size_t off = (size_t)((const uint8_t *)p - page->start);
    unsigned first = (unsigned)(off / OS_PAGE_SIZE);
    unsigned last = (unsigned)((off + page->block_size - 1) / OS_PAGE_SIZE);
    uint32_t span = ((2u << last) - 1) & ~((1u << first) - 1);
    return (holes & span) != 0;
}

/* The page_shift of chunks without pages: any offset in a chunk, shifted by it, gives page
 * index 0, with a shift count below the word size (a larger one is undefined behaviour). */
#define PAGE_SHIFT_NONE (sizeof(uintptr_t) * 8 - 1)

enum { CHUNK_DENSE_NONE = 0, CHUNK_DENSE_CANDIDATE, CHUNK_DENSE_HUGE };

/* A chunk descriptor, kept outside the chunk so that large blocks start 2 MiB-aligned.
 * The registry maps every chunk address to its descriptor. */
struct chunk {
    uint8_t *base;
    uint8_t kind;       /* enum chunk_kind */
    uint8_t page_shift; /* log2 of page size; PAGE_SHIFT_NONE for large and unused */
    uint8_t npages;
    uint8_t pages_used;
    /* 1 + the highest slot that has been USED in the chunk's life (page_init): the walks of
     * a thread's exit and of adoption stop there instead of reading every descriptor (a
     * short-lived thread's chunk used a few of its 128 slots; the walks dominated its life,
     * and wrote every slot's descriptor page). The owner's, or whoever holds the chunk
     * unowned. */
    uint8_t used_hi;
    _Atomic uint8_t ndirty; /* slots in PAGE_DIRTY (counted before a slot shows it) */
    /* CHUNK_SMALL/MEDIUM: CHUNK_DENSE_* (dense.c): nearly all in use and waiting for the
     * purger's look, or collapsed into a huge page (until a purge inside splits it). */
    _Atomic uint8_t dense;
    /* CHUNK_SMALL/MEDIUM: the chunk is huge-advised (MADV_HUGEPAGE) for density: taken
     * ahead for a growing heap (chunk_new) or collapsed (dense.c). A purge inside drops the
     * advice (chunk_dense_lost): khugepaged would collapse it again however sparse. */
    _Atomic uint8_t dense_advised;
    _Atomic(heap_t *) owner;   /* NULL: abandoned, or large (not owned) */
    _Atomic uint8_t abandoned; /* on the abandoned list (changed under its lock) */
    bool orphan;               /* left unadopted for purge_delay: purged now when it empties */
    uint32_t abandoned_at;     /* ms clock when it went on the abandoned list */
    uint32_t abandoned_idle;   /* bytes of its empty pages then (in stat_pages_dirty) */
    chunk_t *next, *prev;      /* heap's chunk list / abandoned list / free list */
    arena_t *arena;
    struct extent_map *ext; /* CHUNK_EXTENT: its runs (extent.c) */
    /* CHUNK_SMALL: 1 + the index of its split slots (0: none), and which of their
     * sub-pages are free (bit j: sub-page j, chunk_sub); the owner's, or the purger's
     * holding it. */
    uint8_t split[SPLITS];
    uint32_t sub_free;
    /* large blocks */
    size_t large_size;    /* usable bytes */
    size_t nchunks;       /* chunks in the run */
    uint8_t *large_start; /* == base unless over-aligned */
    page_t pages[MAX_PAGES_PER_CHUNK];
    page_t sub2[SUB_PAGES]; /* the second split slot's: touched only by a heap that needs one */
};

/* A descriptor from meta's segments (chunk_desc_alloc): the first split slot's sub-pages
 * right before the header, so that a small process's sub-pages, header and first pages
 * share one OS page, and a chunk without pages can do with a short descriptor. */
typedef struct chunk_slot {
    page_t sub[SUB_PAGES];
    chunk_t c;
} chunk_slot_t;

/* What a chunk without pages (an extent chunk's, in its map) has of its descriptor: the
 * header and pages[0], whose NULL fast_owner sends every free to the slow path. */
#define CHUNK_DESC_SHORT (offsetof(chunk_t, pages) + sizeof(page_t))

static inline page_t *chunk_sub1(const chunk_t *c)
{
    return ((chunk_slot_t *)((uintptr_t)c - offsetof(chunk_slot_t, c)))->sub;
}

/* The page of chunk c that holds p (chunks are 2 MiB-aligned; a large block's
 * PAGE_SHIFT_NONE makes every offset page 0). */
static inline page_t *page_of(chunk_t *c, const void *p)
{
    return &c->pages[((uintptr_t)p & CHUNK_MASK) >> c->page_shift];
}

/* Sub-page j (0 .. SPLITS * SUB_PAGES - 1) of c: of split slot j / SUB_PAGES. */
static inline page_t *chunk_sub(chunk_t *c, unsigned j)
{
    return j < SUB_PAGES ? &chunk_sub1(c)[j] : &c->sub2[j - SUB_PAGES];
}

static inline bool page_is_sub(const page_t *p)
{
    const chunk_t *c = p->chunk;
    const page_t *s = chunk_sub1(c);
    return (p >= s && p < s + SUB_PAGES) || (p >= c->sub2 && p < c->sub2 + SUB_PAGES);
}

static inline unsigned sub_index(const page_t *p)
{
    const chunk_t *c = p->chunk;
    const page_t *s = chunk_sub1(c);
    return p >= s && p < s + SUB_PAGES ? (unsigned)(p - s) : SUB_PAGES + (unsigned)(p - c->sub2);
}

/* The page that block p of a small-object chunk lies in, given page_of(c, p): that page, or
 * the sub-page of a split slot (the slow paths: the fast ones never see a marker's blocks). */
static inline page_t *page_sub_of(chunk_t *c, page_t *page, const void *p)
{
    if (unlikely(page->cls == SPLIT_CLS) && c->kind == CHUNK_SMALL &&
        atomic_load_explicit(&page->in_use, memory_order_acquire) == PAGE_USED) {
        unsigned s = (unsigned)(page - c->pages) + 1 == c->split[0] ? 0 : 1;
        page = chunk_sub(c, s * SUB_PAGES + (((uintptr_t)p >> SUB_PAGE_SHIFT) & (SUB_PAGES - 1)));
    }
    return page;
}

/* The page that block p of a small-object chunk lies in (page_sub_of). */
static inline page_t *page_of_block(chunk_t *c, const void *p)
{
    return page_sub_of(c, page_of(c, p), p);
}

/* A chunk's page descriptors, for walks: its slots, then its split slots' sub-pages while
 * it has them (a sub-page is in use only then). */
static inline unsigned chunk_page_count(const chunk_t *c)
{
    return c->npages + (c->split[1] ? 2u * SUB_PAGES : c->split[0] ? (unsigned)SUB_PAGES : 0u);
}
/* The next index of a walk over the descriptors that may hold blocks: past used_hi, the
 * split slots' sub-pages (for (i = 0; i < chunk_page_count(c); i = chunk_page_next(c, i))). */
static inline unsigned chunk_page_next(const chunk_t *c, unsigned i)
{
    return i + 1 == c->used_hi ? c->npages : i + 1;
}
static inline page_t *chunk_page(chunk_t *c, unsigned i)
{
    return i < c->npages ? &c->pages[i] : chunk_sub(c, i - c->npages);
}
/* In use and holding blocks (a split slot's marker holds none of its own). */
static inline bool page_has_blocks(const page_t *p, memory_order mo)
{
    return atomic_load_explicit(&p->in_use, mo) == PAGE_USED && p->cls != SPLIT_CLS;
}

/* ---- arena: address space reserved in big pieces, handed out in chunk runs ---------- */
#define ARENA_MAX_CHUNKS 512
struct arena {
    uint8_t *base;
    uint32_t nchunks;
    uint32_t nfree;
    bool dedicated; /* one large block's own mapping: released when it is freed */
    bool idle;      /* every chunk free and purged since idle_since (ms clock) */
    uint32_t idle_since;
    size_t huge_chunks; /* chunks under MADV_HUGEPAGE */
    arena_t *next;
    uint64_t used[ARENA_MAX_CHUNKS / 64];  /* chunk handed out */
    uint64_t dirty[ARENA_MAX_CHUNKS / 64]; /* free, maybe resident, not zero */
    /* free, purged by the delayed purge at freed_at (arena.c, a refault if taken soon) */
    uint64_t purged_late[ARENA_MAX_CHUNKS / 64];
    /* strict overcommit (vm.overcommit_memory = 2): chunk read/write, charged */
    uint64_t committed[ARENA_MAX_CHUNKS / 64];
    uint8_t advice[ARENA_MAX_CHUNKS];    /* enum os_advice the chunk carries, | ADVICE_MAYBE_OLD */
    uint32_t freed_at[ARENA_MAX_CHUNKS]; /* ms clock when it became dirty, or padded */
    /* A live large block's tail that kept a huge page from an earlier use: the bytes the
     * block uses in it (0: none); the rest goes after purge_delay. */
    uint32_t padded[ARENA_MAX_CHUNKS];
};

/* advice[] bit: purged with MADV_FREE, so old contents may come back (not known zero). */
#define ADVICE_MAYBE_OLD 0x80
#define ADVICE_MASK 0x7f

/* Dedicated mappings may be longer than the advice table: their chunks beyond it are
 * fresh, hence unadvised. */
static inline enum os_advice advice_get(const arena_t *a, size_t i)
{
    return i < ARENA_MAX_CHUNKS ? (enum os_advice)(a->advice[i] & ADVICE_MASK) : OS_ADVICE_NONE;
}

/* The policy in force: the key table's values (config.h, struct cfg_values) embedded whole,
 * so that resolving fills them by key and nothing is copied field by field (policy.c), and
 * read under the names the allocator has always used (thp.mode, thp.threshold, ...): the same
 * bytes, checked below. */
struct policy {
    union {
        struct cfg_values values;
        struct {
            struct thp_policy thp; /* thp, thp_threshold */
            size_t arena_size;
            long purge_delay_ms; /* < 0: never */
            enum os_purge purge;
            bool stats_at_exit;
            bool log_problems;
            size_t thp_dense; /* percent; 0: off (purge-rules.h, dense_*) */
        };
    };
    /* Without the purger thread, a free that leaves a resident extent run this long gives it
     * back at once (extent.c, trim); 0: never. Not a key of its own: the tests set it. */
    size_t trim_threshold;
    /* Trims a purge_delay made at once; past them a storm's go in batches (extent.c,
     * trim_now). Not a key of its own: the tests set it. */
    unsigned trim_burst;
};
#define POLICY_SAME(a, b) (offsetof(struct policy, a) == offsetof(struct policy, values.b))
_Static_assert(POLICY_SAME(thp.mode, thp) && POLICY_SAME(thp.threshold, thp_threshold) &&
                   POLICY_SAME(arena_size, arena_size) &&
                   POLICY_SAME(purge_delay_ms, purge_delay_ms) && POLICY_SAME(purge, purge) &&
                   POLICY_SAME(stats_at_exit, stats_at_exit) &&
                   POLICY_SAME(log_problems, log_problems) && POLICY_SAME(thp_dense, thp_dense),
               "struct policy's names are struct cfg_values's fields");
#undef POLICY_SAME
/* 64 KiB: half glibc's trim threshold for the top of its heap, the one free memory glibc
 * gives back at free. */
#define TRIM_THRESHOLD_DEFAULT ((size_t)64 << 10)
/* 8: room for the few trims a program's start-up makes before it goes idle */
#define TRIM_BURST_DEFAULT 8u

/* ---- heap: one per thread ----------------------------------------------------------- */
typedef struct page_queue {
    page_t *first, *last;
} page_queue_t;

/* p is the only page its class allocates from (full pages are on the heap's full list). */
static inline bool page_alone(const page_queue_t *q, const page_t *p)
{
    return q->first == p && !p->next;
}
#define EXT_CACHE_SLOTS 16
typedef struct chunk_queue {
    chunk_t *first, *last;
} chunk_queue_t;

struct heap {
    page_t *direct[DIRECT_SLOTS]; /* by (size+15)/16: the page to allocate from */
    /* The reclaim handshake (reclaim.c): the owner sets busy around every use of its
     * owner-only structures; the purger sets claimed, and works on the heap only when,
     * after a process-wide barrier (membarrier), it sees busy clear. */
    _Atomic int busy;
    _Atomic int claimed;
    uint32_t slow_ops; /* owner-only count of slow-path calls: activity, read by the purger */
    /* the purger's own notes: slow_ops when last looked at, since when, when reclaimed */
    uint32_t seen_ops, seen_at, reclaimed_ops, reclaim_pass;
    bool reclaimed;     /* also cleared by the owner: it is active again, wake the purger */
    uint8_t purge_tick; /* owner-only: heavier events towards an inline look (purge-signal.c) */
    page_queue_t queues[SMALL_CLASSES];
    page_queue_t full;          /* pages without a free block */
    _Atomic int full_has_xfree; /* another thread freed into a full page */
    chunk_queue_t chunks[2];    /* owned chunks, small and medium (list through next/prev) */
    /* bit cls: the class had its first page, which comes cheap: a sub-page up to
     * SUB_BLOCK_MAX, a 16 KiB page of a small chunk for the first medium class; its second,
     * another sub-page if there is room (chunk.c, chunk_page_new) */
    uint64_t first_taken, second_taken;
    /* bit cls: a page of the class that the owner trimmed was refilled (a refault): the
     * class's kept pages are no longer trimmed (heap.c, page_trim_kept) */
    uint64_t trim_refaulted;
    bool medium_in_small; /* one medium class had its first page in a small chunk */
    /* Bytes stat_pages_dirty counts beyond this heap's dirty slots (chunk.c, dirty_credit):
     * the owner's, or the purger's under the claim; read by purger_dirty_now. */
    uint32_t dirty_credit;
    /* bit cls: heap_page_retire kept a page of the class empty since the heap was last
     * parked (heap_park_kept walks these; none: kept_page_steal need not look) */
    uint64_t kept_mask;
    /* Extents this thread freed, kept for its next allocation of the same length
     * (extent.c): owner-only, or the purger's under the claim. */
    void *ext_cache[EXT_CACHE_SLOTS];
    uint16_t ext_cache_len[EXT_CACHE_SLOTS];
    uint8_t ext_cache_era[EXT_CACHE_SLOTS]; /* ext_cache_eras when the block came in */
    uint8_t ext_cache_eras;                 /* one more every purge_delay (extent_cache_age) */
    uint32_t ext_cache_era_at;              /* ms clock when the era began */
    uint32_t ext_cache_looked;              /* slow_ops at the owner's last look */
    uint32_t ext_cache_n;
    size_t ext_cache_bytes; /* also read by the statistics */
    heap_t *next_all;       /* all heaps ever made */
    heap_t *next_free;      /* free heap list */
    bool in_use;
};

static inline bool heap_is_busy(const heap_t *heap)
{
    return heap->slow_ops >= HEAP_BUSY_OPS;
}

#endif
