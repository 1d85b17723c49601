/* thpalloc internals, layer 8: the chunks of exited threads (base.h says how the headers
 * go). */
#ifndef THPALLOC_ABANDON_H
#define THPALLOC_ABANDON_H

#include "chunk.h"

/* ---- abandon.c: the chunks of exited threads -------------------------------------------- */
HIDDEN void abandon_heap(heap_t *heap);
HIDDEN bool abandoned_adopt_one(heap_t *heap);
HIDDEN bool abandoned_free(chunk_t *c, page_t *page, block_t *b);
HIDDEN size_t abandoned_take_due(uint32_t now, bool force, uint32_t *next, chunk_queue_t *out);
HIDDEN void abandoned_put_back(chunk_t *c, uint32_t now);
HIDDEN void abandon_fork(enum fork_phase phase);

#endif
