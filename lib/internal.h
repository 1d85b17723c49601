/* thpalloc internals: what each layer offers the ones above it, and the inlines of the fast
 * paths; the data structures and their invariants are in types.h. Layering:
 * docs/design.md, "The library, bottom to top". */
#ifndef THPALLOC_INTERNAL_H
#define THPALLOC_INTERNAL_H

#include "types.h"

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
/* The same for one chunk's slots (the chunk held: its owner's claim, or the purger's walk). */
HIDDEN size_t page_slots_purge(chunk_t *c, uint32_t now, bool force, uint32_t *next);
/* purge-signal.c: the notes that something waits for purge_delay, and the purger's sleep.
 * A page slot became dirty (or an extent run, an exited thread's page): wake the purger, or
 * ask for one (purger_start_if_wanted), or arm the inline pass. */
HIDDEN void purge_note_dirty(void);
/* A storm of frees (extent.c's trims, one after the other): ask for the purger thread now,
 * whatever waits, unless creating it has failed before. */
HIDDEN void purge_want_thread(void);
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
 * walked and no lock is held (pthread_create allocates). caller: the return address of
 * the free that got here (NULL from a malloc): a free the dynamic loader makes leaves the
 * thread to the next call (purger.c). */
HIDDEN void purger_start_if_wanted(const void *caller);
extern HIDDEN _Atomic int purger_wanted;
/* Something waits for purge_delay in a process without the purger: from now on the
 * allocator's heavier events count (purge_inline_tick), and one in 16 asks the next safe
 * point to look (purger.c). */
HIDDEN void purge_inline_arm(void);
extern HIDDEN _Atomic int purge_inline_armed;
HIDDEN void purge_inline_count(heap_t *heap);
/* Whether the purger thread runs or has been asked for: no inline pass then. */
HIDDEN bool purger_thread_started(void);
/* Whether a free may trim now (extent.c): no purger thread, and the process is not faulting
 * back what was given back a moment ago (purger.c). */
HIDDEN bool purge_trim_now(void);
extern HIDDEN _Atomic bool purge_refaulting;
extern HIDDEN _Atomic uint32_t purge_lag_ms;
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
/* arena-advice.c, for arena.c (arena lock held): a run's THP advice for its use (reuse: the
 * chunks held something before); true when it left a large block's tail padded, keeping its
 * huge page until purge_delay (the caller arms the purge); the advice dropped when chunks
 * became a new mapping; a padded tail ended; and the purge of the padded tails now due. */
HIDDEN bool advice_run(arena_t *a, size_t first, size_t n, enum thp_use use, size_t block_size,
                       bool reuse);
HIDDEN void advice_drop_huge(arena_t *a, size_t n);
HIDDEN void advice_tail_unpad(arena_t *a, size_t i);
HIDDEN size_t advice_purge_padded_tails(arena_t *a, uint32_t now, bool force, uint32_t *next);
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
extern HIDDEN heap_t heap_empty, heap_exited;

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
HIDDEN heap_t *thread_heap_create(void);
HIDDEN void *thread_late_malloc(size_t size, bool zero);
/* Set by thread.c when a second heap is made, never cleared: until then the process has one
 * thread that allocates, and its extents bypass the thread cache (extent-cache.c, where it
 * lives: below the heaps' lives in the layers). */
extern HIDDEN _Atomic int heap_second_made;
/* At thread exit: puts the heap's chunks on the abandoned list as they stand. */
HIDDEN void abandon_heap(heap_t *heap);
/* Takes the full pages that other threads freed into back to the class queues, their frees
 * collected; may_free: empty ones go (the owner), else they stay for the caller to reset
 * (the purger, holding the heap by its claim: no chunk may go back to the arena there). */
HIDDEN void heap_rescue_full(heap_t *heap, bool may_free);
/* Marks a page of the calling thread's heap (or of the shared late heap, for a thread past
 * its exit destructor) as holding aligned blocks, inside the reclaim handshake. */
HIDDEN void thread_page_set_aligned(page_t *page);
/* free of a block of a small-object chunk off the fast path: the owner's (full page,
 * aligned blocks), a remote free, an abandoned chunk taken over, or a bad pointer. */
HIDDEN void heap_free_slow(chunk_t *c, page_t *page, void *p);
/* realloc's check that p (block b of page, b == p unless memalign moved p) is live, as
 * free's: aborts when b is in a hole, beyond the carved blocks, or on the lists of the
 * caller's own page; false when it carries its free key on another heap's page (only the
 * move, whose free applies free's rules, may follow), else true. */
HIDDEN bool heap_realloc_live(chunk_t *c, page_t *page, block_t *b, void *p);
/* A freed-looking block is freed (or reallocated) again: abort with msg if it really is on
 * the page's free lists. The owner's, or the abandoned lock holder's. */
HIDDEN void free_check_double(page_t *page, void *p, const char *msg);
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
HIDDEN void heap_page_retire(heap_t *heap, page_t *page);
HIDDEN void thread_heap_exit(void *heap);
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
HIDDEN page_t *chunk_page_new(heap_t *heap, unsigned cls);
/* One of the heap's first chunks for class cls has a free slot: chunk_page_new needs no new chunk.
 */
HIDDEN bool chunk_slot_available(heap_t *heap, unsigned cls);
/* The heap's chunk list that holds chunks of c's kind. */
static inline chunk_queue_t *heap_chunks(heap_t *heap, const chunk_t *c)
{
    return &heap->chunks[c->kind == CHUNK_MEDIUM];
}
/* Returns true when the chunk went back to the arena with it. */
HIDDEN bool chunk_page_free(heap_t *heap, page_t *page);
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
HIDDEN size_t thread_heap_count(void);
/* Calls fn for every heap in use, under the heaps lock (fn must not allocate). */
HIDDEN void thread_foreach_heap(void (*fn)(heap_t *heap, void *arg), void *arg);

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
/* In a page with aligned blocks: the start of the block p names (p is a block's start that
 * memalign did not move, or the pointer memalign handed out, as its mark says), or NULL when
 * p names none (an interior pointer). Reads the first word of p's block. */
HIDDEN void *block_named(page_t *page, void *p);
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
/* Frees the blocks of a thread's cache (extent_cache_in) under one lock; aborts on any that
 * is not one (always checked). */
HIDDEN void extent_free_many(void *const *blocks, unsigned n);
/* The granules of the block p starts, or 0 when p starts none (safe without the lock for a
 * block the caller holds, and memory-safe for any pointer into an extent chunk). */
HIDDEN unsigned extent_block_len(const chunk_t *c, const void *p);
/* A thread's cache takes the block p starts (a free): its granules, and when they are at
 * most max it is marked cached in the map, by CAS. Aborts unless p starts a live block: a
 * second free is caught whichever thread makes it and whatever cache holds the block. */
HIDDEN unsigned extent_cache_in(const chunk_t *c, void *p, unsigned max);
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
 * from it (a heap's new chunk, a large block): reused there before a fresh one is touched.
 * All but one besides the spare. */
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
