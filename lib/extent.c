/* extent: blocks above the small classes (8 KiB) up to 1 MiB, as runs of 4 KiB granules
 * inside 2 MiB extent chunks shared by every thread. A free run coalesces with its free
 * neighbours at once, a block grows and shrinks in place (realloc), and a request takes the
 * smallest free run that fits (best fit, bins by exact length), a resident one before a
 * purged one; when no run of that length is resident, the smallest resident run that fits,
 * from its resident end: what a thread frees, any thread reuses, before fresh memory is
 * touched (glibc's and jemalloc's coalescing instead of 24 segregated classes per thread,
 * each holding pages of its own). Free runs go back to the kernel after purge_delay
 * (extents_purge, from the purger); a chunk that empties goes back to the arena once
 * purged (or when a heap needs a chunk), but one spare a shard.
 *
 * The chunks are split into shards (struct ext_shard), each with its own lock, bins and
 * chunks; a chunk's map (extent-map.h) holds the boundary tags and the dirty bits, outside
 * the memory, and its shard. Everything here is under the lock of the shard concerned;
 * only the purger drops it, around the madvise of a run it has taken out (tagged BUSY, so
 * that no neighbour merges with it and no free accepts it). */
#include "extent-map.h"
#include "internal.h"
#include "list.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#define TRIM_COST_CALL 4u   /* a madvise costs about as much as 4 page faults */
#define TRIM_COST_MAX 256u  /* a refault budget of 1 MiB faulted again per purge_delay */
#define TRIM_BATCH 128u     /* granules (512 KiB): a storm's trims go by the half MiB */
#define TRIM_BATCH_RUNS 64u /* runs one batch purges at most */
/* Granules a storm's batches give back in a purge_delay before the purger thread is asked
 * for: 16 MiB, which would have waited without them, the purger's own start (purge-signal.c,
 * PURGER_MIN_PENDING). */
#define TRIM_STORM_MAX 4096u

/* A shard: its own lock, bins and chunks. One process-wide shard was one lock for every
 * thread's extents: 4 threads of mixed sizes (mixed) waited 0.67 s for it in a 0.97 s run,
 * 36632 of 1.39 million takes contended. Once a second heap is made, a request takes from
 * the shard of the CPU it runs on (a thread that runs meets the others only when it was
 * moved, or frees a block another CPU's shard holds); until then every request takes from
 * shard0, and a single-threaded process lays out its extents as with one shard. A chunk
 * stays in the shard that made it, and so does its map, recycled there (maps_free): a
 * map's shard never changes, and a free finds its lock without one. */
#define EXT_SHARDS 8
#define MAP_WORDS ((GRANULES + 64) / 64)

struct ext_shard {
    pthread_mutex_t lock; /* shard0's is shard0_lock (shard_lock) */
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
    /* Granules not yet added to stat_pages_dirty and stat_extent_used: one atomic each when
     * the lock goes (shard_unlock), not one for each run a request splits or merges (the
     * counters' line is every thread's). */
    long stat_dirty, stat_used;
    uint64_t binmap[MAP_WORDS];
    uint64_t pendmap[MAP_WORDS]; /* bins whose first run is pending */
    /* By exact length, pending runs at the front; the heads alone, 4 KiB (a bin's list keeps
     * its last node in its first node's prev), stored longest first (bin_of) after the
     * fields above. A small process's runs, short blocks and the rest of its chunk, touch
     * two pages of them, not three (python3 idle: -4 KiB). */
    struct ext_free *bins[GRANULES];
};

/* shard0 in .bss, its lock apart in .data (an initialised shard0, 4 KiB of .data, cost the
 * smallest process a written page more: rel-footprint); shard_lock finds it. */
static struct ext_shard shard0;
static pthread_mutex_t shard0_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
/* shards[i] for i > 0, made when a request first runs on a CPU of that index (meta memory,
 * never freed); NULL in .bss, so that a single-threaded process writes none of it. */
static struct ext_shard *_Atomic shards[EXT_SHARDS];
static pthread_mutex_t shards_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int empty_kept;        /* some empty chunk besides a spare is kept, resident */
static _Atomic bool trim_want_thread; /* a storm asks for the purger (note_pending) */
_Atomic uint64_t stat_extent_used;    /* bytes handed out (statistics) */
/* Set by thread.c, the heaps' lives, when a second heap is made, never cleared: until then
 * the process has one thread that allocates, its extents bypass the thread cache
 * (extent-cache.c) and take from shard0. It lives here, below the heaps' lives and the
 * cache in the layers. */
_Atomic int heap_second_made;

static inline pthread_mutex_t *shard_lock(struct ext_shard *s)
{
    return s == &shard0 ? &shard0_lock : &s->lock;
}

/* Shard i, or NULL when no request has run on such a CPU yet. */
static inline struct ext_shard *shard_at(unsigned i)
{
    return i == 0 ? &shard0 : atomic_load_explicit(&shards[i], memory_order_acquire);
}

/* Shard i, made now if it is not yet; shard0 when there is no memory for it. */
static struct ext_shard *shard_make(unsigned i)
{
    pthread_mutex_lock(&shards_lock);
    struct ext_shard *s = atomic_load_explicit(&shards[i], memory_order_relaxed);
    if (!s) {
        s = meta_alloc(sizeof *s); /* zero: fresh meta memory */
        if (s) {
            pthread_mutex_t init = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
            s->lock = init;
            atomic_store_explicit(&shards[i], s, memory_order_release);
        }
    }
    pthread_mutex_unlock(&shards_lock);
    return s ? s : &shard0;
}

/* The shard a request takes from: shard0 until a second heap is made, then its CPU's. */
static struct ext_shard *shard_here(void)
{
    if (!atomic_load_explicit(&heap_second_made, memory_order_relaxed))
        return &shard0;
    int cpu = sched_getcpu(); /* a load from the rseq area where the kernel has it */
    unsigned i = cpu > 0 ? (unsigned)cpu % EXT_SHARDS : 0;
    struct ext_shard *s = shard_at(i);
    return likely(s) ? s : shard_make(i);
}

static bool purge_enabled(void)
{
    /* mode always: extent chunks are huge pages, which a 4 KiB purge would split */
    return policy_in_force.purge_delay_ms >= 0 && policy_in_force.thp.mode != THP_MODE_ALWAYS;
}

static void pending_add(struct ext_shard *s, long granules)
{
    s->pending_granules = (size_t)((long)s->pending_granules + granules);
    s->stat_dirty += granules;
}

static void stat_flush(_Atomic uint64_t *stat, long *granules)
{
    if (*granules > 0)
        atomic_fetch_add_explicit(stat, (uint64_t)*granules << GRANULE_SHIFT, memory_order_relaxed);
    else if (*granules < 0)
        atomic_fetch_sub_explicit(stat, (uint64_t) - *granules << GRANULE_SHIFT,
                                  memory_order_relaxed);
    *granules = 0;
}

/* Every unlock of a shard: its counts reach the statistics first. */
static void shard_unlock(struct ext_shard *s)
{
    stat_flush(&stat_pages_dirty, &s->stat_dirty);
    stat_flush(&stat_extent_used, &s->stat_used);
    pthread_mutex_unlock(shard_lock(s));
}

/* ---- bins ------------------------------------------------------------------------ */

static inline struct ext_free **bin_of(struct ext_shard *s, unsigned len)
{
    return &s->bins[GRANULES - len];
}

static void pendmap_update(struct ext_shard *s, unsigned len)
{
    const struct ext_free *f = *bin_of(s, len);
    uint64_t bit = (uint64_t)1 << (len % 64);
    s->pendmap[len / 64] = f && f->dirty ? s->pendmap[len / 64] | bit : s->pendmap[len / 64] & ~bit;
}

static void bin_insert(struct ext_shard *s, struct ext_free *n)
{
    struct ext_free **b = bin_of(s, n->len), *f = *b;
    if (!f) {
        n->next = NULL;
        n->prev = n;
        *b = n;
    } else if (n->dirty) { /* resident first: reuse before touching purged memory */
        n->next = f;
        n->prev = f->prev;
        f->prev = n;
        *b = n;
    } else {
        n->prev = f->prev;
        n->next = NULL;
        f->prev->next = n;
        f->prev = n;
    }
    s->binmap[n->len / 64] |= (uint64_t)1 << (n->len % 64);
    pendmap_update(s, n->len);
}

static void bin_remove(struct ext_shard *s, struct ext_free *n)
{
    struct ext_free **b = bin_of(s, n->len), *f = *b;
    LIB_ASSERT(f && !f->prev->next); /* f's prev is the bin's last node */
    if (n == f)
        *b = n->next;
    else
        n->prev->next = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else if (n != f)
        f->prev = n->prev; /* n was the last */
    n->next = n->prev = NULL;
    if (!*b)
        s->binmap[n->len / 64] &= ~((uint64_t)1 << (n->len % 64));
    pendmap_update(s, n->len);
}

/* The smallest bin of at least len granules that map marks, or 0. */
static unsigned map_find(const uint64_t *map, unsigned len)
{
    unsigned w = len / 64;
    uint64_t bits = map[w] & (~(uint64_t)0 << (len % 64));
    for (;;) {
        if (bits)
            return w * 64 + (unsigned)__builtin_ctzll(bits);
        if (++w >= MAP_WORDS)
            return 0;
        bits = map[w];
    }
}

/* The largest bin of at least len granules that map marks, or 0. */
static unsigned map_find_top(const uint64_t *map, unsigned len)
{
    for (unsigned w = MAP_WORDS; w-- > len / 64;) {
        uint64_t bits = map[w];
        if (w == len / 64)
            bits &= ~(uint64_t)0 << (len % 64);
        if (bits)
            return w * 64 + 63 - (unsigned)__builtin_clzll(bits);
    }
    return 0;
}

/* The bin a request of len granules takes from: the smallest run that fits, unless no run
 * of that length is resident and a longer one is (reuse before touching fresh memory:
 * thread churn's extents touched every granule of their chunks over a second of batches,
 * 4.1 -> 6.8 MiB, for as much handed out). 0: none. */
static unsigned bin_find(struct ext_shard *s, unsigned len)
{
    unsigned k = map_find(s->binmap, len);
    if (k && !(*bin_of(s, k))->dirty) {
        unsigned r = map_find(s->pendmap, k);
        if (r)
            k = r;
    }
    return k;
}

#ifdef THPALLOC_DEBUG
/* The map's runs tile the chunk; free runs are in the bin of their length, never next to
 * another free run; used counts the granules handed out. */
static void map_check(const struct extent_map *m)
{
    unsigned g = 0, used = 0;
    bool prev_free = false;
    while (g < GRANULES) {
        uint16_t t = tag_get(m, g);
        unsigned len = t & TAG_LEN;
        LIB_ASSERT((t & TAG_HEAD) && len >= 1 && g + len <= GRANULES);
        LIB_ASSERT(len == 1 ? (t & TAG_TAIL) != 0
                            : tag_get(m, g + len - 1) ==
                                  (uint16_t)((t & ~(TAG_HEAD | TAG_CACHED)) | TAG_TAIL));
        bool is_free = (t & TAG_FREE) != 0;
        LIB_ASSERT(!(is_free && prev_free));
        if (is_free)
            LIB_ASSERT(m->node[g].len == len && m->node[g].dirty == dirty_count(m, g, len));
        else if (!(t & TAG_BUSY))
            used += len;
        if (!is_free && !(t & TAG_BUSY))
            LIB_ASSERT(dirty_count(m, g, len) == 0);
        prev_free = is_free;
        g += len;
    }
    LIB_ASSERT(g == GRANULES && used == m->used);
}

/* The shard's pending_granules is its free runs' dirty granules, over its maps. */
static void pending_check(struct ext_shard *s)
{
    size_t dirty = 0;
    for (chunk_t *c = s->chunks.first; c; c = c->next) {
        const struct extent_map *m = map_of(c);
        for (unsigned g = 0, len; g < GRANULES; g += len) {
            uint16_t t = tag_get(m, g);
            len = t & TAG_LEN;
            if (!len)
                break;
            if (t & TAG_FREE)
                dirty += m->node[g].dirty;
        }
    }
    LIB_ASSERT(dirty == s->pending_granules);
}
#define MAP_CHECK(m) (map_check(m), pending_check((m)->shard))
#else
#define MAP_CHECK(m) ((void)0)
#endif

/* ---- chunks ------------------------------------------------------------------------ */

/* A new extent chunk of s: one free run of the whole chunk. s->lock held. */
static chunk_t *chunk_add(struct ext_shard *s)
{
    arena_t *arena;
    bool zero;
    uint8_t *base = arena_alloc_chunks(1, CHUNK_SIZE, THP_USE_SMALL, CHUNK_SIZE, &arena, &zero);
    if (!base)
        return NULL;
    struct extent_map *m = s->maps_free;
    if (m)
        s->maps_free = m->next_free;
    else
        m = meta_alloc(sizeof *m); /* zero: fresh meta memory */
    if (!m) {
        arena_free_chunks(arena, base, 1);
        errno = ENOMEM;
        return NULL;
    }
    /* Zero when fresh; recycled, an extent chunk's still: only what differs is set (no
     * memset, so that a stale look at it never reads a NULL ext). */
    chunk_t *c = (chunk_t *)(void *)m->desc;
    c->base = base;
    c->kind = CHUNK_EXTENT;
    c->page_shift = PAGE_SHIFT_NONE; /* every offset is page 0, whose fast_owner is NULL */
    c->npages = 0;
    c->arena = arena;
    c->nchunks = 1;
    c->ext = m;
    atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
    /* pages[0] is never written: its fast_owner stays NULL */
    LIB_ASSERT(!atomic_load_explicit(&c->pages[0].fast_owner, memory_order_relaxed));
    m->chunk = c;
    m->used = 0;
    m->next_free = NULL;
    m->shard = s; /* already, for a map of s->maps_free */
    if (!registry_set(base, 1, c)) {
        registry_set(base, 1, registry_unused(arena));
        arena_free_chunks(arena, base, 1);
        c->kind = CHUNK_FREE;
        m->chunk = NULL;
        m->next_free = s->maps_free;
        s->maps_free = m;
        errno = ENOMEM;
        return NULL;
    }
    struct ext_free *n = &m->node[0];
    n->index = 0;
    n->len = GRANULES;
    n->dirty = !zero && purge_enabled() ? GRANULES : 0; /* not purged by the arena yet */
    dirty_mark(m, 0, GRANULES, n->dirty != 0);
    n->zero = zero;
    n->trimmed = false;
    /* resident, it has waited since the arena got it: the rest of purge_delay */
    n->freed_at = n->dirty ? arena_freed_at(arena, base) : now_ms();
    pending_add(s, n->dirty);
    tags_set(m, 0, GRANULES, TAG_FREE);
    bin_insert(s, n);
    DLIST_PUSH_BACK(&s->chunks, c);
    return c;
}

/* An empty chunk back to the arena. One known to read as zero (never written, or purged
 * with DONTNEED) goes back as purged: counted as waiting, it showed megabytes in
 * purge_pending that were not resident, and was purged twice. Any other (resident: a heap
 * needs a chunk; or written where nothing purges extents: purge_delay never, mode always;
 * or purged with MADV_FREE, whose old contents may come back) waits there for purge_delay,
 * and is never handed out as zero. The shard's lock held; its one free run is in its bin. */
static void chunk_drop(chunk_t *c)
{
    struct extent_map *m = map_of(c);
    struct ext_shard *s = m->shard;
    struct ext_free *n = &m->node[0];
    LIB_ASSERT(m->used == 0 && n->len == GRANULES);
    bin_remove(s, n);
    pending_add(s, -(long)n->dirty);
    bool clean = !n->dirty && n->zero;
    dirty_mark(m, 0, GRANULES, false);
    tags_clear(m, 0, GRANULES);
    DLIST_REMOVE(&s->chunks, c);
    registry_set(c->base, 1, registry_unused(c->arena));
    if (clean)
        arena_free_chunks_clean(c->arena, c->base, 1);
    else
        arena_free_chunks(c->arena, c->base, 1);
    /* c->ext stays: a racing look at a stale pointer reads this map, never NULL; and the
     * descriptor stays an extent chunk's, page_shift and pages[0] included */
    c->kind = CHUNK_FREE;
    m->chunk = NULL;
    m->next_free = s->maps_free;
    s->maps_free = m;
}

/* ---- runs -------------------------------------------------------------------------- */

/* What a free run being built takes from a free neighbour it absorbs. */
struct merge {
    unsigned start, total;
    unsigned was_dirty; /* dirty granules of the parts, counted as waiting already */
    unsigned dirty;     /* of the whole */
    bool zero, trimmed;
    /* A merged run waits as long as its part with the most dirty granules (age_dirty): a
     * freed block that joins a big run freed long ago does not start the big run's wait
     * again (a thread cache's flush next to it would keep it resident for as long as the
     * program runs), and a big block freed now is not purged for the sake of a small old
     * neighbour, nor for a long clean one's. */
    uint32_t freed_at;
    unsigned age_dirty;
};

static void absorb(struct extent_map *m, unsigned first, unsigned len, struct merge *g)
{
    struct ext_free *x = &m->node[first];
    bin_remove(m->shard, x);
    tags_clear(m, first, len);
    if (first < g->start)
        g->start = first;
    g->total += len;
    if (x->dirty) {
        g->was_dirty += x->dirty;
        if (!g->dirty || x->dirty > g->age_dirty) {
            g->freed_at = x->freed_at;
            g->age_dirty = x->dirty;
        }
        g->dirty += x->dirty;
    }
    g->zero = g->zero && x->zero;
    g->trimmed = g->trimmed || x->trimmed;
}

/* Makes [first, first+len) of m a free run, merged with free neighbours. dirty: it all held
 * data (to be purged after purge_delay), else its dirty bits stay as they are; zero: it
 * reads as zero. Returns the merged run, and in *held its dirty granules. The shard's lock
 * held. */
static struct ext_free *run_free_own(struct extent_map *m, unsigned first, unsigned len,
                                     unsigned own, bool zero, bool trimmed, uint32_t freed_at,
                                     unsigned *held);

static struct ext_free *run_free_held(struct extent_map *m, unsigned first, unsigned len,
                                      bool dirty, bool zero, bool trimmed, uint32_t freed_at,
                                      unsigned *held)
{
    if (dirty)
        dirty_mark(m, first, len, true);
    return run_free_own(m, first, len, dirty ? len : dirty_count(m, first, len), zero, trimmed,
                        freed_at, held);
}

/* run_free_held with the run's dirty granules already known (own): a split run's parts. */
static struct ext_free *run_free_own(struct extent_map *m, unsigned first, unsigned len,
                                     unsigned own, bool zero, bool trimmed, uint32_t freed_at,
                                     unsigned *held)
{
    LIB_ASSERT(own == dirty_count(m, first, len));
    struct merge g = {first, len, 0, own, zero, trimmed, freed_at, own};
    if (first > 0) {
        uint16_t t = tag_get(m, first - 1);
        if ((t & (TAG_TAIL | TAG_FREE)) == (TAG_TAIL | TAG_FREE))
            absorb(m, first - (t & TAG_LEN), t & TAG_LEN, &g);
    }
    if (first + len < GRANULES) {
        uint16_t t = tag_get(m, first + len);
        if ((t & (TAG_HEAD | TAG_FREE)) == (TAG_HEAD | TAG_FREE))
            absorb(m, first + len, t & TAG_LEN, &g);
    }
    struct ext_shard *s = m->shard;
    struct ext_free *n = &m->node[g.start];
    n->index = g.start & 0x3ff;
    n->len = g.total & TAG_LEN;
    n->dirty = g.dirty & TAG_LEN;
    n->zero = g.zero;
    n->trimmed = g.trimmed && !g.dirty; /* a resident part joined: taken, it may be that */
    n->freed_at = g.freed_at;
    pending_add(s, (long)g.dirty - (long)g.was_dirty);
    tags_set(m, g.start, g.total, TAG_FREE);
    bin_insert(s, n);
    if (held)
        *held = g.dirty;
    return n;
}

static struct ext_free *run_free(struct extent_map *m, unsigned first, unsigned len, bool dirty,
                                 bool zero, bool trimmed, uint32_t freed_at)
{
    return run_free_held(m, first, len, dirty, zero, trimmed, freed_at, NULL);
}

/* A trimmed run is handed out again, len granules of it. Within purge_delay of its trim,
 * the trim bought only the page faults that follow (the delayed purge would have left it):
 * a refault, priced in granules faulted again, a granule for each and TRIM_COST_CALL for the
 * madvise. A process may pay TRIM_COST_MAX of that per purge_delay (a start-up reuses what
 * it frees for a while, then goes idle with the rest); past that it trims only runs twice as
 * long, until none. */
static void trim_taken(struct ext_shard *s, uint32_t trimmed_at, unsigned len)
{
    long delay = policy_in_force.purge_delay_ms;
    uint32_t now = now_ms();
    if (clock_passed(now, trimmed_at, delay))
        return;
    if (clock_passed(now, s->trim_window_at, delay)) {
        s->trim_window_at = now;
        s->trim_cost = 0;
    }
    s->trim_cost += TRIM_COST_CALL + len;
    if (s->trim_cost > TRIM_COST_MAX) {
        s->trim_shift++;
        s->trim_cost = 0;
    }
}

/* Whether a free that left the merged run n, with held granules of it resident, gives it
 * back now: when the run is the threshold long or longer, as glibc trims its heap's top by
 * the top's length. Only where nothing else would: the purger thread purges after
 * purge_delay, and without it only the process's own later calls do, which a process that
 * goes idle after its start-up (python3: 68 KiB of runs it freed while starting) never
 * makes. By the granules held alone, blocks freed one by one next to the untouched rest of
 * their chunk stayed, each below the threshold (python3 idle: 24 KiB, once the dirty
 * granules were placed and no longer overcounted). Not a whole chunk: an empty chunk is the
 * spare or waits as a chunk (chunk_maybe_drop); trimmed, it went back to the arena at once,
 * and the next block took it back as a new chunk, whose runs carry no trim (rel-reclaim
 * loop: a 2 MiB madvise per malloc/free pair). */
static bool trim_due(const struct ext_shard *s, const struct ext_free *n, unsigned held)
{
    size_t min = policy_in_force.trim_threshold;
    return min && held && n->len < GRANULES && s->trim_shift <= CHUNK_SHIFT &&
           ((size_t)n->len << GRANULE_SHIFT) >= min << s->trim_shift && !purger_thread_started();
}

/* Granules a storm's batch waits for: TRIM_BATCH, doubled with the trim's length by the
 * refaults (trim_taken), as a process that takes back what it freed should pay for fewer
 * madvise calls (the realloc workload: 113 calls before the batches, 246 with a fixed
 * one). */
static size_t trim_batch_len(struct ext_shard *s)
{
    return (size_t)TRIM_BATCH << (s->trim_shift < 16 ? s->trim_shift : 16);
}

/* Whether the trim that is due now goes at once: the first trim_burst of a purge_delay do
 * (a start-up that frees a few runs and goes idle gets them back); past them the process is
 * in a storm of frees, and its runs wait for the batch (trim_batch) or the delayed purge.
 * One madvise a freed block was a syscall storm: a list drained by a server, 8 KiB nodes
 * freed one after the other next to the runs trimmed before them, made 123 madvise calls
 * a MiB freed (listdrain). */
static bool trim_now(struct ext_shard *s)
{
    uint32_t now = now_ms();
    unsigned burst = policy_in_force.trim_burst;
    if (clock_passed(now, s->trim_calls_at, policy_in_force.purge_delay_ms)) {
        s->trim_calls_at = now;
        s->trim_calls = 0;
        s->trim_batched = 0;
    }
    if (s->trim_calls < burst) {
        s->trim_calls++;
        return true;
    }
    if (s->trim_calls == burst) { /* the storm starts */
        s->trim_calls++;
        s->trim_batch_at = s->pending_granules + trim_batch_len(s);
    }
    return false;
}

/* Whether trims are made at all now (trim_due without the run). */
static bool trim_due_any(struct ext_shard *s)
{
    return policy_in_force.trim_threshold && s->trim_shift <= CHUNK_SHIFT &&
           !purger_thread_started();
}

/* Takes granules [first, first+len) out of the free run n (first at or after n's start),
 * the rest of it back as free runs with their own dirty granules. Returns whether the taken
 * part reads as zero. */
static bool run_take(struct extent_map *m, struct ext_free *n, unsigned first, unsigned len)
{
    struct ext_shard *s = m->shard;
    unsigned start = n->index, total = n->len;
    unsigned dirty = n->dirty;
    bool zero = n->zero, trimmed = n->trimmed;
    uint32_t at = n->freed_at;
    bin_remove(s, n);
    tags_clear(m, start, total);
    pending_add(s, -(long)dirty);
    if (trimmed)
        trim_taken(s, at, len); /* once a trim: the rest of the run is not flagged again */
    /* A storm whose memory is taken again as it goes (thread churn) is no reason for the
     * purger: its batches kept the peak down (threadchurn-25: 13.3 MiB, 16.0 with the
     * thread); one that only frees (a drained list) is. */
    if (s->trim_batched)
        s->trim_batched = s->trim_batched > len ? s->trim_batched - len : 0;
    /* the parts before and after: free runs of their own (no free neighbour: n had none).
     * Their dirty granules by difference, counting only the part taken and the part before
     * (usually none): counting the rest, most of a chunk, cost 8 words on every split. */
    unsigned before = first - start, after = start + total - first - len;
    unsigned taken_dirty = 0, before_dirty = 0;
    if (dirty == total) { /* all resident: nothing to count */
        taken_dirty = len;
        before_dirty = before;
        dirty_mark(m, first, len, false);
    } else if (dirty) {
        taken_dirty = dirty_count(m, first, len);
        before_dirty = before ? dirty_count(m, start, before) : 0;
        dirty_mark(m, first, len, false);
    }
    if (before)
        run_free_own(m, start, before, before_dirty, zero, false, at, NULL);
    if (after)
        run_free_own(m, first + len, after, dirty - taken_dirty - before_dirty, zero, false, at,
                     NULL);
    tags_set(m, first, len, 0);
    m->used += len;
    if (m->chunk == s->spare)
        s->spare = NULL;
    s->stat_used += len;
    return zero;
}

/* Every granule of m's chunk free, in one run (not one the purger holds). */
static bool chunk_is_empty(const struct extent_map *m)
{
    uint16_t t = tag_get(m, 0);
    return m->used == 0 && (t & TAG_FREE) && (t & TAG_LEN) == GRANULES;
}

/* After a free or a purge: a chunk that emptied is the spare, or goes back to the arena once
 * it is purged. A resident one stays an extent chunk until extents_purge gives its run back
 * after purge_delay, or a heap or a large block needs a chunk (extents_release_empty):
 * dropped at once, it became some heap's chunk of dirty slots, and the next extents touched
 * a fresh chunk (thread churn: 8 to 16 MiB of extents faulted in for 6 MiB resident). */
static void chunk_maybe_drop(struct extent_map *m)
{
    struct ext_shard *s = m->shard;
    if (!chunk_is_empty(m))
        return;
    if (!s->spare && s == &shard0) { /* one spare in the process: the others take it too */
        s->spare = m->chunk;
    } else if (s->spare != m->chunk) {
        if (m->node[0].dirty)
            atomic_store_explicit(&empty_kept, 1, memory_order_relaxed);
        else
            chunk_drop(m->chunk);
    }
}

/* One empty chunk stays besides the spare: handed to a heap, the last one came back as
 * fresh memory the next time the extents grew (thread churn, whose batches' extents go up
 * and down by a chunk: 7 runs in 30 peaked at 17.0-20.4 MiB, 1 with the one kept). The one
 * kept goes back once purged (chunk_maybe_drop). */
void extents_release_empty(void)
{
    if (!atomic_load_explicit(&empty_kept, memory_order_relaxed))
        return;
    bool kept = false; /* one in the process, whichever shard holds it */
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (!s)
            continue;
        pthread_mutex_lock(shard_lock(s));
        chunk_t *cn;
        for (chunk_t *c = s->chunks.first; c; c = cn) {
            cn = c->next;
            if (c == s->spare || !chunk_is_empty(map_of(c)))
                continue;
            if (kept)
                chunk_drop(c);
            kept = true;
        }
        shard_unlock(s);
    }
    atomic_store_explicit(&empty_kept, 0, memory_order_relaxed); /* the one kept: not again */
}

static bool run_purge(struct extent_map *m, struct ext_free *n, bool trim, size_t *purged);
static void run_purge_now(struct extent_map *m, struct ext_free *n, bool trim);

/* A storm's trims, in batches: once TRIM_BATCH more granules wait than after the last
 * batch, the longest waiting runs of at least the trim's length go back, one madvise each,
 * until as much is purged (at most TRIM_BATCH_RUNS of them); the rest and those shorter
 * wait for purge_delay as ever (every such run a batch: the realloc workload made 246
 * madvise calls, 113 before the batches). A drained list leaves one run that grows by a
 * node a free: a madvise a half MiB. Once the batches of a purge_delay gave back
 * TRIM_STORM_MAX more than was taken again since, the storm asks for the purger thread. What a
 * process leaves waiting when it goes idle in the middle of a storm is below a batch (with 1 MiB, a
 * process that freed 8 MiB of 12000-byte blocks kept 13 % of them: policy-purge). */
static void trim_batch(struct ext_shard *s)
{
    if (s->trim_batch_at > s->pending_granules + trim_batch_len(s))
        s->trim_batch_at = s->pending_granules + trim_batch_len(s); /* reused meanwhile */
    if (s->pending_granules < s->trim_batch_at)
        return;
    size_t min = (policy_in_force.trim_threshold << s->trim_shift) >> GRANULE_SHIFT;
    unsigned len = min > GRANULES ? 0 : min ? (unsigned)min : 1;
    size_t batch = 0, want = trim_batch_len(s);
    for (unsigned i = 0; len && batch < want && i < TRIM_BATCH_RUNS; i++) {
        unsigned k = map_find_top(s->pendmap, len);
        if (!k)
            break;
        struct ext_free *n = *bin_of(s, k);
        struct extent_map *m = map_of_node(n);
        size_t purged = 0;
        bool done = run_purge(m, n, true, &purged);
        chunk_maybe_drop(m);
        batch += purged >> GRANULE_SHIFT;
        if (!done)
            break; /* refused: the delayed purge tries again */
    }
    s->trim_batched += batch;
    s->trim_batch_at = s->pending_granules + trim_batch_len(s);
    /* A storm that goes on: what it frees is taken again by its next phase, purged and
     * faulted in again for nothing (listdrain: 0.71 s against 0.36 s without, as many page
     * faults as MiB freed); the purger waits purge_delay instead. */
    if (s->trim_batched >= TRIM_STORM_MAX)
        atomic_store_explicit(&trim_want_thread, true, memory_order_relaxed);
}

/* After a free that left memory waiting (the shard's lock released). */
static void note_pending(void)
{
    if (unlikely(atomic_load_explicit(&trim_want_thread, memory_order_relaxed))) {
        atomic_store_explicit(&trim_want_thread, false, memory_order_relaxed);
        purge_want_thread();
    }
    purge_note_dirty();
}

/* ---- the API ----------------------------------------------------------------------- */

static inline unsigned granules_of(size_t size)
{
    return (unsigned)((size + GRANULE - 1) >> GRANULE_SHIFT);
}

/* No resident run of *sp fits want granules (k: the bin it would take from, fresh or
 * purged memory; 0: none fits): the bin of another shard's resident run that fits, with
 * that shard's lock held and *sp set to it; failing that, when *sp has no fit at all,
 * another shard's fresh run before a new chunk; else *sp's again, locked. A shard that
 * took fresh memory while another's freed runs waited grew the process: mixed peaked at
 * 172 MiB against 133 with one lock, xchange at 60-66 against 59. Shards are locked one
 * at a time, never two. */
static unsigned bin_find_other(struct ext_shard **sp, unsigned want, unsigned k)
{
    struct ext_shard *s = *sp;
    shard_unlock(s);
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *o = shard_at(i);
        if (!o || o == s)
            continue;
        pthread_mutex_lock(shard_lock(o));
        unsigned ko = bin_find(o, want);
        if (ko && (!k || (*bin_of(o, ko))->dirty)) {
            *sp = o;
            return ko;
        }
        shard_unlock(o);
    }
    pthread_mutex_lock(shard_lock(s));
    return bin_find(s, want); /* it may have changed meanwhile */
}

/* A run of len granules (plus what align needs) taken out of *sp's bins, or another shard's
 * (then *sp is that shard), or NULL. Returns with (*sp)->lock held. */
static void *run_alloc_locked(struct ext_shard **sp, unsigned len, size_t align, bool *is_zero)
{
    unsigned slack = align > GRANULE ? (unsigned)(align >> GRANULE_SHIFT) - 1 : 0;
    struct ext_shard *s = *sp;
    pthread_mutex_lock(shard_lock(s));
    unsigned k = bin_find(s, len + slack);
    if ((!k || !(*bin_of(s, k))->dirty) &&
        atomic_load_explicit(&heap_second_made, memory_order_relaxed))
        k = bin_find_other(sp, len + slack, k), s = *sp;
    if (!k) {
        if (!chunk_add(s))
            return NULL;
        k = GRANULES;
    }
    struct ext_free *n = *bin_of(s, k);
    struct extent_map *m = map_of_node(n);
    unsigned first = n->index;
    if (slack) {
        uintptr_t a = (uintptr_t)m->chunk->base + ((uintptr_t)first << GRANULE_SHIFT);
        uintptr_t aligned = (a + align - 1) & ~(uintptr_t)(align - 1);
        first += (unsigned)((aligned - a) >> GRANULE_SHIFT);
    } else if (n->dirty && n->dirty < n->len && n->len > len &&
               dirty_count(m, first + n->len - len, len) > dirty_count(m, first, len)) {
        first += n->len - len; /* the resident end: a freed block beside a purged run */
    }
    *is_zero = run_take(m, n, first, len);
    MAP_CHECK(m);
    return m->chunk->base + ((size_t)first << GRANULE_SHIFT);
}

/* The first granule of the block p starts, when its head's state is state (0: handed out,
 * TAG_CACHED: in a thread's cache); else -1 (an interior pointer, a free run, a run the
 * purger holds, a cached block asked for as live). Safe without the lock for a block the
 * caller holds; for anything else only under it. */
static int block_granule_in(const chunk_t *c, const void *p, uint16_t state)
{
    uintptr_t off = (uintptr_t)((const uint8_t *)p - c->base);
    /* beyond the chunk: a stale descriptor, its map reused for another chunk since */
    if (off >= CHUNK_SIZE || (off & (GRANULE - 1)))
        return -1;
    unsigned g = (unsigned)(off >> GRANULE_SHIFT);
    uint16_t t = tag_get(map_of(c), g);
    if ((t & (TAG_HEAD | TAG_FREE | TAG_BUSY | TAG_CACHED)) != (TAG_HEAD | state))
        return -1;
    return (int)g;
}

static int block_granule(const chunk_t *c, const void *p)
{
    return block_granule_in(c, p, 0);
}

void extent_bad_pointer(const chunk_t *c, const void *p, const char *invalid)
{
    uintptr_t off = (uintptr_t)((const uint8_t *)p - c->base);
    uint16_t t = off >= CHUNK_SIZE || (off & (GRANULE - 1))
                     ? 0
                     : tag_get(map_of(c), (unsigned)(off >> GRANULE_SHIFT));
    lib_fatal((t & TAG_HEAD) && invalid[0] == 'f' ? "free(): double free detected" : invalid, p);
}

/* What becomes of the merged free run n that a free or a shrink left (held granules of it
 * resident): purged now with purge_delay 0 or when the trim is due, else it waits, and a
 * chunk that emptied goes (chunk_maybe_drop). The shard's lock held. */
static void run_freed(struct extent_map *m, struct ext_free *n, bool pend, unsigned held)
{
    struct ext_shard *s = m->shard; /* the map's for good, even once it went back */
    MAP_CHECK(m);                   /* before the map may go back with its chunk */
    if (pend && policy_in_force.purge_delay_ms == 0)
        run_purge_now(m, n, false);
    else if (pend && trim_due(s, n, held) && trim_now(s))
        run_purge_now(m, n, true);
    else {
        chunk_maybe_drop(m);
        if (pend && s->trim_calls > policy_in_force.trim_burst && trim_due_any(s))
            trim_batch(s);
    }
}

/* Frees the block of len granules at granule g of m. The shard's lock held. Returns whether it
 * left memory to purge. */
static bool block_free_locked(struct extent_map *m, unsigned g, unsigned len, uint32_t now)
{
    tags_clear(m, g, len);
    m->used -= len;
    m->shard->stat_used -= len;
    bool pend = purge_enabled();
    unsigned held;
    struct ext_free *n = run_free_held(m, g, len, pend, false, false, now, &held);
    run_freed(m, n, pend, held);
    return pend;
}

void *extent_alloc(size_t size, size_t align, bool zero)
{
    LIB_ASSERT(size <= SC_MAX_SIZE && align <= CHUNK_SIZE / 2);
    bool is_zero = false;
    struct ext_shard *s = shard_here();
    void *p = run_alloc_locked(&s, granules_of(size ? size : 1), align, &is_zero);
    shard_unlock(s);
    if (p && zero && !is_zero)
        memset(p, 0, size);
    return p;
}

unsigned extent_block_len(const chunk_t *c, const void *p)
{
    int g = block_granule(c, p);
    return g < 0 ? 0 : tag_get(map_of(c), (unsigned)g) & TAG_LEN;
}

/* Takes the head of a live block (t, as checked) by CAS, under the lock: a thread's cache
 * marks a head without the lock (extent_cache_in), so a second free racing with this one
 * either saw the head first (and this CAS fails) or fails its own. */
static bool head_claim(struct extent_map *m, unsigned g, uint16_t t)
{
    return __atomic_compare_exchange_n(&m->tag[g], &t, 0, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

void extent_free(chunk_t *c, void *p)
{
    struct extent_map *m = map_of(c);
    struct ext_shard *s = m->shard;
    pthread_mutex_lock(shard_lock(s));
    int g = block_granule(c, p);
    uint16_t t = g < 0 ? 0 : tag_get(m, (unsigned)g);
    if (unlikely(g < 0 || !head_claim(m, (unsigned)g, t))) {
        shard_unlock(s);
        extent_bad_pointer(c, p, "free(): invalid pointer");
    }
    bool pend = block_free_locked(m, (unsigned)g, t & TAG_LEN, now_ms());
    shard_unlock(s);
    if (pend)
        note_pending();
}

unsigned extent_cache_in(const chunk_t *c, void *p, unsigned max)
{
    /* block_granule's checks, with the tag read once: the CAS expects what was checked */
    uintptr_t off = (uintptr_t)((const uint8_t *)p - c->base);
    struct extent_map *m = map_of(c);
    uint16_t t = off >= CHUNK_SIZE || (off & (GRANULE - 1)) ? 0 : tag_get(m, off >> GRANULE_SHIFT);
    if (unlikely((t & (TAG_HEAD | TAG_FREE | TAG_BUSY | TAG_CACHED)) != TAG_HEAD) ||
        ((t & TAG_LEN) <= max && unlikely(!__atomic_compare_exchange_n(
                                     &m->tag[off >> GRANULE_SHIFT], &t, (uint16_t)(t | TAG_CACHED),
                                     false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))))
        extent_bad_pointer(c, p, "free(): invalid pointer");
    return t & TAG_LEN;
}

void extent_free_many(void *const *blocks, unsigned n)
{
    bool pend = false;
    struct ext_shard *held = NULL; /* the lock held: consecutive blocks of a shard share it */
    uint32_t now = now_ms();
    for (unsigned i = 0; i < n; i++) {
        chunk_t *c = registry_lookup(blocks[i]);
        /* Always checked (a bound that keeps the map's index in range, not a debug
         * invariant): every block must still be a cached block of an extent chunk; under
         * the lock of the map's shard, which a chunk's kind changes under. */
        struct ext_shard *s = c && c->kind == CHUNK_EXTENT ? map_of(c)->shard : held;
        if (s != held) {
            if (held)
                shard_unlock(held);
            pthread_mutex_lock(shard_lock(s));
            held = s;
        }
        int g = c && c->kind == CHUNK_EXTENT ? block_granule_in(c, blocks[i], TAG_CACHED) : -1;
        if (unlikely(g < 0)) {
            if (held)
                shard_unlock(held);
            lib_fatal("free(): double free detected", blocks[i]);
        }
        struct extent_map *m = map_of(c);
        pend |= block_free_locked(m, (unsigned)g, tag_get(m, (unsigned)g) & TAG_LEN, now);
    }
    if (held)
        shard_unlock(held);
    if (pend)
        note_pending();
}

int extent_owns(const chunk_t *c, const void *p)
{
    return extent_block_len(c, p) != 0;
}

size_t extent_usable_size(chunk_t *c, void *p, const char *invalid)
{
    int g = block_granule(c, p);
    if (unlikely(g < 0)) {
        uintptr_t off = (uintptr_t)((uint8_t *)p - c->base);
        uint16_t t =
            (off & (GRANULE - 1)) ? 0 : tag_get(map_of(c), (unsigned)(off >> GRANULE_SHIFT));
        if (invalid[0] == 'm' && (t & TAG_HEAD) && (t & (TAG_FREE | TAG_CACHED)))
            return 0; /* a freed block: glibc says 0 for a freed chunk */
        lib_fatal(invalid, p);
    }
    return (size_t)(tag_get(map_of(c), (unsigned)g) & TAG_LEN) << GRANULE_SHIFT;
}

bool extent_resize(chunk_t *c, void *p, size_t size)
{
    unsigned want = granules_of(size);
    struct extent_map *m = map_of(c);
    int gi = block_granule(c, p);
    if (unlikely(gi < 0))
        extent_bad_pointer(c, p, "realloc(): invalid pointer");
    unsigned g = (unsigned)gi;
    uint16_t t = tag_get(m, g);
    unsigned len = t & TAG_LEN;
    if (want == len)
        return true; /* no lock: the block is the caller's */
    bool ok = true, pend = false;
    struct ext_shard *s = m->shard;
    pthread_mutex_lock(shard_lock(s));
    /* The head stays 0 until it is rewritten: a free racing with this realloc fails. */
    if (unlikely(!head_claim(m, g, t))) { /* freed by another thread since the check */
        shard_unlock(s);
        extent_bad_pointer(c, p, "realloc(): invalid pointer");
    }
    if (want < len) {
        /* The tail goes back (it held data), merged with a free run after it, and is given
         * back as a free is: a buffer shrunk to fit in a process without the purger thread
         * kept its tail until the process's next calls, which an idle one never makes. */
        tags_clear(m, g, len);
        tags_set(m, g, want, 0);
        m->used -= len - want;
        s->stat_used -= len - want;
        pend = purge_enabled();
        unsigned held;
        struct ext_free *n =
            run_free_held(m, g + want, len - want, pend, false, false, now_ms(), &held);
        run_freed(m, n, pend, held);
    } else {
        uint16_t next = g + len < GRANULES ? tag_get(m, g + len) : 0;
        ok = (next & (TAG_HEAD | TAG_FREE)) == (TAG_HEAD | TAG_FREE) &&
             len + (next & TAG_LEN) >= want;
        if (ok) {
            /* the front of the free run after it joins the block */
            tags_clear(m, g, len);
            run_take(m, &m->node[g + len], g + len, want - len);
            tags_clear(m, g + len, want - len);
            tags_set(m, g, want, 0);
        } else {
            __atomic_store_n(&m->tag[g], t, __ATOMIC_RELAXED); /* unchanged: given back */
        }
    }
    MAP_CHECK(m);
    shard_unlock(s);
    if (pend)
        note_pending();
    return ok;
}

/* ---- purging ------------------------------------------------------------------------- */

/* Takes the free run n out (BUSY), purges it without the lock, and frees it again as clean.
 * The shard's lock held on entry and on return; the chunk stays (the BUSY run is not free). */
static bool run_purge(struct extent_map *m, struct ext_free *n, bool trim, size_t *purged)
{
    struct ext_shard *s = m->shard;
    unsigned first = n->index, len = n->len, dirty = n->dirty;
    bin_remove(s, n);
    pending_add(s, -(long)dirty);
    tags_set(m, first, len, TAG_BUSY);
    s->purging++;
    shard_unlock(s);
    enum os_purge how = policy_in_force.purge;
    bool done = os_purge(m->chunk->base + ((size_t)first << GRANULE_SHIFT),
                         (size_t)len << GRANULE_SHIFT, how);
    pthread_mutex_lock(shard_lock(s));
    s->purging--;
    tags_clear(m, first, len);
    if (done) { /* what may have been resident went back */
        atomic_fetch_add_explicit(&stat_purged, (uint64_t)dirty << GRANULE_SHIFT,
                                  memory_order_relaxed);
        *purged += (size_t)dirty << GRANULE_SHIFT;
    }
    /* a refused madvise leaves it resident: pending again, tried at the next pass */
    if (done)
        dirty_mark(m, first, len, false);
    run_free(m, first, len, false, done && how == OS_PURGE_DONTNEED, trim && done, now_ms());
    return done;
}

static void run_purge_now(struct extent_map *m, struct ext_free *n, bool trim)
{
    size_t purged = 0;
    run_purge(m, n, trim, &purged);
    chunk_maybe_drop(m);
}

/* One shard's pass (extents_purge); *next as there, for its runs. */
static size_t shard_purge(struct ext_shard *s, uint32_t now, bool force, uint32_t *next)
{
    long delay = policy_in_force.purge_delay_ms;
    size_t purged = 0;
    pthread_mutex_lock(shard_lock(s));
    if (!s->pending_granules || (delay < 0 && !force)) {
        shard_unlock(s);
        return 0;
    }
    chunk_t *cn;
    for (chunk_t *c = s->chunks.first; c; c = cn) {
        struct extent_map *m = map_of(c);
        for (unsigned g = 0; g < GRANULES;) {
            uint16_t t = tag_get(m, g);
            unsigned len = t & TAG_LEN;
            if (unlikely(!(t & TAG_HEAD) || len == 0))
                break; /* cannot happen: runs tile the chunk */
            struct ext_free *n = &m->node[g];
            if ((t & TAG_FREE) && n->dirty) {
                if (force || (delay >= 0 && clock_passed(now, n->freed_at, delay))) {
                    if (!run_purge(m, n, false, &purged))
                        break; /* refused (out of memory for the kernel?): next pass */
                    g = 0;     /* the lock was dropped: the runs may have moved */
                    continue;
                }
                uint32_t due = n->freed_at + (uint32_t)delay;
                if (*next == 0 || (int32_t)(due - *next) < 0)
                    *next = due;
            }
            g += len;
        }
        /* the BUSY runs pinned c while the lock was dropped; it may have emptied since */
        cn = c->next;
        chunk_maybe_drop(m);
    }
    shard_unlock(s);
    return purged;
}

size_t extents_purge(uint32_t now, bool force, uint32_t *next)
{
    size_t purged = 0;
    *next = 0;
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (s)
            purged += shard_purge(s, now, force, next);
    }
    return purged;
}

/* ---- statistics and fork ------------------------------------------------------------- */

static void shard_fork(struct ext_shard *s, enum fork_phase phase)
{
    fork_mutex(shard_lock(s), phase);
    if (phase != FORK_CHILD || !s->purging)
        return;
    s->purging = 0;
    for (chunk_t *c = s->chunks.first; c; c = c->next) {
        struct extent_map *m = map_of(c);
        for (unsigned g = 0; g < GRANULES;) {
            uint16_t t = tag_get(m, g);
            unsigned len = t & TAG_LEN;
            if (!(t & TAG_HEAD) || len == 0)
                break;
            if (t & TAG_BUSY) {
                tags_clear(m, g, len);
                run_free(m, g, len, true, false, false, now_ms());
                g = 0;
                continue;
            }
            g += len;
        }
    }
}

/* The shards' locks in index order (shards_lock first: no shard is made meanwhile). The
 * child has no purger: a run it held out at the fork is freed again (not known zero). */
void extent_fork(enum fork_phase phase)
{
    if (phase == FORK_PARENT) {
        for (unsigned i = EXT_SHARDS; i-- > 0;) {
            struct ext_shard *s = shard_at(i);
            if (s)
                shard_unlock(s);
        }
        pthread_mutex_unlock(&shards_lock);
        return;
    }
    fork_mutex(&shards_lock, phase);
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (s)
            shard_fork(s, phase);
    }
}
