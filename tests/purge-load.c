/* purge-load: memory returned under changing load, for tests/purge-load.sh.
 *
 *   purge-load [-g] [-p PHASES] [-i IDLE_MS]
 *
 * Four worker threads live for the whole run. Each phase is busy, then idle:
 *   busy: every thread frees its long-lived blocks of the previous phase, allocates its
 *         share of this phase's long-lived set (mixed sizes, 16 B .. 6 MiB), then churns
 *         ~50 MiB of short-lived blocks (mixed sizes, every byte written, freed in batches
 *         of ~4 MiB): ~200 MiB allocated per phase in all;
 *   idle: no thread calls the allocator. The main thread reads AnonHugePages and
 *         Anonymous from /proc/self/smaps_rollup (open/read into a stack buffer, no malloc)
 *         every 50 ms for IDLE_MS.
 * The long-lived set changes size from phase to phase (60, 10, 120, 0, 30 MiB, ...).
 * Per phase the program prints the live bytes (sum of malloc_usable_size), the anonymous
 * RSS above the start (before any phase), and when it first came within 10 % of the
 * live bytes (+ a fixed 4 MiB for the allocator's metadata, thread stacks and the one
 * partly used page per thread and size class, + the unused rest of the last huge page of
 * each live block of 2 MiB or more: the thp policy's own cost) and prints
 *   "ok - phase N: ..." or "not ok - phase N: ..." (thpalloc), "# ..." in -g (glibc) mode
 * and "end" (tests/relay-report.h, relayed by tests/api-taplib.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "relay-report.h"
#include "thpalloc.h"

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)
#define NT 4
#define MAXLIVE 40000

static int glibc_mode;
typedef int (*get_stats_fn)(struct thpalloc_stats *, size_t);
typedef size_t (*purge_fn)(void);
static get_stats_fn p_get_stats;
static purge_fn p_purge;
static int phases = 6;
static long idle_ms = 1500;
/* Blocks from thp_threshold up (set to this by tests/purge-load.sh) are huge pages
 * under the default thp mode, large: the last one of a block is resident whole. */
#define HUGE_MIN ((size_t)2 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
static const size_t live_target[] = {60 * MiB, 10 * MiB, 120 * MiB, 0, 30 * MiB, 5 * MiB};
#define NTARGETS (sizeof live_target / sizeof *live_target)

struct worker {
    pthread_t t;
    int idx;
    uint64_t rng;
    void *live[MAXLIVE];
    size_t nlive;
    size_t live_bytes; /* malloc_usable_size sum */
    size_t live_tails; /* the unused rest of the last huge page of each block of HUGE_MIN+ */
};

static struct worker w[NT];
static pthread_barrier_t go, done;
static int cur_phase;

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Mixed sizes: by count mostly small; by bytes about a third large. */
static size_t pick(uint64_t *r)
{
    uint64_t x = rnd(r);
    switch (x % 100) {
    case 0:
    case 1:
        return 1 * MiB + (x >> 8) % (5 * MiB); /* large */
    case 2:
    case 3:
    case 4:
    case 5:
        return 64 * KiB + (x >> 8) % (960 * KiB);
    default:
        if (x % 100 < 30)
            return 8 * KiB + (x >> 8) % (56 * KiB); /* medium */
        return 16 + (x >> 8) % (8 * KiB);           /* small */
    }
}

static void *work(void *arg)
{
    struct worker *me = arg;
    for (;;) {
        pthread_barrier_wait(&go);
        int ph = cur_phase;
        if (ph < 0)
            return NULL;
        for (size_t i = 0; i < me->nlive; i++)
            free(me->live[i]);
        me->nlive = 0;
        me->live_bytes = 0;
        me->live_tails = 0;
        size_t share = live_target[ph % NTARGETS] / NT, got = 0;
        while (got < share && me->nlive < MAXLIVE) {
            size_t n = pick(&me->rng);
            char *p = malloc(n);
            if (!p)
                break;
            memset(p, 0x11 + me->idx, n);
            me->live[me->nlive++] = p;
            got += n;
            size_t usable = malloc_usable_size(p);
            me->live_bytes += usable;
            if (usable >= HUGE_MIN) /* written whole: every huge page of it resident */
                me->live_tails += (HUGE_PAGE - usable % HUGE_PAGE) % HUGE_PAGE;
        }
        /* ~50 MiB of short-lived blocks per thread, in batches of ~4 MiB */
        size_t churn = 0;
        void *batch[4096];
        while (churn < 50 * MiB) {
            size_t nb = 0, bb = 0;
            while (bb < 4 * MiB && nb < 4096) {
                size_t n = pick(&me->rng);
                char *p = malloc(n);
                if (!p)
                    break;
                memset(p, 0x22, n);
                batch[nb++] = p;
                bb += n;
            }
            for (size_t i = 0; i < nb; i++)
                free(batch[i]);
            churn += bb;
            if (!nb)
                break;
        }
        pthread_barrier_wait(&done);
    }
}

/* Anonymous and AnonHugePages of smaps_rollup, in kB, without malloc. */
static int rollup(long *anon, long *huge)
{
    char buf[4096];
    int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    *anon = *huge = -1;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "Anonymous:", 10))
            *anon = strtol(l + 10, NULL, 10);
        else if (!strncmp(l, "AnonHugePages:", 14))
            *huge = strtol(l + 14, NULL, 10);
    }
    return *anon >= 0;
}

/* For the diagnosis of a phase over its bound: the mappings that hold 1 MiB or more, or a
 * huge page, with their Rss and AnonHugePages (the arenas are 64 MiB mappings, a block of
 * its own has one of its own). After the measurement, so stdio may allocate. */
static void dump_big_mappings(int ph)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    char line[512], range[64] = "";
    long rss = 0, huge;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            snprintf(range, sizeof range, "%lx-%lx (%lu kB)", lo, hi, (hi - lo) >> 10);
            rss = 0;
        } else if (!strncmp(line, "Rss:", 4)) {
            rss = strtol(line + 4, NULL, 10);
        } else if (!strncmp(line, "AnonHugePages:", 14)) {
            huge = strtol(line + 14, NULL, 10);
            if (rss >= 1024 || huge > 0)
                printf("# phase %d over its bound: %s Rss %ld kB, AnonHugePages %ld kB\n", ph,
                       range, rss, huge);
        }
    }
    fclose(f);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "gp:i:")) != -1) {
        if (opt == 'g')
            glibc_mode = 1;
        else if (opt == 'p')
            phases = atoi(optarg);
        else if (opt == 'i')
            idle_ms = atol(optarg);
        else
            return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!glibc_mode)
        p_get_stats = (get_stats_fn)dlsym(RTLD_DEFAULT, "thpalloc_get_stats"),
        p_purge = (purge_fn)dlsym(RTLD_DEFAULT, "thpalloc_purge");
    pthread_barrier_init(&go, NULL, NT + 1);
    pthread_barrier_init(&done, NULL, NT + 1);
    for (int i = 0; i < NT; i++) {
        w[i].idx = i;
        w[i].rng = 1000 + (uint64_t)i;
        pthread_create(&w[i].t, NULL, work, &w[i]);
    }
    sleep_ms(50);
    long base, basehuge;
    if (!rollup(&base, &basehuge)) {
        report(0, "read /proc/self/smaps_rollup");
        puts("end");
        return 1;
    }
    printf("# start: anonymous %ld kB\n", base);
    for (int ph = 0; ph < phases; ph++) {
        cur_phase = ph;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double busy = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        size_t live = 0, tails = 0;
        for (int i = 0; i < NT; i++) {
            live += w[i].live_bytes;
            tails += w[i].live_tails;
        }
        long live_kb = (long)(live / 1024);
        long bound_kb = live_kb + live_kb / 10 + 4096 + (long)(tails / 1024);
        long anon = 0, huge = 0, first_ok = -1, peak = 0;
        /* idle: nobody calls the allocator */
        for (long t = 0; t <= idle_ms; t += 50) {
            rollup(&anon, &huge);
            if (t == 0)
                peak = anon - base;
            if (first_ok < 0 && anon - base <= bound_kb)
                first_ok = t;
            if (first_ok >= 0 && anon - base > bound_kb)
                first_ok = -1; /* must stay within */
            if (t < idle_ms)
                sleep_ms(50);
        }
        long extra = anon - base;
        char line[400];
        snprintf(line, sizeof line,
                 "phase %d: live %ld kB, anonymous RSS above start %ld kB at the end of a %ld ms "
                 "idle phase (%ld kB when it began; bound %ld kB; within it from %ld ms; "
                 "AnonHugePages %ld kB; busy %.2f s)",
                 ph, live_kb, extra, idle_ms, peak, bound_kb, first_ok, huge, busy);
        struct thpalloc_stats st;
        memset(&st, 0, sizeof st);
        if (p_get_stats && p_get_stats(&st, sizeof st) == 0)
            printf(
                "# phase %d: thpalloc stats: committed %llu kB, in_use %llu kB, "
                "purge_pending %llu kB, purged %llu kB, huge_advised %llu kB\n",
                ph, (unsigned long long)st.committed / 1024, (unsigned long long)st.in_use / 1024,
                (unsigned long long)st.purge_pending / 1024, (unsigned long long)st.purged / 1024,
                (unsigned long long)st.huge_advised / 1024);
        if (glibc_mode)
            printf("# %s\n", line);
        else {
            report(extra <= bound_kb, "%s", line);
            if (extra > bound_kb)
                dump_big_mappings(ph);
        }
    }
    if (p_purge) {
        /* for the diagnosis only: what an explicit purge would give back now */
        long anon = 0, huge = 0;
        size_t purged = p_purge();
        rollup(&anon, &huge);
        printf("# after the last phase, thpalloc_purge() gave back %zu kB: anonymous RSS above "
               "start %ld kB\n",
               purged / 1024, anon - base);
    }
    cur_phase = -1;
    pthread_barrier_wait(&go);
    for (int i = 0; i < NT; i++) {
        pthread_join(w[i].t, NULL);
        for (size_t k = 0; k < w[i].nlive; k++)
            free(w[i].live[k]);
    }
    printf("end\n");
    return 0;
}
