/* arena-advice: the THP advice of an arena's chunks (arena.c hands the chunks out, this
 * decides what madvise each run needs for its use), and the padded tails: a large block's
 * last chunk that keeps the huge page it had, the rest of it purged after purge_delay.
 * Everything here runs under the arena lock. */
#include "registry.h"

/* Chunks that leave MADV_HUGEPAGE without an madvise (decommitted: a new mapping). */
TEXT_COLD
void advice_drop_huge(arena_t *a, size_t n)
{
    a->huge_chunks -= n;
    atomic_fetch_sub_explicit(&stat_huge_advised, (uint64_t)n << CHUNK_SHIFT, memory_order_relaxed);
}

/* Chunk i, a live large block's tail using `used` bytes, keeps a huge page it had: the rest
 * is purged after purge_delay (the caller arms the purge: advice_run returns true). */
static void tail_pad(arena_t *a, size_t i, size_t used)
{
    uint32_t now = now_ms();
    a->padded[i] = (uint32_t)used;
    a->freed_at[i] = now;
    atomic_fetch_add_explicit(&stat_tail_padded, CHUNK_SIZE - used, memory_order_relaxed);
}

/* A padded tail ends (purged, freed, or no longer a tail). */
TEXT_COLD
void advice_tail_unpad(arena_t *a, size_t i)
{
    atomic_fetch_sub_explicit(&stat_tail_padded, CHUNK_SIZE - a->padded[i], memory_order_relaxed);
    a->padded[i] = 0;
}

/* Gives chunks [first, first+n) of arena the advice their use calls for, one madvise per
 * run of equal advice (reuse: the chunks held something before). Large blocks: the full
 * 2 MiB pieces and the tail differ. True when it left a large block's tail padded, keeping
 * its huge page until purge_delay (the caller arms the purge). */
bool advice_run(arena_t *a, size_t first, size_t n, enum thp_use use, size_t block_size, bool reuse)
{
    bool padded = false;
    const struct thp_policy *pol = &policy_in_force.thp;
    size_t pieces = use == THP_USE_SMALL || use == THP_USE_DENSE ? 0 : block_size >> CHUNK_SHIFT;
    size_t i = 0;
    while (i < n) {
        enum thp_use u = use == THP_USE_SMALL || use == THP_USE_DENSE ? use
                         : i < pieces                                 ? THP_USE_LARGE_PIECE
                                                                      : THP_USE_LARGE_TAIL;
        enum thp_want want = thp_want(pol, u, block_size);
        enum os_advice cur = advice_get(a, first + i);
        /* The system setting is read only when some advice may be needed. */
        enum os_advice adv = OS_ADVICE_NONE;
        if (want != THP_WANT_DEFAULT && !(want == THP_WANT_HUGE && cur == OS_ADVICE_HUGE) &&
            !(want == THP_WANT_NOHUGE && cur == OS_ADVICE_NOHUGE))
            adv = thp_advice(thp_system_setting(), want, cur);
        size_t j = i + 1;
        while (j < n) {
            enum thp_use uj = use == THP_USE_SMALL || use == THP_USE_DENSE ? use
                              : j < pieces                                 ? THP_USE_LARGE_PIECE
                                                                           : THP_USE_LARGE_TAIL;
            if (uj != u || advice_get(a, first + j) != cur)
                break;
            j++;
        }
        /* A padded tail (below) follows its block's size, and is one no longer once the
         * chunk is anything but a tail. */
        for (size_t k = i; k < j && first + k < ARENA_MAX_CHUNKS; k++) {
            if (!a->padded[first + k])
                continue;
            advice_tail_unpad(a, first + k);
            if (u == THP_USE_LARGE_TAIL) {
                tail_pad(a, first + k, block_size & CHUNK_MASK);
                padded = true;
            }
        }
        if (adv != OS_ADVICE_NONE) {
            uint8_t *p = a->base + ((first + i) << CHUNK_SHIFT);
            /* A chunk that held huge pages and is reused without them: a small-object
             * chunk drops its pages first (MADV_NOHUGEPAGE does not split a huge page that
             * is already there, and it would pin 2 MiB for a few KiB of use). A large
             * block's tail keeps its huge page and advice for now: the memory is resident
             * already, and a loop of blocks of changing sizes would refault the tail on
             * every call. The part beyond the block goes after purge_delay (padded[],
             * purge_arena), so a long-lived block does not pin it. */
            if (reuse && adv == OS_ADVICE_NOHUGE && cur == OS_ADVICE_HUGE) {
                if (u == THP_USE_LARGE_TAIL && first + i < ARENA_MAX_CHUNKS && j == i + 1) {
                    adv = OS_ADVICE_NONE;
                    tail_pad(a, first + i, block_size & CHUNK_MASK);
                    padded = true;
                } else {
                    purge_give_back(p, (j - i) << CHUNK_SHIFT, OS_PURGE_DONTNEED);
                }
            }
            if (os_advise(p, (j - i) << CHUNK_SHIFT, adv)) {
                for (size_t k = i; k < j; k++) {
                    if (cur == OS_ADVICE_HUGE)
                        a->huge_chunks--;
                    if (adv == OS_ADVICE_HUGE)
                        a->huge_chunks++;
                    if (first + k < ARENA_MAX_CHUNKS)
                        a->advice[first + k] = (uint8_t)adv;
                }
                int64_t delta = (adv == OS_ADVICE_HUGE) - (cur == OS_ADVICE_HUGE);
                atomic_fetch_add_explicit(&stat_huge_advised,
                                          (uint64_t)(delta * (int64_t)((j - i) << CHUNK_SHIFT)),
                                          memory_order_relaxed);
            }
        }
        i = j;
    }
    return padded;
}

/* The padded tails of live large blocks whose delay has passed: the part beyond the block
 * is purged (the huge page splits) and the chunk opts out of huge pages as a tail should. */
TEXT_WARM
size_t advice_purge_padded_tails(arena_t *a, uint32_t now, bool force, uint32_t *next)
{
    size_t purged = 0;
    for (size_t i = 0; i < a->nchunks && i < ARENA_MAX_CHUNKS; i++) {
        if (!a->padded[i] || !purge_is_due(a->freed_at[i], now, force, next))
            continue;
        uint8_t *p = a->base + (i << CHUNK_SHIFT);
        size_t keep = ((size_t)a->padded[i] + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
        advice_tail_unpad(a, i);
        if (keep < CHUNK_SIZE && purge_give_back(p + keep, CHUNK_SIZE - keep, OS_PURGE_DONTNEED))
            purged += CHUNK_SIZE - keep;
        enum os_advice adv = thp_advice(thp_system_setting(), THP_WANT_NOHUGE, OS_ADVICE_HUGE);
        if (adv != OS_ADVICE_NONE && advice_get(a, i) == OS_ADVICE_HUGE &&
            os_advise(p, CHUNK_SIZE, adv)) {
            advice_drop_huge(a, 1);
            a->advice[i] = (uint8_t)adv;
        }
    }
    return purged;
}
