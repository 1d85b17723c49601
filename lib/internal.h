/* thpalloc internals: every data structure of the allocator and its invariants, in one
 * place (as musl's mallocng keeps them). Layering: docs/design.md, "The library, bottom to top". */
#ifndef THPALLOC_INTERNAL_H
#define THPALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * every pop checks that the block lies in its page and carries its key (malloc_corrupt
 * otherwise; only a block's start can carry it). The key also catches a block freed twice
 * before it is handed out twice. Only block_next/block_set_next/block_key touch them. Every block
 * is at least 16 bytes. */
typedef struct block {
    uintptr_t link; /* next ^ secret.link ^ &block */
    uintptr_t key;  /* secret.key ^ &block while free */
} block_t;
struct block_secret {
    uintptr_t link, key;
};
extern HIDDEN struct block_secret block_secret;
/* Reads AT_RANDOM once (init.c, before any block exists). */
HIDDEN void block_secret_init(void);

static inline uintptr_t block_key(const block_t *b)
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
typedef struct heap heap_t;
typedef struct chunk chunk_t;
typedef struct arena arena_t;

/* A page: blocks of one size class.
 * Invariants: used = blocks handed out and not yet freed by the owner (blocks on
 * xthread_free still count); free, local_free, xthread_free and the blocks handed out
 * partition the first `capacity` blocks; capacity <= reserved. */
typedef struct page {
    /* First cache line: what the fast paths read. */
    /* The owning heap while the page takes the fast free path (owned, flags == 0), else
     * NULL: free compares it with its own heap, one load for ownership and flags. */
    _Atomic(heap_t *) fast_owner;
    block_t *free;       /* the owner allocates from here */
    block_t *local_free; /* the owner's frees; becomes `free` when that runs dry */
    uint8_t *start;
    /* ceil(2^64 / block_size): off % block_size == 0 iff off * div_check < div_check */
    uint64_t div_check;
    uint32_t used;
    uint32_t block_size;
    uint32_t span;          /* reserved * block_size: a block starts below this offset */
    uint8_t flags;          /* owner-only: PAGE_HAS_ALIGNED, PAGE_IN_FULL; 0 on the fast path */
    _Atomic uint8_t in_use; /* enum page_state */
    uint8_t cls;
    _Atomic uint8_t in_full; /* on the heap's full list (see page-queue.c) */
    /* Second cache line: the slow paths'. */
    uint32_t capacity;
    uint32_t reserved;
    _Atomic(block_t *) xthread_free; /* other threads' frees */
    struct page *next, *prev;        /* in a heap queue */
    chunk_t *chunk;
    uint32_t retired_at; /* ms clock when the page became PAGE_DIRTY */
    /* Small pages: OS pages the purger gave back while the page had live blocks (bit i:
     * the i-th 4 KiB). Every block overlapping one is free and on no list; the owner takes
     * them back (page_refill_holes) before it carves new blocks. Written under the
     * reclaim handshake; read by remote frees (double free check). */
    uint16_t holes;
    /* The slot was resident when the page took it (a dirty slot or chunk): beyond the
     * carved blocks there may be old pages, which the purger gives back (reclaim.c). */
    bool tail_resident;
    /* The owner has allocated from it since it took the page (a new page, or one its slow
     * path chose): only such a page is kept empty for the next allocation (page_retire). */
    bool alloc_seen;
    bool is_sub; /* a sub-page of a split slot (page_is_sub, in one load) */
    /* A sub-page: how often it was kept empty as its class's only page (page_retire). */
    uint8_t sub_keeps;
    uint32_t kept_at; /* the heap's slow_ops when it was last kept empty (page_retire) */
} __attribute__((aligned(128))) page_t; /* a power of two: the page index is a shift */

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

#define PAGE_HAS_ALIGNED 1 /* interior (aligned) pointers may be freed */
#define PAGE_IN_FULL 2     /* on the heap's full list (owner's copy of in_full) */
#define PAGE_HAS_HOLES 4   /* holes != 0: frees take the slow path, which checks them */
#define PAGE_RESET 8       /* reset by the reclaimer: frees take the slow path until refilled */
#define PAGE_SPLIT 16      /* a split slot's marker: its blocks are its sub-pages' */
#define PAGE_TRIMMED 32    /* reset by its owner's trim (page_retire): refilled, a refault */

/* Sets the owner-only flags and, with them, whether frees take the fast path. */
static inline void page_set_flags(page_t *page, heap_t *owner, uint8_t flags)
{
    page->flags = flags;
    atomic_store_explicit(&page->fast_owner, flags ? NULL : owner, memory_order_relaxed);
}

/* true when p is not the start of a block of page (an interior or stray pointer): one
 * multiplication (Lemire, Kaser, Kurz: divisibility by direct computation; exact for
 * offsets and block sizes below 2^32). */
static inline bool block_misaligned(const page_t *page, const void *p)
{
    uint64_t off = (uint64_t)((const uint8_t *)p - page->start);
    return off * page->div_check >= page->div_check;
}

/* true unless b lies inside page with room for its link and key: what a pop checks before
 * it reads a block a link led to (a corrupted link that lands elsewhere aborts, not reads).
 * A b inside the page but off a block boundary fails the key check instead: its key would
 * have to be forged with the secret. One comparison, no multiplication (4 instructions off
 * the malloc fast path). */
static inline bool block_outside(const page_t *page, const block_t *b)
{
    uint64_t off = (uint64_t)((const uint8_t *)b - page->start);
    return off > page->span - sizeof(block_t);
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

/* A chunk descriptor, kept outside the chunk so that large blocks start 2 MiB-aligned.
 * The registry maps every chunk address to its descriptor. */
struct chunk {
    uint8_t *base;
    uint8_t kind;       /* enum chunk_kind */
    uint8_t page_shift; /* log2 of page size; PAGE_SHIFT_NONE for large and unused */
    uint8_t npages;
    uint8_t pages_used;
    _Atomic uint8_t ndirty;    /* slots in PAGE_DIRTY (counted before a slot shows it) */
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
static inline page_t *chunk_page(chunk_t *c, unsigned i)
{
    return i < c->npages ? &c->pages[i] : chunk_sub(c, i - c->npages);
}
/* In use and holding blocks (a split slot's marker holds none of its own). */
static inline bool page_has_blocks(const page_t *p, memory_order mo)
{
    return atomic_load_explicit(&p->in_use, mo) == PAGE_USED && p->cls != SPLIT_CLS;
}

/* ---- registry: is this pointer ours? O(1), two loads ----------------------------- */
#if UINTPTR_MAX > 0xffffffffu
/* 48: arm64's user space (48-bit VA: mmap hands out addresses near 2^48); x86-64's is 47
 * bits, and with 5-level paging mmap stays below 2^47 unless given a higher hint. */
#define REG_ADDR_BITS 48
#define REG_LEAF_BITS 13
#else
#define REG_ADDR_BITS 32 /* 32-bit programs: the whole space, 2048 chunks */
#define REG_LEAF_BITS 6
#endif
/* Beyond the registry's range: never on 32-bit (the 64-bit cast keeps the shift defined). */
#define REG_OUT_OF_RANGE(a) ((uint64_t)(a) >> REG_ADDR_BITS)
#define REG_ROOT_BITS (REG_ADDR_BITS - CHUNK_SHIFT - REG_LEAF_BITS)
#define REG_REGION_SHIFT (CHUNK_SHIFT + REG_LEAF_BITS) /* a root entry's span: 16 GiB */
/* Root entries are offsets from registry_empty_leaf (a leaf of NULLs in .bss, never
 * written), so that a lookup has no NULL test for a missing leaf: 0 means "empty". */
extern HIDDEN _Atomic uintptr_t registry_root[1u << REG_ROOT_BITS];
extern HIDDEN chunk_t *registry_empty_leaf[1u << REG_LEAF_BITS];
/* The root entry of one region, the first one the two-level table gets (what lies outside
 * the first arena: another arena, a block with a mapping of its own), kept in .data among
 * the globals every process writes: the root is indexed by the address's top bits and mmap
 * puts arenas near the top, so their entry was a page of its own that such a process
 * wrote. Its region goes from REG_REGION_NONE to that region once, and that region's entry
 * is here, never in the root. */
#define REG_REGION_NONE UINTPTR_MAX /* no address's region */
/* And the first arena's chunks apart, in a leaf of their own (registry_claim_hot): most
 * processes have that one arena, so a lookup there is a subtraction, a comparison and a
 * load, and no leaf of the two-level table is written for it. span is 0 until claimed, and
 * set last (release): base and leaf are valid once a lookup sees it. */
struct registry_hot {
    _Atomic uintptr_t span; /* bytes from base: the first arena's */
    _Atomic uintptr_t base;
    chunk_t **_Atomic leaf; /* span >> CHUNK_SHIFT entries, from meta.c */
    _Atomic uintptr_t region;
    _Atomic uintptr_t off; /* as a root entry */
};
extern HIDDEN struct registry_hot registry_hot;
/* Makes [base, base + nchunks chunks) the first arena's range, once (the arena lock held);
 * false when claimed already or there is no memory for its leaf. */
HIDDEN bool registry_claim_hot(uint8_t *base, size_t nchunks);

/* The descriptor of the chunk holding p, the unused-chunk marker, or NULL (not ours; also
 * for NULL itself). */
static inline chunk_t *registry_lookup(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    /* span first: read with acquire, so that base and leaf are those it was set with */
    uintptr_t span = atomic_load_explicit(&registry_hot.span, memory_order_acquire);
    uintptr_t in = a - atomic_load_explicit(&registry_hot.base, memory_order_relaxed);
    if (likely(in < span))
        return __atomic_load_n(
            &atomic_load_explicit(&registry_hot.leaf, memory_order_relaxed)[in >> CHUNK_SHIFT],
            __ATOMIC_ACQUIRE);
    uintptr_t off;
    /* The hot region first: it needs no range check (no region is out of range). */
    if (likely(a >> REG_REGION_SHIFT ==
               atomic_load_explicit(&registry_hot.region, memory_order_acquire))) {
        off = atomic_load_explicit(&registry_hot.off, memory_order_acquire);
    } else {
        if (unlikely(REG_OUT_OF_RANGE(a)))
            return NULL;
        off = atomic_load_explicit(&registry_root[a >> REG_REGION_SHIFT], memory_order_acquire);
    }
    chunk_t **leaf = (chunk_t **)((uintptr_t)registry_empty_leaf + off);
    return leaf[(a >> CHUNK_SHIFT) & ((1u << REG_LEAF_BITS) - 1)];
}
HIDDEN bool registry_set(uint8_t *base, size_t nchunks, chunk_t *desc);
/* What the registry holds for a chunk of an arena that is not in use: a marker, so that a
 * double free or a stray pointer into our address space is caught instead of being handed
 * to glibc. Dedicated mappings are unmapped on free: nothing (the space may be reused). */
extern HIDDEN const chunk_t chunk_unused;
static inline chunk_t *registry_unused(const arena_t *a);

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

struct policy {
    struct thp_policy thp;
    size_t arena_size;
    long purge_delay_ms; /* < 0: never */
    enum os_purge purge;
    bool stats_at_exit;
    /* Without the purger thread, a free that leaves a resident extent run this long gives it
     * back at once (extent.c, trim); 0: never. Not a key of its own: the tests set it. */
    size_t trim_threshold;
};
/* 64 KiB: half glibc's trim threshold for the top of its heap, the one free memory glibc
 * gives back at free. */
#define TRIM_THRESHOLD_DEFAULT ((size_t)64 << 10)
extern HIDDEN struct policy policy_in_force;
/* policy.c: resolves the policy on the first chunk-level event (never at process start). */
HIDDEN void policy_ensure_loaded(void);
HIDDEN void policy_say_passthrough(size_t pagesize);
HIDDEN void introspect_set_active(bool active);
HIDDEN bool introspect_in_charge(void); /* introspect_set_active(true) was called */
HIDDEN void introspect_add_range(void *base, size_t size);
HIDDEN void introspect_remove_range(void *base);
HIDDEN void policy_fork_prepare(void);
HIDDEN void policy_fork_parent(void);
HIDDEN void policy_fork_child(void);

/* Gets a run of n chunks for `use` (advised as policy says); is_zero tells whether the
 * memory is known to read as zero. NULL + ENOMEM when address space runs out. */
HIDDEN uint8_t *arena_alloc_chunks(size_t n, size_t align, enum thp_use use, size_t block_size,
                                   arena_t **arena_out, bool *is_zero);
HIDDEN void arena_free_chunks(arena_t *arena, uint8_t *base, size_t n);
/* The same, purged now instead of after purge_delay (what an exited thread left: no thread
 * of the process is working in it, so keeping it resident for reuse only spreads the next
 * owner's pages over memory that is resident already). */
HIDDEN void arena_free_chunks_purged(arena_t *arena, uint8_t *base, size_t n);
/* The same for chunks that read as zero (the caller never wrote them, or purged them with
 * DONTNEED: an empty extent chunk whose run was purged): not waiting, not purged again. */
HIDDEN void arena_free_chunks_clean(arena_t *arena, uint8_t *base, size_t n);
/* Extends a run of n chunks to want chunks in place, when the chunks after it are free. */
HIDDEN bool arena_grow_chunks(arena_t *arena, uint8_t *base, size_t n, size_t want,
                              size_t block_size);
/* Resizes a dedicated mapping (one large block's, desc) to want chunks, in place or moved
 * by mremap (no copy), advised for block_size, its registry entries with it. Returns its
 * base, or NULL (ENOMEM) with the block untouched. */
HIDDEN uint8_t *arena_resize_dedicated(arena_t *arena, chunk_t *desc, size_t want,
                                       size_t block_size);
/* When chunk base of a was freed last (the ms clock): a chunk handed out resident (not
 * is_zero) has waited that long already, and its unused parts wait only for the rest of
 * purge_delay. The caller owns the chunk. */
HIDDEN uint32_t arena_freed_at(const arena_t *a, const uint8_t *base);
/* Gives a large block's run the advice its (new) size calls for. */
HIDDEN void arena_readvise(arena_t *arena, uint8_t *base, size_t n, size_t block_size);
/* The purger's side of the arena (purger.c drives these): purges the free chunks whose
 * purge_delay has passed and the arenas idle as long, and returns when the next is due (0:
 * none); purges every free chunk now (bytes). */
HIDDEN uint32_t arena_purge_due(uint32_t now);
HIDDEN size_t arena_purge_chunks(bool force);
/* purger.c: gives back everything free now, whatever purge_delay says (thpalloc_purge,
 * malloc_trim): free chunks, dirty page slots, the inside of every heap. Returns bytes. */
HIDDEN size_t purge_all(bool force);
/* Purges DIRTY page slots of live chunks older than purge_delay (all when force); returns
 * the bytes purged and sets *next to the time the next one is due (0: none). */
HIDDEN size_t pages_purge(uint32_t now, bool force, uint32_t *next);
/* purge-signal.c: the notes that something waits for purge_delay, and the purger's sleep.
 * A page slot became dirty (or an extent run, an exited thread's page): wake the purger, or
 * ask for one (purger_start_if_wanted), or arm the inline pass. */
HIDDEN void purge_note_dirty(void);
/* A heap the purger reclaimed is busy again: it has to be looked at after purge_delay. */
HIDDEN void purge_note_active(void);
/* The arena has free chunks or a padded tail waiting (arena lock held: the arena's lock
 * comes before purge-signal's). */
HIDDEN void purge_note_chunks(void);
/* What the next safe point does (purger_start_if_wanted): nothing, start the purger
 * thread, or, in a process without one, look whether purge_delay has made something due
 * and purge it. */
enum { PURGER_WANT_NONE, PURGER_WANT_THREAD, PURGER_WANT_INLINE };
/* Starts the background purger when one was asked for, or purges inline what is due. Only
 * at a safe point: the top of a malloc or the end of a free, where no heap list is being
 * walked and no lock is held (pthread_create allocates). */
HIDDEN void purger_start_if_wanted(void);
extern HIDDEN _Atomic int purger_wanted;
/* Something waits for purge_delay in a process without the purger: from now on the
 * allocator's heavier events count (purge_inline_tick), and one in 16 asks the next safe
 * point to look (purger.c). */
HIDDEN void purge_inline_arm(void);
extern HIDDEN _Atomic int purge_inline_armed;
HIDDEN void purge_inline_count(heap_t *heap);
/* Whether the purger thread runs or has been asked for: no inline pass then. */
HIDDEN bool purger_thread_started(void);
/* The thread could not be created: ask again once twice as much waits. */
HIDDEN void purger_thread_not_started(void);
/* The purger's sleep: the count of wake-ups (read before a pass), then a sleep until due,
 * or, with due 0, until a free chunk, a dirty page or a wake-up arrives after that count. */
HIDDEN uint32_t purge_wakes_seen(void);
HIDDEN void purge_wait_for_work(uint32_t due, uint32_t wakes);
HIDDEN void purge_signal_fork_prepare(void);
HIDDEN void purge_signal_fork_parent(void);
HIDDEN void purge_signal_fork_child(void);
/* Every purge pass (the thread's, an inline one, purge_all) holds purger.c's pass lock, and
 * fork waits for it: a pass cut off by fork would leave the child pages marked PURGING and
 * abandoned chunks taken out, with no thread to finish them. */
HIDDEN void purger_fork_prepare(void);
HIDDEN void purger_fork_parent(void);
HIDDEN void purger_fork_child(void);
/* A heavier event (a new page, an extent or a large block, a page left empty): a load and
 * a branch while nothing waits, so that the safe points of the fast-path misses pay
 * nothing. heap: the caller's own (it counts there), or NULL. */
static inline void purge_inline_tick(heap_t *heap)
{
    if (unlikely(atomic_load_explicit(&purge_inline_armed, memory_order_relaxed)))
        purge_inline_count(heap);
}
extern HIDDEN _Atomic uint64_t stat_pages_dirty;
/* The unused parts of live large blocks' padded tails that keep a huge page until
 * purge_delay passes (arena.c, under its lock): waiting too, for purge-signal's count. */
extern HIDDEN _Atomic uint64_t stat_tail_padded;
HIDDEN void arena_fork_prepare(void);
HIDDEN void arena_fork_parent(void);
HIDDEN void arena_fork_child(void);

static inline chunk_t *registry_unused(const arena_t *a)
{
    return a->dedicated ? NULL : (chunk_t *)&chunk_unused;
}

/* ---- meta: descriptors (chunks, heaps) from a private pool, never through malloc ---- */
HIDDEN void *meta_alloc(size_t size);
HIDDEN chunk_t *chunk_desc_alloc(void);
HIDDEN void chunk_desc_free(chunk_t *c);
/* Calls fn for every chunk descriptor ever made (statistics walk; racy by design). */
HIDDEN void chunk_desc_foreach(void (*fn)(chunk_t *c, void *arg), void *arg);
HIDDEN void meta_fork_prepare(void);
HIDDEN void meta_fork_parent(void);
HIDDEN void meta_fork_child(void);

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
     * another sub-page if there is room (chunk.c, page_new) */
    uint64_t first_taken, second_taken;
    /* bit cls: a page of the class that the owner trimmed was refilled (a refault): the
     * class's kept pages are no longer trimmed (heap.c, page_trim_kept) */
    uint64_t trim_refaulted;
    bool medium_in_small; /* one medium class had its first page in a small chunk */
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

extern HIDDEN heap_t heap_empty, heap_exited;

static inline bool heap_is_busy(const heap_t *heap)
{
    return heap->slow_ops >= HEAP_BUSY_OPS;
}

/* The purger holds this heap: wait until it lets go (reclaim.c). */
HIDDEN void heap_wait_reclaim(heap_t *heap);
/* Sleeps until no claim is held on heap (without being inside it). */
HIDDEN void heap_wait_unclaimed(heap_t *heap);

/* Brackets the owner's use of its heap: two plain stores and a load, no fence (the purger
 * supplies the barrier with membarrier: see reclaim.c). */
static inline void heap_enter(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (unlikely(atomic_load_explicit(&heap->claimed, memory_order_acquire)))
        heap_wait_reclaim(heap);
}

static inline void heap_leave(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 0, memory_order_release);
}
extern HIDDEN __thread heap_t *tl_heap __attribute__((tls_model("initial-exec")));
extern HIDDEN page_t page_empty;

/* A block of a small class from the heap's pages (the caller owns the heap, or holds the
 * late lock for the shared late heap). */
HIDDEN void *heap_malloc_small(heap_t *heap, size_t size, bool zero);
/* The fast path's page ran dry: the next page of its queue, when that is all it takes (inside
 * the fast path's handshake). NULL: nothing changed, the slow path decides. */
HIDDEN void *heap_malloc_dry(heap_t *heap, page_t *page);
/* thread.c: the calling thread's new heap (tl_heap, and the exit destructor armed); a block
 * from the shared late heap for a thread past its exit destructor. */
HIDDEN heap_t *heap_create(void);
HIDDEN void *late_malloc(size_t size, bool zero);
/* Set by thread.c when a second heap is made, never cleared: until then the process has one
 * thread that allocates, and its extents bypass the thread cache (extent-cache.c, where it
 * lives: below the heaps' lives in the layers). */
extern HIDDEN _Atomic int heap_second_made;
/* At thread exit: puts the heap's chunks on the abandoned list as they stand. */
HIDDEN void heap_abandon(heap_t *heap);
/* Takes the full pages that other threads freed into back to the class queues, their frees
 * collected; may_free: empty ones go (the owner), else they stay for the caller to reset
 * (the purger, holding the heap by its claim: no chunk may go back to the arena there). */
HIDDEN void heap_rescue_full(heap_t *heap, bool may_free);
/* Marks a page of the calling thread's heap (or of the shared late heap, for a thread past
 * its exit destructor) as holding aligned blocks, inside the reclaim handshake. */
HIDDEN void heap_page_set_aligned(page_t *page);
/* free of a block of a small-object chunk off the fast path: the owner's (full page,
 * aligned blocks), a remote free, an abandoned chunk taken over, or a bad pointer. */
HIDDEN void heap_free_slow(chunk_t *c, page_t *page, void *p);
/* A freed-looking block is freed again: abort if it really is on the page's free lists. */
HIDDEN void free_check_double(page_t *page, void *p);
/* malloc popped a block without the free key: a double free or a write after free. */
HIDDEN void malloc_corrupt(page_t *page, void *b) __attribute__((noreturn, cold));
/* Pops page's first free block (page->free is not empty), checked as every pop is: inside
 * the page and carrying its key. */
static inline block_t *page_pop(page_t *page)
{
    block_t *b = page->free;
    if (unlikely(block_outside(page, b) || b->key != block_key(b)))
        malloc_corrupt(page, b);
    page->free = block_next(b);
    page->used++;
    b->key = 0;
    return b;
}
HIDDEN void page_retire(heap_t *heap, page_t *page);
HIDDEN void heap_thread_exit(void *heap);
/* thread.c: the thread-exit key (init, once; no allocation). */
HIDDEN void thread_key_init(void);
HIDDEN void abandon_fork_prepare(void);
HIDDEN void abandon_fork_parent(void);
HIDDEN void abandon_fork_child(void);

/* page-queue.c: a heap's page queues and direct slots (the owner, or the purger holding
 * the heap). */
HIDDEN void page_queue_remove(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_front(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_back(page_queue_t *q, page_t *p);
/* Points the direct slots of class cls at the queue's first page. */
HIDDEN void direct_update(heap_t *heap, unsigned cls);
/* Takes a page off whichever list of the heap holds it. */
HIDDEN void page_unlink(heap_t *heap, page_t *page);
/* Takes a page off the full list (the caller puts it back in its queue). */
HIDDEN void page_unfull(heap_t *heap, page_t *page);
/* Moves a page without free blocks to the full list; false when a remote free arrived
 * meanwhile (collect again). The caller updates the class's direct slots. */
HIDDEN bool page_to_full(heap_t *heap, page_t *page);

/* chunk.c: pages from the heap's chunks, chunks from the arena. */
HIDDEN page_t *page_new(heap_t *heap, unsigned cls);
/* One of the heap's first chunks for class cls has a free slot: page_new needs no new chunk. */
HIDDEN bool page_slot_available(heap_t *heap, unsigned cls);
/* The heap's chunk list that holds chunks of c's kind. */
static inline chunk_queue_t *heap_chunks(heap_t *heap, const chunk_t *c)
{
    return &heap->chunks[c->kind == CHUNK_MEDIUM];
}
/* Returns true when the chunk went back to the arena with it. */
HIDDEN bool page_free(heap_t *heap, page_t *page);
/* Gives a chunk back to the arena once every slot is free (claims dirty slots first). */
HIDDEN void chunk_release(chunk_t *c);
/* Called by a heap about to take a new chunk from the arena, when set: init.c points it at
 * reclaim_emptied_chunks, a layer above (an upcall by registration keeps the layers
 * acyclic). */
extern HIDDEN void (*chunk_new_prepare)(heap_t *heap);
/* Purges the chunk's dirty slots now (an exited thread's chunk, abandoned). */
HIDDEN void chunk_purge_dirty(chunk_t *c);

/* abandon.c: the chunks of exited threads. */
HIDDEN bool abandoned_adopt_one(heap_t *heap);
/* A free into an abandoned chunk, done in place (true), unless it was adopted meanwhile. */
HIDDEN bool abandoned_free(chunk_t *c, page_t *page, block_t *b);
/* The purger's: takes the abandoned chunks nobody adopted within purge_delay (all with
 * force) off the list into out (returns how many; *next: when the next is due), and puts
 * one back, adoptable again, when reclaim_abandoned is done with it. */
HIDDEN size_t abandoned_take_due(uint32_t now, bool force, uint32_t *next, chunk_queue_t *out);
HIDDEN void abandoned_put_back(chunk_t *c, uint32_t now);
HIDDEN void thread_fork_prepare(void);
HIDDEN void thread_fork_parent(void);
HIDDEN void thread_fork_child(void);
HIDDEN size_t heap_count(void);
/* Calls fn for every heap in use, under the heaps lock (fn must not allocate). */
HIDDEN void heap_foreach_in_use(void (*fn)(heap_t *heap, void *arg), void *arg);

/* reclaim (reclaim.c): the purger gives back the free memory inside the pages of heaps
 * that have been idle for purge_delay (all heaps with force): empty pages a heap keeps
 * for its next allocation, and the OS pages inside free blocks of 8 KiB and more. Returns
 * the bytes purged and sets *next to when it wants to look again (0: not until woken). */
HIDDEN size_t reclaim_idle_heaps(uint32_t now, bool force, uint32_t *next);
/* The same for the chunks of exited threads that nobody adopted within purge_delay: empty
 * pages freed (the chunk with the last, purged at once), the free OS pages of the others
 * (holes), dirty slots purged. */
HIDDEN size_t reclaim_abandoned(uint32_t now, bool force, uint32_t *next);
/* For a heap about to take a chunk from the arena (chunk_new_prepare): what other threads'
 * frees emptied in heaps outside the allocator goes back first (whole chunks to the arena,
 * pages to their chunks, purged). Nothing while the process has one heap. */
HIDDEN void reclaim_emptied_chunks(heap_t *self);
HIDDEN void reclaim_fork_prepare(void);
HIDDEN void reclaim_fork_parent(void);
HIDDEN void reclaim_fork_child(void);

/* pages (page.c) */
HIDDEN void page_init(page_t *page, chunk_t *c, unsigned idx, unsigned cls);
/* The same for sub-page j of c (chunk_sub). */
HIDDEN void sub_page_init(page_t *page, chunk_t *c, unsigned j, unsigned cls);
HIDDEN void page_extend(page_t *page);
HIDDEN uint32_t page_collect(page_t *page);
#ifdef THPALLOC_DEBUG
HIDDEN void page_check(const page_t *page);
#endif
HIDDEN void page_refill_holes(heap_t *heap, page_t *page);
/* Purges an empty page's carved blocks and resets it (PAGE_RESET); returns bytes purged. */
HIDDEN size_t page_reset_empty(heap_t *heap, const chunk_t *c, page_t *page, enum os_purge how);
HIDDEN void *block_start(page_t *page, void *p);
static inline size_t page_size_of(const chunk_t *c)
{
    return (size_t)1 << c->page_shift;
}

/* extents (extent.c): blocks above SMALL_MAX up to SC_MAX_SIZE in runs of 4 KiB granules,
 * shared by all threads. align: a power of two up to CHUNK_SIZE / 2 (blocks are 4 KiB-
 * aligned anyway). */
#define EXT_GRANULE_SHIFT 12
HIDDEN void *extent_alloc(size_t size, size_t align, bool zero);
HIDDEN void extent_free(chunk_t *c, void *p);
/* Frees blocks the caller holds (a thread's cache) under one lock. */
HIDDEN void extent_free_many(void *const *blocks, unsigned n);
/* The granules of the block p starts, or 0 when p starts none (safe without the lock for a
 * block the caller holds, and memory-safe for any pointer into an extent chunk). */
HIDDEN unsigned extent_block_len(const chunk_t *c, const void *p);
HIDDEN void extent_bad_pointer(const chunk_t *c, const void *p, const char *invalid)
    __attribute__((noreturn, cold));
HIDDEN int extent_owns(const chunk_t *c, const void *p);
/* The block's usable bytes; aborts with `invalid` unless p starts a block (0 for a freed
 * one when asked by malloc_usable_size, as glibc says for a freed chunk). */
HIDDEN size_t extent_usable_size(chunk_t *c, void *p, const char *invalid);
/* Grows or shrinks the block in place; false when the run after it is not free and long
 * enough (the caller moves it). */
HIDDEN bool extent_resize(chunk_t *c, void *p, size_t size);
/* The purger's: free runs resident for purge_delay (all with force) go back to the kernel;
 * *next is when the next one is due (0: none). */
HIDDEN size_t extents_purge(uint32_t now, bool force, uint32_t *next);
/* Empty extent chunks kept resident go back to the arena, for a caller about to take a chunk
 * from it (a heap's new chunk, a large block): reused there before a fresh one is touched. */
HIDDEN void extents_release_empty(void);
extern HIDDEN _Atomic uint64_t stat_extent_used;
HIDDEN void extent_fork_prepare(void);
HIDDEN void extent_fork_parent(void);
HIDDEN void extent_fork_child(void);
/* extent-cache.c: the calling thread's cache in front of them (a thread without a heap
 * goes to the shared runs directly). */
HIDDEN void *extent_malloc_cached(size_t size, size_t align, bool zero);
HIDDEN void extent_free_cached(chunk_t *c, void *p);
/* Gives a heap's cached extents back to the shared runs (its owner, or the purger holding
 * it): at thread exit and when the purger reclaims an idle heap. */
HIDDEN void extent_cache_flush(heap_t *heap);
/* The owner, outside its handshake, now and then from malloc's slow path (every
 * EXT_CACHE_LOOK_OPS slow_ops): blocks that have sat in its cache for a whole purge_delay
 * go back to the shared runs, so that a thread that stays busy does not hold what it freed
 * from the others and from the purge (an idle one's cache the purger flushes, reclaim.c). */
#define EXT_CACHE_LOOK_OPS 256
HIDDEN void extent_cache_age(heap_t *heap);
/* Whether the owner's next look is due (owner-only counts, read outside the handshake as
 * hints: the look re-reads inside). */
static inline bool extent_cache_look_due(const heap_t *heap)
{
    return heap->ext_cache_n && heap->slow_ops - heap->ext_cache_looked >= EXT_CACHE_LOOK_OPS;
}

/* large blocks (large.c) */
HIDDEN void *large_alloc(size_t size, size_t align, bool zero);
HIDDEN void large_free(chunk_t *c, void *p);
/* Resizes a large block where it stands, or moves its own mapping with mremap: its new
 * address, or NULL when it would have to be copied (the caller does that). */
HIDDEN void *large_resize(chunk_t *c, size_t size);

/* Our own malloc under a name nobody can interpose (for the dormancy check). */
HIDDEN void *lib_malloc_self(size_t size);

/* The dormancy probe (init.c): set while init calls the process's malloc once. */
extern HIDDEN _Atomic int probe_active, probe_hit;
extern HIDDEN pthread_t probe_thread;

/* init */
HIDDEN void lib_init(void);
HIDDEN bool lib_dormant(void);
/* True when the kernel's page size is not OS_PAGE_SIZE (64 KiB pages on ppc64el, 16 KiB on
 * loong64 or some arm64 kernels): every purge here would round to the kernel's page and
 * could drop live data, so the process runs on glibc's malloc instead (pass-through):
 * new blocks come from glibc, and frees and reallocs of them go back to it as for any
 * pointer that is not ours. */
HIDDEN bool lib_passthrough_init(void);
/* Set once init is done and the process is not in pass-through: what lib_passthrough reads
 * inline, so that every extent and large block does not pay a call (threadchurn: 0.6 % of
 * its samples). */
extern HIDDEN _Atomic bool lib_ready_native;
static inline bool lib_passthrough(void)
{
    return likely(atomic_load_explicit(&lib_ready_native, memory_order_acquire))
               ? false
               : lib_passthrough_init();
}
HIDDEN void *passthrough_alloc(size_t size, size_t align, bool zero);
/* glibc's own definition of an API function we also define (dlsym RTLD_NEXT; only in
 * pass-through, never on an allocation path), or NULL. */
HIDDEN void *passthrough_next(const char *name);
extern HIDDEN bool passthrough;
HIDDEN void lib_fatal(const char *msg, const void *p) __attribute__((noreturn, cold));

/* foreign pointers: glibc's own functions. Weak: a static program linked with
 * libthpalloc.a must not pull glibc's malloc.o out of libc.a (its malloc would collide with
 * ours); there they are null, and a static program has no foreign pointer and cannot pass
 * through (lib_init refuses to). In a shared object they bind to libc.so's as before. */
extern void __libc_free(void *) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_malloc(size_t) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));
extern void *__libc_valloc(size_t) __attribute__((weak));
extern void *__libc_pvalloc(size_t) __attribute__((weak));
/* free and realloc of a pointer that is not ours: glibc's, or fatal where there is none. */
HIDDEN void foreign_free(void *p) __attribute__((cold));
HIDDEN void *foreign_realloc(void *p, size_t size) __attribute__((cold));
HIDDEN size_t foreign_usable_size(void *p);

/* statistics */
struct thpalloc_stats;
HIDDEN void stats_collect(struct thpalloc_stats *s);
extern HIDDEN _Atomic uint64_t stat_reserved, stat_huge_advised, stat_purged, stat_purge_pending,
    stat_committed;

#endif
