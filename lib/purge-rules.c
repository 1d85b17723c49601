/* purge-rules: the one owner of the purge's rules. Whether memory that waits is given back
 * at all, when it is due, and how: every file asks here instead of reading purge_delay or
 * the THP mode (the rules themselves are policy.h's inlines of this block). What is kept
 * here is the one piece of state the rules have: the longer wait of a process that takes
 * back what the delayed purge gave back (refaults).
 *
 * Refaults: a chunk the delayed purge gave back and a request took again within
 * REFAULT_WINDOW purge_delays was faulted in twice for nothing (a compiler's phases free
 * and take back tens of MiB seconds apart). Each take of such chunks doubles the wait of
 * free memory (refault_shift, up to REFAULT_MAX_SHIFT) until a window passes without one.
 * Growth is not a refault: a purged chunk taken later, or a fresh one, counts nothing. The
 * longer wait holds no memory past the peak: a request that takes fresh chunks purges as
 * many waiting ones first (arena.c, purge_for_room). It ends at the first pass that finds
 * the process asleep (purger.c, refault_sleeping): an idle process gets its memory back one
 * purge_delay after its frees, as ever. */
#include "policy.h"

#define REFAULT_MAX_SHIFT 4u
#define REFAULT_WINDOW_SHIFT 4u        /* 16 purge_delays */
static _Atomic unsigned refault_shift; /* read by the extents' purge without arena_lock */
static _Atomic uint32_t refault_at;    /* the last take of a chunk purged late (ms clock) */
static _Atomic bool refault_asleep;    /* purger.c saw no activity at its last look */

/* delay << shift, within what the clock's comparisons take (24 h). */
static long refault_span(long delay, unsigned shift)
{
    long max = 24L * 3600 * 1000;
    return delay > (max >> shift) ? max : delay << shift;
}

long purge_refault_window(void)
{
    return refault_span(purge_delay(), REFAULT_WINDOW_SHIFT);
}

void purge_note_refault(uint32_t now)
{
    unsigned shift = atomic_load_explicit(&refault_shift, memory_order_relaxed);
    if (shift < REFAULT_MAX_SHIFT)
        atomic_store_explicit(&refault_shift, shift + 1, memory_order_relaxed);
    atomic_store_explicit(&refault_at, now, memory_order_relaxed);
}

bool purge_refaulting(void)
{
    return atomic_load_explicit(&refault_shift, memory_order_relaxed) != 0;
}

void purge_refault_asleep(bool asleep)
{
    atomic_store_explicit(&refault_asleep, asleep, memory_order_relaxed);
}

long purge_delay_now(uint32_t now)
{
    long delay = purge_delay();
    unsigned shift = atomic_load_explicit(&refault_shift, memory_order_relaxed);
    if (!shift || delay <= 0 || atomic_load_explicit(&refault_asleep, memory_order_relaxed))
        return delay;
    if (clock_passed(now, atomic_load_explicit(&refault_at, memory_order_relaxed),
                     refault_span(delay, REFAULT_WINDOW_SHIFT))) {
        atomic_store_explicit(&refault_shift, 0, memory_order_relaxed);
        return delay;
    }
    return refault_span(delay, shift);
}

bool purge_give_back(void *addr, size_t size, enum os_purge how)
{
    return os_purge(addr, size, how);
}
