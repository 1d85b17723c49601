/* meta: memory for the allocator's own descriptors (chunks, heaps, registry leaves).
 * It never comes from malloc and is never returned: descriptors are recycled through free
 * lists, so a racy reader (statistics, a late cross-thread free) never touches unmapped
 * memory. */
#include "policy.h"

#include <errno.h>
#include <string.h>

#define META_SEGMENT ((size_t)256 << 10)

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *bump, *bump_end;

/* Chunk descriptors live in segments of their own so that they can be walked. A segment's
 * descriptors are handed out in order (count: how many so far, read by the walkers), so
 * that only the descriptors in use are ever touched: a process with one chunk pays one
 * descriptor's pages, not the segment's 256 KiB. Freed ones are recycled first. The
 * descriptors start at their mapping's first byte, the first segment's header being in
 * .bss: the first descriptor's sub-pages, header and first 15 pages share one OS page, its
 * second split slot's first 15 sub-pages another (with extent.c's short descriptors, an idle
 * process's descriptors fit the fewest pages). */
typedef struct desc_segment {
    struct desc_segment *next;
    _Atomic size_t count;
    size_t capacity;
    chunk_slot_t *descs;
} desc_segment_t;
static desc_segment_t *_Atomic desc_segments;
static desc_segment_t first_segment;
static chunk_t *desc_free;

/* Every piece keeps the next one aligned for the most aligned descriptor (page_t's 128). */
#define META_ALIGN ((size_t)128)
_Static_assert(_Alignof(chunk_slot_t) <= META_ALIGN, "descriptors need more alignment");

/* A mapping of meta memory of its own: page-aligned, zero. */
static void *meta_map(size_t size)
{
    size = (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    uint8_t *p = os_reserve_aligned(size, OS_PAGE_SIZE, OS_RESERVE_NORESERVE);
    if (!p)
        return NULL;
    /* on the stack, written by two immediate stores: as a literal it was 14 bytes of .rodata,
     * which every process maps, and .rodata is kept to one page (lib/README.md) */
    char name[] = "thpalloc meta";
    os_name(p, size, name);
    atomic_fetch_add_explicit(&stat_reserved, size, memory_order_relaxed);
    return p;
}

static void *meta_alloc_locked(size_t size)
{
    size = (size + META_ALIGN - 1) & ~(META_ALIGN - 1);
    if (size > META_SEGMENT)
        return meta_map(size);
    if ((size_t)(bump_end - bump) < size) {
        uint8_t *p = meta_map(META_SEGMENT);
        if (!p)
            return NULL;
        bump = p;
        bump_end = p + META_SEGMENT;
    }
    void *r = bump;
    bump += size;
    return r; /* fresh anonymous memory: already zero */
}

void *meta_alloc(size_t size)
{
    pthread_mutex_lock(&meta_lock);
    void *p = meta_alloc_locked(size);
    pthread_mutex_unlock(&meta_lock);
    return p;
}

chunk_t *chunk_desc_alloc(void)
{
    pthread_mutex_lock(&meta_lock);
    chunk_t *c = desc_free;
    desc_segment_t *s = atomic_load_explicit(&desc_segments, memory_order_relaxed);
    if (c) {
        desc_free = c->next;
    } else if (s && atomic_load_explicit(&s->count, memory_order_relaxed) < s->capacity) {
        size_t n = atomic_load_explicit(&s->count, memory_order_relaxed);
        c = &s->descs[n].c;
        /* release: a walker that sees the count sees a zeroed descriptor (CHUNK_FREE) */
        atomic_store_explicit(&s->count, n + 1, memory_order_release);
    } else {
        s = s ? meta_alloc_locked(sizeof *s) : &first_segment;
        chunk_slot_t *descs = s ? meta_map(META_SEGMENT) : NULL;
        if (!descs) {
            pthread_mutex_unlock(&meta_lock);
            errno = ENOMEM;
            return NULL; /* a header taken for nothing stays meta memory, as all of it */
        }
        s->descs = descs;
        s->capacity = META_SEGMENT / sizeof(chunk_slot_t);
        atomic_store_explicit(&s->count, 1, memory_order_relaxed);
        c = &s->descs[0].c;
        s->next = atomic_load_explicit(&desc_segments, memory_order_relaxed);
        atomic_store_explicit(&desc_segments, s, memory_order_release);
    }
    pthread_mutex_unlock(&meta_lock);
    /* The header only (the page descriptors are FREE, their links clean); callers set
     * every other field. */
    memset(c, 0, offsetof(chunk_t, pages));
    return c;
}

void chunk_desc_free(chunk_t *c)
{
    pthread_mutex_lock(&meta_lock);
    c->kind = CHUNK_FREE;
    c->next = desc_free;
    desc_free = c;
    pthread_mutex_unlock(&meta_lock);
}

/* Calls fn for every chunk descriptor ever made (statistics walk; racy by design). The
 * inline purge pass of page slots walks it too: a small process runs it (unmarked). */
void chunk_desc_foreach(void (*fn)(chunk_t *c, void *arg), void *arg)
{
    for (desc_segment_t *s = atomic_load_explicit(&desc_segments, memory_order_acquire); s;
         s = s->next)
        for (size_t i = 0, n = atomic_load_explicit(&s->count, memory_order_acquire); i < n; i++)
            fn(&s->descs[i].c, arg);
}

TEXT_BUSY
void meta_fork(enum fork_phase phase)
{
    fork_mutex(&meta_lock, phase);
}
