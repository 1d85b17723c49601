/* thpalloc internals, layer 2: the policy in force, the metadata allocator, the purge
 * rules (base.h says how the headers go). */
#ifndef THPALLOC_POLICY_H
#define THPALLOC_POLICY_H

#include "base.h"

/* ---- policy.c --------------------------------------------------------------------------- */
extern HIDDEN struct policy policy_in_force;
HIDDEN void policy_ensure_loaded(void);
HIDDEN void policy_say_passthrough(size_t pagesize);
HIDDEN void policy_fork(enum fork_phase phase);

/* ---- introspect.c: the block thp-status reads ------------------------------------------- */
HIDDEN void introspect_set_active(bool active);
HIDDEN bool introspect_in_charge(void);
HIDDEN void introspect_set_policy(const struct cfg_values *v);
HIDDEN void introspect_add_range(void *base, size_t size);
HIDDEN void introspect_remove_range(void *base);
HIDDEN void introspect_fork(enum fork_phase phase);

/* ---- meta.c ----------------------------------------------------------------------------- */
HIDDEN void *meta_alloc(size_t size);
HIDDEN chunk_t *chunk_desc_alloc(void);
HIDDEN void chunk_desc_free(chunk_t *c);
HIDDEN void chunk_desc_foreach(void (*fn)(chunk_t *c, void *arg), void *arg);
HIDDEN void meta_fork(enum fork_phase phase);

/* ---- purge-rules.c: whether memory that waits is given back, when, and how -------------- */
/* purge_delay in force (ms): < 0 never (only thpalloc_purge(), force, gives back), 0 at once. */
static inline long purge_delay(void)
{
    return policy_in_force.purge_delay_ms;
}
static inline bool purge_never(void)
{
    return purge_delay() < 0;
}
/* Mode always: every chunk is a huge page. Nothing inside one is given back (a purge of
 * part of it would split it), and new pages fill the fullest chunk first. */
static inline bool purge_chunks_whole(void)
{
    return policy_in_force.thp.mode == THP_MODE_ALWAYS;
}
/* Whether the pages inside chunks (a small page's slot, an extent run) are given back. */
static inline bool purge_inside_chunks(void)
{
    return !purge_never() && !purge_chunks_whole();
}
/* thp_dense: the percent of a small-object chunk in use from which it is collapsed into a
 * huge page (dense.c); 0: never (thp = never or system: not ours to decide; always: every
 * chunk is huge-advised already; a kernel without huge pages). */
static inline unsigned dense_percent(void)
{
    if (policy_in_force.thp.mode != THP_MODE_LARGE || thp_system_setting() == THP_SYS_NEVER)
        return 0;
    return (unsigned)policy_in_force.thp_dense;
}
/* How memory is given back (purge = dontneed or free). */
static inline enum os_purge purge_how(void)
{
    return policy_in_force.purge;
}
/* Whether what waits since stamp may go back at now (force: always; purge_delay = never:
 * only with force). When it may not, next (unless NULL) becomes the earlier of *next (0:
 * none yet) and its due time. */
static inline bool purge_is_due(uint32_t stamp, uint32_t now, bool force, uint32_t *next)
{
    if (force)
        return true;
    long delay = purge_delay();
    if (delay < 0)
        return false;
    if (clock_passed(now, stamp, delay))
        return true;
    uint32_t due = stamp + (uint32_t)delay;
    if (next && (*next == 0 || (int32_t)(due - *next) < 0))
        *next = due;
    return false;
}
/* The wait of free memory now (free chunks, free extent runs): purge_delay, doubled by the
 * refaults seen within the window. */
HIDDEN long purge_delay_now(uint32_t now);
/* The window in which a take of a chunk purged late is a refault; one is noted at now. */
HIDDEN long purge_refault_window(void);
HIDDEN void purge_note_refault(uint32_t now);
/* Whether the wait is longer now (a pass then looks at whether the process sleeps). */
HIDDEN bool purge_refaulting(void);
/* Whether the process sleeps (purger.c): meanwhile what waits goes after purge_delay. */
HIDDEN void purge_refault_asleep(bool asleep);
/* Gives size bytes at addr back to the kernel, how: every purge of the library's memory. */
HIDDEN bool purge_give_back(void *addr, size_t size, enum os_purge how);

#endif
