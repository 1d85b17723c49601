/* thpalloc internals, layer 1: the fatal path, the counters, the fork hooks' phases.
 *
 * One header a layer of docs/design.md ("The library, bottom to top"), each including the
 * one below it: base.h < policy.h < registry.h < arena.h < page.h < page-queue.h < chunk.h
 * < abandon.h < heap.h < thread.h < reclaim.h < purger.h < init.h < alloc.h. A file includes
 * its own layer's header, and so sees what its layer and the layers below export, nothing
 * above. A header holds one block per file of its layer, in the order of the layers, with
 * exactly what that file exports and the inlines of the fast paths that call it. Why a
 * function does what it does is said beside its definition; the data structures and their
 * invariants are in types.h. tools/dev/lib-layers --check checks each block's names against
 * its file, the blocks' order, every file's includes and the calls of every header's
 * inlines. */
#ifndef THPALLOC_BASE_H
#define THPALLOC_BASE_H

#include "types.h"

/* ---- the fork hooks: one per file that holds a lock, FILE_fork (init.c calls them in the
 * lock order) ------------------------------------------------------------------------------ */
enum fork_phase { FORK_PREPARE, FORK_PARENT, FORK_CHILD };
/* What a hook does with one mutex: take it before fork, release it after, and make it anew
 * in the child (only the forking thread exists there). */
static inline void fork_mutex(pthread_mutex_t *m, enum fork_phase phase)
{
    if (phase == FORK_PREPARE)
        pthread_mutex_lock(m);
    else if (phase == FORK_PARENT)
        pthread_mutex_unlock(m);
    else
        pthread_mutex_init(m, NULL);
}

/* ---- fatal.c ---------------------------------------------------------------------------- */
HIDDEN void lib_fatal(const char *msg, const void *p) __attribute__((noreturn, cold));
/* lib_fatal for paths that make no call but tail calls (free's fast path, heap_free_full,
 * heap_free_remote), jumped to: a call of a noreturn function stays a call, and made them
 * align their stack on every free. */
HIDDEN void lib_fatal_tail(const char *msg, void *p) __attribute__((cold));

/* ---- counters.c ------------------------------------------------------------------------- */
extern HIDDEN _Atomic uint64_t stat_reserved, stat_huge_advised, stat_purged, stat_purge_pending,
    stat_committed;
extern HIDDEN _Atomic uint64_t stat_pages_dirty, stat_tail_padded;
extern HIDDEN _Atomic uint64_t stat_dense_huge, stat_dense_collapses, stat_dense_splits,
    stat_dense_ahead;

#endif
