/* arena: address space reserved in pieces of arena_size, handed out as runs of 2 MiB
 * chunks (the unit of THP advice and of purging). All of it under one
 * lock: only chunk-level events (a new page chunk, a large block) come here. The registry
 * that maps chunks to descriptors is registry.c; who is told that free chunks wait for
 * purge_delay, and the purger's sleep, purge-signal.c; the THP advice of the chunks and the
 * padded tails of large blocks, arena-advice.c. */
#include "arena.h"

#include <errno.h>
#include <string.h>

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static arena_t *arenas;
static arena_t *arena_desc_free;
static uint32_t next_purge_ms; /* earliest time a dirty chunk expires */
static bool purge_armed;       /* some dirty chunk waits for its delay */

/* ---- bitmaps ------------------------------------------------------------------------ */

static inline bool bit_get(const uint64_t *bm, size_t i)
{
    return (bm[i >> 6] >> (i & 63)) & 1;
}
static inline void bit_set(uint64_t *bm, size_t i)
{
    bm[i >> 6] |= (uint64_t)1 << (i & 63);
}
static inline void bit_clear(uint64_t *bm, size_t i)
{
    bm[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

/* Chunks of [first, first+n) get the advice their use calls for; a large block's tail that
 * keeps its huge page is purged after purge_delay, so the purge is armed for it. */
static void advise(arena_t *a, size_t first, size_t n, enum thp_use use, size_t block_size,
                   bool reuse)
{
    if (!advice_run(a, first, n, use, block_size, reuse))
        return;
    if (purge_never())
        return;
    uint32_t now = now_ms();
    uint32_t due = now + (uint32_t)purge_delay();
    if (!purge_armed ||
        (!clock_reached(now, next_purge_ms) && (int32_t)(due - next_purge_ms) < 0)) {
        purge_armed = true;
        next_purge_ms = due;
    }
    purge_note_chunks();
}

/* ---- arenas -------------------------------------------------------------------------- */

#ifdef THPALLOC_DEBUG
/* A shared arena's counts agree with its bitmaps: nfree chunks not in use, a dirty chunk
 * never in use, and (strict overcommit) every chunk in use or dirty committed. */
static void arena_check(const arena_t *a, bool strict)
{
    if (a->dedicated)
        return;
    uint32_t free = 0;
    for (size_t i = 0; i < a->nchunks; i++) {
        bool used = bit_get(a->used, i), dirty = bit_get(a->dirty, i);
        free += !used;
        LIB_ASSERT(!(used && dirty));
        LIB_ASSERT(!strict || !(used || dirty) || bit_get(a->committed, i));
    }
    LIB_ASSERT(free == a->nfree);
}
#define ARENA_CHECK(a) arena_check((a), strict_commit())
#else
#define ARENA_CHECK(a) ((void)0)
#endif

static arena_t *arena_desc_new(void)
{
    arena_t *a = arena_desc_free;
    if (a) {
        arena_desc_free = a->next;
        memset(a, 0, sizeof *a);
        return a;
    }
    return meta_alloc(sizeof(arena_t)); /* zeroed */
}

/* Strict overcommit (vm.overcommit_memory = 2) is read when the first arena is reserved:
 * there arenas are reserved PROT_NONE and chunks committed as they are handed out, so that
 * the commit charge follows use (MAP_NORESERVE means nothing in that mode). */
static int commit_strict = -1;

static bool strict_commit(void)
{
    if (commit_strict < 0)
        commit_strict = os_overcommit_mode() == 2;
    return commit_strict;
}

static void arena_unmap(arena_t *a);

static bool arena_has_dirty(const arena_t *a)
{
    for (size_t w = 0; w < ARENA_MAX_CHUNKS / 64; w++)
        if (a->dirty[w])
            return true;
    return false;
}

/* Unmaps every shared arena that has no chunk in use, at once: a reservation failed, and
 * their address space may be what is missing (arena lock held). Returns how many. */
static size_t arenas_unmap_all_free(void)
{
    size_t n = 0;
    for (arena_t **pp = &arenas; *pp;) {
        arena_t *a = *pp;
        if (a->nfree != a->nchunks) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        arena_unmap(a);
        n++;
    }
    return n;
}

/* Unmaps the shared arenas whose chunks have all been free and purged for purge_delay (at
 * once with force), but one: the spare for the next growth. Lowers *next to when the next
 * one is due (arena lock held). With purge = free, the chunks stay lazily freed for that
 * delay, then the address space goes too. */
static void arenas_unmap_idle(uint32_t now, bool force, uint32_t *next)
{
    bool spare = false;
    for (arena_t **pp = &arenas; *pp;) {
        arena_t *a = *pp;
        if (a->nfree != a->nchunks || arena_has_dirty(a)) {
            a->idle = false;
            pp = &a->next;
            continue;
        }
        if (!a->idle) {
            a->idle = true;
            a->idle_since = now;
        }
        /* the first wholly free arena stays: only a spare one's due time counts */
        if (!spare || !purge_is_due(a->idle_since, now, force, spare ? next : NULL)) {
            spare = true;
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        arena_unmap(a);
    }
}

/* Reserves a new arena of at least min_chunks chunks: arena_size first, then halves when
 * the kernel says no (RLIMIT_AS, overcommit), down to what the request needs. Before the
 * first halving, the arenas that are wholly free are given back (their address space may
 * be what is missing). Dedicated mappings are charged as glibc's are, so that the kernel's
 * overcommit heuristic refuses what cannot be backed. */
static arena_t *arena_new(size_t min_chunks, size_t align, bool dedicated)
{
    size_t want = dedicated ? min_chunks : policy_in_force.arena_size >> CHUNK_SHIFT;
    if (want > ARENA_MAX_CHUNKS && !dedicated)
        want = ARENA_MAX_CHUNKS;
    if (want < min_chunks)
        want = min_chunks;
    if (align < CHUNK_SIZE)
        align = CHUNK_SIZE;
    enum os_reserve how = dedicated         ? OS_RESERVE_ACCOUNTED
                          : strict_commit() ? OS_RESERVE_UNCOMMITTED
                                            : OS_RESERVE_NORESERVE;
    uint8_t *base = NULL;
    bool unmapped = false;
    for (;;) {
        base = os_reserve_aligned(want << CHUNK_SHIFT, align, how);
        if (base)
            break;
        if (!unmapped) {
            unmapped = true;
            if (arenas_unmap_all_free())
                continue;
        }
        if (want <= min_chunks)
            break;
        want = want / 2 > min_chunks ? want / 2 : min_chunks;
    }
    if (!base)
        return NULL;
    /* The first arena: its own leaf (registry.c), from meta before its descriptor, so that
     * the two share the meta pool's first page (one page less for an idle process). */
    if (!dedicated && !arenas)
        registry_claim_hot(base, want);
    arena_t *a = arena_desc_new();
    if (!a) {
        os_release(base, want << CHUNK_SHIFT);
        return NULL;
    }
    if (!dedicated && !registry_set(base, want, (chunk_t *)&chunk_unused)) {
        os_release(base, want << CHUNK_SHIFT);
        a->next = arena_desc_free;
        arena_desc_free = a;
        return NULL;
    }
    a->base = base;
    a->nchunks = (uint32_t)want;
    a->nfree = (uint32_t)want;
    a->dedicated = dedicated;
    os_name(base, want << CHUNK_SHIFT, "thpalloc");
    introspect_add_range(base, want << CHUNK_SHIFT);
    atomic_fetch_add_explicit(&stat_reserved, want << CHUNK_SHIFT, memory_order_relaxed);
    if (!dedicated) {
        a->next = arenas;
        arenas = a;
    }
    return a;
}

/* Gives an arena's address space back (arena lock held; a shared one is off the list and
 * has no chunk in use, a dedicated one is its block's). Its chunks leave the registry: the
 * space may be mapped by anyone next. */
TEXT_WARM
static void arena_unmap(arena_t *a)
{
    size_t size = (size_t)a->nchunks << CHUNK_SHIFT;
    if (!a->dedicated) {
        size_t dirty = 0;
        for (size_t w = 0; w < ARENA_MAX_CHUNKS / 64; w++)
            dirty += (size_t)__builtin_popcountll(a->dirty[w]);
        atomic_fetch_sub_explicit(&stat_purge_pending, dirty << CHUNK_SHIFT, memory_order_relaxed);
        atomic_fetch_add_explicit(&stat_purged, dirty << CHUNK_SHIFT, memory_order_relaxed);
        registry_set(a->base, a->nchunks, NULL); /* leaves exist: cannot fail */
    } else {
        atomic_fetch_add_explicit(&stat_purged, size, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&stat_huge_advised, (uint64_t)a->huge_chunks << CHUNK_SHIFT,
                              memory_order_relaxed);
    introspect_remove_range(a->base);
    os_release(a->base, size);
    atomic_fetch_sub_explicit(&stat_reserved, size, memory_order_relaxed);
    a->next = arena_desc_free;
    arena_desc_free = a;
}

/* Strict overcommit: commits the chunks of [first, first+n) that are not, in runs. On a
 * refusal (the commit limit), what this call committed is given back and false returned. */
TEXT_COLD
static bool commit_run(arena_t *a, size_t first, size_t n)
{
    for (size_t i = first; i < first + n;) {
        if (bit_get(a->committed, i)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < first + n && !bit_get(a->committed, j))
            j++;
        if (!os_commit(a->base + (i << CHUNK_SHIFT), (j - i) << CHUNK_SHIFT)) {
            for (size_t k = first; k < i; k++)
                if (bit_get(a->committed, k) && !bit_get(a->used, k) && !bit_get(a->dirty, k)) {
                    os_decommit(a->base + (k << CHUNK_SHIFT), CHUNK_SIZE, "thpalloc");
                    bit_clear(a->committed, k);
                    a->advice[k] = OS_ADVICE_NONE;
                }
            errno = ENOMEM;
            return false;
        }
        for (size_t k = i; k < j; k++) {
            bit_set(a->committed, k);
            a->advice[k] = OS_ADVICE_NONE; /* a fresh mapping since the decommit */
        }
        i = j;
    }
    return true;
}

/* A free chunk that is still resident (dirty), for a one-chunk request: taking it rather
 * than the lowest free one keeps the process from touching new memory while old memory
 * waits for its purge. */
static bool arena_find_dirty(const arena_t *a, size_t *first)
{
    for (size_t w = 0; w < (a->nchunks + 63) / 64; w++) {
        if (a->dirty[w]) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(a->dirty[w]);
            if (i < a->nchunks && !bit_get(a->used, i)) {
                *first = i;
                return true;
            }
        }
    }
    return false;
}

/* The run of n free chunks (its start aligned to align) that holds the most dirty ones, the
 * lowest of those; *dirty: how many. A large block reuses what a freed one left resident
 * before it touches fresh memory: first fit took the lowest run, often fresh, while the
 * freed block's chunks waited for purge_delay beside it. */
static bool arena_find(arena_t *a, size_t n, size_t align, size_t *first, size_t *dirty)
{
    if (a->nfree < n)
        return false;
    size_t run = 0, in_run = 0;
    bool found = false;
    for (size_t i = 0; i < a->nchunks; i++) {
        if (bit_get(a->used, i)) {
            run = in_run = 0;
            continue;
        }
        in_run += bit_get(a->dirty, i);
        if (++run > n)
            in_run -= bit_get(a->dirty, i - n);
        if (run < n)
            continue;
        size_t start = i + 1 - n;
        if (align > CHUNK_SIZE && ((uintptr_t)(a->base + (start << CHUNK_SHIFT)) & (align - 1)))
            continue;
        if (!found || in_run > *dirty) {
            found = true;
            *first = start;
            *dirty = in_run;
            if (in_run == n)
                break;
        }
    }
    return found;
}

static size_t purge_run(arena_t *a, size_t i, size_t j, bool resident);

/* A request took fresh chunks while freed ones wait for purge_delay elsewhere (none of them
 * could serve it): as many of those go back now, oldest first, so that a process whose
 * blocks grow (a dict's table, a string) does not hold the old ones and the new ones at once
 * (glibc unmaps such blocks at their free). arena_lock held. */
static void purge_for_room(size_t fresh)
{
    size_t purged = 0;
    while (fresh && atomic_load_explicit(&stat_purge_pending, memory_order_relaxed) > purged) {
        arena_t *oa = NULL;
        size_t oi = 0;
        for (arena_t *x = arenas; x; x = x->next)
            for (size_t w = 0; w < (x->nchunks + 63) / 64; w++)
                for (uint64_t bits = x->dirty[w]; bits; bits &= bits - 1) {
                    size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
                    if (!oa || (int32_t)(x->freed_at[i] - oa->freed_at[oi]) < 0) {
                        oa = x;
                        oi = i;
                    }
                }
        if (!oa)
            break;
        size_t j = oi + 1;
        while (j < oa->nchunks && j - oi < fresh && bit_get(oa->dirty, j))
            j++;
        size_t got = purge_run(oa, oi, j, true);
        if (!got)
            break; /* refused (mlock): the delayed purge tries again */
        purged += got;
        fresh -= j - oi;
    }
    atomic_fetch_sub_explicit(&stat_purge_pending, purged, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_purged, purged, memory_order_relaxed);
}

static void purge_locked(uint32_t now, bool force, bool unmap);

/* A request takes chunks first..first+n-1 of a: a refault when the delayed purge gave one
 * of them back within the refault window (purge-rules.c). arena_lock held. */
static void note_take(arena_t *a, size_t first, size_t n)
{
    if (purge_delay() <= 0)
        return;
    uint32_t now = now_ms();
    bool refault = false;
    for (size_t i = first; i < first + n; i++)
        if (bit_get(a->purged_late, i)) {
            bit_clear(a->purged_late, i);
            refault |= !clock_passed(now, a->freed_at[i], purge_refault_window());
        }
    if (refault)
        purge_note_refault(now);
}

/* Gets a run of n chunks for `use` (advised as policy says); is_zero tells whether the
 * memory is known to read as zero. NULL + ENOMEM when address space runs out. */
uint8_t *arena_alloc_chunks(size_t n, size_t align, enum thp_use use, size_t block_size,
                            arena_t **arena_out, bool *is_zero)
{
    policy_ensure_loaded();
    pthread_mutex_lock(&arena_lock);
    if (purge_armed) {
        uint32_t now = now_ms();
        if (clock_reached(now, next_purge_ms))
            purge_locked(now, false, true);
    }
    arena_t *a = NULL;
    size_t first = 0;
    size_t arena_chunks = policy_in_force.arena_size >> CHUNK_SHIFT;
    if (arena_chunks > ARENA_MAX_CHUNKS)
        arena_chunks = ARENA_MAX_CHUNKS;
    if (n > arena_chunks / 2 || align > (arena_chunks << CHUNK_SHIFT) / 2) {
        /* A block of more than half an arena gets a mapping of its own, and so does one
         * aligned to more: its reservation (size + alignment) is charged, so that the
         * kernel refuses an absurd one as it would glibc's. */
        a = arena_new(n, align, true);
        first = 0;
    } else {
        a = NULL;
        if (n == 1 && align <= CHUNK_SIZE)
            for (a = arenas; a; a = a->next)
                if (arena_find_dirty(a, &first))
                    break;
        if (!a) {
            size_t best = 0;
            for (arena_t *x = arenas; x; x = x->next) {
                size_t f, d;
                if (arena_find(x, n, align, &f, &d) && (!a || d > best)) {
                    a = x;
                    first = f;
                    best = d;
                    if (d == n)
                        break;
                }
            }
        }
        if (!a) {
            size_t d;
            a = arena_new(n, align, false);
            if (a && !arena_find(a, n, align, &first, &d))
                a = NULL; /* over-aligned request in a smaller fallback arena */
        }
    }
    if (a && !a->dedicated && strict_commit() && !commit_run(a, first, n)) {
        /* Over the commit limit: give back the charge of free chunks, then try once more. */
        purge_locked(now_ms(), true, false); /* a stays mapped */
        if (!commit_run(a, first, n))
            a = NULL;
    }
    if (!a) {
        pthread_mutex_unlock(&arena_lock);
        errno = ENOMEM;
        return NULL;
    }
    a->idle = false;
    bool zero = true;
    size_t fresh = n;
    if (!a->dedicated) {
        note_take(a, first, n);
        for (size_t i = first; i < first + n; i++) {
            if (bit_get(a->dirty, i)) {
                fresh--;
                zero = false;
                bit_clear(a->dirty, i);
                atomic_fetch_sub_explicit(&stat_purge_pending, CHUNK_SIZE, memory_order_relaxed);
            } else if (a->advice[i] & ADVICE_MAYBE_OLD) {
                zero = false; /* purged with MADV_FREE: old contents may come back */
            }
            a->advice[i] &= ADVICE_MASK;
            bit_set(a->used, i);
        }
        a->nfree -= (uint32_t)n;
    }
    atomic_fetch_add_explicit(&stat_committed, n << CHUNK_SHIFT, memory_order_relaxed);
    if (fresh && purge_delay() > 0 &&
        atomic_load_explicit(&stat_purge_pending, memory_order_relaxed))
        purge_for_room(fresh);
    advise(a, first, n, use, block_size, true);
    ARENA_CHECK(a);
    pthread_mutex_unlock(&arena_lock);
    *arena_out = a;
    *is_zero = zero;
    return a->base + (first << CHUNK_SHIFT);
}

/* When chunk base of a was freed last (the ms clock): a chunk handed out resident (not
 * is_zero) has waited that long already, and its unused parts wait only for the rest of
 * purge_delay. The caller owns the chunk. */
uint32_t arena_freed_at(const arena_t *a, const uint8_t *base)
{
    /* Written under the arena lock when the chunk was freed; the caller took it since, under
     * the same lock, and nobody writes it while the chunk is handed out (tail_pad only for
     * large blocks' own chunks). */
    return a->freed_at[(size_t)(base - a->base) >> CHUNK_SHIFT];
}

/* Extends a run of n chunks to want chunks in place, when the chunks after it are free. */
TEXT_WARM
bool arena_grow_chunks(arena_t *a, uint8_t *base, size_t n, size_t want, size_t block_size)
{
    if (a->dedicated)
        return false;
    pthread_mutex_lock(&arena_lock);
    size_t first = (size_t)(base - a->base) >> CHUNK_SHIFT;
    bool ok = first + want <= a->nchunks;
    for (size_t i = first + n; ok && i < first + want; i++)
        ok = !bit_get(a->used, i);
    if (ok && strict_commit())
        ok = commit_run(a, first + n, want - n);
    if (ok) {
        for (size_t i = first + n; i < first + want; i++) {
            if (bit_get(a->dirty, i)) {
                bit_clear(a->dirty, i);
                atomic_fetch_sub_explicit(&stat_purge_pending, CHUNK_SIZE, memory_order_relaxed);
            }
            a->advice[i] &= ADVICE_MASK;
            bit_set(a->used, i);
        }
        a->nfree -= (uint32_t)(want - n);
        atomic_fetch_add_explicit(&stat_committed, (want - n) << CHUNK_SHIFT, memory_order_relaxed);
        advise(a, first, want, THP_USE_LARGE_PIECE, block_size, false);
    }
    pthread_mutex_unlock(&arena_lock);
    return ok;
}

/* Grows a dedicated mapping to want chunks: in place, or moved (mremap: no copy) to an
 * aligned placeholder whose registry entries are set first, so that a failure leaves the
 * block as it was. Returns the new base, or NULL. */
static uint8_t *dedicated_grow(arena_t *a, chunk_t *desc, size_t want)
{
    size_t n = a->nchunks;
    uint8_t *old = a->base;
    if (os_remap_in_place(old, n << CHUNK_SHIFT, want << CHUNK_SHIFT)) {
        if (registry_set(old + (n << CHUNK_SHIFT), want - n, desc))
            return old;
        registry_set(old + (n << CHUNK_SHIFT), want - n, NULL);
        os_release(old + (n << CHUNK_SHIFT), (want - n) << CHUNK_SHIFT);
        return NULL;
    }
    uint8_t *dst = os_reserve_aligned(want << CHUNK_SHIFT, CHUNK_SIZE, OS_RESERVE_UNCOMMITTED);
    if (!dst)
        return NULL;
    if (!registry_set(dst, want, desc) ||
        !os_remap_to(old, n << CHUNK_SHIFT, want << CHUNK_SHIFT, dst)) {
        registry_set(dst, want, NULL);
        os_release(dst, want << CHUNK_SHIFT);
        return NULL;
    }
    registry_set(old, n, NULL);
    return dst;
}

/* Resizes a dedicated mapping (one large block's, desc) to want chunks, in place or moved
 * by mremap (no copy), advised for block_size, its registry entries with it. Returns its
 * base, or NULL (ENOMEM) with the block untouched. */
TEXT_COLD
uint8_t *arena_resize_dedicated(arena_t *a, chunk_t *desc, size_t want, size_t block_size)
{
    pthread_mutex_lock(&arena_lock);
    size_t n = a->nchunks;
    uint8_t *old = a->base, *base = old;
    if (want < n) {
        for (size_t i = want; i < n && i < ARENA_MAX_CHUNKS; i++)
            if (advice_get(a, i) == OS_ADVICE_HUGE)
                advice_drop_huge(a, 1);
        registry_set(old + (want << CHUNK_SHIFT), n - want, NULL);
        os_release(old + (want << CHUNK_SHIFT), (n - want) << CHUNK_SHIFT);
        atomic_fetch_sub_explicit(&stat_reserved, (n - want) << CHUNK_SHIFT, memory_order_relaxed);
        atomic_fetch_sub_explicit(&stat_committed, (n - want) << CHUNK_SHIFT, memory_order_relaxed);
        atomic_fetch_add_explicit(&stat_purged, (n - want) << CHUNK_SHIFT, memory_order_relaxed);
    } else if (want > n) {
        base = dedicated_grow(a, desc, want);
        if (!base) {
            pthread_mutex_unlock(&arena_lock);
            errno = ENOMEM;
            return NULL;
        }
        /* The new chunks inherit the mapping's flags (its huge advice too): record them
         * unadvised, so that advise below counts what it sets. */
        for (size_t i = n; i < want && i < ARENA_MAX_CHUNKS; i++)
            a->advice[i] = OS_ADVICE_NONE;
        atomic_fetch_add_explicit(&stat_reserved, (want - n) << CHUNK_SHIFT, memory_order_relaxed);
        atomic_fetch_add_explicit(&stat_committed, (want - n) << CHUNK_SHIFT, memory_order_relaxed);
    }
    if (base != old || want != n) {
        introspect_remove_range(old);
        introspect_add_range(base, want << CHUNK_SHIFT);
        if (base != old)
            os_name(base, want << CHUNK_SHIFT, "thpalloc");
    }
    a->base = base;
    a->nchunks = (uint32_t)want;
    advise(a, 0, want, THP_USE_LARGE_PIECE, block_size, false);
    pthread_mutex_unlock(&arena_lock);
    return base;
}

/* Gives a large block's run the advice its (new) size calls for. */
TEXT_WARM
void arena_readvise(arena_t *a, uint8_t *base, size_t n, size_t block_size)
{
    pthread_mutex_lock(&arena_lock);
    advise(a, (size_t)(base - a->base) >> CHUNK_SHIFT, n, THP_USE_LARGE_PIECE, block_size, false);
    pthread_mutex_unlock(&arena_lock);
}

/* A small-object chunk dense.c collapses where it is VM_NOHUGEPAGE (small chunks under system
 * always, a chunk whose earlier huge page split): huge-advised now (recorded, so that its
 * next use is advised anew). */
TEXT_COLD
void arena_advise_dense(arena_t *a, uint8_t *base)
{
    pthread_mutex_lock(&arena_lock);
    advise(a, (size_t)(base - a->base) >> CHUNK_SHIFT, 1, THP_USE_DENSE, CHUNK_SIZE, false);
    pthread_mutex_unlock(&arena_lock);
}

/* A huge-advised small-object chunk (dense.c's, or chunk_new's for a growing heap) split by
 * a purge inside: the advice a small-object chunk has (khugepaged collapses a huge-advised
 * range with a single page resident). */
TEXT_COLD
void arena_advise_small(arena_t *a, uint8_t *base)
{
    pthread_mutex_lock(&arena_lock);
    advise(a, (size_t)(base - a->base) >> CHUNK_SHIFT, 1, THP_USE_SMALL, CHUNK_SIZE, false);
    pthread_mutex_unlock(&arena_lock);
}

/* chunk_dense_lost's work (page.h), out of line: a chunk that was a dense huge page, or
 * huge-advised for one, is neither now. */
TEXT_COLD
void arena_dense_lost(const chunk_t *c, bool split)
{
    /* the two fields a holder of a const descriptor may change */
    _Atomic uint8_t *dense = (_Atomic uint8_t *)&c->dense;
    _Atomic uint8_t *advised = (_Atomic uint8_t *)&c->dense_advised;
    /* A chunk going back keeps its advice: the arena's next use of it sets its own. */
    if (atomic_exchange_explicit(advised, 0, memory_order_relaxed) && split)
        arena_advise_small(c->arena, c->base);
    uint8_t huge = CHUNK_DENSE_HUGE;
    if (!atomic_compare_exchange_strong_explicit(dense, &huge, CHUNK_DENSE_NONE,
                                                 memory_order_relaxed, memory_order_relaxed))
        return;
    atomic_fetch_sub_explicit(&stat_dense_huge, CHUNK_SIZE, memory_order_relaxed);
    if (split)
        atomic_fetch_add_explicit(&stat_dense_splits, 1, memory_order_relaxed);
    introspect_set_dense();
}

/* Marks a run free (and dirty) in a, arena_lock held. */
static void free_locked(arena_t *a, uint8_t *base, size_t n, uint32_t now)
{
    size_t first = (size_t)(base - a->base) >> CHUNK_SHIFT;
    for (size_t i = first; i < first + n; i++) {
        LIB_ASSERT(bit_get(a->used, i));
        if (i < ARENA_MAX_CHUNKS && a->padded[i])
            advice_tail_unpad(a, i);
        bit_clear(a->used, i);
        bit_set(a->dirty, i);
        bit_clear(a->purged_late, i);
        a->freed_at[i] = now;
    }
    a->nfree += (uint32_t)n;
    ARENA_CHECK(a);
    atomic_fetch_add_explicit(&stat_purge_pending, n << CHUNK_SHIFT, memory_order_relaxed);
}

void arena_free_chunks(arena_t *a, uint8_t *base, size_t n)
{
    pthread_mutex_lock(&arena_lock);
    atomic_fetch_sub_explicit(&stat_committed, n << CHUNK_SHIFT, memory_order_relaxed);
    if (a->dedicated) {
        arena_unmap(a);
        pthread_mutex_unlock(&arena_lock);
        return;
    }
    uint32_t now = now_ms();
    free_locked(a, base, n, now);
    long delay = purge_delay();
    if (delay == 0) {
        purge_locked(now, false, true);
    } else if (delay > 0) {
        if (!purge_armed) {
            purge_armed = true;
            next_purge_ms = now + (uint32_t)delay;
        } else if (clock_reached(now, next_purge_ms)) {
            purge_locked(now, false, true);
        }
        purge_note_chunks();
    }
    pthread_mutex_unlock(&arena_lock);
}

static void free_chunks_now(arena_t *a, uint8_t *base, size_t n, bool resident)
{
    pthread_mutex_lock(&arena_lock);
    atomic_fetch_sub_explicit(&stat_committed, n << CHUNK_SHIFT, memory_order_relaxed);
    free_locked(a, base, n, now_ms());
    size_t first = (size_t)(base - a->base) >> CHUNK_SHIFT;
    size_t purged = purge_run(a, first, first + n, resident);
    atomic_fetch_sub_explicit(&stat_purge_pending, purged, memory_order_relaxed);
    if (resident)
        atomic_fetch_add_explicit(&stat_purged, purged, memory_order_relaxed);
    if (purged != n << CHUNK_SHIFT && !purge_never()) {
        /* refused: the delayed purge takes it, and whoever purges is told */
        if (!purge_armed) {
            purge_armed = true;
            next_purge_ms = now_ms() + (uint32_t)purge_delay();
        }
        purge_note_chunks();
    }
    pthread_mutex_unlock(&arena_lock);
}

/* The same, purged now instead of after purge_delay (what an exited thread left: no thread
 * of the process is working in it, so keeping it resident for reuse only spreads the next
 * owner's pages over memory that is resident already). */
void arena_free_chunks_purged(arena_t *a, uint8_t *base, size_t n)
{
    if (a->dedicated || purge_never())
        arena_free_chunks(a, base, n);
    else
        free_chunks_now(a, base, n, true);
}

/* The same for chunks that read as zero (the caller never wrote them, or purged them with
 * DONTNEED: an empty extent chunk whose run was purged): not waiting, not purged again. */
void arena_free_chunks_clean(arena_t *a, uint8_t *base, size_t n)
{
    if (a->dedicated)
        arena_free_chunks(a, base, n);
    else
        free_chunks_now(a, base, n, false);
}

/* Purges free chunks i .. j-1 of a (dirty), a run per madvise; returns the bytes. */
/* resident false: the caller gave the memory back already; only the charge goes (strict
 * overcommit) and the bits say so. */
static size_t purge_run(arena_t *a, size_t i, size_t j, bool resident)
{
    uint8_t *p = a->base + (i << CHUNK_SHIFT);
    size_t len = (j - i) << CHUNK_SHIFT;
    if (!(strict_commit() ? os_decommit(p, len, "thpalloc")
                          : !resident || purge_give_back(p, len, purge_how())))
        return 0;
    for (size_t k = i; k < j; k++) {
        bit_clear(a->dirty, k);
        if (strict_commit()) {
            /* the charge goes with the pages; so does the advice (a new mapping) */
            bit_clear(a->committed, k);
            if (advice_get(a, k) == OS_ADVICE_HUGE)
                advice_drop_huge(a, 1);
            a->advice[k] = OS_ADVICE_NONE;
        } else if (purge_how() == OS_PURGE_FREE) {
            a->advice[k] |= ADVICE_MAYBE_OLD;
        }
    }
    return len;
}

/* Purges every dirty chunk whose delay has passed (all with force), a run per madvise.
 * Whole chunks only, so a huge page is never split. */
static size_t purge_arena(arena_t *a, uint32_t now, bool force, uint32_t *next)
{
    long delay = purge_delay_now(now);
    size_t purged = 0;
    size_t i = 0;
    while (i < a->nchunks) {
        bool due = bit_get(a->dirty, i) &&
                   (force || (delay >= 0 && clock_passed(now, a->freed_at[i], delay)));
        if (!due) {
            if (bit_get(a->dirty, i)) {
                uint32_t t = a->freed_at[i] + (uint32_t)delay;
                if (*next == 0 || (int32_t)(t - *next) < 0)
                    *next = t;
            }
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < a->nchunks && bit_get(a->dirty, j) &&
               (force || clock_passed(now, a->freed_at[j], delay)))
            j++;
        size_t got = purge_run(a, i, j, true);
        if (got && !force)
            for (size_t k = i; k < j; k++) { /* a take within the window is a refault */
                bit_set(a->purged_late, k);
                a->freed_at[k] = now;
            }
        if (got == 0 && delay >= 0) {
            /* refused (mlock, or no memory for the kernel's own work): try again later,
             * not at every pass, and not never */
            uint32_t t = now + (uint32_t)(delay > 50 ? delay : 50);
            if (*next == 0 || (int32_t)(t - *next) < 0)
                *next = t;
        }
        purged += got;
        i = j;
    }
    return purged;
}

/* Purges the free chunks that are due (all with force); unmap: then gives back the arenas
 * left wholly free but one (not while the caller holds an arena it found). */
static void purge_locked(uint32_t now, bool force, bool unmap)
{
    size_t purged = 0;
    uint32_t next = 0;
    size_t tails = 0;
    for (arena_t *a = arenas; a; a = a->next) {
        purged += purge_arena(a, now, force, &next);
        tails += advice_purge_padded_tails(a, now, force, &next);
    }
    atomic_fetch_add_explicit(&stat_purged, tails, memory_order_relaxed);
    if (unmap)
        arenas_unmap_idle(now, force, &next);
    purge_armed = next != 0;
    next_purge_ms = next;
    atomic_fetch_sub_explicit(&stat_purge_pending, purged, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_purged, purged, memory_order_relaxed);
}

/* ---- what the purger (purger.c) drives ---------------------------------------------- */

/* Purges the free chunks whose purge_delay has passed and the arenas idle as long, and
 * returns when the next is due (0: none). */
uint32_t arena_purge_due(uint32_t now)
{
    pthread_mutex_lock(&arena_lock);
    /* a refaulting process's wait may have ended early (purge_refault_asleep) */
    if (purge_armed && (clock_reached(now, next_purge_ms) || purge_refaulting()))
        purge_locked(now, false, true);
    uint32_t next = purge_armed ? next_purge_ms : 0;
    pthread_mutex_unlock(&arena_lock);
    return next;
}

/* Purges every free chunk now (thpalloc_purge, malloc_trim); returns the bytes. */
TEXT_WARM
size_t arena_purge_chunks(bool force)
{
    pthread_mutex_lock(&arena_lock);
    uint64_t before = atomic_load_explicit(&stat_purged, memory_order_relaxed);
    purge_locked(now_ms(), force, true);
    uint64_t after = atomic_load_explicit(&stat_purged, memory_order_relaxed);
    pthread_mutex_unlock(&arena_lock);
    return (size_t)(after - before);
}

TEXT_BUSY
void arena_fork(enum fork_phase phase)
{
    fork_mutex(&arena_lock, phase);
}
