/* thpalloc internals, layer 3: the registry (is this pointer ours?), the purge signals,
 * the arena's advice (base.h says how the headers go). */
#ifndef THPALLOC_REGISTRY_H
#define THPALLOC_REGISTRY_H

#include "policy.h"

/* ---- registry.c: is this pointer ours? O(1), two loads ---------------------------------- */
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
#define REG_REGION_NONE UINTPTR_MAX                    /* no address's region */
/* The first arena's chunks in a leaf of their own, and the first region's root entry apart
 * (registry.c says why). span is 0 until claimed, and set last (release): base and leaf are
 * valid once a lookup sees it. */
struct registry_hot {
    _Atomic uintptr_t span; /* bytes from base: the first arena's */
    _Atomic uintptr_t base;
    uintptr_t *_Atomic leaf; /* span >> CHUNK_SHIFT entries (registry_tag), from meta.c */
    _Atomic uintptr_t region;
    _Atomic uintptr_t off; /* as a root entry */
};
extern HIDDEN _Atomic uintptr_t registry_root[1u << REG_ROOT_BITS];
extern HIDDEN uintptr_t registry_empty_leaf[1u << REG_LEAF_BITS];
extern HIDDEN struct registry_hot registry_hot;
HIDDEN bool registry_claim_hot(uint8_t *base, size_t nchunks);
HIDDEN bool registry_set(uint8_t *base, size_t nchunks, chunk_t *desc);

/* Entries are descriptors with their chunk's page shift in the low bits (descriptors are
 * 128-byte aligned): free finds the page from the entry without waiting for a second load
 * (page_of_entry). One word, so a racing lookup never pairs a descriptor with another
 * chunk's shift. The tag is page_shift - 7, the shift that takes the offset's bits above
 * 16 KiB (every page size is a multiple) straight to the page's descriptor offset: 7 for
 * small pages, 9 for medium ones (whose bits 14-15 land below 128, and are masked off with
 * the tag), 56 (24 on 32-bit) for chunks without pages (page 0). */
#define REG_TAG_MASK ((uintptr_t) _Alignof(chunk_t) - 1)
#define REG_SHIFT_BITS (sizeof(uintptr_t) * 8 - 1)
_Static_assert(_Alignof(chunk_t) >= 128 && sizeof(page_t) == 128 &&
                   offsetof(chunk_t, pages) % _Alignof(chunk_t) == 0 &&
                   MEDIUM_PAGE_SHIFT - SMALL_PAGE_SHIFT == 2,
               "registry tags: a medium page's low bits and the tag stay below 128");
extern HIDDEN const chunk_t chunk_unused; /* the unused-chunk marker */
static inline uintptr_t registry_tag(const chunk_t *desc)
{
    /* page_shift 0 (a descriptor not set up yet, the unit tests') tags as page 0 too */
    return desc ? (uintptr_t)desc | ((desc->page_shift - 7u) & REG_SHIFT_BITS) : 0;
}
static inline chunk_t *chunk_of_entry(uintptr_t e)
{
    return (chunk_t *)(e & ~REG_TAG_MASK);
}
/* page_of for the fast paths (free_inline, malloc_usable_size), from a registry entry: the
 * shift from its tag, not from the descriptor, so the page's address waits for one load, not
 * two; one shift to the descriptor's offset, one
 * lea, the tag (and a medium page's low bits) masked off last. */
static inline page_t *page_of_entry(uintptr_t e, const void *p)
{
    unsigned shift = (unsigned)e & REG_SHIFT_BITS; /* x86's shr masks it anyway */
    uintptr_t off = ((uintptr_t)p & CHUNK_MASK & ~(SMALL_PAGE_SIZE - 1)) >> shift;
    return (page_t *)((e + offsetof(chunk_t, pages) + off) & ~REG_TAG_MASK);
}

/* The registry entry of the chunk holding p (registry_tag of its descriptor or of the
 * unused-chunk marker), or 0 (not ours; also for NULL itself). */
static inline uintptr_t registry_entry(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    /* span first: read with acquire, so that base and leaf are those it was set with */
    uintptr_t span = atomic_load_explicit(&registry_hot.span, memory_order_acquire);
#if defined(__x86_64__) || defined(__i386__)
    /* base subtracted from memory, after span (a plain x86 load is ordered after the acquire
     * load): gcc loads an atomic into a register first, an instruction more on free's path */
    uintptr_t in = a;
    __asm__("sub %1, %0" : "+r"(in) : "m"(*(const uintptr_t *)&registry_hot.base) : "cc");
#else
    uintptr_t in = a - atomic_load_explicit(&registry_hot.base, memory_order_relaxed);
#endif
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
            return 0;
        off = atomic_load_explicit(&registry_root[a >> REG_REGION_SHIFT], memory_order_acquire);
    }
    uintptr_t *leaf = (uintptr_t *)((uintptr_t)registry_empty_leaf + off);
    return leaf[(a >> CHUNK_SHIFT) & ((1u << REG_LEAF_BITS) - 1)];
}

/* The descriptor of the chunk holding p, the unused-chunk marker, or NULL (not ours; also
 * for NULL itself). */
static inline chunk_t *registry_lookup(const void *p)
{
    return chunk_of_entry(registry_entry(p));
}

/* What the registry holds for a chunk of an arena that is not in use: the marker (a double
 * free or a stray pointer into our space is caught); nothing for a mapping of its own. */
static inline chunk_t *registry_unused(const arena_t *a)
{
    return a->dedicated ? NULL : (chunk_t *)&chunk_unused;
}

/* ---- purge-signal.c --------------------------------------------------------------------- */
/* What the next safe point does (purger_start_if_wanted): nothing, start the purger
 * thread, or, in a process without one, look whether purge_delay has made something due
 * and purge it. */
enum { PURGER_WANT_NONE, PURGER_WANT_THREAD, PURGER_WANT_INLINE };
extern HIDDEN _Atomic int purger_wanted;
extern HIDDEN _Atomic int purge_inline_armed;
extern HIDDEN _Atomic uint32_t purge_inline_look_at;
HIDDEN void purge_note_dirty(void);
HIDDEN void purge_note_dirty_by(heap_t *heap);
HIDDEN void purge_want_thread(void);
HIDDEN void purge_note_dense(bool want_thread);
HIDDEN void purge_note_active(void);
HIDDEN void purge_note_chunks(void);
HIDDEN void purge_inline_arm(void);
HIDDEN void purge_inline_count(heap_t *heap);
HIDDEN bool purger_thread_started(void);
HIDDEN void purger_thread_not_started(void);
HIDDEN uint32_t purge_wakes_seen(void);
HIDDEN void purge_wait_for_work(uint32_t due, uint32_t wakes, uint64_t (*dirty_now)(void));
HIDDEN void purge_signal_fork(enum fork_phase phase);

/* A heavier event (a new page, an extent or a large block, a page left empty): a load and
 * a branch while nothing waits, so that the safe points of the fast-path misses pay
 * nothing. heap: the caller's own (it counts there), or NULL. */
static inline void purge_inline_tick(heap_t *heap)
{
    if (unlikely(atomic_load_explicit(&purge_inline_armed, memory_order_relaxed)))
        purge_inline_count(heap);
}

/* ---- arena-advice.c --------------------------------------------------------------------- */
HIDDEN bool advice_run(arena_t *a, size_t first, size_t n, enum thp_use use, size_t block_size,
                       bool reuse);
HIDDEN void advice_drop_huge(arena_t *a, size_t n);
HIDDEN void advice_tail_unpad(arena_t *a, size_t i);
HIDDEN size_t advice_purge_padded_tails(arena_t *a, uint32_t now, bool force, uint32_t *next);

#endif
