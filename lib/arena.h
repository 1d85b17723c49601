/* thpalloc internals, layer 4: the arenas' chunks (base.h says how the headers go). */
#ifndef THPALLOC_ARENA_H
#define THPALLOC_ARENA_H

#include "registry.h"

/* ---- arena.c ---------------------------------------------------------------------------- */
HIDDEN uint8_t *arena_alloc_chunks(size_t n, size_t align, enum thp_use use, size_t block_size,
                                   arena_t **arena_out, bool *is_zero);
HIDDEN void arena_free_chunks(arena_t *arena, uint8_t *base, size_t n);
HIDDEN void arena_free_chunks_purged(arena_t *arena, uint8_t *base, size_t n);
HIDDEN void arena_free_chunks_clean(arena_t *arena, uint8_t *base, size_t n);
HIDDEN bool arena_grow_chunks(arena_t *arena, uint8_t *base, size_t n, size_t want,
                              size_t block_size);
HIDDEN uint8_t *arena_resize_dedicated(arena_t *arena, chunk_t *desc, size_t want,
                                       size_t block_size);
HIDDEN uint32_t arena_freed_at(const arena_t *a, const uint8_t *base);
HIDDEN void arena_readvise(arena_t *arena, uint8_t *base, size_t n, size_t block_size);
HIDDEN void arena_advise_dense(arena_t *arena, uint8_t *base);
HIDDEN void arena_advise_small(arena_t *arena, uint8_t *base);
HIDDEN void arena_dense_lost(const chunk_t *c, bool split);
HIDDEN uint32_t arena_purge_due(uint32_t now);
HIDDEN size_t arena_purge_chunks(bool force);
HIDDEN void arena_fork(enum fork_phase phase);

#endif
