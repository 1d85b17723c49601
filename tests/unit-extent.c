/* unit-extent: the extents (lib/extent.c, extent-run.c, extent-purge.c) over the real arena,
 * registry and meta layers, with a stand-in for the policy: blocks of 4 KiB granules with boundary
 * tags, best fit (a resident run before a purged one that fits better, from its resident end), a
 * freed block merged with its free neighbours at once, blocks grown into the free run after them
 * and shrunk in place, alignment up to half a chunk, zeroed blocks on request, free runs purged
 * after purge_delay (residency read from the kernel with mincore), empty chunks kept while resident
 * and back to the arena once purged or asked for (but one spare), bad pointers refused; built with
 * THPALLOC_DEBUG, so that every operation also checks the map's invariants (runs tile the chunk, no
 * two free runs touch, the counts add up), over a random run checked against a shadow model. */
#include "extent-map.h"
#include "chunk.h"
#include "tap.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit-extent-env.h"

/* Everything that waits for purge_delay (stat_pages_dirty lags the shards by up to a chunk:
 * extent_stats has the rest). */
static uint64_t waiting(void)
{
    uint64_t used;
    int64_t uncounted;
    extent_stats(&used, &uncounted);
    return (uint64_t)((int64_t)atomic_load(&stat_pages_dirty) + uncounted);
}

static chunk_t *chunk_of(const void *p)
{
    return registry_lookup(p);
}

static size_t len_of(const void *p)
{
    return (size_t)extent_block_len(chunk_of(p), p) * G;
}

/* Resident bytes of [p, p+n), from the kernel. */
static size_t resident(const void *p, size_t n)
{
    unsigned char vec[512];
    size_t pages = n / G, r = 0;
    if (pages > sizeof vec || mincore((void *)p, n, vec) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < pages; i++)
        r += (vec[i] & 1) * G;
    return r;
}

/* What a bad call does in a child: the signal it dies of, its message in buf. */
static int child_dies(void (*fn)(void *), void *arg, char *buf, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], buf, cap - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void free_it(void *p)
{
    extent_free(chunk_of(p), p);
}

static void free_interior(void *p)
{
    uint8_t *q = (uint8_t *)p + G;
    extent_free(chunk_of(q), q);
}

static void realloc_interior(void *p)
{
    uint8_t *q = (uint8_t *)p + 16;
    extent_resize(chunk_of(q), q, 64 * KIB);
}

/* ---- a random run against a shadow model ---- */
#define SLOTS 400
static struct {
    uint8_t *p;
    size_t size;
    uint8_t tag;
} slot[SLOTS];

/* splitmix64: a fixed sequence, so that a failure replays */
static uint64_t rng = 42;
static uint64_t next_rand(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool intact(int i)
{
    for (size_t k = 0; k < slot[i].size; k += 509)
        if (slot[i].p[k] != slot[i].tag)
            return false;
    return slot[i].p[slot[i].size - 1] == slot[i].tag;
}

static bool random_run(unsigned ops, unsigned *resizes_in_place)
{
    for (unsigned n = 0; n < ops; n++) {
        int i = (int)(next_rand() % SLOTS);
        if (slot[i].p && !intact(i))
            return false;
        unsigned what = (unsigned)(next_rand() % 4);
        size_t size = 8 * KIB + 1 + (size_t)(next_rand() % (SC_MAX_SIZE - 8 * KIB));
        if (next_rand() % 4)
            size = 8 * KIB + 1 + (size_t)(next_rand() % (56 * KIB)); /* mostly small */
        if (slot[i].p && what == 0) {
            if (extent_resize(chunk_of(slot[i].p), slot[i].p, size)) {
                (*resizes_in_place)++;
                if (size > slot[i].size)
                    memset(slot[i].p + slot[i].size, slot[i].tag, size - slot[i].size);
                slot[i].size = size;
                if (len_of(slot[i].p) != (size + G - 1) / G * G)
                    return false;
            }
            continue;
        }
        if (slot[i].p) {
            extent_free(chunk_of(slot[i].p), slot[i].p);
            slot[i].p = NULL;
        }
        if (what == 3)
            continue;
        size_t align = next_rand() % 8 == 0 ? (size_t)1 << (12 + next_rand() % 8) : 0;
        slot[i].p = extent_alloc(size, align, false);
        if (!slot[i].p || (align && (uintptr_t)slot[i].p % align))
            return false;
        slot[i].size = size;
        slot[i].tag = (uint8_t)(next_rand() | 1);
        memset(slot[i].p, slot[i].tag, size);
    }
    for (int i = 0; i < SLOTS; i++) {
        if (slot[i].p && !intact(i))
            return false;
        if (slot[i].p)
            extent_free(chunk_of(slot[i].p), slot[i].p);
        slot[i].p = NULL;
    }
    return true;
}

static cpu_set_t cpus_allowed; /* at the start of test_shards */

/* Runs the caller on the n-th CPU it was allowed; false when there is none. */
static bool run_on(int n)
{
    cpu_set_t one;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &cpus_allowed) && n-- == 0) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(0, sizeof one, &one) == 0 && sched_getcpu() == cpu;
        }
    }
    return false;
}

static const void *shard_of(const void *p)
{
    return map_of(chunk_of(p))->shard;
}

/* Once a second heap is made, a request takes from its CPU's shard (chunks of its own), a
 * shard with no fit takes another's free run before a new chunk, a block goes back to its
 * chunk's shard whichever CPU frees it, and the purge reaches every shard. */
static void test_shards(void)
{
    sched_getaffinity(0, sizeof cpus_allowed, &cpus_allowed);
    if (!run_on(0) || !run_on(1)) {
        tap_ok(1, "# SKIP shards: fewer than two CPUs to run on");
        sched_setaffinity(0, sizeof cpus_allowed, &cpus_allowed);
        return;
    }
    uint64_t used0 = ext_used();
    atomic_store(&extent_heap_second_made, 1);
    run_on(0);
    uint8_t *a = extent_alloc(64 * KIB, G, false), *big[64];
    free_it(extent_alloc(1024 * KIB, G, false)); /* a free run of 1 MiB in a's shard */
    run_on(1);
    int nb = 0;
    do
        big[nb] = extent_alloc(1024 * KIB, G, false);
    while (big[nb] && shard_of(big[nb++]) == shard_of(a) && nb < 64);
    tap_ok(nb >= 2 && shard_of(big[0]) == shard_of(a) && shard_of(big[nb - 1]) != shard_of(a),
           "shards: the other CPU's requests took the first shard's free runs first, then a "
           "chunk of their own (%d blocks of 1 MiB)",
           nb);
    uint8_t *b = extent_alloc(64 * KIB, G, false);
    run_on(0);
    uint8_t *a2 = extent_alloc(64 * KIB, G, false);
    tap_ok(b && a2 && shard_of(b) == shard_of(big[nb - 1]) && shard_of(a2) == shard_of(a) &&
               chunk_of(b) != chunk_of(a2),
           "shards: on each CPU a request takes from its own shard (%p, %p)", (void *)a2,
           (void *)b);
    memset(b, 1, 64 * KIB);
    free_it(b); /* on CPU 0: into CPU 1's shard, merged with the rest of its chunk */
    run_on(1);
    uint8_t *b2 = extent_alloc(64 * KIB, G, false);
    tap_ok(b2 == b, "shards: a block freed on another CPU went back to its own shard (%p, %p)",
           (void *)b2, (void *)b);
    /* CPU 0's shard: a resident run of 16 KiB between two blocks */
    run_on(0);
    uint8_t *y = extent_alloc(256 * KIB, G, false), *z1 = extent_alloc(16 * KIB, G, false);
    uint8_t *z = extent_alloc(16 * KIB, G, false), *w = extent_alloc(8 * KIB, G, false);
    memset(y, 1, 256 * KIB);
    memset(z, 1, 16 * KIB);
    free_it(y);
    free_it(z);
    run_on(1);
    free_it(b2); /* CPU 1's shard: a long resident run, b2's granules and the fresh rest */
    uint8_t *z2 = extent_alloc(16 * KIB, G, false);
    tap_ok(shard_of(z2) == shard_of(z) && shard_of(z2) != shard_of(b),
           "shards: a request whose shard has only a long resident run takes another shard's "
           "shorter one (%p, in CPU 0's shard with %p)",
           (void *)z2, (void *)z);
    free_it(z2);
    free_it(z1);
    free_it(w);
    free_it(a2);
    free_it(a);
    for (int i = 0; i < nb; i++)
        free_it(big[i]);
    uint32_t next;
    extents_purge(now_ms(), true, &next);
    tap_ok(resident(b, 64 * KIB) == 0 && resident(a, 64 * KIB) == 0 && ext_used() == used0,
           "shards: everything freed, the purge reached every shard (%zu, %zu bytes resident)",
           resident(a, 64 * KIB), resident(b, 64 * KIB));
    atomic_store(&extent_heap_second_made, 0);
    sched_setaffinity(0, sizeof cpus_allowed, &cpus_allowed);
}

/* The free run that holds p's granule: its first granule in *first, its length returned. */
static unsigned run_at(const uint8_t *p, unsigned *first)
{
    const chunk_t *c = chunk_of(p);
    unsigned gp = (unsigned)((size_t)(p - c->base) / G), g = 0, len = 1;
    for (; g < GRANULES; g += len) {
        len = tag_get(map_of(c), g) & TAG_LEN;
        if (!len || gp < g + len)
            break;
    }
    *first = g;
    return len;
}

/* extent_alloc_resident, the thread cache's request when it holds blocks: it takes a run
 * only where a resident one fits (a bin's first run pending, in any shard), else takes
 * nothing and says fresh, so that the cache gives its blocks back first. */
static void test_alloc_resident(void)
{
    uint32_t next;
    extents_purge(now_ms(), true, &next);
    uint64_t used = ext_used();
    bool fresh = false;
    void *none = extent_alloc_resident(G, 0, false, &fresh);
    bool none_ok = !none && fresh && ext_used() == used;
    uint8_t *b = extent_alloc(200 * G, 0, false);
    memset(b, 1, 200 * G);
    free_it(b); /* merged with its free neighbours, purged: 200 granules of it resident */
    unsigned first, len = run_at(b, &first);
    const struct ext_free *n = &map_of(chunk_of(b))->node[first];
    tap_ok(none_ok && len >= 200 && n->dirty == 200,
           "resident only: after the purge nothing is taken (fresh); then a freed run of %u "
           "granules, 200 resident",
           len);
    uint8_t *r = extent_alloc_resident(200 * G, 0, false, &fresh);
    const uint8_t *run = map_of(chunk_of(b))->chunk->base + (size_t)first * G;
    tap_ok(r && !fresh && r >= run && r + 200 * G <= run + (size_t)len * G &&
               resident(r, 200 * G) == 200 * G && ext_used() == used + 200 * G,
           "200 granules: taken from it, its resident part (%p in the run at %p)", (void *)r,
           (const void *)run);
    free_it(r);
}

/* stat_pages_dirty, a line every thread's frees wrote, is written by a shard only as
 * something starts or stops waiting in it or once it lags by a chunk; the statistics
 * (extent_stats) add the rest. */
static void test_dirty_lag(void)
{
    uint32_t next;
    extents_purge(now_ms(), true, &next);
    uint64_t d0 = atomic_load(&stat_pages_dirty);
    tap_ok(waiting() == 0 && d0 == 0, "lag: nothing waits, stat_pages_dirty 0 (%llu)",
           (unsigned long long)d0);
    uint8_t *p[4], *sep[4];
    for (int i = 0; i < 4; i++) {
        p[i] = extent_alloc(16 * KIB, 0, false);
        sep[i] = extent_alloc(G, 0, false); /* between them: the freed blocks do not merge */
        memset(p[i], 1, 16 * KIB);
    }
    free_it(p[0]);
    tap_ok(atomic_load(&stat_pages_dirty) == 16 * KIB && waiting() == 16 * KIB,
           "lag: the first run to wait is counted at once (%llu)",
           (unsigned long long)atomic_load(&stat_pages_dirty));
    free_it(p[1]);
    free_it(p[2]);
    tap_ok(atomic_load(&stat_pages_dirty) == 16 * KIB && waiting() == 48 * KIB,
           "lag: the next ones are not (%llu counted, %llu waiting)",
           (unsigned long long)atomic_load(&stat_pages_dirty), (unsigned long long)waiting());
    uint8_t *q[3];
    for (int i = 0; i < 3; i++)
        q[i] = extent_alloc(16 * KIB, 0, false);
    tap_ok(q[0] && q[1] && q[2] && atomic_load(&stat_pages_dirty) == 0 && waiting() == 0,
           "lag: the waiting runs taken again, nothing waits and it says 0 (%llu)",
           (unsigned long long)atomic_load(&stat_pages_dirty));
    free_it(q[0]); /* counted at once: 16 KiB */
    uint8_t *m[3];
    for (int i = 0; i < 3; i++) {
        m[i] = extent_alloc(SC_MAX_SIZE, 0, false);
        memset(m[i], 1, SC_MAX_SIZE);
    }
    for (int i = 0; i < 3; i++)
        free_it(m[i]);
    uint64_t counted = atomic_load(&stat_pages_dirty);
    tap_ok(counted > 16 * KIB && waiting() - counted < CHUNK_SIZE,
           "lag: never a chunk or more (%llu counted, %llu waiting)", (unsigned long long)counted,
           (unsigned long long)waiting());
    free_it(q[1]);
    free_it(q[2]);
    free_it(p[3]);
    for (int i = 0; i < 4; i++)
        free_it(sep[i]);
    extents_purge(now_ms(), true, &next);
    tap_ok(atomic_load(&stat_pages_dirty) == 0 && waiting() == 0, "lag: all purged, 0 again");
}

int main(void)
{
    /* a block: 4 KiB-aligned, in an extent chunk, its length in granules */
    uint8_t *a = extent_alloc(8 * KIB + 1, 0, false);
    chunk_t *c = chunk_of(a);
    tap_ok(a && c && c->kind == CHUNK_EXTENT && (uintptr_t)a % G == 0,
           "an extent: 4 KiB-aligned, in a chunk of kind extent");
    tap_ok(len_of(a) == 3 * G && extent_usable_size(c, a, "x") == 3 * G,
           "8 KiB + 1 takes 3 granules, usable 12 KiB");
    tap_ok(ext_used() == 3 * G, "12 KiB counted in use");
    tap_ok(extent_owns(c, a) && !extent_owns(c, a + G) && !extent_owns(c, a + 16),
           "only a block's start is a block");

    /* neighbours merge: b and d after a; freeing b, a, d leaves one run, the spare */
    uint8_t *b = extent_alloc(5 * G, 0, false);
    uint8_t *d = extent_alloc(2 * G, 0, false);
    tap_ok(b == a + 3 * G && d == b + 5 * G, "consecutive blocks from one run (%p %p %p)", a, b, d);
    extent_free(c, b);
    uint8_t *e = extent_alloc(4 * G, 0, false);
    tap_ok(e == b, "a 4-granule request takes the 5-granule hole (best fit)");
    uint8_t *f = extent_alloc(G, 0, false);
    tap_ok(f == b + 4 * G, "and the granule left of it after");
    extent_free(c, e);
    extent_free(c, f);
    extent_free(c, a);
    extent_free(c, d);
    tap_ok(ext_used() == 0, "everything freed: nothing in use");
    /* One free run now, the chunk's untouched rest and the ten granules freed into it: only
     * those wait for purge_delay (counted, the rest clean). */
    tap_ok(waiting() == 10 * G,
           "the ten granules freed wait, not the untouched rest of the chunk they joined (%llu "
           "bytes)",
           (unsigned long long)waiting());
    uint8_t *big = extent_alloc(SC_MAX_SIZE, 0, false);
    uint8_t *big2 = extent_alloc(SC_MAX_SIZE, 0, false);
    tap_ok(big == a && big2 == a + SC_MAX_SIZE,
           "the freed runs merged into one: two 1 MiB blocks fill the same chunk");
    extent_free(c, big);
    extent_free(c, big2);

    /* best fit across runs: holes of 6 and 3 granules, a 3-granule request */
    uint8_t *h[6];
    size_t hs[6] = {6, 1, 3, 1, 8, 1};
    for (int i = 0; i < 6; i++)
        h[i] = extent_alloc(hs[i] * G, 0, false);
    extent_free(c, h[0]);
    extent_free(c, h[2]);
    uint8_t *x = extent_alloc(3 * G, 0, false);
    tap_ok(x == h[2], "best fit: the 3-granule hole, not the first that fits");
    extent_free(c, x);

    /* in place: grow into the free run after it, not past a block in use; shrink */
    tap_ok(extent_resize(c, h[4], 8 * G) && len_of(h[4]) == 8 * G, "same length: nothing to do");
    tap_ok(!extent_resize(c, h[4], 9 * G), "a block with one in use after it cannot grow");
    extent_free(c, h[5]);
    tap_ok(extent_resize(c, h[4], 20 * G) && len_of(h[4]) == 20 * G,
           "a block grows into the free run after it");
    tap_ok(extent_resize(c, h[4], 10 * G + 1) && len_of(h[4]) == 11 * G,
           "and shrinks where it stands");
    uint8_t *y = extent_alloc(9 * G, 0, false);
    tap_ok(y == h[4] + 11 * G, "its tail went back as a free run (the next block is there)");
    extent_free(c, y);
    for (int i = 1; i < 5; i++)
        if (i != 2)
            extent_free(c, h[i]);
    tap_ok(ext_used() == 0, "in use back to 0");

    /* alignment, up to half a chunk */
    bool aligned = true;
    uint8_t *pad = extent_alloc(G, 0, false);
    for (size_t al = 8 * KIB; al <= CHUNK_SIZE / 2; al <<= 1) {
        uint8_t *p = extent_alloc(20 * KIB, al, false);
        aligned = aligned && p && (uintptr_t)p % al == 0 && len_of(p) == 5 * G;
        extent_free(chunk_of(p), p);
    }
    extent_free(c, pad);
    tap_ok(aligned, "aligned blocks from 8 KiB to 1 MiB alignment start on their boundary");

    /* zero on request, though the memory was written */
    uint8_t *w = extent_alloc(64 * KIB, 0, false);
    memset(w, 0xa5, 64 * KIB);
    extent_free(c, w);
    uint8_t *z = extent_alloc(64 * KIB, 0, true);
    bool zeroed = z == w;
    for (size_t i = 0; i < 64 * KIB && zeroed; i++)
        zeroed = z[i] == 0;
    tap_ok(zeroed, "a block asked zero is zero, written memory reused");
    extent_free(c, z);

    /* the free runs wait resident for purge_delay, then go back to the kernel */
    uint8_t *r = extent_alloc(256 * KIB, 0, false);
    uint8_t *keep = extent_alloc(G, 0, false); /* the chunk stays in use */
    memset(r, 1, 256 * KIB);
    extent_free(c, r);
    uint32_t next = 0, now = now_ms();
    size_t purged = extents_purge(now, false, &next);
    tap_ok(purged == 0 && resident(r, 256 * KIB) == 256 * KIB && next != 0,
           "a free run stays resident before purge_delay (next look due at +%d ms)",
           (int)(next - now));
    tap_ok(waiting() >= 256 * KIB, "and counts as waiting (%llu bytes)",
           (unsigned long long)waiting());
    purged = extents_purge(now + 1001, false, &next);
    tap_ok(purged >= 256 * KIB && resident(r, 256 * KIB) == 0,
           "after purge_delay it is given back: %zu bytes purged, none resident", purged);
    tap_ok(waiting() == 0, "nothing waits any more");
    uint8_t *r2 = extent_alloc(256 * KIB, 0, true);
    tap_ok(r2 == r && r2[0] == 0 && r2[256 * KIB - 1] == 0,
           "the purged run is reused, zero without a memset");
    extent_free(c, r2);

    /* A merged run waits as long as its largest pending part: a small block freed next to a
     * big run freed long ago does not restart the big run's wait, and a big block freed
     * now is not purged early for a small old neighbour. */
    uint8_t *hole = extent_alloc(256 * KIB, 0, false); /* where r was: the next go after keep */
    for (int big_first = 1; big_first >= 0; big_first--) {
        uint8_t *wide = extent_alloc(512 * KIB, 0, false);
        uint8_t *small = extent_alloc(G, 0, false);
        uint8_t *guard = extent_alloc(G, 0, false); /* small's other side stays in use */
        memset(wide, 3, 512 * KIB);
        memset(small, 3, G);
        uint32_t t0 = now_ms();
        extent_free(c, big_first ? wide : small);
        struct timespec ts = {0, 200 * 1000000L}; /* past the coarse clock's tick */
        nanosleep(&ts, NULL);
        extent_free(c, big_first ? small : wide);
        extents_purge(t0 + 1000 + 50, false, &next);
        size_t res = resident(wide, 512 * KIB) + resident(small, G);
        if (big_first)
            tap_ok(small == wide + 512 * KIB && res == 0,
                   "a small block freed 200 ms after its big neighbour: the run is purged on "
                   "the big one's time (%zu bytes resident)",
                   res);
        else
            tap_ok(small == wide + 512 * KIB && res == 512 * KIB + G,
                   "a big block freed 200 ms after its small neighbour: the run waits for "
                   "the big one (%zu bytes resident)",
                   res);
        extents_purge(now_ms() + 1001, false, &next);
        extent_free(c, guard);
    }
    extent_free(c, hole);
    extent_free(c, keep);

    /* three chunks' worth, all freed: kept while resident, then all but the spare go back */
    uint64_t committed0 = atomic_load(&stat_committed);
    uint8_t *m[6];
    for (int i = 0; i < 6; i++) {
        m[i] = extent_alloc(SC_MAX_SIZE, 0, false);
        memset(m[i], 2, SC_MAX_SIZE);
    }
    uint64_t committed1 = atomic_load(&stat_committed);
    for (int i = 0; i < 6; i++)
        extent_free(chunk_of(m[i]), m[i]);
    uint64_t committed2 = atomic_load(&stat_committed);
    tap_ok(committed1 - committed0 == 2 * CHUNK_SIZE && committed2 == committed1 &&
               resident(m[0], SC_MAX_SIZE) == SC_MAX_SIZE,
           "6 MiB took two more chunks, which stay extents while resident "
           "(committed %llu -> %llu -> %llu KiB)",
           (unsigned long long)committed0 >> 10, (unsigned long long)committed1 >> 10,
           (unsigned long long)committed2 >> 10);
    uint8_t *again = extent_alloc(SC_MAX_SIZE, 0, false);
    tap_ok(atomic_load(&stat_committed) == committed2 &&
               resident(again, SC_MAX_SIZE) == SC_MAX_SIZE,
           "a block after them is carved from their resident runs, no chunk committed");
    extent_free(chunk_of(again), again);
    purged = extents_purge(now_ms() + 1001, false, &next);
    uint64_t committed3 = atomic_load(&stat_committed);
    tap_ok(committed3 == committed0 && purged >= 2 * CHUNK_SIZE,
           "purged after purge_delay, the empty chunks went back to the arena, the spare stays "
           "(%zu KiB purged, committed %llu KiB)",
           purged >> 10, (unsigned long long)committed3 >> 10);

    /* the same kept chunks, wanted by a heap or a large block: back to the arena at once */
    for (int i = 0; i < 6; i++) {
        m[i] = extent_alloc(SC_MAX_SIZE, 0, false);
        memset(m[i], 3, SC_MAX_SIZE);
    }
    for (int i = 0; i < 6; i++)
        extent_free(chunk_of(m[i]), m[i]);
    uint64_t pending0 = atomic_load(&stat_purge_pending);
    int still[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        extents_release_empty();
        for (int i = 0; i < 6; i++)
            still[k] += chunk_of(m[i])->kind == CHUNK_EXTENT;
    }
    tap_ok(atomic_load(&stat_purge_pending) - pending0 == CHUNK_SIZE && still[0] == 4 &&
               still[1] == 4 && atomic_load(&stat_committed) == committed0 + CHUNK_SIZE,
           "released on demand: one chunk goes to the arena, resident (waiting there for "
           "purge_delay); the spare and one more stay extents, asked again too (%d, %d of 6 "
           "blocks' chunks still extents, %llu KiB pending in the arena)",
           still[0], still[1],
           (unsigned long long)(atomic_load(&stat_purge_pending) - pending0) >> 10);

    /* bad pointers */
    char msg[256];
    uint8_t *v = extent_alloc(16 * KIB, 0, false);
    uint8_t *guard = extent_alloc(16 * KIB, 0, false);
    int sig = child_dies(free_interior, v, msg, sizeof msg);
    tap_ok(sig == SIGABRT && strstr(msg, "free(): invalid pointer"),
           "free of an interior pointer aborts: %s", msg);
    sig = child_dies(realloc_interior, v, msg, sizeof msg);
    tap_ok(sig == SIGABRT && strstr(msg, "realloc(): invalid pointer"),
           "realloc of an interior pointer aborts: %s", msg);
    chunk_t *vc = chunk_of(v);
    extent_free(vc, v);
    sig = child_dies(free_it, v, msg, sizeof msg);
    tap_ok(sig == SIGABRT && strstr(msg, "double free"), "a second free aborts: %s", msg);
    tap_ok(extent_usable_size(vc, v, "malloc_usable_size(): invalid pointer") == 0,
           "malloc_usable_size of a freed block: 0, as glibc says");
    extent_free(chunk_of(guard), guard);

    /* random run with the invariants checked after every operation */
    unsigned in_place = 0;
    bool run_ok = random_run(200000, &in_place);
    tap_ok(run_ok && in_place > 1000,
           "200000 random allocations, frees and resizes: every block intact, none "
           "overlapping (%u resized in place)",
           in_place);
    uint64_t committed_run = atomic_load(&stat_committed);
    extents_purge(now_ms() + 1001, false, &next);
    tap_ok(ext_used() == 0 && atomic_load(&stat_committed) <= CHUNK_SIZE,
           "all freed and purged: nothing in use, only the spare chunk committed (%llu KiB, "
           "%llu KiB before the purge)",
           (unsigned long long)atomic_load(&stat_committed) >> 10,
           (unsigned long long)committed_run >> 10);

    /* A chunk the arena hands out resident has waited there since it was freed: the free
     * run left of it is due the rest of purge_delay after that, not a whole delay after the
     * extents took it (a small process's 2000-byte blocks came back at 535 ms, not 360, with
     * 300 ms). */
    arena_purge_chunks(true); /* the one freed below is the arena's only resident chunk */
    arena_t *fa;
    bool fz;
    uint8_t *fc = arena_alloc_chunks(1, CHUNK_SIZE, THP_USE_SMALL, CHUNK_SIZE, &fa, &fz);
    memset(fc, 0x33, CHUNK_SIZE);
    uint32_t freed = now_ms();
    arena_free_chunks(fa, fc, 1);
    usleep(300 * 1000);
    uint8_t *mb[4] = {NULL};
    int k = 0;
    while (k < 4 && (!k || chunk_of(mb[k - 1])->base != fc))
        mb[k++] = extent_alloc(1024 * KIB, 0, false);
    extents_purge(now_ms(), false, &next);
    tap_ok(chunk_of(mb[k - 1])->base == fc && next != 0 && (int32_t)(next - freed) <= 1000 + 20,
           "a chunk taken from the arena resident 300 ms after its free: the rest of it is due "
           "%d ms after the free (purge_delay 1000 ms)",
           (int)(next - freed));
    while (k > 0) {
        k--;
        extent_free(chunk_of(mb[k]), mb[k]);
    }
    /* Trim: with no purger thread (none here), a free that leaves 64 KiB or more of resident
     * run gives it back at once; one below that waits for purge_delay. Nothing else waits
     * (resident, another run would serve the loop below before the trimmed one). */
    extents_purge(now_ms(), true, &next);
    policy_in_force.trim_threshold = 64 * KIB;
    if (purger_thread_started())
        purger_thread_not_started(); /* asked for by the 6 MiB above; nothing runs it here */
    uint8_t *tl = extent_alloc(G, 0, false);
    uint8_t *t48 = extent_alloc(48 * KIB, 0, false);
    uint8_t *tr = extent_alloc(G, 0, false);
    uint8_t *t80 = extent_alloc(80 * KIB, 0, false);
    uint8_t *tg = extent_alloc(G, 0, false);
    tap_ok(t48 == tl + G && tr == t48 + 48 * KIB && t80 == tr + G && tg == t80 + 80 * KIB,
           "trim: five consecutive blocks, 48 and 80 KiB between guards");
    memset(t48, 5, 48 * KIB);
    memset(t80, 5, 80 * KIB);
    uint64_t dirty0 = waiting(), purged0 = atomic_load(&stat_purged);
    free_it(t48);
    tap_ok(resident(t48, 48 * KIB) == 48 * KIB && waiting() == dirty0 + 48 * KIB,
           "trim: a 48 KiB run waits for purge_delay, resident (%zu bytes)",
           resident(t48, 48 * KIB));
    free_it(t80);
    tap_ok(resident(t80, 80 * KIB) == 0 && atomic_load(&stat_purged) == purged0 + 80 * KIB &&
               waiting() == dirty0 + 48 * KIB,
           "trim: an 80 KiB run goes back at its free (%zu bytes resident, %llu purged)",
           resident(t80, 80 * KIB), (unsigned long long)(atomic_load(&stat_purged) - purged0));
    /* Taken again within purge_delay, a trimmed run cost page faults for nothing: past 1 MiB
     * of them (a granule each, 4 for the madvise) in one purge_delay, only runs twice as
     * long are trimmed. An 80 KiB loop: 24 a time, the 11th refault is one too many. */
    int trims = 0, loops = 0;
    uint32_t t0 = now_ms();
    for (; loops < 40; loops++) {
        uint8_t *p = extent_alloc(80 * KIB, 0, false);
        if (p != t80)
            break;
        memset(p, 6, 80 * KIB);
        free_it(p);
        trims += resident(p, 80 * KIB) == 0;
    }
    tap_ok(loops == 40 && trims == 10 && now_ms() - t0 < 1000,
           "trim: a loop that takes its 80 KiB again stops trimming after 10 refaults (%d "
           "trims in %d loops, %u ms)",
           trims, loops, now_ms() - t0);
    tap_ok(resident(t80, 80 * KIB) == 80 * KIB, "trim: and its run stays resident");
    /* A shrink (realloc in place) gives its tail back as a free does. The loop doubled the
     * threshold to 128 KiB: a 72 KiB tail waits, a 172 KiB one that joins it goes at once. */
    uint8_t *sb = extent_alloc(256 * KIB, 0, false), *sg = NULL, *holes[64];
    unsigned nholes = 0;
    while (nholes < 64 && (sg = extent_alloc(G, 0, false)) && sg != sb + 256 * KIB)
        holes[nholes++] = sg; /* the 1-granule holes first: best fit */
    tap_ok(sg == sb + 256 * KIB, "trim: a 256 KiB block with a guard after it (%p %p)", (void *)sb,
           (void *)sg);
    memset(sb, 7, 256 * KIB);
    uint64_t spurged = atomic_load(&stat_purged), sdirty = waiting();
    bool shrunk = extent_resize(chunk_of(sb), sb, 184 * KIB);
    tap_ok(shrunk && len_of(sb) == 184 * KIB && resident(sb + 184 * KIB, 72 * KIB) == 72 * KIB &&
               atomic_load(&stat_purged) == spurged && waiting() == sdirty + 72 * KIB,
           "trim: a block shrunk to 184 KiB keeps its 72 KiB tail resident, waiting (%zu bytes)",
           resident(sb + 184 * KIB, 72 * KIB));
    shrunk = extent_resize(chunk_of(sb), sb, 12 * KIB);
    tap_ok(shrunk && len_of(sb) == 12 * KIB && resident(sb + 12 * KIB, 244 * KIB) == 0 &&
               resident(sb, 12 * KIB) == 12 * KIB &&
               atomic_load(&stat_purged) == spurged + 244 * KIB && waiting() == sdirty,
           "trim: shrunk to 12 KiB, the 172 KiB tail and the 72 waiting go back at once "
           "(%zu bytes resident, %llu purged)",
           resident(sb + 12 * KIB, 244 * KIB),
           (unsigned long long)(atomic_load(&stat_purged) - spurged));
    /* With purge_delay 0 a shrunk block's tail goes back at once, as a freed block does. */
    policy_in_force.trim_threshold = 0;
    policy_in_force.purge_delay_ms = 0;
    memset(sb, 8, 12 * KIB);
    shrunk = extent_resize(chunk_of(sb), sb, 20 * KIB); /* grows into the purged run */
    memset(sb, 9, 20 * KIB);
    shrunk = shrunk && extent_resize(chunk_of(sb), sb, 12 * KIB);
    tap_ok(shrunk && resident(sb + 12 * KIB, 8 * KIB) == 0 && sb[12 * KIB - 1] == 9,
           "purge_delay 0: a shrunk block's tail goes back at once (%zu bytes resident)",
           resident(sb + 12 * KIB, 8 * KIB));
    policy_in_force.purge_delay_ms = 1000;
    free_it(sb);
    if (sg)
        free_it(sg);
    for (unsigned i = 0; i < nholes; i++)
        free_it(holes[i]);
    free_it(tl);
    free_it(tr);
    free_it(tg);
    policy_in_force.trim_threshold = 0;

    /* Reuse before touching fresh memory. Nothing waits; then a 4-granule block is freed
     * (resident) and a 2-granule hole purged: a 2-granule request takes the resident run,
     * though the purged hole fits exactly. */
    extents_purge(now_ms(), true, &next);
    uint8_t *q[5];
    for (int i = 0; i < 5; i++)
        q[i] = extent_alloc((i == 1 ? 4 : i == 3 ? 2 : 1) * G, 0, false);
    tap_ok(q[1] == q[0] + G && q[2] == q[1] + 4 * G && q[3] == q[2] + G && q[4] == q[3] + 2 * G,
           "reuse: guard, 4 granules, guard, 2 granules, guard");
    memset(q[1], 4, 4 * G);
    memset(q[3], 4, 2 * G);
    free_it(q[3]);
    extents_purge(now_ms(), true, &next);
    free_it(q[1]);
    uint8_t *q2 = extent_alloc(2 * G, 0, false);
    tap_ok(q2 == q[1] && resident(q[3], 2 * G) == 0,
           "reuse: a 2-granule request takes the resident 4-granule run, not the purged hole "
           "that fits (%p, hole %p)",
           (void *)q2, (void *)q[3]);
    free_it(q2);
    for (int i = 0; i < 5; i += 2)
        free_it(q[i]);
    /* Where the resident granules lie: a purged run of 8 with a 2-granule block freed at its
     * end is one run, its end resident; a 2-granule request takes that end, and nothing is
     * left counted as waiting. */
    extents_purge(now_ms(), true, &next);
    uint8_t *u[4];
    for (int i = 0; i < 4; i++)
        u[i] = extent_alloc((i == 1 ? 8 : i == 2 ? 2 : 1) * G, 0, false);
    tap_ok(u[1] == u[0] + G && u[2] == u[1] + 8 * G && u[3] == u[2] + 2 * G,
           "placed: guard, 8 granules, 2 granules, guard");
    memset(u[1], 5, 8 * G);
    memset(u[2], 5, 2 * G);
    free_it(u[1]);
    extents_purge(now_ms(), true, &next);
    uint64_t wait0 = waiting();
    free_it(u[2]);
    tap_ok(waiting() == wait0 + 2 * G,
           "placed: the freed block joins the purged run, 2 granules waiting");
    uint8_t *u2 = extent_alloc(2 * G, 0, false);
    tap_ok(u2 == u[2] && resident(u[1], 8 * G) == 0 && waiting() == wait0,
           "placed: a 2-granule request takes the run's resident end (%p, run at %p), none of "
           "the purged part, and nothing waits (%llu bytes)",
           (void *)u2, (void *)u[1], (unsigned long long)(waiting() - wait0));
    free_it(u2);
    free_it(u[0]);
    free_it(u[3]);

    /* Trim by length, as glibc trims its heap's top: with no purger thread, a block below the
     * threshold freed next to a long free run (the untouched rest of its chunk) goes back at
     * once; the same block freed into a short hole waits. */
    policy_in_force.trim_threshold = 64 * KIB;
    if (purger_thread_started())
        purger_thread_not_started();
    extents_purge(now_ms(), true, &next);
    uint8_t *v1 = extent_alloc(G, 0, false);
    uint8_t *v2 = extent_alloc(2 * G, 0, false);
    uint8_t *v3 = extent_alloc(G, 0, false);
    uint8_t *v4 = extent_alloc(2 * G, 0, false);
    const struct extent_map *vm = map_of(chunk_of(v4));
    unsigned vg = (unsigned)((size_t)(v4 - chunk_of(v4)->base) / G) + 2;
    tap_ok(v2 == v1 + G && v3 == v2 + 2 * G && v4 == v3 + G && (tag_get(vm, vg) & TAG_FREE) &&
               (tag_get(vm, vg) & TAG_LEN) >= 64 * KIB / G,
           "trim by length: guard, 2 granules, guard, 2 granules, then the chunk's free rest "
           "(%u granules)",
           tag_get(vm, vg) & TAG_LEN);
    memset(v2, 6, 2 * G);
    memset(v4, 6, 2 * G);
    uint64_t vpurged = atomic_load(&stat_purged), vdirty = waiting();
    free_it(v2);
    tap_ok(resident(v2, 2 * G) == 2 * G && waiting() == vdirty + 2 * G,
           "trim by length: 8 KiB freed into a hole of its own waits, resident (%zu bytes)",
           resident(v2, 2 * G));
    free_it(v4);
    tap_ok(resident(v4, 2 * G) == 0 && atomic_load(&stat_purged) == vpurged + 2 * G &&
               waiting() == vdirty + 2 * G,
           "trim by length: 8 KiB freed next to the chunk's free rest goes back at once (%zu "
           "bytes resident, %llu purged)",
           resident(v4, 2 * G), (unsigned long long)(atomic_load(&stat_purged) - vpurged));
    /* A storm (issue 36: a FIFO of 8 KiB nodes drained one by one made a madvise a node):
     * past trim_burst trims a purge_delay a run of trim length waits, and once 1 MiB more
     * waits one batch gives back every such run, a madvise each. 200 blocks of 8 KiB in a
     * row freed from the front, burst 2: the loop above doubled the trim's length to 128
     * KiB, so the 16th and 17th frees trim at once, the 18th starts the storm, and 64
     * frees later 512 KiB more waits: a batch, and another 64 frees later. */
    extents_purge(now_ms(), true, &next);
    policy_in_force.trim_burst = 2;
    policy_in_force.purge_delay_ms = 100;
    usleep(120 * 1000); /* a purge_delay since the last trim: a new window */
    enum { NS = 200, NA = 1024 };
    static uint8_t *sa[NA];
    int na = 0, row = 0;
    while (na < NA && row < NS) { /* the holes left by the tests above fill first */
        sa[na] = extent_alloc(2 * G, 0, false);
        memset(sa[na], 7, 2 * G);
        row = na && sa[na] == sa[na - 1] + 2 * G ? row + 1 : 1;
        na++;
    }
    uint8_t **sn = sa + na - NS;
    tap_ok(row == NS, "storm: 200 blocks of 8 KiB in a row (after %d others)", na - NS);
    uint64_t spurged0 = atomic_load(&stat_purged);
    for (int i = 0; i < 80; i++)
        free_it(sn[i]);
    tap_ok(resident(sn[0], 17 * 8 * KIB) == 0 && resident(sn[17], 63 * 8 * KIB) == 63 * 8 * KIB,
           "storm: 80 freed, the first 17 trimmed at once, past the burst of 2 trims the run "
           "waits (%zu of %zu bytes resident)",
           resident(sn[17], 63 * 8 * KIB), 63 * 8 * KIB);
    for (int i = 80; i < 180; i++)
        free_it(sn[i]);
    tap_ok(resident(sn[0], 144 * 8 * KIB) == 0 && resident(sn[147], 33 * 8 * KIB) == 33 * 8 * KIB &&
               atomic_load(&stat_purged) - spurged0 >= 128 * 8 * KIB,
           "storm: each time 512 KiB more waits, a batch gives the run back; what is freed after "
           "waits (%zu bytes resident of the first 144, %llu purged)",
           resident(sn[0], 144 * 8 * KIB),
           (unsigned long long)(atomic_load(&stat_purged) - spurged0));
    for (int i = 180; i < NS; i++)
        free_it(sn[i]);
    for (int i = 0; i < na - NS; i++)
        free_it(sa[i]);
    policy_in_force.purge_delay_ms = 1000;
    policy_in_force.trim_burst = 1000;
    policy_in_force.trim_threshold = 0;
    test_alloc_resident();
    test_dirty_lag();
    test_shards();
    return tap_done();
}
