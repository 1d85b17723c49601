/* extent-shard: what the extents' three files share (extent.c the blocks: malloc's side;
 * extent-run.c the shards, their bins, chunks and runs; extent-purge.c the trims and the
 * delayed purge, which give free runs back): a shard, the inline helpers every locked path
 * takes, and the functions one file calls in another. Included by the three and by the
 * unit test. */
#ifndef THPALLOC_EXTENT_SHARD_H
#define THPALLOC_EXTENT_SHARD_H

#include "extent-map.h"
#include "chunk.h"

#include <sched.h>

/* A shard: its own lock, bins and chunks. With one lock for the process, threads that take
 * and free extents at once waited for one another most of the time (docs/benchmarks-log.md).
 * Once a second heap is made, a request takes from the shard of the CPU it runs on (a
 * thread that runs meets the others only when it was moved, or frees a block another CPU's
 * shard holds); until then every request takes from shard0, and a single-threaded process
 * lays out its extents as with one shard. A chunk stays in the shard that made it, and so
 * does its map, recycled there (maps_free): a map's shard never changes, and a free finds
 * its lock without one. */
#define EXT_SHARDS 8
#define MAP_WORDS ((GRANULES + 64) / 64)
_Static_assert(MAP_WORDS <= 64, "a bit of binsum and pendsum for each word of the maps");

struct ext_shard {
    chunk_queue_t chunks; /* every extent chunk of the shard (list through next/prev) */
    chunk_t *spare;       /* an empty chunk kept for the next request */
    struct extent_map *maps_free;
    size_t pending_granules; /* dirty granules of free runs, waiting for purge_delay */
    /* Trim (block_free_locked): policy_in_force.trim_threshold, doubled trim_shift times by
     * the refaults (trim_taken); past a chunk, none. */
    unsigned trim_shift;
    unsigned trim_cost;      /* of the refaults since trim_window_at */
    uint32_t trim_window_at; /* ms clock */
    /* The trims made since trim_calls_at (within a purge_delay; one more once a storm
     * started), and the pending granules at which a storm's next batch goes (trim_batch). */
    unsigned trim_calls;
    uint32_t trim_calls_at;
    size_t trim_batch_at;
    size_t trim_batched; /* granules the batches purged since trim_calls_at, less those taken */
    unsigned purging;    /* runs the purger holds out (BUSY) right now */
    /* The granules of pending_granules that stat_pages_dirty counts: it is brought up to
     * date as the lock goes (shard_unlock) only when one of the two is 0 or they are a chunk
     * apart, so that it is 0 exactly when nothing waits (the purger sleeps on that) and
     * extents taken and freed do not write its line, every thread's, each time;
     * extent_stats() adds the rest. Written under the lock, read by the statistics
     * without it. */
    size_t dirty_counted;
    size_t used_granules; /* handed out (statistics: extent_stats), as dirty_counted */
    uint64_t binmap[MAP_WORDS];
    uint64_t pendmap[MAP_WORDS]; /* bins whose first run is pending */
    /* Bit w: word w of binmap, of pendmap, is not 0. A look for a fit is a word and a bit,
     * not a walk of the words: a request without a resident fit in its shard looks at the
     * others' pendmaps that way. */
    uint64_t binsum, pendsum;
    /* By exact length, pending runs at the front; the heads alone, 4 KiB (a bin's list keeps
     * its last node in its first node's prev), stored longest first (bin_of) after the
     * fields above. A small process's runs, short blocks and the rest of its chunk, touch
     * two pages of them, not three. */
    struct ext_free *bins[GRANULES];
    /* shard_lock; shard0's too (0: free, so shard0 stays in .bss). Last, on a line of its
     * own: shard0's last page is the one the fork hook writes anyway (shards_lock), and in
     * .data beside registry_hot every lock and unlock of shard0 took the line each free
     * reads the registry from out of the other CPUs' caches. */
    _Alignas(64) _Atomic int lock;
};

extern HIDDEN struct ext_shard shard0;
extern HIDDEN struct ext_shard *_Atomic shards[EXT_SHARDS];

/* A shard's lock word: 0 free, 1 held, 2 held with a thread asleep on it (or about to be).
 * Not a pthread mutex: its calls cost more than a CAS to take it and an exchange to let it
 * go, which this is (docs/benchmarks-log.md). */
static inline _Atomic int *shard_lock_word(struct ext_shard *s)
{
    return &s->lock;
}

/* Taken by another thread: spins a little, then sleeps (extent-run.c). */
HIDDEN void shard_lock_wait(_Atomic int *l);

static inline void shard_lock(struct ext_shard *s)
{
    _Atomic int *l = shard_lock_word(s);
    int free_ = 0;
    if (unlikely(!atomic_compare_exchange_strong_explicit(l, &free_, 1, memory_order_acquire,
                                                          memory_order_relaxed)))
        shard_lock_wait(l);
}

/* The fork hook's: taken before, free in the child (the parent's: shard_unlock, which wakes
 * a thread that slept on it meanwhile). */
static inline void shard_lock_fork(struct ext_shard *s, enum fork_phase phase)
{
    if (phase == FORK_PREPARE)
        shard_lock(s);
    else if (phase == FORK_CHILD)
        atomic_store_explicit(shard_lock_word(s), 0, memory_order_relaxed);
}

/* Shard i, or NULL when no request has run on such a CPU yet. */
static inline struct ext_shard *shard_at(unsigned i)
{
    return i == 0 ? &shard0 : atomic_load_explicit(&shards[i], memory_order_acquire);
}

/* Shard i, made now if it is not yet; shard0 when there is no memory for it. */
HIDDEN struct ext_shard *shard_make(unsigned i);

/* The shard a request takes from: shard0 until a second heap is made, then its CPU's. */
static inline struct ext_shard *shard_here(void)
{
    if (!atomic_load_explicit(&extent_heap_second_made, memory_order_relaxed))
        return &shard0;
    int cpu = sched_getcpu(); /* a load from the rseq area where the kernel has it */
    unsigned i = cpu > 0 ? (unsigned)cpu % EXT_SHARDS : 0;
    struct ext_shard *s = shard_at(i);
    return likely(s) ? s : shard_make(i);
}

static inline bool purge_enabled(void)
{
    return purge_inside_chunks();
}

/* pending_granules and used_granules change under the lock; relaxed stores, for
 * extent_stats' reads without it. */
static inline void pending_add(struct ext_shard *s, long granules)
{
    __atomic_store_n(&s->pending_granules, (size_t)((long)s->pending_granules + granules),
                     __ATOMIC_RELAXED);
}

static inline void used_add(struct ext_shard *s, long granules)
{
    __atomic_store_n(&s->used_granules, (size_t)((long)s->used_granules + granules),
                     __ATOMIC_RELAXED);
}

/* How far stat_pages_dirty may lag a shard's pending granules: a chunk. */
#define DIRTY_LAG_MAX GRANULES

/* Every unlock of a shard: stat_pages_dirty brought up to date when nothing waits any
 * more, something waits for the first time, or it lags by a chunk (dirty_counted).
 * Returns whether it was. */
static inline bool shard_unlock(struct ext_shard *s)
{
    bool counted = false;
    size_t p = s->pending_granules, c = s->dirty_counted;
    size_t lag = p > c ? p - c : c - p;
    if (lag && (!p || !c || lag >= DIRTY_LAG_MAX)) {
        if (p > c)
            atomic_fetch_add_explicit(&stat_pages_dirty, (uint64_t)(p - c) << GRANULE_SHIFT,
                                      memory_order_relaxed);
        else
            atomic_fetch_sub_explicit(&stat_pages_dirty, (uint64_t)(c - p) << GRANULE_SHIFT,
                                      memory_order_relaxed);
        __atomic_store_n(&s->dirty_counted, p, __ATOMIC_RELAXED);
        counted = true;
    }
    _Atomic int *l = shard_lock_word(s);
    if (unlikely(atomic_exchange_explicit(l, 0, memory_order_release) == 2))
        os_wake_one(l); /* it marks the word 2 again as it takes it: the next one is woken */
    return counted;
}

static inline struct ext_free **bin_of(struct ext_shard *s, unsigned len)
{
    return &s->bins[GRANULES - len];
}

/* The smallest bin of at least len granules that map marks (sum: its words not 0), or 0. */
static inline unsigned map_find(const uint64_t *map, uint64_t sum, unsigned len)
{
    unsigned w = len / 64;
    uint64_t bits = __atomic_load_n(&map[w], __ATOMIC_RELAXED) & (~(uint64_t)0 << (len % 64));
    if (bits)
        return w * 64 + (unsigned)__builtin_ctzll(bits);
    sum &= ~(uint64_t)1 << w; /* the words above w */
    if (!sum)
        return 0;
    w = (unsigned)__builtin_ctzll(sum);
    bits = __atomic_load_n(&map[w], __ATOMIC_RELAXED);
    return bits ? w * 64 + (unsigned)__builtin_ctzll(bits) : 0; /* 0: changed meanwhile */
}

/* Whether o, looked at without its lock (a hint), has a run of at least want granules that
 * bin_find_other takes: a resident one (pendmap), or any when the request has no fit (!k). */
static inline bool shard_may_fit(const struct ext_shard *o, unsigned want, unsigned k)
{
    return k ? map_find(o->pendmap, __atomic_load_n(&o->pendsum, __ATOMIC_RELAXED), want) != 0
             : map_find(o->binmap, __atomic_load_n(&o->binsum, __ATOMIC_RELAXED), want) != 0;
}

/* ---- extent-run.c: the shards, their bins, chunks and runs ------------------------------ */
HIDDEN void bin_remove(struct ext_shard *s, struct ext_free *n);
HIDDEN unsigned map_find_top(const uint64_t *map, unsigned len);
HIDDEN struct ext_free *run_free_held(struct extent_map *m, unsigned first, unsigned len,
                                      bool dirty, bool zero, bool trimmed, uint32_t freed_at,
                                      unsigned *held);
HIDDEN struct ext_free *run_free(struct extent_map *m, unsigned first, unsigned len, bool dirty,
                                 bool zero, bool trimmed, uint32_t freed_at);
HIDDEN bool run_take(struct extent_map *m, struct ext_free *n, unsigned first, unsigned len);
HIDDEN void chunk_maybe_drop(struct extent_map *m);
HIDDEN void *run_alloc_locked(struct ext_shard **sp, unsigned len, size_t align, bool *is_zero,
                              bool *fresh);
#ifdef THPALLOC_DEBUG
HIDDEN void map_check(const struct extent_map *m);
HIDDEN void pending_check(struct ext_shard *s);
#define MAP_CHECK(m) (map_check(m), pending_check((m)->shard))
#else
#define MAP_CHECK(m) ((void)0)
#endif

/* ---- extent-purge.c: trims and the delayed purge ---------------------------------------- */
HIDDEN void run_freed(struct extent_map *m, struct ext_free *n, bool pend, unsigned held);
HIDDEN void note_pending(bool counted);

#endif
