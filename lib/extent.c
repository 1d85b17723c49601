/* extent: blocks above the small classes (8 KiB) up to 1 MiB, as runs of 4 KiB granules
 * inside 2 MiB extent chunks shared by every thread. A free run coalesces with its free
 * neighbours at once, a block grows and shrinks in place (realloc), and a request takes the
 * smallest free run that fits (best fit, bins by exact length), a resident one before a
 * purged one; when no run of that length is resident, the smallest resident run that fits,
 * from its resident end: what a thread frees, any thread reuses, before fresh memory is
 * touched (glibc's and jemalloc's coalescing instead of 24 segregated classes per thread,
 * each holding pages of its own). Free runs go back to the kernel after purge_delay
 * (extents_purge, from the purger); a chunk that empties goes back to the arena once
 * purged (or when a heap needs a chunk), but one spare.
 *
 * The chunk's map (extent-map.h) holds the boundary tags and the dirty bits, outside the
 * memory. Everything here is under extent_lock; only the purger drops it, around the
 * madvise of a run it has taken out (tagged BUSY, so that no neighbour merges with it and
 * no free accepts it). */
#include "extent-map.h"
#include "internal.h"
#include "list.h"

#include <errno.h>
#include <string.h>

#define TRIM_COST_CALL 4u   /* a madvise costs about as much as 4 page faults */
#define TRIM_COST_MAX 256u  /* a refault budget of 1 MiB faulted again per purge_delay */
#define TRIM_BATCH 128u     /* granules (512 KiB): a storm's trims go by the half MiB */
#define TRIM_BATCH_RUNS 64u /* runs one batch purges at most */
/* Granules a storm's batches give back in a purge_delay before the purger thread is asked
 * for: 16 MiB, which would have waited without them, the purger's own start (purge-signal.c,
 * PURGER_MIN_PENDING). */
#define TRIM_STORM_MAX 4096u

static pthread_mutex_t extent_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
/* By exact length, pending runs at the front; the heads alone, 4 KiB (a bin's list keeps its
 * last node in its first node's prev), stored longest first (bin_of) after the globals
 * above. A small process's runs, short blocks and the rest of its chunk, touch two pages
 * of them, not three (python3 idle: -4 KiB); aligned to a page, the globals took a page of
 * their own (perl +4 KiB). */
static struct ext_free *bins[GRANULES];
static uint64_t binmap[(GRANULES + 64) / 64];
static uint64_t pendmap[(GRANULES + 64) / 64]; /* bins whose first run is pending */
static chunk_queue_t ext_chunks;               /* every extent chunk (list through next/prev) */
static chunk_t *spare;                         /* an empty chunk kept for the next request */
static _Atomic int empty_kept; /* some empty chunk besides the spare is kept, resident */
static struct extent_map *maps_free;
static size_t pending_granules; /* dirty granules of free runs, waiting for purge_delay */
/* Trim (block_free_locked): policy_in_force.trim_threshold, doubled trim_shift times by the
 * refaults (trim_taken); past a chunk, none. */
static unsigned trim_shift;
static unsigned trim_cost;      /* of the refaults since trim_window_at */
static uint32_t trim_window_at; /* ms clock */
/* The trims made since trim_calls_at (within a purge_delay; one more once a storm started),
 * and the pending granules at which a storm's next batch goes (trim_batch). */
static unsigned trim_calls;
static uint32_t trim_calls_at;
static size_t trim_batch_at;
static size_t trim_batched; /* granules the batches purged since trim_calls_at, less those taken */
static _Atomic bool trim_want_thread; /* a storm asks for the purger (note_pending) */
static unsigned purging;              /* runs the purger holds out (BUSY) right now */
_Atomic uint64_t stat_extent_used;    /* bytes handed out (statistics) */

static bool purge_enabled(void)
{
    /* mode always: extent chunks are huge pages, which a 4 KiB purge would split */
    return policy_in_force.purge_delay_ms >= 0 && policy_in_force.thp.mode != THP_MODE_ALWAYS;
}

static void pending_add(long granules)
{
    pending_granules = (size_t)((long)pending_granules + granules);
    if (granules > 0)
        atomic_fetch_add_explicit(&stat_pages_dirty, (uint64_t)granules << GRANULE_SHIFT,
                                  memory_order_relaxed);
    else if (granules < 0)
        atomic_fetch_sub_explicit(&stat_pages_dirty, (uint64_t)-granules << GRANULE_SHIFT,
                                  memory_order_relaxed);
}

/* ---- bins ------------------------------------------------------------------------ */

static inline struct ext_free **bin_of(unsigned len)
{
    return &bins[GRANULES - len];
}

static void pendmap_update(unsigned len)
{
    const struct ext_free *f = *bin_of(len);
    uint64_t bit = (uint64_t)1 << (len % 64);
    pendmap[len / 64] = f && f->dirty ? pendmap[len / 64] | bit : pendmap[len / 64] & ~bit;
}

static void bin_insert(struct ext_free *n)
{
    struct ext_free **b = bin_of(n->len), *f = *b;
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
    binmap[n->len / 64] |= (uint64_t)1 << (n->len % 64);
    pendmap_update(n->len);
}

static void bin_remove(struct ext_free *n)
{
    struct ext_free **b = bin_of(n->len), *f = *b;
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
        binmap[n->len / 64] &= ~((uint64_t)1 << (n->len % 64));
    pendmap_update(n->len);
}

/* The smallest bin of at least len granules that map marks, or 0. */
static unsigned map_find(const uint64_t *map, unsigned len)
{
    unsigned w = len / 64;
    uint64_t bits = map[w] & (~(uint64_t)0 << (len % 64));
    for (;;) {
        if (bits)
            return w * 64 + (unsigned)__builtin_ctzll(bits);
        if (++w >= sizeof binmap / sizeof binmap[0])
            return 0;
        bits = map[w];
    }
}

/* The largest bin of at least len granules that map marks, or 0. */
static unsigned map_find_top(const uint64_t *map, unsigned len)
{
    for (unsigned w = sizeof binmap / sizeof binmap[0]; w-- > len / 64;) {
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
static unsigned bin_find(unsigned len)
{
    unsigned k = map_find(binmap, len);
    if (k && !(*bin_of(k))->dirty) {
        unsigned r = map_find(pendmap, k);
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

/* pending_granules is the free runs' dirty granules, over every map. */
static void pending_check(void)
{
    size_t dirty = 0;
    for (chunk_t *c = ext_chunks.first; c; c = c->next) {
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
    LIB_ASSERT(dirty == pending_granules);
}
#define MAP_CHECK(m) (map_check(m), pending_check())
#else
#define MAP_CHECK(m) ((void)0)
#endif

/* ---- chunks ------------------------------------------------------------------------ */

/* A new extent chunk: one free run of the whole chunk. extent_lock held. */
static chunk_t *chunk_add(void)
{
    arena_t *arena;
    bool zero;
    uint8_t *base = arena_alloc_chunks(1, CHUNK_SIZE, THP_USE_SMALL, CHUNK_SIZE, &arena, &zero);
    if (!base)
        return NULL;
    struct extent_map *m = maps_free;
    if (m)
        maps_free = m->next_free;
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
    if (!registry_set(base, 1, c)) {
        registry_set(base, 1, registry_unused(arena));
        arena_free_chunks(arena, base, 1);
        c->kind = CHUNK_FREE;
        m->chunk = NULL;
        m->next_free = maps_free;
        maps_free = m;
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
    pending_add(n->dirty);
    tags_set(m, 0, GRANULES, TAG_FREE);
    bin_insert(n);
    DLIST_PUSH_BACK(&ext_chunks, c);
    return c;
}

/* An empty chunk back to the arena. One known to read as zero (never written, or purged
 * with DONTNEED) goes back as purged: counted as waiting, it showed megabytes in
 * purge_pending that were not resident, and was purged twice. Any other (resident: a heap
 * needs a chunk; or written where nothing purges extents: purge_delay never, mode always;
 * or purged with MADV_FREE, whose old contents may come back) waits there for purge_delay,
 * and is never handed out as zero. extent_lock held; its one free run is in its bin. */
static void chunk_drop(chunk_t *c)
{
    struct extent_map *m = map_of(c);
    struct ext_free *n = &m->node[0];
    LIB_ASSERT(m->used == 0 && n->len == GRANULES);
    bin_remove(n);
    pending_add(-(long)n->dirty);
    bool clean = !n->dirty && n->zero;
    dirty_mark(m, 0, GRANULES, false);
    tags_clear(m, 0, GRANULES);
    DLIST_REMOVE(&ext_chunks, c);
    registry_set(c->base, 1, registry_unused(c->arena));
    if (clean)
        arena_free_chunks_clean(c->arena, c->base, 1);
    else
        arena_free_chunks(c->arena, c->base, 1);
    /* c->ext stays: a racing look at a stale pointer reads this map, never NULL; and the
     * descriptor stays an extent chunk's, page_shift and pages[0] included */
    c->kind = CHUNK_FREE;
    m->chunk = NULL;
    m->next_free = maps_free;
    maps_free = m;
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
    bin_remove(x);
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
 * reads as zero. Returns the merged run, and in *held its dirty granules. extent_lock
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
    struct ext_free *n = &m->node[g.start];
    n->index = g.start & 0x3ff;
    n->len = g.total & TAG_LEN;
    n->dirty = g.dirty & TAG_LEN;
    n->zero = g.zero;
    n->trimmed = g.trimmed && !g.dirty; /* a resident part joined: taken, it may be that */
    n->freed_at = g.freed_at;
    pending_add((long)g.dirty - (long)g.was_dirty);
    tags_set(m, g.start, g.total, TAG_FREE);
    bin_insert(n);
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
static void trim_taken(uint32_t trimmed_at, unsigned len)
{
    long delay = policy_in_force.purge_delay_ms;
    uint32_t now = now_ms();
    if (clock_passed(now, trimmed_at, delay))
        return;
    if (clock_passed(now, trim_window_at, delay)) {
        trim_window_at = now;
        trim_cost = 0;
    }
    trim_cost += TRIM_COST_CALL + len;
    if (trim_cost > TRIM_COST_MAX) {
        trim_shift++;
        trim_cost = 0;
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
static bool trim_due(const struct ext_free *n, unsigned held)
{
    size_t min = policy_in_force.trim_threshold;
    return min && held && n->len < GRANULES && trim_shift <= CHUNK_SHIFT &&
           ((size_t)n->len << GRANULE_SHIFT) >= min << trim_shift && purge_trim_now();
}

/* Granules a storm's batch waits for: TRIM_BATCH, doubled with the trim's length by the
 * refaults (trim_taken), as a process that takes back what it freed should pay for fewer
 * madvise calls (the realloc workload: 113 calls before the batches, 246 with a fixed
 * one). */
static size_t trim_batch_len(void)
{
    return (size_t)TRIM_BATCH << (trim_shift < 16 ? trim_shift : 16);
}

/* Whether the trim that is due now goes at once: the first trim_burst of a purge_delay do
 * (a start-up that frees a few runs and goes idle gets them back); past them the process is
 * in a storm of frees, and its runs wait for the batch (trim_batch) or the delayed purge.
 * One madvise a freed block was a syscall storm: a list drained by a server, 8 KiB nodes
 * freed one after the other next to the runs trimmed before them, made 123 madvise calls
 * a MiB freed (listdrain). */
static bool trim_now(void)
{
    uint32_t now = now_ms();
    unsigned burst = policy_in_force.trim_burst;
    if (clock_passed(now, trim_calls_at, policy_in_force.purge_delay_ms)) {
        trim_calls_at = now;
        trim_calls = 0;
        trim_batched = 0;
    }
    if (trim_calls < burst) {
        trim_calls++;
        return true;
    }
    if (trim_calls == burst) { /* the storm starts */
        trim_calls++;
        trim_batch_at = pending_granules + trim_batch_len();
    }
    return false;
}

/* Whether trims are made at all now (trim_due without the run). */
static bool trim_due_any(void)
{
    return policy_in_force.trim_threshold && trim_shift <= CHUNK_SHIFT && purge_trim_now();
}

/* Takes granules [first, first+len) out of the free run n (first at or after n's start),
 * the rest of it back as free runs with their own dirty granules. Returns whether the taken
 * part reads as zero. */
static bool run_take(struct extent_map *m, struct ext_free *n, unsigned first, unsigned len)
{
    unsigned start = n->index, total = n->len;
    unsigned dirty = n->dirty;
    bool zero = n->zero, trimmed = n->trimmed;
    uint32_t at = n->freed_at;
    bin_remove(n);
    tags_clear(m, start, total);
    pending_add(-(long)dirty);
    if (trimmed)
        trim_taken(at, len); /* once a trim: the rest of the run is not flagged again */
    /* A storm whose memory is taken again as it goes (thread churn) is no reason for the
     * purger: its batches kept the peak down (threadchurn-25: 13.3 MiB, 16.0 with the
     * thread); one that only frees (a drained list) is. */
    if (trim_batched)
        trim_batched = trim_batched > len ? trim_batched - len : 0;
    /* the parts before and after: free runs of their own (no free neighbour: n had none).
     * Their dirty granules by difference, counting only the part taken and the part before
     * (usually none): counting the rest, most of a chunk, cost 8 words on every split. */
    unsigned before = first - start, after = start + total - first - len;
    unsigned taken_dirty = 0, before_dirty = 0;
    if (dirty) {
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
    if (m->chunk == spare)
        spare = NULL;
    atomic_fetch_add_explicit(&stat_extent_used, (uint64_t)len << GRANULE_SHIFT,
                              memory_order_relaxed);
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
    if (!chunk_is_empty(m))
        return;
    if (!spare) {
        spare = m->chunk;
    } else if (spare != m->chunk) {
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
    pthread_mutex_lock(&extent_lock);
    bool kept = false;
    chunk_t *cn;
    for (chunk_t *c = ext_chunks.first; c; c = cn) {
        cn = c->next;
        if (c == spare || !chunk_is_empty(map_of(c)))
            continue;
        if (kept)
            chunk_drop(c);
        kept = true;
    }
    atomic_store_explicit(&empty_kept, 0, memory_order_relaxed); /* the one kept: not again */
    pthread_mutex_unlock(&extent_lock);
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
static void trim_batch(void)
{
    if (trim_batch_at > pending_granules + trim_batch_len())
        trim_batch_at = pending_granules + trim_batch_len(); /* reused meanwhile */
    if (pending_granules < trim_batch_at)
        return;
    size_t min = (policy_in_force.trim_threshold << trim_shift) >> GRANULE_SHIFT;
    unsigned len = min > GRANULES ? 0 : min ? (unsigned)min : 1;
    size_t batch = 0, want = trim_batch_len();
    for (unsigned i = 0; len && batch < want && i < TRIM_BATCH_RUNS; i++) {
        unsigned k = map_find_top(pendmap, len);
        if (!k)
            break;
        struct ext_free *n = *bin_of(k);
        struct extent_map *m = map_of_node(n);
        size_t purged = 0;
        bool done = run_purge(m, n, true, &purged);
        chunk_maybe_drop(m);
        batch += purged >> GRANULE_SHIFT;
        if (!done)
            break; /* refused: the delayed purge tries again */
    }
    trim_batched += batch;
    trim_batch_at = pending_granules + trim_batch_len();
    /* A storm that goes on: what it frees is taken again by its next phase, purged and
     * faulted in again for nothing (listdrain: 0.71 s against 0.36 s without, as many page
     * faults as MiB freed); the purger waits purge_delay instead. */
    if (trim_batched >= TRIM_STORM_MAX)
        atomic_store_explicit(&trim_want_thread, true, memory_order_relaxed);
}

/* After a free that left memory waiting (extent_lock released). */
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

/* A run of len granules (plus what align needs) taken out of the bins, or NULL. Returns with
 * extent_lock held. */
static void *run_alloc_locked(unsigned len, size_t align, bool *is_zero)
{
    unsigned slack = align > GRANULE ? (unsigned)(align >> GRANULE_SHIFT) - 1 : 0;
    pthread_mutex_lock(&extent_lock);
    unsigned k = bin_find(len + slack);
    if (!k) {
        if (!chunk_add())
            return NULL;
        k = GRANULES;
    }
    struct ext_free *n = *bin_of(k);
    struct extent_map *m = map_of_node(n);
    unsigned first = n->index;
    if (slack) {
        uintptr_t a = (uintptr_t)m->chunk->base + ((uintptr_t)first << GRANULE_SHIFT);
        uintptr_t aligned = (a + align - 1) & ~(uintptr_t)(align - 1);
        first += (unsigned)((aligned - a) >> GRANULE_SHIFT);
    } else if (n->dirty && n->len > len &&
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
 * chunk that emptied goes (chunk_maybe_drop). extent_lock held. */
static void run_freed(struct extent_map *m, struct ext_free *n, bool pend, unsigned held)
{
    MAP_CHECK(m); /* before the map may go back with its chunk */
    if (pend && policy_in_force.purge_delay_ms == 0)
        run_purge_now(m, n, false);
    else if (pend && trim_due(n, held) && trim_now())
        run_purge_now(m, n, true);
    else {
        chunk_maybe_drop(m);
        if (pend && trim_calls > policy_in_force.trim_burst && trim_due_any())
            trim_batch();
    }
}

/* Frees the block of len granules at granule g of m. extent_lock held. Returns whether it
 * left memory to purge. */
static bool block_free_locked(struct extent_map *m, unsigned g, unsigned len, uint32_t now)
{
    tags_clear(m, g, len);
    m->used -= len;
    atomic_fetch_sub_explicit(&stat_extent_used, (uint64_t)len << GRANULE_SHIFT,
                              memory_order_relaxed);
    bool pend = purge_enabled();
    unsigned held;
    struct ext_free *n = run_free_held(m, g, len, pend, false, false, now, &held);
    run_freed(m, n, pend, held);
    return pend;
}

void *extent_alloc(size_t size, size_t align, bool zero)
{
    LIB_ASSERT(size <= SC_MAX_SIZE && align <= CHUNK_SIZE / 2);
    bool is_zero;
    void *p = run_alloc_locked(granules_of(size ? size : 1), align, &is_zero);
    pthread_mutex_unlock(&extent_lock);
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
    pthread_mutex_lock(&extent_lock);
    int g = block_granule(c, p);
    struct extent_map *m = map_of(c);
    uint16_t t = g < 0 ? 0 : tag_get(m, (unsigned)g);
    if (unlikely(g < 0 || !head_claim(m, (unsigned)g, t))) {
        pthread_mutex_unlock(&extent_lock);
        extent_bad_pointer(c, p, "free(): invalid pointer");
    }
    bool pend = block_free_locked(m, (unsigned)g, t & TAG_LEN, now_ms());
    pthread_mutex_unlock(&extent_lock);
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
    pthread_mutex_lock(&extent_lock);
    uint32_t now = now_ms();
    for (unsigned i = 0; i < n; i++) {
        chunk_t *c = registry_lookup(blocks[i]);
        /* Always checked (a bound that keeps the map's index in range, not a debug
         * invariant): every block must still be a cached block of an extent chunk. */
        int g = c && c->kind == CHUNK_EXTENT ? block_granule_in(c, blocks[i], TAG_CACHED) : -1;
        if (unlikely(g < 0)) {
            pthread_mutex_unlock(&extent_lock);
            lib_fatal("free(): double free detected", blocks[i]);
        }
        struct extent_map *m = map_of(c);
        pend |= block_free_locked(m, (unsigned)g, tag_get(m, (unsigned)g) & TAG_LEN, now);
    }
    pthread_mutex_unlock(&extent_lock);
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
    pthread_mutex_lock(&extent_lock);
    /* The head stays 0 until it is rewritten: a free racing with this realloc fails. */
    if (unlikely(!head_claim(m, g, t))) { /* freed by another thread since the check */
        pthread_mutex_unlock(&extent_lock);
        extent_bad_pointer(c, p, "realloc(): invalid pointer");
    }
    if (want < len) {
        /* The tail goes back (it held data), merged with a free run after it, and is given
         * back as a free is: a buffer shrunk to fit in a process without the purger thread
         * kept its tail until the process's next calls, which an idle one never makes. */
        tags_clear(m, g, len);
        tags_set(m, g, want, 0);
        m->used -= len - want;
        atomic_fetch_sub_explicit(&stat_extent_used, (uint64_t)(len - want) << GRANULE_SHIFT,
                                  memory_order_relaxed);
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
    pthread_mutex_unlock(&extent_lock);
    if (pend)
        note_pending();
    return ok;
}

/* ---- purging ------------------------------------------------------------------------- */

/* Takes the free run n out (BUSY), purges it without the lock, and frees it again as clean.
 * extent_lock held on entry and on return; the chunk stays (the BUSY run is not free). */
static bool run_purge(struct extent_map *m, struct ext_free *n, bool trim, size_t *purged)
{
    unsigned first = n->index, len = n->len, dirty = n->dirty;
    bin_remove(n);
    pending_add(-(long)dirty);
    tags_set(m, first, len, TAG_BUSY);
    purging++;
    pthread_mutex_unlock(&extent_lock);
    enum os_purge how = policy_in_force.purge;
    bool done = os_purge(m->chunk->base + ((size_t)first << GRANULE_SHIFT),
                         (size_t)len << GRANULE_SHIFT, how);
    pthread_mutex_lock(&extent_lock);
    purging--;
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

size_t extents_purge(uint32_t now, bool force, uint32_t *next)
{
    long delay = policy_in_force.purge_delay_ms;
    size_t purged = 0;
    *next = 0;
    pthread_mutex_lock(&extent_lock);
    if (!pending_granules || (delay < 0 && !force)) {
        pthread_mutex_unlock(&extent_lock);
        return 0;
    }
    chunk_t *cn;
    for (chunk_t *c = ext_chunks.first; c; c = cn) {
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
    pthread_mutex_unlock(&extent_lock);
    return purged;
}

/* ---- statistics and fork ------------------------------------------------------------- */

void extent_fork_prepare(void)
{
    pthread_mutex_lock(&extent_lock);
}

void extent_fork_parent(void)
{
    pthread_mutex_unlock(&extent_lock);
}

/* The child has no purger: a run it held out at the fork is freed again (not known zero). */
void extent_fork_child(void)
{
    pthread_mutex_init(&extent_lock, NULL);
    if (!purging)
        return;
    purging = 0;
    for (chunk_t *c = ext_chunks.first; c; c = c->next) {
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
