/* unit-extent-cache: a thread's cache in front of the extents (lib/extent-cache.c), over the
 * real extents, arena, registry and meta layers, with a heap of its own standing in for a
 * thread's: a free into a full cache gives back its oldest blocks (as many as make room, and
 * 32 KiB more), not all of them; the newest stay and are handed out again, the newest first;
 * the order the blocks came in holds across the holes that blocks taken leave; when the 16
 * slots run out, the 4 oldest go; a request takes the block that fits best, up to a quarter
 * longer; a flush gives every block back. Built with THPALLOC_DEBUG: the extent map's
 * invariants are checked on every operation. */
#include "extent-map.h"
#include "internal.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>

#define KIB ((size_t)1 << 10)
#define G ((size_t)4096) /* a granule */

/* ---- the layers above, stood in for ---- */
struct policy policy_in_force = {
    .thp = {.mode = THP_MODE_LARGE, .threshold = (size_t)2 << 20},
    .arena_size = (size_t)64 << 20,
    .purge_delay_ms = 1000,
    .purge = OS_PURGE_DONTNEED,
    .trim_threshold = 0,
    .trim_burst = 1000,
};
void policy_ensure_loaded(void) {}
void introspect_add_range(void *base, size_t size)
{
    (void)base;
    (void)size;
}
void introspect_remove_range(void *base)
{
    (void)base;
}
void lib_fatal(const char *msg, const void *p)
{
    fprintf(stderr, "thpalloc: %s (%p)\n", msg, p);
    abort();
}
void lib_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "thpalloc: invariant failed: %s at %s:%d\n", expr, file, line);
    abort();
}
void malloc_corrupt(page_t *page, void *b)
{
    (void)page;
    lib_fatal("malloc(): free block corrupted", b);
}
/* No purger claims the heap: the handshake never waits. */
void heap_wait_reclaim(heap_t *heap)
{
    (void)heap;
}
struct block_secret block_secret;
heap_t heap_empty, heap_exited;
static heap_t heap;
__thread heap_t *tl_heap __attribute__((tls_model("initial-exec"))) = &heap;

static uint64_t ext_used(void)
{
    uint64_t used;
    int64_t uncounted;
    extent_stats(&used, &uncounted);
    return used;
}

static void *get(size_t size)
{
    return extent_malloc_cached(size, 0, false);
}

static void put(void *p)
{
    extent_free_cached(registry_lookup(p), p);
}

/* The blocks the cache holds. */
static unsigned held(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < EXT_CACHE_SLOTS; i++)
        n += heap.ext_cache[i] != NULL;
    return n;
}

static size_t len_of(const void *p)
{
    return (size_t)extent_block_len(registry_lookup(p), p) * G;
}

int main(void)
{
    /* a second thread has allocated: frees go to the cache */
    atomic_store(&heap_second_made, 1);

    /* Nine blocks of 32 KiB: eight fill the cache's 256 KiB; the ninth gives back the two
     * oldest (room for it and 32 KiB more), not all eight. */
    uint8_t *a[9];
    for (int i = 0; i < 9; i++)
        a[i] = get(32 * KIB);
    for (int i = 0; i < 8; i++)
        put(a[i]);
    tap_ok(held() == 8 && heap.ext_cache_bytes == 256 * KIB,
           "eight blocks of 32 KiB fill the cache (%u blocks, %zu KiB)", held(),
           heap.ext_cache_bytes / KIB);
    put(a[8]);
    tap_ok(held() == 7 && heap.ext_cache_bytes == 224 * KIB,
           "a ninth gives back the two oldest only: 7 blocks, 224 KiB held (%u, %zu KiB)", held(),
           heap.ext_cache_bytes / KIB);
    tap_ok(ext_used() == 224 * KIB, "the two are back in the runs: 224 KiB counted out (%llu)",
           (unsigned long long)ext_used() / KIB);
    uint8_t *r[7];
    int order = 1;
    for (int i = 0; i < 7; i++)
        order &= (r[i] = get(32 * KIB)) == a[8 - i];
    tap_ok(order && held() == 0,
           "seven requests take the seven held, the newest first, and empty the cache");
    for (int i = 0; i < 7; i++)
        put(r[i]);
    extent_cache_flush(&heap);
    tap_ok(held() == 0 && heap.ext_cache_bytes == 0 && ext_used() == 0,
           "a flush gives every block back (%llu KiB out)", (unsigned long long)ext_used() / KIB);

    /* Seventeen blocks of 12 KiB (204 KiB): the sixteenth fills the slots, the seventeenth
     * gives back the four oldest. */
    uint8_t *s[17];
    for (int i = 0; i < 17; i++)
        s[i] = get(12 * KIB);
    for (int i = 0; i < 17; i++)
        put(s[i]);
    tap_ok(held() == 13 && heap.ext_cache_bytes == 13 * 12 * KIB,
           "17 blocks of 12 KiB into 16 slots: the 4 oldest go back, 13 stay (%u)", held());
    uint8_t *t0 = get(12 * KIB), *t1 = get(12 * KIB);
    tap_ok(t0 == s[16] && t1 == s[15], "the newest come out first");
    extent_cache_flush(&heap);
    extent_free(registry_lookup(t0), t0);
    extent_free(registry_lookup(t1), t1);
    tap_ok(ext_used() == 0, "all back (%llu KiB out)", (unsigned long long)ext_used() / KIB);

    /* The order blocks came in holds across holes: x0..x3 fill the cache, two are taken, x4
     * and x5 come in; the next free gives back x0 and x1 (the oldest), not x4. */
    uint8_t *x[6];
    for (int i = 0; i < 6; i++)
        x[i] = get(64 * KIB);
    for (int i = 0; i < 4; i++)
        put(x[i]);
    uint8_t *g3 = get(64 * KIB), *g2 = get(60 * KIB);
    tap_ok(g3 == x[3], "a 64 KiB request takes the newest block, x3");
    tap_ok(g2 == x[2] && len_of(g2) == 64 * KIB,
           "a 60 KiB request takes x2, 64 KiB (a granule longer: within a quarter)");
    put(x[4]);
    put(x[5]);
    tap_ok(held() == 4 && heap.ext_cache_bytes == 256 * KIB,
           "x0, x1, x4, x5 held: 256 KiB, nothing given back yet");
    put(g3);
    tap_ok(held() == 3 && heap.ext_cache_bytes == 192 * KIB,
           "freeing x3 gives back two: 3 blocks, 192 KiB held (%u, %zu KiB)", held(),
           heap.ext_cache_bytes / KIB);
    uint8_t *y0 = get(64 * KIB), *y1 = get(64 * KIB), *y2 = get(64 * KIB);
    tap_ok(y0 == x[3] && y1 == x[5] && y2 == x[4],
           "the ones kept are x3, x5, x4, newest first: x0 and x1 went back");
    put(g2);
    put(y0);
    put(y1);
    put(y2);
    extent_cache_flush(&heap);
    tap_ok(ext_used() == 0, "all back (%llu KiB out)", (unsigned long long)ext_used() / KIB);

    /* Best fit from the bitmaps: blocks of 3, 5, 8 and 16 granules held. */
    uint8_t *b3 = get(3 * G), *b5 = get(5 * G), *b8 = get(8 * G), *b16 = get(16 * G);
    put(b3);
    put(b5);
    put(b8);
    put(b16);
    uint8_t *f4 = get(4 * G), *f13 = get(13 * G), *f3 = get(3 * G);
    tap_ok(f4 == b5, "4 granules: the 5-granule block (a quarter longer at most)");
    tap_ok(f13 == b16, "13 granules: the 16-granule block");
    tap_ok(f3 == b3, "3 granules: the 3-granule block");
    tap_ok(held() == 1 && heap.ext_cache_bytes == 8 * G, "the 8-granule block left");
    uint8_t *m = get(9 * G);
    tap_ok(m != b8 && len_of(m) == 9 * G, "9 granules: none fits (8 is short), one from the runs");
    put(m);
    put(f3);
    put(f4);
    put(f13);
    extent_cache_flush(&heap);
    tap_ok(ext_used() == 0, "all back (%llu KiB out)", (unsigned long long)ext_used() / KIB);
    return tap_done();
}
