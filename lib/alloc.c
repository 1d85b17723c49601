/* api: the malloc family with glibc 2.36's behaviour. The fast paths
 * of malloc and free are here, inline: one TLS load, one page load, a list pop or push, no
 * lock and no atomic read-modify-write. */
#include "alloc.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- who answers what the fast paths do not ---------------------------------------------- */

/* A safe point to start the purger (pthread_create allocates) or to purge inline: the top
 * of a malloc, the end of a free, where no heap list is being walked and no lock held. */
static inline void safe_point(void)
{
    if (unlikely(atomic_load_explicit(&purger_wanted, memory_order_relaxed)))
        purger_start_if_wanted(NULL);
}

/* The end of a free, called from caller (its return address): ld.so frees with glibc's
 * locks held (purger.c). */
static inline void safe_point_free(const void *caller)
{
    if (unlikely(atomic_load_explicit(&purger_wanted, memory_order_relaxed)))
        purger_start_if_wanted(caller);
}

/* The calling thread's heap, or NULL for the shared sentinels (written by nobody). */
static inline heap_t *own_heap(void)
{
    heap_t *heap = tl_heap;
    return heap == &heap_empty || heap == &heap_exited ? NULL : heap;
}

/* A block no heap owns: an extent up to 1 MiB (aligned to at most half a chunk), else a
 * large block with chunks of its own; glibc's in pass-through. */
TEXT_BUSY
static void *shared_malloc(size_t size, size_t align, bool zero)
{
    if (unlikely(lib_passthrough()))
        return passthrough_alloc(size, align, zero);
    void *p = size <= SC_MAX_SIZE && align <= CHUNK_SIZE / 2
                  ? extent_malloc_cached(size, align, zero)
                  : large_alloc(size, align, zero);
    purge_inline_tick(own_heap());
    safe_point();
    return p;
}

/* malloc's slow path: init's dormancy probe, large blocks, extents, a thread without a heap yet
 * (its first allocation, a kernel page that is not 4 KiB, a thread past its exit
 * destructor), then the heap's own slow path. */
static NOINLINE void *malloc_slow(size_t size, heap_t *heap, bool zero)
{
    if (unlikely(atomic_load_explicit(&probe_active, memory_order_relaxed)) &&
        pthread_equal(pthread_self(), probe_thread)) {
        atomic_store(&probe_hit, 1); /* init asking who is in charge: we are */
        return NULL;
    }
    safe_point();
    if (size > SMALL_MAX)
        return shared_malloc(size, 0, zero);
    if (unlikely(heap == &heap_empty || heap == &heap_exited)) {
        if (unlikely(lib_passthrough()))
            return passthrough_alloc(size, 0, zero); /* no heap, ever: always here */
        if (unlikely(heap == &heap_exited))
            return thread_late_malloc(size, zero);
        heap = thread_heap_create();
        if (!heap)
            return NULL;
    }
    if (unlikely(extent_cache_look_due(heap)))
        extent_cache_age(heap);
    return heap_malloc_small(heap, size, zero);
}

/* free's slow path: large blocks, extents, then the heap's (remote, full page, aligned blocks, a
 * bad pointer). */
static NOINLINE void free_slow(void *p, page_t *page, chunk_t *c, const void *caller)
{
    if (c->kind == CHUNK_LARGE) {
        large_free(c, p);
        purge_inline_tick(own_heap());
    } else if (c->kind == CHUNK_EXTENT) {
        extent_free_cached(c, p);
        purge_inline_tick(own_heap());
    } else {
        heap_free_slow(c, page, p);
    }
    safe_point_free(caller);
}

/* What heap_malloc_dry hands a dry page's malloc to when it cannot take the next page (it
 * sits below this file, so it is given the function). */
static NOINLINE void *malloc_slow_dry(heap_t *heap, size_t size)
{
    return malloc_slow(size, heap, false);
}

/* The owner frees into its full page (fast_owner_full). */
static NOINLINE void free_full(void *p, page_t *page, heap_t *heap, const void *caller)
{
    heap_free_full(p, page, heap);
    safe_point_free(caller);
}

/* Another thread's free into an owned page (heap_free_remote). */
static NOINLINE void free_remote(void *p, page_t *page, heap_t *owner, const void *caller)
{
    heap_free_remote(p, page, owner);
    safe_point_free(caller);
}

/* The owner freed its page's last block on the fast path. */
static NOINLINE void free_retire(heap_t *heap, page_t *page, const void *caller)
{
    heap_page_retire(heap, page);
    heap_leave(heap);
    safe_point_free(caller);
}

/* ---- the fast paths ------------------------------------------------------------------ */

/* A block from page, the class's first (or page_empty), inside the handshake. */
static inline __attribute__((always_inline)) void *malloc_page(heap_t *heap, page_t *page,
                                                               size_t size)
{
    block_t *b = page->free;
    if (unlikely(!b)) {
        /* The owner's frees become the free list here, as page_ready does, unless
         * another thread freed into this page or a full one of the heap: the slow
         * path collects those, so that pages can empty. page_empty and a reset page
         * have neither list.
         * Counted and marked as the slow path does: the busy heap's rules and kept
         * pages' ages run on slow_ops, heap_page_retire keeps only pages allocated from. */
        b = page->local_free;
        if (b && likely(!atomic_load_explicit(&page->xthread_free, memory_order_relaxed) &&
                        !atomic_load_explicit(&heap->full_has_xfree, memory_order_relaxed))) {
            page->local_free = NULL;
            page->alloc_seen = true;
            heap->slow_ops++;
        } else {
            /* the next page if ready, else malloc_slow_dry */
            return heap_malloc_dry(heap, page, size, malloc_slow_dry);
        }
    }
    if (unlikely(block_outside(page, b) || b->key != block_key(b)))
        return page_corrupt_tail(b, page);
    page->free = block_next(b);
    page->used++;
    b->key = 0;
    heap_leave(heap);
    return b;
}

/* heap_enter, with the wait left to the slow path (a call here would make the fast path
 * save registers). */
static inline __attribute__((always_inline)) bool malloc_enter(heap_t *heap)
{
    atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (likely(!heap_claimed(heap)))
        return true;
    heap_leave(heap);
    return false;
}

static inline __attribute__((always_inline)) void *malloc_inline(size_t size)
{
    heap_t *heap = tl_heap;
    if (likely(size <= DIRECT_MAX)) {
        if (likely(malloc_enter(heap)))
            return malloc_page(heap, heap->direct[(size + 15) >> 4], size);
    } else if (likely(size <= SMALL_MAX)) {
        /* The class's queue: a direct slot per 16 B up to 8 KiB would cost every thread
         * 3.5 KiB more, and the slow path costs several times the fast one. */
        if (likely(malloc_enter(heap))) {
            page_t *page = heap->queues[sc_mid_class[((size + 15) >> 4) - SC_MID_FIRST]].first;
            LIB_ASSERT(!page || page->cls == sc_class_of(size));
            return malloc_page(heap, page ? page : &page_empty, size);
        }
    }
    return malloc_slow(size, heap, false);
}

/* Every path off the fast one is a tail call, so that the fast path saves no register. */
static inline __attribute__((always_inline)) void free_inline(void *p)
{
    uintptr_t e = registry_entry(p);
    if (unlikely(!e)) {
        if (p)
            foreign_free(p); /* not ours: glibc's own, or from before we were in charge */
        return;
    }
    /* Chunks are 2 MiB-aligned; a large block's PAGE_SHIFT_NONE makes its index 0. The
     * shift comes with the entry: no load of the descriptor before the page's. */
    page_t *page = page_of_entry(e, p);
    chunk_t *c = chunk_of_entry(e);
    heap_t *heap = tl_heap;
    block_t *b = p;
    /* Checked here: its start (interior pointers); inside the handshake, its free key
     * (block_mark_free: a block freed already, by this thread or another, or being freed by
     * another now). */
    if (likely(page_fast_owned(page, heap) && !block_misaligned(page, p))) {
        /* heap_enter as in malloc_inline: claimed by the purger, free_slow waits */
        atomic_store_explicit(&heap->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (likely(!heap_claimed(heap))) {
            if (unlikely(block_mark_free(b))) {
                heap_leave(heap);
                lib_fatal_tail("free(): double free detected", p);
                return;
            }
            block_set_next(b, page->local_free);
            page->local_free = b;
            if (unlikely(--page->used == 0)) {
                if (likely(page->kept_quiet)) {
                    /* what heap_page_retire would do but its count: a loop of malloc/free
                     * of one block empties the page on every free. The page's age is
                     * now; slow_ops need not move for it (a read-modify-write in every
                     * pair): malloc's swap of local_free counts the loop's activity at
                     * least once per page's worth of blocks. */
                    LIB_ASSERT(page_alone(&heap->queues[page->cls], page) && page->alloc_seen &&
                               !page->is_sub);
                    page->kept_at = heap->slow_ops;
                    heap_leave(heap);
                    return;
                }
                free_retire(heap, page, __builtin_return_address(0));
                return;
            }
            heap_leave(heap);
            return;
        }
        heap_leave(heap);
    } else {
        heap_t *fo = atomic_load_explicit(&page->fast_owner, memory_order_relaxed);
        /* Straight to heap.c's function (a tail call) unless a safe point has work: the
         * wrapper's frame is a sixth of a remote free. */
        bool wanted = atomic_load_explicit(&purger_wanted, memory_order_relaxed);
        if (fo == fast_owner_full(heap)) {
            if (likely(!wanted))
                heap_free_full(p, page, heap);
            else
                free_full(p, page, heap, __builtin_return_address(0));
            return;
        }
        /* another heap's page (its own or full): a remote free, without free_slow's looks */
        heap_t *owner = (heap_t *)((uintptr_t)fo & ~(uintptr_t)1);
        if (fo && owner != heap) {
            if (likely(!wanted))
                heap_free_remote(p, page, owner);
            else
                free_remote(p, page, owner, __builtin_return_address(0));
            return;
        }
    }
    /* remote, aligned blocks, holes, a bad pointer; the return address is free's (or
     * realloc's): free_inline is always inlined into the API function */
    free_slow(p, page, c, __builtin_return_address(0));
}

/* Usable bytes from p to the end of its block. p must be a block's start (or the pointer
 * memalign handed out): anything else aborts with fn's name, as free() does, instead of
 * reporting a size that runs into the next block. */
static inline __attribute__((always_inline)) size_t usable_size(chunk_t *c, void *p,
                                                                const char *invalid, page_t **pagep)
{
    if (unlikely(c->kind == CHUNK_FREE)) {
        /* unused space (a freed large block): glibc says 0 for a freed chunk */
        if (invalid[0] == 'm')
            return 0;
        lib_fatal(invalid, p);
    }
    if (c->kind == CHUNK_LARGE) {
        if (unlikely((uint8_t *)p != c->large_start))
            lib_fatal(invalid, p);
        return c->large_size;
    }
    if (c->kind == CHUNK_EXTENT)
        return extent_usable_size(c, p, invalid);
    page_t *page = page_of_block(c, p);
    *pagep = page;
    if (unlikely(atomic_load_explicit(&page->in_use, memory_order_relaxed) != PAGE_USED))
        lib_fatal(invalid, p);
    if (page->flags & PAGE_HAS_ALIGNED) {
        void *s = page_block_named(page, p);
        if (unlikely(!s))
            lib_fatal(invalid, p);
        return page->block_size - (size_t)((uint8_t *)p - (uint8_t *)s);
    }
    if (unlikely(block_misaligned(page, p)))
        lib_fatal(invalid, p);
    return page->block_size;
}

/* alignment: a power of two > 16. */
TEXT_BUSY
static void *aligned_impl(size_t alignment, size_t size)
{
    if (size > ALLOC_MAX || alignment > ALLOC_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    if (unlikely(lib_passthrough())) /* a glibc block cannot be aligned inside (below) */
        return passthrough_alloc(size, alignment, false);
    if (size == 0)
        size = 1;
    if (size <= SMALL_MAX) {
        /* Blocks of a class whose size is a multiple of the alignment are aligned already
         * (pages start at 16 KiB multiples or more). */
        size_t bsize = sc_block_size(sc_class_of(size));
        if (alignment <= SMALL_PAGE_SIZE && bsize % alignment == 0)
            return malloc_inline(size);
        if (size + alignment - 1 <= SMALL_MAX) {
            uint8_t *b = malloc_inline(size + alignment - 1);
            if (!b)
                return NULL;
            uintptr_t a = ((uintptr_t)b + alignment - 1) & ~(uintptr_t)(alignment - 1);
            if (a != (uintptr_t)b) {
                chunk_t *c = registry_lookup(b);
                page_t *page = page_of_block(c, b);
                /* our own page: we just allocated from it (flags are the owner's: inside
                 * the reclaim handshake, like every change to the heap) */
                thread_page_set_aligned(page);
                /* the block's first 16 bytes are ours (a - b >= 16): the pointer we handed out */
                aligned_mark_set(b, a - (uintptr_t)b);
            }
            return (void *)a;
        }
    }
    /* Extents start on 4 KiB boundaries and can start on any up to half a chunk. */
    return shared_malloc(size, alignment, false);
}

/* glibc 2.36's _mid_memalign: small alignments are plain malloc, others are rounded up to a
 * power of two, absurd ones are EINVAL. */
TEXT_BUSY
static void *memalign_impl(size_t alignment, size_t size)
{
    if (alignment <= 16)
        return malloc_inline(size);
    if (alignment > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (alignment & (alignment - 1)) {
        size_t a = 32;
        while (a < alignment)
            a <<= 1;
        alignment = a;
    }
    return aligned_impl(alignment, size);
}

API void *malloc(size_t size)
{
    return malloc_inline(size);
}

/* Our own malloc under a name nobody can interpose (for the dormancy check). */
__attribute__((copy(malloc))) void *lib_malloc_self(size_t size) __attribute__((alias("malloc")));

API void free(void *p)
{
    free_inline(p);
}

TEXT_WARM
API void cfree(void *p); /* obsolete; glibc keeps it only for old binaries */
TEXT_WARM
API void cfree(void *p)
{
    free_inline(p);
}

API void *calloc(size_t n, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(n, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    if (total > SMALL_MAX)
        return shared_malloc(total, 0, true); /* fresh or purged memory: no memset */
    void *p = malloc_inline(total);
    if (likely(p))
        memset(p, 0, total);
    return p;
}

#define REALLOC_EXTENT_MIN ((size_t)4 << 10)

API void *realloc(void *p, size_t size)
{
    if (!p)
        return malloc_inline(size);
    if (size == 0) {
        /* glibc (REALLOC_ZERO_BYTES_FREES): frees and returns NULL. */
        free_inline(p);
        return NULL;
    }
    chunk_t *c = registry_lookup(p);
    if (!c)
        return foreign_realloc(p, size);
    page_t *page = NULL;
    size_t old = usable_size(c, p, "realloc(): invalid pointer", &page);
    /* A small block checked as free checks it: a freed one never keeps its place. Inline,
     * the key, and beyond the carved blocks; holes, reset pages and a key seen out of line. */
    bool live = true;
    if (page) {
        block_t *b = page->flags & PAGE_HAS_ALIGNED ? page_block_start(page, p) : p;
        if (unlikely((page->flags & (PAGE_HAS_HOLES | PAGE_RESET)) || b->key == block_key(b) ||
                     (size_t)((uint8_t *)b - page->start) >=
                         (size_t)__atomic_load_n(&page->capacity, __ATOMIC_RELAXED) *
                             page->block_size))
            live = heap_realloc_live(c, page, b, p);
    }
    /* Large blocks grow and shrink where they stand when they can (no copy, and no hole
     * left behind for a growing buffer to step over). */
    if (c->kind == CHUNK_LARGE && size > SC_MAX_SIZE) {
        void *q = large_resize(c, p, size);
        safe_point();
        if (q)
            return q;
    }
    /* Extents grow into a free run after them and give back their tail. */
    if (c->kind == CHUNK_EXTENT && (size > SMALL_MAX || size > old) && size <= SC_MAX_SIZE &&
        extent_resize(c, p, size))
        return p;
    /* Same block while the new size fits and does not waste more than half of it. */
    if (size <= old && size >= old / 2 && live)
        return p;
    if (size > ALLOC_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    /* Growing a small block: take half as much again, so that a buffer grown a few bytes
     * at a time does not step through every size class, leaving a block behind in each
     * (that left realloc-heavy programs with several times their live bytes resident). Past
     * REALLOC_EXTENT_MIN it is an extent from then on, where it grows in place: through the
     * medium classes it left a block behind in a 64 KiB page of each, so the step below it
     * stops at REALLOC_EXTENT_MIN. */
    size_t want = size;
    bool grow = size > old;
    if (grow && old + (old >> 1) > size && old + (old >> 1) <= SC_MAX_SIZE)
        want = old + (old >> 1);
    if (grow && size <= REALLOC_EXTENT_MIN && want > REALLOC_EXTENT_MIN)
        want = REALLOC_EXTENT_MIN;
    void *q =
        grow && size > REALLOC_EXTENT_MIN ? shared_malloc(want, 0, false) : malloc_inline(want);
    if (!q)
        return NULL;
    if (unlikely(q == p))
        lib_fatal("realloc(): invalid pointer", p); /* p was free: malloc handed it out */
    memcpy(q, p, old < size ? old : size);
    free_inline(p);
    return q;
}

TEXT_BUSY
API void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

TEXT_BUSY
API int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) || alignment == 0)
        return EINVAL;
    void *p = alignment <= 16 ? malloc_inline(size) : aligned_impl(alignment, size);
    if (!p)
        return ENOMEM;
    *memptr = p;
    return 0;
}

TEXT_BUSY
API void *aligned_alloc(size_t alignment, size_t size)
{
    return memalign_impl(alignment, size);
}

TEXT_BUSY
API void *memalign(size_t alignment, size_t size)
{
    return memalign_impl(alignment, size);
}

TEXT_WARM
API void *valloc(size_t size)
{
    if (unlikely(lib_passthrough())) /* glibc's, with the kernel's page size */
        return __libc_valloc(size);
    return memalign_impl(OS_PAGE_SIZE, size);
}

TEXT_WARM
API void *pvalloc(size_t size)
{
    if (unlikely(lib_passthrough()))
        return __libc_pvalloc(size);
    size_t rounded;
    if (__builtin_add_overflow(size, OS_PAGE_SIZE - 1, &rounded)) {
        errno = ENOMEM;
        return NULL;
    }
    return memalign_impl(OS_PAGE_SIZE, rounded & ~(OS_PAGE_SIZE - 1));
}

/* A pointer that is not ours whose glibc header (the 16 bytes before it) lies in a page that
 * is not mapped: no glibc block. What a second free of a block with a mapping of its own
 * (above 32 MiB: arena.c's dedicated arenas) finds once the first unmapped it; glibc would
 * read the header and die of SIGSEGV. Only a page-aligned pointer can have its header in
 * another page, so the system call is for those alone. */
static bool foreign_unmapped(const void *p)
{
    return ((uintptr_t)p & (OS_PAGE_SIZE - 1)) == 0 &&
           !os_page_mapped((const uint8_t *)p - OS_PAGE_SIZE);
}

/* free and realloc of a pointer that is not ours: glibc's, or fatal where there is none. */
TEXT_WARM
void foreign_free(void *p)
{
    if (!__libc_free)
        lib_fatal("free(): invalid pointer", p);
    if (foreign_unmapped(p))
        lib_fatal("free(): double free or invalid pointer", p);
    __libc_free(p);
}

TEXT_WARM
void *foreign_realloc(void *p, size_t size)
{
    if (!__libc_realloc || foreign_unmapped(p))
        lib_fatal("realloc(): invalid pointer", p);
    return __libc_realloc(p, size);
}

/* glibc's own malloc_usable_size (malloc.c, musable) for one of its blocks, read from its
 * chunk header: glibc exports no __libc_ name for it, and a dlsym on the allocator's path may
 * allocate. The header layout (size word before the block; IS_MMAPPED = 2, PREV_INUSE = 1 in
 * the next chunk) has not changed since glibc 2.0; tests/api-foreign.sh compares the result with
 * glibc's function for every kind of glibc block. */
TEXT_WARM
size_t foreign_usable_size(void *p)
{
    const size_t *size_word = (const size_t *)p - 1;
    size_t csize = *size_word & ~(size_t)7;
    if (*size_word & 2)
        return csize - 2 * sizeof(size_t); /* mmapped chunk */
    const size_t *next_size = (const size_t *)((const char *)p + csize - sizeof(size_t));
    return (*next_size & 1) ? csize - sizeof(size_t) : 0;
}

/* malloc_usable_size off its short path: NULL, foreign pointers, extents, large blocks,
 * sub-pages, aligned blocks, and the invalid pointers that abort. In the busy segment
 * beside its leaf (the section overrides cold's .text.unlikely): a program that asks about
 * its large blocks should not map the rare segment for it. */
static NOINLINE __attribute__((cold)) TEXT_BUSY size_t usable_size_cold(void *p, chunk_t *c)
{
    if (!p)
        return 0;
    if (!c)
        return foreign_usable_size(p);
    page_t *page;
    return usable_size(c, p, "malloc_usable_size(): invalid pointer", &page);
}

/* A short leaf for a small block's start (some programs ask after every allocation), with
 * usable_size's checks for that case, sub-pages included (a class's first blocks); everything
 * else is a tail call, so that this path saves no register. */
TEXT_BUSY
API size_t malloc_usable_size(void *p)
{
    uintptr_t e = registry_entry(p);
    chunk_t *c = chunk_of_entry(e);
    if (likely(c) && likely(c->kind == CHUNK_SMALL || c->kind == CHUNK_MEDIUM)) {
        page_t *page = page_sub_of(c, page_of_entry(e, p), p);
        /* one register for the page: left alone, gcc 12 works out in_use's address apart */
        __asm__("" : "+r"(page));
        if (likely(atomic_load_explicit(&page->in_use, memory_order_relaxed) == PAGE_USED &&
                   !(page->flags & PAGE_HAS_ALIGNED) && !block_misaligned(page, p)))
            return page->block_size;
    }
    return usable_size_cold(p, c);
}

TEXT_COLD
API int malloc_trim(size_t pad)
{
    if (unlikely(lib_passthrough())) {
        int (*next)(size_t) = (int (*)(size_t))passthrough_next("malloc_trim");
        return next ? next(pad) : 0;
    }
    return purge_all(true) > 0;
}

TEXT_COLD
API int mallopt(int param, int value)
{
    if (unlikely(lib_passthrough())) {
        int (*next)(int, int) = (int (*)(int, int))passthrough_next("mallopt");
        if (next)
            return next(param, value);
    }
    /* Accepted and ignored, as glibc accepts them; only M_MXFAST has a range there. */
    if (param == M_MXFAST)
        return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
    return 1;
}
