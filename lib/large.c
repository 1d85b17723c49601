/* large: blocks above the largest size class (1 MiB), each in a run of chunks of its own,
 * owned by no heap: allocated, resized in place and freed under the arena lock only. */
#include "chunk.h"

#include <errno.h>
#include <string.h>

TEXT_BUSY
void *large_alloc(size_t size, size_t align, bool zero)
{
    if (size > ALLOC_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t usable = (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    size_t n = (usable + CHUNK_MASK) >> CHUNK_SHIFT;
    arena_t *arena;
    bool is_zero;
    extents_release_empty();
    uint8_t *base = arena_alloc_chunks(n, align > CHUNK_SIZE ? align : CHUNK_SIZE,
                                       THP_USE_LARGE_PIECE, usable, &arena, &is_zero);
    if (!base)
        return NULL;
    chunk_t *c = chunk_desc_alloc();
    if (!c) {
        arena_free_chunks(arena, base, n);
        errno = ENOMEM;
        return NULL;
    }
    c->base = base;
    c->kind = CHUNK_LARGE;
    c->page_shift = PAGE_SHIFT_NONE;
    c->npages = 0;
    c->arena = arena;
    c->large_size = usable;
    c->nchunks = n;
    c->large_start = base;
    atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
    if (!registry_set(base, n, c)) {
        registry_set(base, n, registry_unused(arena));
        arena_free_chunks(arena, base, n);
        chunk_desc_free(c);
        errno = ENOMEM;
        return NULL;
    }
    if (zero && !is_zero)
        memset(base, 0, size);
    return base;
}

/* Resizes a large block where it stands: within its chunks, by taking the free chunks that
 * follow it, or by giving back its tail; a block with a mapping of its own is resized with
 * mremap, moved if need be, never copied (glibc's realloc of an mmapped chunk does the
 * same; copying held both blocks resident). NULL when it would have to be copied. */
static void *large_resize_claimed(chunk_t *c, size_t size)
{
    size_t usable = (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    size_t n = c->nchunks, want = (usable + CHUNK_MASK) >> CHUNK_SHIFT;
    if (c->arena->dedicated) {
        uint8_t *base = arena_resize_dedicated(c->arena, c, want, usable);
        if (!base)
            return NULL;
        c->base = base;
        c->nchunks = want;
        c->large_size = usable;
        return base;
    }
    if (want > n) {
        if (!arena_grow_chunks(c->arena, c->base, n, want, usable))
            return NULL;
        if (!registry_set(c->base + (n << CHUNK_SHIFT), want - n, c)) {
            registry_set(c->base + (n << CHUNK_SHIFT), want - n, registry_unused(c->arena));
            arena_free_chunks(c->arena, c->base + (n << CHUNK_SHIFT), want - n);
            return NULL;
        }
    } else if (want < n) {
        registry_set(c->base + (want << CHUNK_SHIFT), n - want, registry_unused(c->arena));
        arena_free_chunks(c->arena, c->base + (want << CHUNK_SHIFT), n - want);
    } else if (usable != c->large_size) {
        /* a tail became a full piece, or a padded tail's use changed (arena.c) */
        arena_readvise(c->arena, c->base, n, usable);
    }
    c->nchunks = want;
    c->large_size = usable;
    return c->base;
}

/* realloc's resize of the large block p, claimed as large_free claims it (a free racing
 * with it fails there, instead of giving back chunks that the resize grows into). */
void *large_resize(chunk_t *c, void *p, size_t size)
{
    if (size > ALLOC_MAX)
        return NULL;
    uint8_t *want = p;
    if (unlikely(!__atomic_compare_exchange_n(&c->large_start, &want, NULL, false, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE)))
        lib_fatal(want ? "realloc(): invalid pointer" : "realloc(): double free detected", p);
    void *q = large_resize_claimed(c, size);
    __atomic_store_n(&c->large_start, q ? (uint8_t *)q : (uint8_t *)p, __ATOMIC_RELEASE);
    return q;
}

TEXT_BUSY
void large_free(chunk_t *c, void *p)
{
    /* Claimed by a CAS of its start to NULL: of two threads that found the block in the
     * registry at the same moment one fails here, instead of both giving its chunks back
     * (handed out twice later). */
    uint8_t *want = p;
    if (unlikely(!__atomic_compare_exchange_n(&c->large_start, &want, NULL, false, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE)))
        lib_fatal(want ? "free(): invalid pointer" : "free(): double free detected", p);
    uint8_t *base = c->base;
    size_t n = c->nchunks;
    arena_t *arena = c->arena;
    registry_set(base, n, registry_unused(arena));
    chunk_desc_free(c);
    arena_free_chunks(arena, base, n);
}
