/* extent-map: an extent chunk's map (extent.c), outside the chunk's memory: a purged run
 * stays untouched until it is reused, and a pointer is checked against the tags before
 * anything is written. Included by extent.c, its unit test and extent-cache.c (inline
 * helpers: the hot parts of a free, and of a take from a thread's cache).
 *
 * Invariants (map_check, with THPALLOC_DEBUG):
 * - the runs tile the chunk: the first and the last granule of each carry its tag (length
 *   and state), the granules between carry 0;
 * - a free run is never next to another free run (a free merges at once);
 * - a free run's node says its length, and its dirty count is the number of its dirty bits;
 * - a block handed out (or a run the purger holds out) has no dirty bit, and used is the
 *   sum of the blocks' lengths (a block in a thread's cache counts as handed out: its head
 *   says TAG_CACHED, its tail does not). */
#ifndef THPALLOC_EXTENT_MAP_H
#define THPALLOC_EXTENT_MAP_H

#include "chunk.h"

#define GRANULE_SHIFT 12
#define GRANULE ((size_t)1 << GRANULE_SHIFT)
#define GRANULES (CHUNK_SIZE >> GRANULE_SHIFT) /* 512 a chunk */

/* A tag: the first and the last granule of every run say its length and state; the granules
 * between hold 0, so an interior pointer is refused. */
#define TAG_LEN 0x03ffu
#define TAG_HEAD 0x0400u
#define TAG_TAIL 0x0800u
#define TAG_FREE 0x1000u
#define TAG_BUSY 0x2000u /* taken out by the purger */
/* On a block's head only: freed into a thread's extent cache (extent-cache.c), so that a
 * second free is refused whichever thread makes it and whatever cache holds the block. Set
 * by CAS without the lock, cleared by the cache's owner when it hands the block out again,
 * or under the lock when the cache gives it back to the runs. */
#define TAG_CACHED 0x4000u

/* The longest block a thread's cache holds (extent-cache.c): 64 KiB. Only the head of a
 * block of at most this many granules is ever written without the shard's lock
 * (extent_cache_in's CAS); a longer one's only under it. */
#define EXT_CACHE_LEN_MAX 16

/* A free run, indexed by its first granule. */
struct ext_free {
    struct ext_free *next, *prev; /* in the bin of its length */
    uint32_t freed_at;            /* ms clock, for purge_delay (when pending) */
    uint32_t len : 10;            /* granules, 1..GRANULES */
    uint32_t index : 10;          /* its first granule: the way back to the map */
    /* Granules of it that may be resident (they held data since its last purge), to be
     * purged after purge_delay: nonzero, the run is pending. The map's dirty bits say which
     * (this is their count): a run split keeps exactly its own, and a request can tell the
     * resident part of a run from the fresh part. */
    uint32_t dirty : 10;
    uint32_t zero : 1;    /* known to read as zero (fresh, or purged with DONTNEED) */
    uint32_t trimmed : 1; /* some of it purged at its free (trim), at freed_at */
};
_Static_assert(GRANULES < 1024, "ext_free's 10-bit fields hold a chunk's granules");

struct extent_map {
    /* The chunk's descriptor, short (CHUNK_DESC_SHORT): it lives and is recycled with the
     * map, first, on the page the tags share, not in a slot of meta.c's segments (an idle
     * thread's footprint: docs/benchmarks-log.md). */
    _Alignas(page_t) uint8_t desc[CHUNK_DESC_SHORT];
    chunk_t *chunk;               /* the chunk while the map is in use (desc), else NULL */
    struct extent_map *next_free; /* recycled maps */
    struct ext_shard *shard;      /* the shard that made it, for good (extent.c) */
    uint32_t used;                /* granules handed out */
    /* Bit g: granule g is in a free run and held data since its last purge (may be
     * resident). Placed, not only counted per run: a freed block merged with a purged run
     * would make the whole run look resident, and a request would take the purged part,
     * touching fresh pages while the resident ones waited. */
    uint64_t dirty[GRANULES / 64];
    uint16_t tag[GRANULES];
    struct ext_free node[GRANULES];
};

static inline struct extent_map *map_of(const chunk_t *c)
{
    return c->ext;
}

static inline struct extent_map *map_of_node(struct ext_free *n)
{
    return (struct extent_map *)((uint8_t *)(n - n->index) - offsetof(struct extent_map, node));
}

/* ---- tags -------------------------------------------------------------------------- */

/* Written under the shard's lock (extent.c); read without it only for a block the caller holds (its
 * head changes only when that block is freed or resized), hence relaxed atomics. */
static inline uint16_t tag_get(const struct extent_map *m, unsigned g)
{
    return __atomic_load_n(&m->tag[g], __ATOMIC_RELAXED);
}

static inline void tags_set(struct extent_map *m, unsigned first, unsigned len, uint16_t state)
{
    __atomic_store_n(&m->tag[first], (uint16_t)(len | TAG_HEAD | state | (len == 1 ? TAG_TAIL : 0)),
                     __ATOMIC_RELAXED);
    if (len > 1)
        __atomic_store_n(&m->tag[first + len - 1], (uint16_t)(len | TAG_TAIL | state),
                         __ATOMIC_RELAXED);
}

static inline void tags_clear(struct extent_map *m, unsigned first, unsigned len)
{
    __atomic_store_n(&m->tag[first], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m->tag[first + len - 1], 0, __ATOMIC_RELAXED);
}

/* A thread's cache takes the block p starts (a free): its granules, and when they are at
 * most max it is marked cached in the map, by CAS. Aborts unless p starts a live block: a
 * second free is caught whichever thread makes it and whatever cache holds the block.
 * block_granule's checks (extent.c), with the tag read once: the CAS expects what was
 * checked. Inline in the cache's free: a call less on each. */
static inline unsigned extent_cache_in(const chunk_t *c, void *p, unsigned max)
{
    LIB_ASSERT(max <= EXT_CACHE_LEN_MAX);
    uintptr_t off = (uintptr_t)((const uint8_t *)p - c->base);
    struct extent_map *m = c->ext;
    uint16_t t = off >= CHUNK_SIZE || (off & (GRANULE - 1)) ? 0 : tag_get(m, off >> GRANULE_SHIFT);
    if (unlikely((t & (TAG_HEAD | TAG_FREE | TAG_BUSY | TAG_CACHED)) != TAG_HEAD) ||
        ((t & TAG_LEN) <= max && unlikely(!__atomic_compare_exchange_n(
                                     &m->tag[off >> GRANULE_SHIFT], &t, (uint16_t)(t | TAG_CACHED),
                                     false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))))
        extent_bad_pointer(c, p, "free(): invalid pointer");
    return t & TAG_LEN;
}

/* The cache's owner hands the cached block p (of extent chunk c) out again: live. Only the
 * owner writes a cached block's head (other threads' CAS fail on it), hence no CAS. */
static inline void extent_cache_out(const chunk_t *c, const void *p)
{
    struct extent_map *m = map_of(c);
    unsigned g = (unsigned)((uintptr_t)((const uint8_t *)p - c->base) >> GRANULE_SHIFT);
    __atomic_store_n(&m->tag[g], (uint16_t)(tag_get(m, g) & ~TAG_CACHED), __ATOMIC_RELAXED);
}

/* The dirty bits of [first, first+len), len >= 1: the words w to we, the first masked by
 * *lo, the last by *hi (one word: both): whole words between, with no mask worked out for
 * each, as a long run's count and marking are on every request and free. */
static inline void dirty_span(unsigned first, unsigned len, unsigned *w, unsigned *we, uint64_t *lo,
                              uint64_t *hi)
{
    unsigned last = first + len - 1;
    *w = first / 64;
    *we = last / 64;
    *lo = ~(uint64_t)0 << (first % 64);
    *hi = ~(uint64_t)0 >> (63 - last % 64);
}

static inline void dirty_mark(struct extent_map *m, unsigned first, unsigned len, bool on)
{
    unsigned w, we;
    uint64_t lo, hi;
    dirty_span(first, len, &w, &we, &lo, &hi);
    if (w == we)
        lo &= hi;
    m->dirty[w] = on ? m->dirty[w] | lo : m->dirty[w] & ~lo;
    if (w == we)
        return;
    for (unsigned i = w + 1; i < we; i++)
        m->dirty[i] = on ? ~(uint64_t)0 : 0;
    m->dirty[we] = on ? m->dirty[we] | hi : m->dirty[we] & ~hi;
}

/* The bits set in x. __builtin_popcountll is a call into libgcc without -mpopcnt (the
 * x86-64 baseline Debian builds for), and a merged free run counts up to 8 words on every
 * free; this is inline, and does nothing for a clean word. */
static inline unsigned bits_set(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

static inline unsigned dirty_count(const struct extent_map *m, unsigned first, unsigned len)
{
    unsigned w, we;
    uint64_t lo, hi;
    dirty_span(first, len, &w, &we, &lo, &hi);
    if (w == we)
        lo &= hi;
    uint64_t x = m->dirty[w] & lo;
    unsigned n = x ? bits_set(x) : 0;
    if (w == we)
        return n;
    for (unsigned i = w + 1; i < we; i++)
        if (m->dirty[i])
            n += m->dirty[i] == ~(uint64_t)0 ? 64 : bits_set(m->dirty[i]);
    x = m->dirty[we] & hi;
    return n + (x ? bits_set(x) : 0);
}

#endif
