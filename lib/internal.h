/* thpalloc internals: one block per .c file, in the order of the layers (docs/design.md,
 * "The library, bottom to top"), each holding exactly what its file exports, with the inlines
 * of the fast paths that go with it. Why a function does what it does is said beside its
 * definition. The data structures and their invariants are in types.h. tools/dev/lib-layers
 * checks that each block's names are defined in the file its label names, and the order. */
#ifndef THPALLOC_INTERNAL_H
#define THPALLOC_INTERNAL_H

#include "types.h"

/* ---- glibc's own functions (foreign pointers) ------------------------------------------ */
/* Weak: a static program linked with libthpalloc.a must not pull glibc's malloc.o out of
 * libc.a (its malloc would collide with ours); there they are null, and a static program has
 * no foreign pointer and cannot pass through (lib_init refuses to). In a shared object they
 * bind to libc.so's as before. */
extern void __libc_free(void *) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_malloc(size_t) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));
extern void *__libc_valloc(size_t) __attribute__((weak));
extern void *__libc_pvalloc(size_t) __attribute__((weak));

/* ---- the fork hooks: one per file that holds a lock, FILE_fork (init.c calls them in the
 * lock order) ------------------------------------------------------------------------------ */
enum fork_phase { FORK_PREPARE, FORK_PARENT, FORK_CHILD };
/* What a hook does with one mutex: take it before fork, release it after, and make it anew
 * in the child (only the forking thread exists there). */
static inline void fork_mutex(pthread_mutex_t *m, enum fork_phase phase)
{
    if (phase == FORK_PREPARE)
        pthread_mutex_lock(m);
    else if (phase == FORK_PARENT)
        pthread_mutex_unlock(m);
    else
        pthread_mutex_init(m, NULL);
}

/* ---- fatal.c ---------------------------------------------------------------------------- */
HIDDEN void lib_fatal(const char *msg, const void *p) __attribute__((noreturn, cold));
/* lib_fatal for paths that make no call but tail calls (free's fast path, heap_free_full,
 * heap_free_remote), jumped to: a call of a noreturn function stays a call, and made them
 * align their stack on every free. */
HIDDEN void lib_fatal_tail(const char *msg, void *p) __attribute__((cold));

/* ---- counters.c ------------------------------------------------------------------------- */
extern HIDDEN _Atomic uint64_t stat_reserved, stat_huge_advised, stat_purged, stat_purge_pending,
    stat_committed;
extern HIDDEN _Atomic uint64_t stat_pages_dirty, stat_tail_padded;

/* ---- policy.c --------------------------------------------------------------------------- */
extern HIDDEN struct policy policy_in_force;
HIDDEN void policy_ensure_loaded(void);
HIDDEN void policy_say_passthrough(size_t pagesize);
HIDDEN void policy_fork(enum fork_phase phase);

/* ---- introspect.c: the block thp-status reads ------------------------------------------- */
HIDDEN void introspect_set_active(bool active);
HIDDEN bool introspect_in_charge(void);
HIDDEN void introspect_set_policy(const struct cfg_values *v);
HIDDEN void introspect_add_range(void *base, size_t size);
HIDDEN void introspect_remove_range(void *base);
HIDDEN void introspect_fork(enum fork_phase phase);

/* ---- meta.c ----------------------------------------------------------------------------- */
HIDDEN void *meta_alloc(size_t size);
HIDDEN chunk_t *chunk_desc_alloc(void);
HIDDEN void chunk_desc_free(chunk_t *c);
HIDDEN void chunk_desc_foreach(void (*fn)(chunk_t *c, void *arg), void *arg);
HIDDEN void meta_fork(enum fork_phase phase);

/* ---- purge-rules.c: whether memory that waits is given back, when, and how -------------- */
/* purge_delay in force (ms): < 0 never (only thpalloc_purge(), force, gives back), 0 at once. */
static inline long purge_delay(void)
{
    return policy_in_force.purge_delay_ms;
}
static inline bool purge_never(void)
{
    return purge_delay() < 0;
}
/* Mode always: every chunk is a huge page. Nothing inside one is given back (a purge of
 * part of it would split it), and new pages fill the fullest chunk first. */
static inline bool purge_chunks_whole(void)
{
    return policy_in_force.thp.mode == THP_MODE_ALWAYS;
}
/* Whether the pages inside chunks (a small page's slot, an extent run) are given back. */
static inline bool purge_inside_chunks(void)
{
    return !purge_never() && !purge_chunks_whole();
}
/* How memory is given back (purge = dontneed or free). */
static inline enum os_purge purge_how(void)
{
    return policy_in_force.purge;
}
/* Whether what waits since stamp may go back at now (force: always; purge_delay = never:
 * only with force). When it may not, next (unless NULL) becomes the earlier of *next (0:
 * none yet) and its due time. */
static inline bool purge_is_due(uint32_t stamp, uint32_t now, bool force, uint32_t *next)
{
    if (force)
        return true;
    long delay = purge_delay();
    if (delay < 0)
        return false;
    if (clock_passed(now, stamp, delay))
        return true;
    uint32_t due = stamp + (uint32_t)delay;
    if (next && (*next == 0 || (int32_t)(due - *next) < 0))
        *next = due;
    return false;
}
/* The wait of free memory now (free chunks, free extent runs): purge_delay, doubled by the
 * refaults seen within the window. */
HIDDEN long purge_delay_now(uint32_t now);
/* The window in which a take of a chunk purged late is a refault; one is noted at now. */
HIDDEN long purge_refault_window(void);
HIDDEN void purge_note_refault(uint32_t now);
/* Whether the wait is longer now (a pass then looks at whether the process sleeps). */
HIDDEN bool purge_refaulting(void);
/* Whether the process sleeps (purger.c): meanwhile what waits goes after purge_delay. */
HIDDEN void purge_refault_asleep(bool asleep);
/* Gives size bytes at addr back to the kernel, how: every purge of the library's memory. */
HIDDEN bool purge_give_back(void *addr, size_t size, enum os_purge how);

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

/* ---- arena.c ---------------------------------------------------------------------------- */
HIDDEN uint8_t *arena_alloc_chunks(size_t n, size_t align, enum thp_use use, size_t block_size,
                                   arena_t **arena_out, bool *is_zero);
HIDDEN void arena_free_chunks(arena_t *arena, uint8_t *base, size_t n);
HIDDEN void arena_free_chunks_purged(arena_t *arena, uint8_t *base, size_t n);
HIDDEN void arena_free_chunks_clean(arena_t *arena, uint8_t *base, size_t n);
HIDDEN bool arena_grow_chunks(arena_t *arena, uint8_t *base, size_t n, size_t want,
                              size_t block_size);
HIDDEN uint8_t *arena_resize_dedicated(arena_t *arena, chunk_t *desc, size_t want,
                                       size_t block_size);
HIDDEN uint32_t arena_freed_at(const arena_t *a, const uint8_t *base);
HIDDEN void arena_readvise(arena_t *arena, uint8_t *base, size_t n, size_t block_size);
HIDDEN uint32_t arena_purge_due(uint32_t now);
HIDDEN size_t arena_purge_chunks(bool force);
HIDDEN void arena_fork(enum fork_phase phase);

/* What the registry holds for a chunk of an arena that is not in use: the marker (a double
 * free or a stray pointer into our space is caught); nothing for a mapping of its own. */
static inline chunk_t *registry_unused(const arena_t *a)
{
    return a->dedicated ? NULL : (chunk_t *)&chunk_unused;
}

/* ---- page.c ----------------------------------------------------------------------------- */
HIDDEN void page_init(page_t *page, chunk_t *c, unsigned idx, unsigned cls);
HIDDEN void page_sub_init(page_t *page, chunk_t *c, unsigned j, unsigned cls);
HIDDEN void page_extend(page_t *page);
HIDDEN uint32_t page_collect(page_t *page);
#ifdef THPALLOC_DEBUG
HIDDEN void page_check(const page_t *page);
#endif
HIDDEN void page_refill_holes(heap_t *heap, page_t *page);
HIDDEN size_t page_reset_empty(heap_t *heap, const chunk_t *c, page_t *page, enum os_purge how);
HIDDEN void *page_block_start(page_t *page, void *p);
HIDDEN void *page_block_named(page_t *page, void *p);
HIDDEN void page_check_double(page_t *page, void *p, const char *msg);
HIDDEN void page_corrupt(page_t *page, void *b) __attribute__((noreturn, cold));
HIDDEN void *page_corrupt_tail(void *b, page_t *page) __attribute__((cold));
HIDDEN size_t pages_purge(uint32_t now, bool force, uint32_t *next);
HIDDEN size_t page_slots_purge(chunk_t *c, uint32_t now, bool force, uint32_t *next);

static inline size_t page_size_of(const chunk_t *c)
{
    return (size_t)1 << c->page_shift;
}

/* Pops page's first free block (page->free is not empty), checked as every pop is: inside
 * the page and carrying its key. */
static inline block_t *page_pop(page_t *page)
{
    block_t *b = page->free;
    if (unlikely(block_outside(page, b) || b->key != block_key(b)))
        page_corrupt(page, b);
    page->free = block_next(b);
    page->used++;
    b->key = 0;
    return b;
}

/* ---- page-queue.c: a heap's page queues and direct slots (the owner, or the purger holding
 * the heap) -------------------------------------------------------------------------------- */
extern HIDDEN page_t page_empty;
HIDDEN void page_queue_remove(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_front(page_queue_t *q, page_t *p);
HIDDEN void page_queue_push_back(page_queue_t *q, page_t *p);
HIDDEN void page_queue_direct_update(heap_t *heap, unsigned cls);
HIDDEN void page_unlink(heap_t *heap, page_t *page);
HIDDEN void page_unfull(heap_t *heap, page_t *page);
HIDDEN bool page_to_full(heap_t *heap, page_t *page);
/* Each class's direct slots [lo, hi] (none: hi 0), by (size + 15) / 16. */
extern HIDDEN const uint8_t direct_range[SMALL_CLASSES][2];

/* Points the direct slots of class cls at page p. */
static inline void direct_set(heap_t *heap, unsigned cls, page_t *p)
{
    unsigned hi = direct_range[cls][1];
    for (unsigned w = direct_range[cls][0]; hi && w <= hi; w++)
        heap->direct[w] = p;
}

/* ---- chunk.c: pages from the heap's chunks, chunks from the arena ----------------------- */
extern HIDDEN void (*chunk_new_prepare)(heap_t *heap);
HIDDEN page_t *chunk_page_new(heap_t *heap, unsigned cls);
HIDDEN bool chunk_slot_available(heap_t *heap, unsigned cls);
HIDDEN bool chunk_page_free(heap_t *heap, page_t *page);
HIDDEN void chunk_release(chunk_t *c);
HIDDEN void chunk_dirty_fold(heap_t *heap);
/* Purges the chunk's dirty slots now (an exited thread's chunk, abandoned). */
HIDDEN void chunk_purge_dirty(chunk_t *c);

/* The heap's chunk list that holds chunks of c's kind. */
static inline chunk_queue_t *heap_chunks(heap_t *heap, const chunk_t *c)
{
    return &heap->chunks[c->kind == CHUNK_MEDIUM];
}

/* ---- extent-run.c: the extents' shards, bins, chunks and runs --------------------------- */
#define EXT_GRANULE_SHIFT 12
/* The bytes of extents handed out (in threads' caches included), and the pending bytes
 * stat_pages_dirty does not count yet (it lags each shard by up to a chunk); read without
 * the shards' locks. */
HIDDEN void extent_stats(uint64_t *used, int64_t *dirty_uncounted);
/* Set by thread.c when a second heap is made, never cleared (extent-run.c says why). */
extern HIDDEN _Atomic int extent_heap_second_made;
/* Empty extent chunks kept resident go back to the arena, for a caller about to take a chunk
 * from it (a heap's new chunk, a large block): reused there before a fresh one is touched.
 * All but one besides the spare. */
HIDDEN void extents_release_empty(void);
HIDDEN void extent_fork(enum fork_phase phase);

/* ---- extent-purge.c: free extent runs back to the kernel -------------------------------- */
/* The purger's: free runs resident for purge_delay (all with force) go back to the kernel;
 * *next is when the next one is due (0: none). */
HIDDEN size_t extents_purge(uint32_t now, bool force, uint32_t *next);

/* ---- extent.c: blocks above SMALL_MAX up to SC_MAX_SIZE in runs of 4 KiB granules, shared
 * by all threads ---------------------------------------------------------------------------- */
/* align: a power of two up to CHUNK_SIZE / 2 (blocks are 4 KiB-aligned anyway). */
HIDDEN void *extent_alloc(size_t size, size_t align, bool zero);
HIDDEN void *extent_alloc_resident(size_t size, size_t align, bool zero, bool *fresh);
HIDDEN void extent_free(chunk_t *c, void *p);
/* Frees the blocks of a thread's cache (extent_cache_in) under one lock; aborts on any that
 * is not one (always checked). */
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

/* ---- large.c: blocks with chunks of their own ------------------------------------------- */
HIDDEN void *large_alloc(size_t size, size_t align, bool zero);
HIDDEN void large_free(chunk_t *c, void *p);
HIDDEN void *large_resize(chunk_t *c, void *p, size_t size);

/* ---- abandon.c: the chunks of exited threads -------------------------------------------- */
HIDDEN void abandon_heap(heap_t *heap);
HIDDEN bool abandoned_adopt_one(heap_t *heap);
HIDDEN bool abandoned_free(chunk_t *c, page_t *page, block_t *b);
HIDDEN size_t abandoned_take_due(uint32_t now, bool force, uint32_t *next, chunk_queue_t *out);
HIDDEN void abandoned_put_back(chunk_t *c, uint32_t now);
HIDDEN void abandon_fork(enum fork_phase phase);

/* ---- heap.c: the slow paths on a heap, the owner's side of the reclaim handshake -------- */
extern HIDDEN heap_t heap_empty, heap_exited;
extern HIDDEN __thread heap_t *tl_heap __attribute__((tls_model("initial-exec")));
HIDDEN void *heap_malloc_small(heap_t *heap, size_t size, bool zero);
HIDDEN void *heap_malloc_dry(heap_t *heap, page_t *page, size_t size,
                             void *(*slow)(heap_t *heap, size_t size));
HIDDEN void heap_free_slow(chunk_t *c, page_t *page, void *p);
HIDDEN void heap_free_full(void *p, page_t *page, heap_t *heap);
HIDDEN void heap_free_remote(void *p, page_t *page, heap_t *owner);
HIDDEN bool heap_realloc_live(chunk_t *c, page_t *page, block_t *b, void *p);
HIDDEN void heap_rescue_full(heap_t *heap, bool may_free);
HIDDEN void heap_page_retire(heap_t *heap, page_t *page);
HIDDEN void heap_forget_kept(heap_t *heap);
HIDDEN void heap_park_kept(heap_t *heap);
HIDDEN void heap_wait_reclaim(heap_t *heap);
HIDDEN void heap_wait_unclaimed(heap_t *heap);
extern HIDDEN bool (*heap_unpark)(void);

/* The owner's look at claimed, with acquire (after busy = 1 and a signal fence). On x86 a
 * compare with memory and a compiler barrier: gcc loads an atomic into a register first,
 * an instruction more on each fast path; a plain load there is an acquire load already. */
static inline bool heap_claimed(heap_t *heap)
{
#if defined(__x86_64__) || defined(__i386__)
    bool claimed;
    __asm__ volatile("cmpl $0, %1"
                     : "=@ccne"(claimed)
                     : "m"(*(const int *)&heap->claimed)
                     : "memory");
    return claimed;
#else
    return atomic_load_explicit(&heap->claimed, memory_order_acquire);
#endif
}

/* Brackets the owner's use of its heap: two plain stores and a load, no fence (the purger
 * supplies the barrier with membarrier: see reclaim.c). */
static inline void heap_enter(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (unlikely(heap_claimed(heap)))
        heap_wait_reclaim(heap);
}

static inline void heap_leave(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 0, memory_order_release);
}

/* ---- extent-cache.c: a thread's cache in front of the extents --------------------------- */
/* The owner looks at its cache's age every EXT_CACHE_LOOK_OPS slow_ops (extent_cache_age). */
#define EXT_CACHE_LOOK_OPS 256
HIDDEN void *extent_malloc_cached(size_t size, size_t align, bool zero);
HIDDEN void extent_free_cached(chunk_t *c, void *p);
HIDDEN void extent_cache_flush(heap_t *heap);
HIDDEN void extent_cache_age(heap_t *heap);

/* Whether the owner's next look is due (owner-only counts, read outside the handshake as
 * hints: the look re-reads inside). */
static inline bool extent_cache_look_due(const heap_t *heap)
{
    return heap->ext_cache_n && heap->slow_ops - heap->ext_cache_looked >= EXT_CACHE_LOOK_OPS;
}

/* ---- thread.c: the heaps' lives ---------------------------------------------------------- */
HIDDEN heap_t *thread_heap_create(void);
HIDDEN void *thread_late_malloc(size_t size, bool zero);
HIDDEN void thread_page_set_aligned(page_t *page);
HIDDEN void thread_heap_exit(void *heap);
HIDDEN void thread_key_init(void);
HIDDEN size_t thread_heap_count(bool with_parked);
HIDDEN uint32_t thread_unpark_due(uint32_t now, bool force);
HIDDEN void thread_collect_parked(void);
HIDDEN void thread_foreach_heap(void (*fn)(heap_t *heap, void *arg), void *arg);
HIDDEN void thread_fork(enum fork_phase phase);

/* ---- reclaim.c: the purger's side of the reclaim handshake ------------------------------ */
HIDDEN size_t reclaim_idle_heaps(uint32_t now, bool force, uint32_t *next);
HIDDEN size_t reclaim_abandoned(uint32_t now, bool force, uint32_t *next);
HIDDEN void reclaim_emptied_chunks(heap_t *self);
HIDDEN void reclaim_fork(enum fork_phase phase);

/* ---- purger.c: the background thread, the inline pass, "purge everything now" ----------- */
HIDDEN size_t purge_all(bool force);
HIDDEN uint64_t purger_dirty_now(void);
HIDDEN void purger_start_if_wanted(const void *caller);
HIDDEN void purger_fork(enum fork_phase phase);

/* ---- init.c: first use, dormancy, pass-through, fork ------------------------------------ */
extern HIDDEN _Atomic int probe_active, probe_hit;
extern HIDDEN pthread_t probe_thread;
extern HIDDEN bool passthrough;
extern HIDDEN _Atomic bool lib_ready_native;
HIDDEN void lib_init(void);
HIDDEN bool lib_dormant(void);
HIDDEN bool lib_passthrough_init(void);
HIDDEN void *passthrough_alloc(size_t size, size_t align, bool zero);
HIDDEN void *passthrough_next(const char *name);

/* Whether the process runs on glibc's malloc (pass-through): one load once init is done. */
static inline bool lib_passthrough(void)
{
    return likely(atomic_load_explicit(&lib_ready_native, memory_order_acquire))
               ? false
               : lib_passthrough_init();
}

/* ---- alloc.c: the malloc family --------------------------------------------------------- */
HIDDEN void *lib_malloc_self(size_t size);
HIDDEN void foreign_free(void *p) __attribute__((cold));
HIDDEN void *foreign_realloc(void *p, size_t size) __attribute__((cold));
HIDDEN size_t foreign_usable_size(void *p);

/* ---- stats.c ---------------------------------------------------------------------------- */
struct thpalloc_stats;
HIDDEN void stats_collect(struct thpalloc_stats *s);

#endif
