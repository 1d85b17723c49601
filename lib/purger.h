/* thpalloc internals, layer 12: the purger thread and the inline pass (base.h says how the
 * headers go). */
#ifndef THPALLOC_PURGER_H
#define THPALLOC_PURGER_H

#include "reclaim.h"

/* ---- purger.c: the background thread, the inline pass, "purge everything now" ----------- */
HIDDEN size_t purge_all(bool force);
HIDDEN uint64_t purger_dirty_now(void);
HIDDEN void purger_start_if_wanted(const void *caller);
HIDDEN void purger_fork(enum fork_phase phase);

#endif
