/* extent: blocks above the small classes (8 KiB) up to 1 MiB, as runs of 4 KiB granules
 * inside 2 MiB extent chunks shared by every thread (glibc's and jemalloc's coalescing
 * instead of 24 segregated classes per thread, each holding pages of its own): what a
 * thread frees, any thread reuses, before fresh memory is touched. This file is malloc's
 * side: a block handed out, checked against its chunk's map (extent-map.h: the boundary
 * tags outside the memory) before anything is written, freed, grown and shrunk in place
 * (realloc), and the thread caches' blocks taken and given back (extent-cache.c). The runs
 * and their shards are extent-run.c's, giving free runs back extent-purge.c's
 * (extent-shard.h: what the three share). Everything is under the lock of the chunk's
 * shard, but a look at a block the caller holds. */
#include "extent-shard.h"

#include <string.h>

static inline unsigned granules_of(size_t size)
{
    return (unsigned)((size + GRANULE - 1) >> GRANULE_SHIFT);
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

TEXT_COLD
void extent_bad_pointer(const chunk_t *c, const void *p, const char *invalid)
{
    uintptr_t off = (uintptr_t)((const uint8_t *)p - c->base);
    uint16_t t = off >= CHUNK_SIZE || (off & (GRANULE - 1))
                     ? 0
                     : tag_get(map_of(c), (unsigned)(off >> GRANULE_SHIFT));
    lib_fatal((t & TAG_HEAD) && invalid[0] == 'f' ? "free(): double free detected" : invalid, p);
}

/* Frees the block of len granules at granule g of m. The shard's lock held. Returns whether it
 * left memory to purge. */
static inline __attribute__((always_inline)) bool
block_free_locked(struct extent_map *m, unsigned g, unsigned len, uint32_t now)
{
    m->used -= len; /* the tags: run_free_held's */
    used_add(m->shard, -(long)len);
    bool pend = purge_enabled();
    unsigned held;
    struct ext_free *n = run_free_held(m, g, len, pend, false, false, now, &held);
    run_freed(m, n, pend, held);
    return pend;
}

static inline __attribute__((always_inline)) void *alloc_in(size_t size, size_t align, bool zero,
                                                            bool *fresh)
{
    LIB_ASSERT(size <= SC_MAX_SIZE && align <= CHUNK_SIZE / 2);
    bool is_zero = false;
    struct ext_shard *s = shard_here();
    void *p = run_alloc_locked(&s, granules_of(size ? size : 1), align, &is_zero, fresh);
    shard_unlock(s);
    if (p && zero && !is_zero)
        memset(p, 0, size);
    return p;
}

TEXT_BUSY
void *extent_alloc(size_t size, size_t align, bool zero)
{
    return alloc_in(size, align, zero, NULL);
}

/* A request the thread's cache could not serve while it holds blocks (extent-cache.c): when
 * only fresh or purged memory fits, nothing is taken and *fresh says so, so that the cache
 * gives its blocks back first and this request reuses them. The look is the request's own,
 * under its lock: a look before it at the shards' words without the lock
 * (extent_resident_fits) cost a second sched_getcpu and a walk of the words on every miss. */
TEXT_BUSY
void *extent_alloc_resident(size_t size, size_t align, bool zero, bool *fresh)
{
    *fresh = false;
    return alloc_in(size, align, zero, fresh);
}

TEXT_COLD
unsigned extent_block_len(const chunk_t *c, const void *p)
{
    int g = block_granule(c, p);
    return g < 0 ? 0 : tag_get(map_of(c), (unsigned)g) & TAG_LEN;
}

/* Takes the head of a live block, t as read, under the lock; false when t is not a live
 * head (t is checked here, not only the read before it: a cache's mark may land between the
 * two). A thread's cache marks a head of up to EXT_CACHE_LEN_MAX granules without the lock
 * (extent_cache_in), so such a head is taken by CAS: a second free racing with this one
 * either saw the head first (and this CAS fails) or fails its own. A longer head is written
 * only under the lock (the cache's CAS is tried only on a head it read as that short, and a
 * head's length changes only under the lock): a load and a plain store, one locked
 * instruction less on each free above 64 KiB. */
static bool head_claim(struct extent_map *m, unsigned g, uint16_t t)
{
    if ((t & (TAG_HEAD | TAG_FREE | TAG_BUSY | TAG_CACHED)) != TAG_HEAD)
        return false;
    if ((t & TAG_LEN) > EXT_CACHE_LEN_MAX) {
        if (tag_get(m, g) != t) /* t was read before the lock (extent_resize) */
            return false;
        __atomic_store_n(&m->tag[g], 0, __ATOMIC_RELAXED);
        return true;
    }
    return __atomic_compare_exchange_n(&m->tag[g], &t, 0, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

TEXT_BUSY
void extent_free(chunk_t *c, void *p)
{
    struct extent_map *m = map_of(c);
    struct ext_shard *s = m->shard;
    uint32_t now = now_ms(); /* before the lock: the others wait for less */
    shard_lock(s);
    int g = block_granule(c, p);
    uint16_t t = g < 0 ? 0 : tag_get(m, (unsigned)g);
    if (unlikely(g < 0 || !head_claim(m, (unsigned)g, t))) {
        shard_unlock(s);
        extent_bad_pointer(c, p, "free(): invalid pointer");
    }
    bool pend = block_free_locked(m, (unsigned)g, t & TAG_LEN, now);
    bool counted = shard_unlock(s);
    if (pend)
        note_pending(counted);
}

/* The blocks of a thread's cache (at most EXT_CACHE_SLOTS) back to the runs, under one
 * lock for each shard they come from: taken in their order, the locks went back and forth
 * between shards. */
TEXT_BUSY
void extent_free_many(void *const *blocks, unsigned n)
{
    LIB_ASSERT(n <= EXT_CACHE_SLOTS && EXT_CACHE_SLOTS < 32);
    chunk_t *cs[EXT_CACHE_SLOTS];
    struct ext_shard *ss[EXT_CACHE_SLOTS];
    for (unsigned i = 0; i < n; i++) {
        cs[i] = registry_lookup(blocks[i]);
        ss[i] = cs[i] && cs[i]->kind == CHUNK_EXTENT ? map_of(cs[i])->shard : NULL;
    }
    bool pend = false, counted = false;
    uint32_t now = now_ms();
    for (uint32_t left = ((uint32_t)1 << n) - 1; left;) {
        unsigned first = (unsigned)__builtin_ctz(left);
        struct ext_shard *s = ss[first];
        if (unlikely(!s))
            lib_fatal("free(): double free detected", blocks[first]);
        shard_lock(s);
        for (uint32_t todo = left; todo; todo &= todo - 1) {
            unsigned i = (unsigned)__builtin_ctz(todo);
            if (ss[i] != s)
                continue;
            left &= ~((uint32_t)1 << i);
            /* Always checked (a bound that keeps the map's index in range, not a debug
             * invariant): every block must still be a cached block of an extent chunk;
             * under the lock of the map's shard, which a chunk's kind changes under. */
            chunk_t *c = cs[i];
            int g = c->kind == CHUNK_EXTENT && map_of(c)->shard == s
                        ? block_granule_in(c, blocks[i], TAG_CACHED)
                        : -1;
            if (unlikely(g < 0)) {
                shard_unlock(s);
                lib_fatal("free(): double free detected", blocks[i]);
            }
            struct extent_map *m = map_of(c);
            pend |= block_free_locked(m, (unsigned)g, tag_get(m, (unsigned)g) & TAG_LEN, now);
        }
        counted |= shard_unlock(s);
    }
    if (pend)
        note_pending(counted);
}

TEXT_BUSY
int extent_owns(const chunk_t *c, const void *p)
{
    return extent_block_len(c, p) != 0;
}

TEXT_BUSY
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

TEXT_BUSY
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
    shard_lock(s);
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
        used_add(s, -(long)(len - want));
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
    bool counted = shard_unlock(s);
    if (pend)
        note_pending(counted);
    return ok;
}
