/* extent-run: the extents' shards (extent-shard.h), each with its lock, its bins of free
 * runs by exact length and its 2 MiB extent chunks: a request takes the smallest free run
 * that fits, a resident one before a purged one and from its resident end, then another
 * shard's, then a new chunk; a freed run merges with its free neighbours at once; an empty
 * chunk goes back to the arena once purged, but one spare in the process. Every function
 * here runs under the lock of the shard concerned (the caller's, in extent.c and
 * extent-purge.c). Also the shards' fork hook. */
#include "extent-shard.h"
#include "list.h"

#include <errno.h>

#define TRIM_COST_CALL 4u  /* a madvise costs about as much as 4 page faults */
#define TRIM_COST_MAX 256u /* a refault budget of 1 MiB faulted again per purge_delay */

/* shard0 in .bss, its lock inside (0: free). */
struct ext_shard shard0;
/* shards[i] for i > 0, made when a request first runs on a CPU of that index (meta memory,
 * never freed); NULL in .bss, so that a single-threaded process writes none of it. */
struct ext_shard *_Atomic shards[EXT_SHARDS];
static pthread_mutex_t shards_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int empty_kept; /* some empty chunk besides a spare is kept, resident */
/* Set by thread.c, the heaps' lives, when a second heap is made, never cleared: until then
 * the process has one thread that allocates, its extents bypass the thread cache
 * (extent-cache.c) and take from shard0. It lives here, below the heaps' lives and the
 * cache in the layers. */
_Atomic int extent_heap_second_made;

TEXT_BUSY
struct ext_shard *shard_make(unsigned i)
{
    pthread_mutex_lock(&shards_lock);
    struct ext_shard *s = atomic_load_explicit(&shards[i], memory_order_relaxed);
    if (!s) {
        s = meta_alloc(sizeof *s); /* zero: fresh meta memory, its lock free */
        if (s)
            atomic_store_explicit(&shards[i], s, memory_order_release);
    }
    pthread_mutex_unlock(&shards_lock);
    return s ? s : &shard0;
}

/* The lock was taken (shard_lock): spins about as long as a glibc adaptive mutex did (a
 * shard's critical sections are short), then sleeps until it is let go. 2 says someone
 * sleeps, so the unlock wakes. */
#define SHARD_SPINS 100

TEXT_BUSY
void shard_lock_wait(_Atomic int *l)
{
    for (int i = 0; i < SHARD_SPINS; i++) {
        if (!atomic_load_explicit(l, memory_order_relaxed)) {
            int free_ = 0;
            if (atomic_compare_exchange_weak_explicit(l, &free_, 1, memory_order_acquire,
                                                      memory_order_relaxed))
                return;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    while (atomic_exchange_explicit(l, 2, memory_order_acquire) != 0)
        os_wait_while(l, 2);
}

/* ---- bins ------------------------------------------------------------------------ */

/* The pendmap's bit of a bin says whether its first run is pending: set when a bin's first
 * run changes, and only then (a run that goes behind the first changes nothing). */
void extent_stats(uint64_t *used, int64_t *dirty_uncounted)
{
    uint64_t u = 0;
    int64_t d = 0;
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (!s)
            continue;
        u += __atomic_load_n(&s->used_granules, __ATOMIC_RELAXED);
        d += (int64_t)__atomic_load_n(&s->pending_granules, __ATOMIC_RELAXED) -
             (int64_t)__atomic_load_n(&s->dirty_counted, __ATOMIC_RELAXED);
    }
    *used = u << GRANULE_SHIFT;
    *dirty_uncounted = d * (int64_t)GRANULE;
}

/* Bit len of map set or cleared, and its word's bit of sum when the word becomes 0 or stops
 * being 0. Atomic stores: other shards' requests peek at both without the lock
 * (shard_may_fit, better_shard). */
static inline void map_set(uint64_t *map, uint64_t *sum, unsigned len, bool on)
{
    uint64_t bit = (uint64_t)1 << (len % 64), w = map[len / 64];
    uint64_t nw = on ? w | bit : w & ~bit;
    if (nw == w)
        return; /* a bin's first run removed, the next as pending as it */
    __atomic_store_n(&map[len / 64], nw, __ATOMIC_RELAXED);
    if (!w != !nw) {
        uint64_t sbit = (uint64_t)1 << (len / 64);
        __atomic_store_n(sum, nw ? *sum | sbit : *sum & ~sbit, __ATOMIC_RELAXED);
    }
}

static void pendmap_set(struct ext_shard *s, unsigned len, bool pending)
{
    map_set(s->pendmap, &s->pendsum, len, pending);
}

static void binmap_set(struct ext_shard *s, unsigned len, bool on)
{
    map_set(s->binmap, &s->binsum, len, on);
}

static inline void bin_insert(struct ext_shard *s, struct ext_free *n)
{
    struct ext_free **b = bin_of(s, n->len), *f = *b;
    if (!f) {
        n->next = NULL;
        n->prev = n;
        *b = n;
        binmap_set(s, n->len, true);
        pendmap_set(s, n->len, n->dirty != 0);
    } else if (n->dirty) { /* resident first: reuse before touching purged memory */
        n->next = f;
        n->prev = f->prev;
        f->prev = n;
        *b = n;
        pendmap_set(s, n->len, true);
    } else {
        n->prev = f->prev;
        n->next = NULL;
        f->prev->next = n;
        f->prev = n;
    }
}

static inline __attribute__((always_inline)) void bin_unlink(struct ext_shard *s,
                                                             struct ext_free *n)
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
        binmap_set(s, n->len, false);
    if (n == f)
        pendmap_set(s, n->len, *b && (*b)->dirty);
}

/* bin_unlink for the purge (extent-purge.c); the splits and merges inline it. */
TEXT_BUSY
void bin_remove(struct ext_shard *s, struct ext_free *n)
{
    bin_unlink(s, n);
}

/* The largest bin of at least len granules that map marks, or 0. */
TEXT_BUSY
unsigned map_find_top(const uint64_t *map, unsigned len)
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
 * of that length is resident and a longer one is (reuse before touching fresh memory: else
 * freed runs wait while fresh granules are faulted in). 0: none. */
TEXT_BUSY
static unsigned bin_find(struct ext_shard *s, unsigned len)
{
    unsigned k = map_find(s->binmap, s->binsum, len);
    if (k && !(*bin_of(s, k))->dirty) {
        unsigned r = map_find(s->pendmap, s->pendsum, k);
        if (r)
            k = r;
    }
    return k;
}

#ifdef THPALLOC_DEBUG
/* The map's runs tile the chunk; free runs are in the bin of their length, never next to
 * another free run; used counts the granules handed out. */
void map_check(const struct extent_map *m)
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
void pending_check(struct ext_shard *s)
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
    for (unsigned w = 0; w < MAP_WORDS; w++)
        LIB_ASSERT(!(s->binsum >> w & 1) == !s->binmap[w] &&
                   !(s->pendsum >> w & 1) == !s->pendmap[w]);
    LIB_ASSERT(!(s->binsum >> MAP_WORDS) && !(s->pendsum >> MAP_WORDS));
}
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

TEXT_BUSY
static void absorb(struct extent_map *m, unsigned first, unsigned len, struct merge *g)
{
    struct ext_free *x = &m->node[first];
    bin_unlink(m->shard, x);
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

/* run_free_held's body, with the run's dirty granules known (own), inlined there: one call
 * less on every free. */
static inline __attribute__((always_inline)) struct ext_free *
run_free_own(struct extent_map *m, unsigned first, unsigned len, unsigned own, bool zero,
             bool trimmed, uint32_t freed_at, unsigned *held)
{
    LIB_ASSERT(own == dirty_count(m, first, len));
    struct merge g = {first, len, 0, own, zero, trimmed, freed_at, own};
    /* The run's own ends are cleared here only where a neighbour joins it: where none does,
     * the merged run's tags go there (a free cleared both first, and they were written again
     * at once). */
    if (first > 0) {
        uint16_t t = tag_get(m, first - 1);
        if ((t & (TAG_TAIL | TAG_FREE)) == (TAG_TAIL | TAG_FREE)) {
            absorb(m, first - (t & TAG_LEN), t & TAG_LEN, &g);
            __atomic_store_n(&m->tag[first], 0, __ATOMIC_RELAXED);
        }
    }
    if (first + len < GRANULES) {
        uint16_t t = tag_get(m, first + len);
        if ((t & (TAG_HEAD | TAG_FREE)) == (TAG_HEAD | TAG_FREE)) {
            absorb(m, first + len, t & TAG_LEN, &g);
            __atomic_store_n(&m->tag[first + len - 1], 0, __ATOMIC_RELAXED);
        }
    }
    struct ext_shard *s = m->shard;
    struct ext_free *n = &m->node[g.start];
    /* one store of the packed fields, not one read-modify-write each */
    *n = (struct ext_free){
        .freed_at = g.freed_at,
        .len = g.total & TAG_LEN,
        .index = g.start & 0x3ff,
        .dirty = g.dirty & TAG_LEN,
        .zero = g.zero,
        .trimmed = g.trimmed && !g.dirty, /* a resident part joined: taken, it may be that */
    };
    pending_add(s, (long)g.dirty - (long)g.was_dirty);
    tags_set(m, g.start, g.total, TAG_FREE);
    bin_insert(s, n);
    if (held)
        *held = g.dirty;
    return n;
}

/* Makes [first, first+len) of m a free run, merged with free neighbours, whatever tags its
 * ends held (its granules between: 0). dirty: it all held
 * data (to be purged after purge_delay), else its dirty bits stay as they are; zero: it
 * reads as zero. Returns the merged run, and in *held its dirty granules. The shard's lock
 * held. */
TEXT_BUSY
struct ext_free *run_free_held(struct extent_map *m, unsigned first, unsigned len, bool dirty,
                               bool zero, bool trimmed, uint32_t freed_at, unsigned *held)
{
    if (dirty)
        dirty_mark(m, first, len, true);
    return run_free_own(m, first, len, dirty ? len : dirty_count(m, first, len), zero, trimmed,
                        freed_at, held);
}

TEXT_BUSY
struct ext_free *run_free(struct extent_map *m, unsigned first, unsigned len, bool dirty, bool zero,
                          bool trimmed, uint32_t freed_at)
{
    return run_free_held(m, first, len, dirty, zero, trimmed, freed_at, NULL);
}

/* A part of a run split by run_take, [first, first+len) with its dirty granules (counted as
 * waiting already), made a free run: no free neighbour to merge with (the run had none, and
 * the part taken is between), so none is looked for. */
TEXT_BUSY
static void run_put(struct extent_map *m, unsigned first, unsigned len, unsigned dirty, bool zero,
                    uint32_t freed_at)
{
    LIB_ASSERT(dirty == dirty_count(m, first, len));
    struct ext_free *n = &m->node[first];
    *n = (struct ext_free){
        .freed_at = freed_at,
        .len = len & TAG_LEN,
        .index = first & 0x3ff,
        .dirty = dirty & TAG_LEN,
        .zero = zero,
    };
    tags_set(m, first, len, TAG_FREE);
    bin_insert(m->shard, n);
}

/* A trimmed run is handed out again, len granules of it. Within purge_delay of its trim,
 * the trim bought only the page faults that follow (the delayed purge would have left it):
 * a refault, priced in granules faulted again, a granule for each and TRIM_COST_CALL for the
 * madvise. A process may pay TRIM_COST_MAX of that per purge_delay (a start-up reuses what
 * it frees for a while, then goes idle with the rest); past that it trims only runs twice as
 * long, until none. */
static void trim_taken(struct ext_shard *s, uint32_t trimmed_at, unsigned len)
{
    long delay = purge_delay();
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

/* Takes granules [first, first+len) out of the free run n (first at or after n's start),
 * the rest of it back as free runs with their own dirty granules. Returns whether the taken
 * part reads as zero. */
static inline __attribute__((always_inline)) bool
run_split(struct extent_map *m, struct ext_free *n, unsigned first, unsigned len)
{
    struct ext_shard *s = m->shard;
    unsigned start = n->index, total = n->len;
    unsigned dirty = n->dirty;
    bool zero = n->zero, trimmed = n->trimmed;
    uint32_t at = n->freed_at;
    /* n's tags are not cleared: the tags of the parts and of the part taken, set below, go
     * on both of its ends */
    bin_unlink(s, n);
    if (trimmed)
        trim_taken(s, at, len); /* once a trim: the rest of the run is not flagged again */
    /* A storm whose memory is taken again as it goes (thread churn) is no reason for the
     * purger: its batches keep the peak lower than the thread's delayed purge would; one
     * that only frees (a drained list) is. */
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
    pending_add(s, -(long)taken_dirty);
    if (before)
        run_put(m, start, before, before_dirty, zero, at);
    if (after)
        run_put(m, first + len, after, dirty - taken_dirty - before_dirty, zero, at);
    tags_set(m, first, len, 0);
    m->used += len;
    if (m->chunk == s->spare)
        s->spare = NULL;
    used_add(s, (long)len);
    return zero;
}

/* run_split for a block grown in place (extent_resize); a request inlines it (one call less
 * on every request). */
TEXT_BUSY
bool run_take(struct extent_map *m, struct ext_free *n, unsigned first, unsigned len)
{
    return run_split(m, n, first, len);
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
 * a fresh chunk. */
void chunk_maybe_drop(struct extent_map *m)
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
 * fresh memory the next time the extents grew (extents that go up and down by a chunk).
 * The one kept goes back once purged (chunk_maybe_drop). */
void extents_release_empty(void)
{
    if (!atomic_load_explicit(&empty_kept, memory_order_relaxed))
        return;
    bool kept = false; /* one in the process, whichever shard holds it */
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (!s)
            continue;
        shard_lock(s);
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

/* No resident run of *sp fits want granules (k: the bin it would take from, fresh or
 * purged memory; 0: none fits): the bin of another shard's resident run that fits, with
 * that shard's lock held and *sp set to it; failing that, when *sp has no fit at all,
 * another shard's fresh run before a new chunk; else *sp's again, locked. A shard that
 * took fresh memory while another's freed runs waited grew the process's peak. Shards are
 * locked one at a time, never two. */
/* Another shard whose pending (resident) runs hold a better fit for want granules than bin
 * k of s (0: none fits there), peeked at without its lock (a hint: taken, it is looked for
 * again under the lock); or NULL. Best fit across the shards: with each shard's alone, a
 * request split a long resident run of its own while a run of its length waited in the
 * other's, and the long runs that later requests needed were gone (the peak grew). */
static struct ext_shard *better_shard(const struct ext_shard *s, unsigned want, unsigned k)
{
    struct ext_shard *best = NULL;
    for (unsigned i = 0; i < EXT_SHARDS && k != want; i++) {
        struct ext_shard *o = shard_at(i);
        if (!o || o == s)
            continue;
        unsigned ko = map_find(o->pendmap, __atomic_load_n(&o->pendsum, __ATOMIC_RELAXED), want);
        if (ko && ko < k) {
            best = o;
            k = ko;
        }
    }
    return best;
}

/* Only the shards that may fit it are locked, and s's lock is kept when none may: each
 * request without a resident fit locked every other shard in turn and its own again. */
static unsigned bin_find_other(struct ext_shard **sp, unsigned want, unsigned k)
{
    struct ext_shard *s = *sp;
    unsigned i;
    for (i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *o = shard_at(i);
        if (o && o != s && shard_may_fit(o, want, k))
            break;
    }
    if (i == EXT_SHARDS)
        return k;
    shard_unlock(s);
    for (; i < EXT_SHARDS; i++) {
        struct ext_shard *o = shard_at(i);
        if (!o || o == s || !shard_may_fit(o, want, k))
            continue;
        shard_lock(o);
        unsigned ko = bin_find(o, want);
        if (ko && (!k || (*bin_of(o, ko))->dirty)) {
            *sp = o;
            return ko;
        }
        shard_unlock(o);
    }
    shard_lock(s);
    return bin_find(s, want); /* it may have changed meanwhile */
}

/* Whether a shard other than s has a resident free run of at least want granules (a look
 * without their locks: a hint). */
static bool resident_elsewhere(const struct ext_shard *s, unsigned want)
{
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *o = shard_at(i);
        if (o && o != s && shard_may_fit(o, want, 1))
            return true;
    }
    return false;
}

/* A run of len granules (plus what align needs) taken out of *sp's bins, or another shard's
 * (then *sp is that shard), or NULL. With fresh (extent_alloc_resident), NULL and *fresh set
 * when no shard has a resident run that fits, where purges are on. Returns with
 * (*sp)->lock held. */
TEXT_BUSY
void *run_alloc_locked(struct ext_shard **sp, unsigned len, size_t align, bool *is_zero,
                       bool *fresh)
{
    unsigned slack = align > GRANULE ? (unsigned)(align >> GRANULE_SHIFT) - 1 : 0;
    struct ext_shard *s = *sp;
    shard_lock(s);
    unsigned k = bin_find(s, len + slack);
    if (atomic_load_explicit(&extent_heap_second_made, memory_order_relaxed)) {
        struct ext_shard *o;
        if (!k || !(*bin_of(s, k))->dirty) {
            k = bin_find_other(sp, len + slack, k), s = *sp;
        } else if (k >= 2 * (len + slack) && (o = better_shard(s, len + slack, k))) {
            shard_unlock(s);
            shard_lock(o);
            unsigned ko = bin_find(o, len + slack);
            if (ko && (*bin_of(o, ko))->dirty) {
                *sp = s = o;
                k = ko;
            } else { /* gone meanwhile: s's again */
                shard_unlock(o);
                shard_lock(s);
                k = bin_find(s, len + slack);
            }
        }
    }
    if (fresh && (!k || !(*bin_of(s, k))->dirty) && purge_enabled() &&
        !resident_elsewhere(s, len + slack)) {
        *fresh = true;
        return NULL;
    }
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
    *is_zero = run_split(m, n, first, len);
    MAP_CHECK(m);
    return m->chunk->base + ((size_t)first << GRANULE_SHIFT);
}

/* ---- statistics and fork ------------------------------------------------------------- */

static void shard_fork(struct ext_shard *s, enum fork_phase phase)
{
    shard_lock_fork(s, phase);
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
TEXT_BUSY
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
