/* thpalloc internals, layer 11: the purger's side of the reclaim handshake (base.h says
 * how the headers go). */
#ifndef THPALLOC_RECLAIM_H
#define THPALLOC_RECLAIM_H

#include "thread.h"

/* ---- reclaim.c: the purger's side of the reclaim handshake ------------------------------ */
HIDDEN size_t reclaim_idle_heaps(uint32_t now, bool force, uint32_t *next);
HIDDEN size_t reclaim_abandoned(uint32_t now, bool force, uint32_t *next);
HIDDEN void reclaim_emptied_chunks(heap_t *self);
HIDDEN void reclaim_fork(enum fork_phase phase);

#endif
