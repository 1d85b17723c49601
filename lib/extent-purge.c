/* extent-purge: free extent runs given back to the kernel. After purge_delay by the purger
 * (extents_purge); at once with purge_delay 0; and by the trim, where nothing else would
 * (no purger thread): a freed run at least trim_threshold long goes back at its free, the
 * first trim_burst of a purge_delay at once and a storm's in batches. What becomes of a
 * run that a free or a shrink left (run_freed) is decided here. The purge drops the
 * shard's lock around each madvise, the run tagged BUSY meanwhile. */
#include "extent-shard.h"

#define TRIM_BATCH 128u     /* granules (512 KiB): a storm's trims go by the half MiB */
#define TRIM_BATCH_RUNS 64u /* runs one batch purges at most */
/* Granules a storm's batches give back in a purge_delay before the purger thread is asked
 * for: 16 MiB, which would have waited without them, the purger's own start (purge-signal.c,
 * PURGER_MIN_PENDING). */
#define TRIM_STORM_MAX 4096u
static _Atomic bool trim_want_thread; /* a storm asks for the purger (note_pending) */

/* Whether a free that left the merged run n, with held granules of it resident, gives it
 * back now: when the run is the threshold long or longer, as glibc trims its heap's top by
 * the top's length. Only where nothing else would: the purger thread purges after
 * purge_delay, and without it only the process's own later calls do, which a process that
 * goes idle after its start-up (an interpreter freeing what it read at start) never
 * makes. By the granules held alone, blocks freed one by one next to the untouched rest of
 * their chunk stayed, each below the threshold. Not a whole chunk: an empty chunk is the
 * spare or waits as a chunk (chunk_maybe_drop); trimmed, it went back to the arena at once,
 * and the next block took it back as a new chunk, whose runs carry no trim (a whole
 * chunk's madvise per malloc/free pair: purge-reclaim's loop). */
static bool trim_due(const struct ext_shard *s, const struct ext_free *n, unsigned held)
{
    size_t min = policy_in_force.trim_threshold;
    return min && held && n->len < GRANULES && s->trim_shift <= CHUNK_SHIFT &&
           ((size_t)n->len << GRANULE_SHIFT) >= min << s->trim_shift && !purger_thread_started();
}

/* Granules a storm's batch waits for: TRIM_BATCH, doubled with the trim's length by the
 * refaults (trim_taken), as a process that takes back what it freed should pay for fewer
 * madvise calls. */
static size_t trim_batch_len(struct ext_shard *s)
{
    return (size_t)TRIM_BATCH << (s->trim_shift < 16 ? s->trim_shift : 16);
}

/* Whether the trim that is due now goes at once: the first trim_burst of a purge_delay do
 * (a start-up that frees a few runs and goes idle gets them back); past them the process is
 * in a storm of frees, and its runs wait for the batch (trim_batch) or the delayed purge.
 * One madvise a freed block was a syscall storm: a list drained by a server, its nodes
 * freed one after the other next to the runs trimmed before them, cost a madvise a node. */
static bool trim_now(struct ext_shard *s)
{
    uint32_t now = now_ms();
    unsigned burst = policy_in_force.trim_burst;
    if (clock_passed(now, s->trim_calls_at, purge_delay())) {
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

static bool run_purge(struct extent_map *m, struct ext_free *n, bool trim, size_t *purged);
static void run_purge_now(struct extent_map *m, struct ext_free *n, bool trim);

/* A storm's trims, in batches: once TRIM_BATCH more granules wait than after the last
 * batch, the longest waiting runs of at least the trim's length go back, one madvise each,
 * until as much is purged (at most TRIM_BATCH_RUNS of them); the rest and those shorter
 * wait for purge_delay as ever (every such run a batch would double a realloc loop's
 * calls). A drained list leaves one run that grows by a
 * node a free: a madvise a half MiB. Once the batches of a purge_delay gave back
 * TRIM_STORM_MAX more than was taken again since, the storm asks for the purger thread. What a
 * process leaves waiting when it goes idle in the middle of a storm is below a batch
 * (policy-purge bounds it). */
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
     * faulted in again for nothing; the purger waits purge_delay instead. */
    if (s->trim_batched >= TRIM_STORM_MAX)
        atomic_store_explicit(&trim_want_thread, true, memory_order_relaxed);
}

/* After a free that left memory waiting (the shard's lock released); counted: its unlock
 * wrote stat_pages_dirty. Only then is the purger told (else a fence and two loads on every
 * extent free): while the shard's count stands above 0 the purger does not sleep without a
 * due time, and an inline pass that finds it nonzero arms the next. */
void note_pending(bool counted)
{
    if (unlikely(atomic_load_explicit(&trim_want_thread, memory_order_relaxed))) {
        atomic_store_explicit(&trim_want_thread, false, memory_order_relaxed);
        purge_want_thread();
    }
    if (counted)
        purge_note_dirty();
}

/* ---- purging ------------------------------------------------------------------------- */

/* Takes the free run n out (BUSY), purges it without the lock, and frees it again as clean.
 * The shard's lock held on entry and on return; the chunk stays (the BUSY run is not free). */
TEXT_BUSY
static bool run_purge(struct extent_map *m, struct ext_free *n, bool trim, size_t *purged)
{
    struct ext_shard *s = m->shard;
    unsigned first = n->index, len = n->len, dirty = n->dirty;
    bin_remove(s, n);
    pending_add(s, -(long)dirty);
    tags_set(m, first, len, TAG_BUSY);
    s->purging++;
    shard_unlock(s);
    enum os_purge how = purge_how();
    bool done = purge_give_back(m->chunk->base + ((size_t)first << GRANULE_SHIFT),
                                (size_t)len << GRANULE_SHIFT, how);
    shard_lock(s);
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
    long delay = purge_delay_now(now);
    size_t purged = 0;
    shard_lock(s);
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

/* What becomes of the merged free run n that a free or a shrink left (held granules of it
 * resident): purged now with purge_delay 0 or when the trim is due, else it waits, and a
 * chunk that emptied goes (chunk_maybe_drop). The shard's lock held. */
TEXT_BUSY
void run_freed(struct extent_map *m, struct ext_free *n, bool pend, unsigned held)
{
    struct ext_shard *s = m->shard; /* the map's for good, even once it went back */
    MAP_CHECK(m);                   /* before the map may go back with its chunk */
    if (pend && purge_delay() == 0)
        run_purge_now(m, n, false);
    else if (pend && trim_due(s, n, held) && trim_now(s))
        run_purge_now(m, n, true);
    else {
        if (!m->used) /* chunk_maybe_drop's first test, without the call */
            chunk_maybe_drop(m);
        if (pend && s->trim_calls > policy_in_force.trim_burst && trim_due_any(s))
            trim_batch(s);
    }
}
