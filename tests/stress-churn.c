/* stress-churn: thread churn and address-space pressure, for tests/stress-churn.sh.
 *
 *   stress-churn [-g] cycles N CHAINS   N thread create/exit cycles in CHAINS parallel
 *                                      chains; each thread checks and frees the blocks
 *                                      its predecessor left, allocates new ones (16 B to
 *                                      3 MiB) and hands them on
 *   stress-churn [-g] mapcount          fills the process's map table (vm.max_map_count)
 *                                      with its own mappings, then allocates in every size
 *                                      range from 4 threads: NULL + ENOMEM or a usable
 *                                      block, never a crash; after the filler is gone,
 *                                      every allocation succeeds again
 *   stress-churn [-g] late N            N threads (4 at a time) allocate in glibc's last
 *                                      TLS-destructor pass, after their heap's own exit
 *                                      destructor: small, aligned and medium blocks, some
 *                                      freed there, some handed to the main thread; the
 *                                      contents hold and (thpalloc) no heap or chunk is
 *                                      left behind per thread
 *
 *   stress-churn [-g] janitor N          N batches of 8 threads that allocate blocks of
 *                                      every small and medium class, free most and exit;
 *                                      the main thread frees what they left: afterwards
 *                                      (thpalloc) the main thread holds no more than a
 *                                      few chunks, so the next batch reuses the rest
 *   stress-churn [-g] orphans           8 threads allocate 64 MiB of small blocks, keep
 *                                      one in 256 and exit; nobody adopts their chunks:
 *                                      (thpalloc) within a few purge_delays the purger
 *                                      gives back their free memory (anonymous RSS read
 *                                      from the kernel) while the kept blocks hold
 *
 * Output: "ok - ..." / "not ok - ..." lines, "# ..." diagnostics, "end" when finished
 * (the relay() format of tests/api-taplib.sh). "thp-only - ..." lines hold only for
 * thpalloc (its statistics, found with dlsym); -g (glibc) leaves them out. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "relay-report.h"
#include "thpalloc.h"

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

static int glibc_mode;
typedef int (*get_stats_fn)(struct thpalloc_stats *, size_t);
typedef int (*active_fn)(void);
static get_stats_fn p_get_stats;

/* A check only thpalloc can pass; not made at all under glibc (-g). */
static void thp_report(int cond, const char *what)
{
    if (!glibc_mode) {
        fputs("thp-only - ", stdout);
        report(cond, "%s", what);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    /* head, tail and one byte every 4 KiB: enough to see overlap, cheap for 3 MiB */
    for (size_t i = 0; i < n; i += (i < 64 || n - i <= 64) ? 1 : 4096)
        p[i] = (unsigned char)(seed + i * 31);
    if (n)
        p[n - 1] = (unsigned char)(seed + (n - 1) * 31);
}

static int verify(const unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += (i < 64 || n - i <= 64) ? 1 : 4096)
        if (p[i] != (unsigned char)(seed + i * 31))
            return 0;
    return !n || p[n - 1] == (unsigned char)(seed + (n - 1) * 31);
}

static int get_stats(struct thpalloc_stats *st)
{
    memset(st, 0, sizeof *st);
    return p_get_stats && p_get_stats(st, sizeof *st) == 0;
}

/* ---- cycles -------------------------------------------------------------------- */

#define HAND 4 /* blocks handed from each thread to the next */

struct baton {
    void *p[HAND];
    size_t n[HAND];
    uint64_t seed[HAND];
    uint64_t rng;
    long bad, handed;
};

static size_t pick_size(uint64_t *r)
{
    uint64_t x = rnd(r);
    switch (x % 8) {
    case 0:
        return 3 * MiB / 2 + (x >> 8) % (3 * MiB / 2); /* large */
    case 1:
        return 64 * KiB + (x >> 8) % (900 * KiB); /* medium / big */
    case 2:
    case 3:
        return 1024 + (x >> 8) % (60 * KiB);
    default:
        return 1 + (x >> 8) % 1024; /* small */
    }
}

static void *cycle_thread(void *arg)
{
    struct baton *b = arg;
    for (int i = 0; i < HAND; i++) {
        if (b->p[i]) {
            if (!verify(b->p[i], b->n[i], b->seed[i]))
                b->bad++;
            free(b->p[i]);
            b->handed++;
        }
        /* some churn of our own, freed before we exit */
        void *tmp[8];
        for (int k = 0; k < 8; k++)
            tmp[k] = malloc(16 + rnd(&b->rng) % 2000);
        for (int k = 0; k < 8; k++)
            free(tmp[k]);
        b->n[i] = pick_size(&b->rng);
        b->seed[i] = rnd(&b->rng);
        b->p[i] = malloc(b->n[i]);
        if (b->p[i])
            fill(b->p[i], b->n[i], b->seed[i]);
    }
    return NULL;
}

struct chain {
    long cycles;
    struct baton b;
    long create_fail;
};

static void *chain_main(void *arg)
{
    struct chain *c = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * KiB);
    for (long i = 0; i < c->cycles; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, cycle_thread, &c->b) != 0) {
            c->create_fail++;
            continue;
        }
        pthread_join(t, NULL);
    }
    pthread_attr_destroy(&attr);
    for (int i = 0; i < HAND; i++) {
        if (c->b.p[i] && !verify(c->b.p[i], c->b.n[i], c->b.seed[i]))
            c->b.bad++;
        free(c->b.p[i]);
        c->b.p[i] = NULL;
    }
    return NULL;
}

static void mode_cycles(long n, int chains)
{
    struct thpalloc_stats st0, st1;
    int have = get_stats(&st0);
    struct chain *c = calloc((size_t)chains, sizeof *c);
    pthread_t *t = calloc((size_t)chains, sizeof *t);
    if (!c || !t) {
        report(0, "cycles: setup");
        return;
    }
    double t0 = now_s();
    for (int i = 0; i < chains; i++) {
        c[i].cycles = n / chains;
        c[i].b.rng = 0x1234 + (uint64_t)i;
        pthread_create(&t[i], NULL, chain_main, &c[i]);
    }
    long bad = 0, handed = 0, cfail = 0;
    for (int i = 0; i < chains; i++) {
        pthread_join(t[i], NULL);
        bad += c[i].b.bad;
        handed += c[i].b.handed;
        cfail += c[i].create_fail;
    }
    double secs = now_s() - t0;
    printf("# cycles: %ld threads in %d chains, %.2f s; %ld blocks handed on, %ld bad, "
           "%ld pthread_create failures\n",
           n, chains, secs, handed, bad, cfail);
    report(cfail == 0, "cycles: every pthread_create succeeded");
    report(bad == 0, "cycles: every handed-on block kept its contents");
    report(handed >= (n - chains) * HAND * 9 / 10, "cycles: blocks were handed between threads");
    free(c);
    free(t);
    if (!glibc_mode) {
        int ok = have && get_stats(&st1);
        printf("# cycles: in_use %llu -> %llu bytes, heaps %llu -> %llu\n",
               (unsigned long long)st0.in_use, (unsigned long long)st1.in_use,
               (unsigned long long)st0.heaps, (unsigned long long)st1.heaps);
        thp_report(ok && st1.in_use <= st0.in_use + 64 * KiB,
                   "cycles: in_use back to its start value (nothing leaked)");
        thp_report(ok && st1.heaps <= (uint64_t)chains * 4 + 8,
                   "cycles: thread heaps recycled (heaps bounded by the live threads)");
    }
}

/* ---- late ---------------------------------------------------------------------- */

/* A key whose destructor re-arms itself until glibc's last pass (PTHREAD_DESTRUCTOR_
 * ITERATIONS = 4), then allocates: by then the thread's heap is long abandoned. */
#define LATE_PASSES 4
static pthread_key_t late_key;
static pthread_mutex_t late_mu = PTHREAD_MUTEX_INITIALIZER;
struct late_block {
    struct late_block *next;
    size_t n;
    uint64_t seed;
};
static struct late_block *late_list;
static long late_bad, late_done;

static void late_dtor(void *arg)
{
    uintptr_t pass = (uintptr_t)arg;
    if (pass < LATE_PASSES) {
        pthread_setspecific(late_key, (void *)(pass + 1));
        return;
    }
    uint64_t seed = (uint64_t)(uintptr_t)&pass;
    static const size_t sizes[] = {24, 100, 700, 5000, 20000};
    long bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t len = sizes[i], total = sizeof(struct late_block) + len;
        /* 124 bytes aligned to 64 (aligned_alloc(64, 128)): from a class whose size is no
         * multiple of 64, so the block is aligned inside it and its page marked */
        struct late_block *b =
            i == 1 ? aligned_alloc(64, (total + 63) & ~(size_t)63) : malloc(total);
        if (!b || (i == 1 && ((uintptr_t)b & 63))) {
            bad++;
            continue;
        }
        b->n = len;
        b->seed = seed + i;
        fill((unsigned char *)(b + 1), len, b->seed);
        if (i % 2) {
            pthread_mutex_lock(&late_mu);
            b->next = late_list;
            late_list = b;
            pthread_mutex_unlock(&late_mu);
        } else {
            bad += !verify((unsigned char *)(b + 1), len, b->seed);
            free(b);
        }
    }
    pthread_mutex_lock(&late_mu);
    late_bad += bad;
    late_done++;
    pthread_mutex_unlock(&late_mu);
}

static void *late_thread(void *arg)
{
    (void)arg;
    void *p = malloc(200); /* the thread's own heap, abandoned by its exit destructor */
    free(p);
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}

static void mode_late(long n)
{
    struct thpalloc_stats st0, st1;
    pthread_key_create(&late_key, late_dtor);
    int have = get_stats(&st0);
    long cfail = 0, handed = 0;
    for (long i = 0; i < n; i += 4) {
        pthread_t t[4];
        int made[4];
        for (int k = 0; k < 4; k++)
            cfail += !(made[k] = pthread_create(&t[k], NULL, late_thread, NULL) == 0);
        for (int k = 0; k < 4; k++)
            if (made[k])
                pthread_join(t[k], NULL);
        /* The main thread checks and frees what the batch handed over: frees into the
         * shared late heap from another thread, which later late allocations reuse. */
        while (late_list) {
            struct late_block *b = late_list;
            late_list = b->next;
            late_bad += !verify((unsigned char *)(b + 1), b->n, b->seed);
            free(b);
            handed++;
        }
    }
    printf("# late: %ld threads, %ld last-pass destructors ran, %ld blocks handed to main, "
           "%ld bad\n",
           n, late_done, handed, late_bad);
    report(cfail == 0 && late_done == (n + 3) / 4 * 4,
           "late: every thread ran its last-pass destructor");
    report(late_bad == 0, "late: blocks allocated in the last pass keep their contents");
    if (!glibc_mode) {
        int ok = have && get_stats(&st1);
        printf("# late: heaps %llu -> %llu, committed %llu -> %llu MiB, in_use %llu -> %llu\n",
               (unsigned long long)st0.heaps, (unsigned long long)st1.heaps,
               (unsigned long long)(st0.committed / MiB), (unsigned long long)(st1.committed / MiB),
               (unsigned long long)st0.in_use, (unsigned long long)st1.in_use);
        thp_report(ok && st1.heaps <= st0.heaps + 1,
                   "late: no heap left behind per thread (one shared for late allocations)");
        thp_report(ok && st1.committed <= st0.committed + 16 * MiB,
                   "late: committed memory does not grow with the threads");
        /* what stays counted: the last frees into the shared heap, not yet collected by a
         * late allocation (about 110 KiB whatever the number of threads) */
        thp_report(ok && st1.in_use <= st0.in_use + 256 * KiB,
                   "late: in_use within 256 KiB of its start value (no per-thread growth)");
    }
}

/* ---- mapcount ------------------------------------------------------------------- */

static long read_max_map_count(void)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static long count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int ch;
    if (!f)
        return -1;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static const size_t mc_sizes[] = {16, 200, 4000, 30000, 200000, 900000, 3 * MiB, 40 * MiB};
#define MC_NSIZES (sizeof mc_sizes / sizeof *mc_sizes)
#define MC_THREADS 4

struct mc_result {
    long got[MC_NSIZES], null_enomem[MC_NSIZES], null_other[MC_NSIZES], bad[MC_NSIZES];
};

static pthread_barrier_t mc_start, mc_done;
static struct mc_result mc_res[MC_THREADS];

static void mc_round(struct mc_result *r, uint64_t seed)
{
    for (size_t s = 0; s < MC_NSIZES; s++) {
        void *kept[64];
        int nk = 0;
        for (int k = 0; k < 64; k++) {
            errno = 0;
            unsigned char *p;
            switch (k % 4) {
            case 0:
                p = malloc(mc_sizes[s]);
                break;
            case 1:
                p = calloc(1, mc_sizes[s]);
                break;
            case 2:
                p = aligned_alloc(4096, mc_sizes[s]);
                break;
            default:
                p = realloc(NULL, mc_sizes[s]);
                break;
            }
            if (!p) {
                if (errno == ENOMEM)
                    r->null_enomem[s]++;
                else
                    r->null_other[s]++;
                continue;
            }
            r->got[s]++;
            fill(p, mc_sizes[s], seed + (uint64_t)k);
            if (!verify(p, mc_sizes[s], seed + (uint64_t)k))
                r->bad[s]++;
            if (mc_sizes[s] <= 4 * MiB)
                kept[nk++] = p;
            else
                free(p);
        }
        for (int k = 0; k < nk; k++)
            free(kept[k]);
    }
}

static void *mc_thread(void *arg)
{
    struct mc_result *r = arg;
    pthread_barrier_wait(&mc_start); /* the map table is full now */
    mc_round(r, (uint64_t)(uintptr_t)arg);
    pthread_barrier_wait(&mc_done);
    return NULL;
}

static void mode_mapcount(void)
{
    long limit = read_max_map_count();
    printf("# mapcount: vm.max_map_count = %ld, %ld mappings at start\n", limit, count_maps());
    if (limit <= 0 || limit > 1000000) {
        printf("# mapcount: limit unknown or too large to fill; nothing to test\n");
        report(1, "mapcount: skipped (vm.max_map_count not fillable)");
        return;
    }
    pthread_t t[MC_THREADS];
    pthread_barrier_init(&mc_start, NULL, MC_THREADS + 1);
    pthread_barrier_init(&mc_done, NULL, MC_THREADS + 1);
    for (int i = 0; i < MC_THREADS; i++)
        pthread_create(&t[i], NULL, mc_thread, &mc_res[i]);
    /* One PROT_NONE region, then every other page made readable: each change splits a
     * mapping, until the kernel refuses with ENOMEM: the map table is full. */
    size_t pages = (size_t)limit * 2 + 16, pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *region =
        mmap(NULL, pages * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) {
        report(0, "mapcount: reserve the filler region");
        return;
    }
    size_t i;
    int err = 0;
    for (i = 1; i < pages; i += 2)
        if (mprotect(region + i * pg, pg, PROT_READ) != 0) {
            err = errno;
            break;
        }
    long maps_full = count_maps();
    printf("# mapcount: filler stopped after %zu splits (errno %d), %ld mappings\n", i / 2, err,
           maps_full);
    report(err == ENOMEM, "mapcount: the map table was filled (mprotect said ENOMEM)");
    pthread_barrier_wait(&mc_start);
    struct mc_result mine;
    memset(&mine, 0, sizeof mine);
    mc_round(&mine, 99);
    pthread_barrier_wait(&mc_done);
    for (int k = 0; k < MC_THREADS; k++)
        pthread_join(t[k], NULL);
    long got = 0, enomem = 0, other = 0, bad = 0;
    for (size_t s = 0; s < MC_NSIZES; s++) {
        long g = mine.got[s], e = mine.null_enomem[s], o = mine.null_other[s], b = mine.bad[s];
        for (int k = 0; k < MC_THREADS; k++) {
            g += mc_res[k].got[s];
            e += mc_res[k].null_enomem[s];
            o += mc_res[k].null_other[s];
            b += mc_res[k].bad[s];
        }
        printf("# mapcount: size %zu: %ld blocks, %ld NULL+ENOMEM, %ld NULL+other errno, %ld bad\n",
               mc_sizes[s], g, e, o, b);
        got += g, enomem += e, other += o, bad += b;
    }
    report(other == 0, "mapcount: every failure under map-table pressure was NULL + ENOMEM");
    report(bad == 0, "mapcount: every block handed out under pressure was usable");
    /* Free the filler: the table has room again, and so has the allocator. */
    munmap(region, pages * pg);
    struct mc_result after;
    memset(&after, 0, sizeof after);
    mc_round(&after, 7);
    long fails = 0, got_after = 0;
    for (size_t s = 0; s < MC_NSIZES; s++)
        fails += after.null_enomem[s] + after.null_other[s] + after.bad[s],
            got_after += after.got[s];
    printf("# mapcount: after release: %ld blocks, %ld failures; %ld mappings\n", got_after, fails,
           count_maps());
    report(fails == 0, "mapcount: after the filler is unmapped every allocation succeeds");
}

/* ---- janitor: one thread frees what exited threads left ---------------------------- */

#define JAN_THREADS 8
#define JAN_BLOCKS 600
static void *jan_left[JAN_THREADS][JAN_BLOCKS];

static void *jan_worker(void *arg)
{
    void **left = arg;
    /* Every class from 16 B to 48 KiB, a few blocks each; a third is left to the main thread. */
    for (int i = 0; i < JAN_BLOCKS; i++) {
        size_t n = (size_t)16 << (i % 12);
        n += (size_t)(i * 37) % n;
        unsigned char *p = malloc(n);
        if (p)
            p[0] = p[n - 1] = (unsigned char)i;
        if (i % 3 == 0)
            left[i] = p;
        else
            free(p);
    }
    return NULL;
}

static void mode_janitor(long batches)
{
    struct thpalloc_stats st;
    for (long b = 0; b < batches; b++) {
        pthread_t t[JAN_THREADS];
        memset(jan_left, 0, sizeof jan_left);
        for (int k = 0; k < JAN_THREADS; k++)
            pthread_create(&t[k], NULL, jan_worker, jan_left[k]);
        for (int k = 0; k < JAN_THREADS; k++)
            pthread_join(t[k], NULL);
        for (int k = 0; k < JAN_THREADS; k++)
            for (int i = 0; i < JAN_BLOCKS; i++)
                free(jan_left[k][i]);
    }
    if (glibc_mode) {
        report(1, "janitor: batches of threads whose leftovers the main thread frees");
        return;
    }
    /* Everything is free now: give back what waits, then what is still committed is what
     * the heaps hold (the main thread's, and the exited threads' heaps abandoned nothing). */
    size_t (*purge)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    if (purge)
        purge();
    int ok = get_stats(&st);
    uint64_t most = ok ? st.committed : 0;
    char what[200];
    snprintf(what, sizeof what,
             "janitor: after %ld batches, everything freed and purged, the heaps hold %llu MiB "
             "of chunks (at most 8: the main thread's own, not the chunks it freed into)",
             batches, (unsigned long long)(most >> 20));
    thp_report(ok && most <= 8 * MiB, what);
}

/* ---- orphans: exited threads' chunks that nobody adopts ----------------------------- */

#define ORPH_THREADS 8
#define ORPH_BLOCKS 32768 /* of 16..496 bytes: 8 MiB a thread */
static unsigned char *orph_kept[ORPH_THREADS][ORPH_BLOCKS / 256];

static size_t orph_size(int i)
{
    return 16 + (size_t)(i * 7919) % 31 * 16;
}

/* No worker exits before every one has allocated: one that did would leave its chunks for
 * the next to adopt (on a loaded machine the workers run one after another), and the check
 * is of chunks nobody adopts. */
static pthread_barrier_t orph_barrier;

static void *orph_worker(void *arg)
{
    unsigned char **kept = arg;
    unsigned char **all = mmap(NULL, ORPH_BLOCKS * sizeof *all, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (all == MAP_FAILED) {
        pthread_barrier_wait(&orph_barrier);
        return NULL;
    }
    for (int i = 0; i < ORPH_BLOCKS; i++) {
        all[i] = malloc(orph_size(i));
        if (all[i])
            memset(all[i], (unsigned char)i, orph_size(i));
    }
    for (int i = 0; i < ORPH_BLOCKS; i++) {
        if (i % 256 == 0)
            kept[i / 256] = all[i];
        else
            free(all[i]);
    }
    munmap(all, ORPH_BLOCKS * sizeof *all);
    pthread_barrier_wait(&orph_barrier);
    return NULL;
}

/* Anonymous resident bytes of the process (RssAnon), from the kernel. */
static size_t rss_anon(void)
{
    char line[256];
    size_t kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb << 10;
}

static void mode_orphans(void)
{
    pthread_t t[ORPH_THREADS];
    pthread_barrier_init(&orph_barrier, NULL, ORPH_THREADS);
    size_t before = rss_anon();
    for (int k = 0; k < ORPH_THREADS; k++)
        pthread_create(&t[k], NULL, orph_worker, orph_kept[k]);
    for (int k = 0; k < ORPH_THREADS; k++)
        pthread_join(t[k], NULL);
    size_t after_exit = rss_anon();
    /* One block off the fast paths, where the purger is started (a thread's exit cannot
     * start it: pthread_create allocates); after that nothing is allocated here and only the
     * purger can give the memory back. Wait up to 20 purge delays (THPALLOC_PURGE_DELAY=100ms
     * in the .sh) for it. */
    void *volatile off_fast = malloc(100 << 10); /* volatile: the pair is not elided */
    free(off_fast);
    size_t now = after_exit;
    for (int i = 0; i < 40 && !glibc_mode; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        now = rss_anon();
        if (now < before + (size_t)8 * MiB)
            break;
    }
    int intact = 1;
    for (int k = 0; k < ORPH_THREADS; k++)
        for (int i = 0; i < ORPH_BLOCKS / 256; i++) {
            unsigned char *p = orph_kept[k][i];
            size_t n = orph_size(i * 256);
            unsigned char tag = (unsigned char)(i * 256);
            intact &= p && p[0] == tag && p[n - 1] == tag;
        }
    char what[400];
    snprintf(what, sizeof what,
             "orphans: the blocks kept from exited threads hold their contents (%d threads, "
             "%d blocks each)",
             ORPH_THREADS, ORPH_BLOCKS / 256);
    report(intact, "%s", what);
    if (glibc_mode)
        return;
    snprintf(what, sizeof what,
             "orphans: nobody adopted the exited threads' chunks, the purger gave their free "
             "memory back: anonymous RSS %zu KiB at start, %zu KiB after the threads exited, "
             "%zu KiB after waiting (bound: start + 8 MiB: the OS pages of the kept blocks, "
             "and the exited threads' stacks with their TLS, which glibc keeps for reuse)",
             before >> 10, after_exit >> 10, now >> 10);
    thp_report(after_exit > before + (size_t)32 * MiB && now < before + (size_t)8 * MiB, what);
    for (int k = 0; k < ORPH_THREADS; k++)
        for (int i = 0; i < ORPH_BLOCKS / 256; i++)
            free(orph_kept[k][i]);
}

int main(int argc, char **argv)
{
    int a = 1;
    if (a < argc && !strcmp(argv[a], "-g"))
        glibc_mode = 1, a++;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!glibc_mode) {
        active_fn act = (active_fn)dlsym(RTLD_DEFAULT, "thpalloc_active");
        p_get_stats = (get_stats_fn)dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
        thp_report(act && act() == 1 && p_get_stats, "thpalloc is the malloc in charge");
    }
    if (a < argc && !strcmp(argv[a], "cycles") && a + 2 < argc)
        mode_cycles(atol(argv[a + 1]), atoi(argv[a + 2]));
    else if (a < argc && !strcmp(argv[a], "mapcount"))
        mode_mapcount();
    else if (a < argc && !strcmp(argv[a], "late") && a + 1 < argc)
        mode_late(atol(argv[a + 1]));
    else if (a < argc && !strcmp(argv[a], "janitor") && a + 1 < argc)
        mode_janitor(atol(argv[a + 1]));
    else if (a < argc && !strcmp(argv[a], "orphans"))
        mode_orphans();
    else {
        fprintf(stderr, "usage: stress-churn [-g] cycles N CHAINS | mapcount | late N | janitor N "
                        "| orphans\n");
        return 2;
    }
    printf("end\n");
    return 0;
}
