/* purge-park: the heaps of exited threads, parked whole for the next new thread (lib/thread.c).
 *
 *   purge-park refault   a worker fills and empties a class's page twice (the second time
 *                      its kept page stays resident: a refault was seen), and exits; the
 *                      next thread does the same: it takes the parked heap as it stands, so
 *                      its page of that class is neither trimmed nor faulted in again
 *                      (before heaps were parked, each new thread trimmed it and refaulted
 *                      it: a madvise and 4 page faults per thread and class here)
 *   purge-park remote    blocks of an exited thread freed by the main thread while its heap
 *                      is parked: the bytes in use come back exactly, the next thread gets
 *                      those blocks again (intact when written), and a second free of one
 *                      of them is still a double free (abort, checked by the script)
 *   purge-park unpark    16 workers exit for good, holding 3 MiB each until they freed it:
 *                      the main thread's 24 MiB afterwards reuse their chunks (committed
 *                      memory at most 6 MiB over the blocks, not the parked heaps' on top)
 *   purge-park fork      a child forked while heaps are parked frees the exited threads'
 *                      blocks and runs threads that take those heaps; both processes end
 *                      with every block intact
 *   purge-park kept      threads one after another, each freeing one block of a class
 *                      of its own, on a busy heap with the purger thread running: the
 *                      empty page an exited thread kept goes back to its chunk at park and
 *                      serves the next thread's class (Anonymous in smaps_rollup +0 KiB;
 *                      a page kept for every class any thread used: +44 KiB)
 *   purge-park kept-trim the same without the purger thread: once each class refilled the
 *                      page its trim gave back, the third round trims nothing (a trimmed
 *                      page stays kept at park: released, every thread trimmed again)
 *   purge-park credit    pages emptied, their dirty slots taken back by another class: the
 *                      pending bytes read as before (the heap's credit taken off), and
 *                      24 threads that exit holding such credit leave nothing pending
 *                      after thpalloc_purge (a credit lost at exit: 64 KiB a heap)
 * Each prints "ok - ..." / "not ok - ..." lines and "end" (tests/purge-park.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/thpalloc.h"
#include "purger-running.h"
#include "relay-report.h"
#include "test-modes.h"

#define MiB ((size_t)1 << 20)

static int get_stats(struct thpalloc_stats *st)
{
    typedef int (*fn_t)(struct thpalloc_stats *, size_t);
    fn_t fn = (fn_t)dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    return fn && fn(st, sizeof *st) == 0;
}

static void run_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) {
        report(0, "pthread_create");
        exit(1);
    }
    pthread_join(t, NULL);
}

/* ---- refault ------------------------------------------------------------------------- */
#define RF_BLOCKS 1300 /* of 48 bytes: four 16 KiB pages, the last one kept empty */
static unsigned char *rf_block[RF_BLOCKS];

static long minflt_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt;
}

/* Fills and empties the class twice; returns the page faults of the second fill. */
static long rf_round(void)
{
    long faults = 0;
    for (int r = 0; r < 2; r++) {
        long f0 = minflt_self();
        for (int i = 0; i < RF_BLOCKS; i++) {
            rf_block[i] = malloc(48);
            if (rf_block[i])
                memset(rf_block[i], i, 48);
        }
        faults = minflt_self() - f0;
        for (int i = RF_BLOCKS; i-- > 0;)
            free(rf_block[i]);
    }
    return faults;
}

static void *rf_worker(void *arg)
{
    *(long *)arg = rf_round();
    return NULL;
}

static void mode_refault(void)
{
    long first = -1, next = -1;
    run_thread(rf_worker, &first);
    run_thread(rf_worker, &next);
    printf("# refault: page faults of the second fill: %ld in the first thread, %ld in the "
           "next\n",
           first, next);
    report(next >= 0 && next <= 1,
           "refault: the next thread took the exited thread's heap whole: its second fill of "
           "the class faulted %ld pages in (at most 1; a new heap trimmed its kept page and "
           "faulted it in again: 4)",
           next);
}

/* ---- kept --------------------------------------------------------------------------- */
/* Twelve classes above 1 KiB that take 16 KiB pages (no sub-pages), their block sizes
 * (lib/sizeclass.h): one block an OS page, each size a class of its own. */
static const size_t kp_size[] = {1168, 1248, 1360, 1488, 1632, 1808,
                                 2048, 2320, 2624, 2720, 3264, 4096};
#define KP_CLASSES (sizeof kp_size / sizeof kp_size[0])

static long anon_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Anonymous: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void *kp_worker(void *arg)
{
    size_t n = *(const size_t *)arg;
    unsigned char *p = malloc(n);
    if (p)
        memset(p, 1, n);
    free(p); /* the class's only page, empty: kept for it */
    return NULL;
}

/* The first worker makes its heap a busy one (past HEAP_BUSY_OPS slow-path calls: a block
 * of a sub-page freed, every free a slow one), in which a page kept a moment ago is not
 * taken over by another class (KEPT_STEAL_AGE). */
static void *kp_first(void *arg)
{
    for (int i = 0; i < 3000; i++) {
        unsigned char *volatile q = malloc(16);
        free(q);
    }
    return kp_worker(arg);
}

static void mode_kept(void)
{
    /* The purger thread running (24 MiB waiting, never touched), so that kept pages are
     * not trimmed at once (heap.c, page_trim_kept) */
    void *volatile big = malloc((size_t)24 << 20);
    free(big);
    int up = 0;
    for (int i = 0; i < 40 && !(up = purger_running()); i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    size_t first = kp_size[0];
    anon_kib(); /* stdio's buffers, before the count starts */
    run_thread(kp_first, &first);
    long before = anon_kib();
    for (unsigned i = 1; i < 3 * KP_CLASSES; i++)
        run_thread(kp_worker, (void *)&kp_size[i % KP_CLASSES]);
    long after = anon_kib();
    printf("# kept: purger thread %s; Anonymous %ld KiB after the first thread, %ld KiB after "
           "%u more\n",
           up ? "running" : "not seen", before, after, 3 * (unsigned)KP_CLASSES - 1);
    report(up && before > 0 && after - before <= 12,
           "kept: threads one after another on a busy parked heap, each freeing one block of "
           "another class: the exited thread's empty page served the next thread's class "
           "(Anonymous +%ld KiB, at most 12; a page kept for each class: +44)",
           after - before);
}

/* Without the purger thread a kept page is trimmed at once until its class refills one
 * (heap.c, page_trim_kept). The park leaves a trimmed page kept: released, its refill went
 * unseen and every later thread trimmed its class's new page again. */
static void mode_kept_trim(void)
{
    struct thpalloc_stats st;
    size_t first = kp_size[0];
    run_thread(kp_first, &first);
    for (unsigned i = 1; i < 2 * KP_CLASSES; i++) /* each class trimmed, then refilled */
        run_thread(kp_worker, (void *)&kp_size[i % KP_CLASSES]);
    int ok = get_stats(&st);
    uint64_t before = st.purged;
    for (unsigned i = 0; i < KP_CLASSES; i++)
        run_thread(kp_worker, (void *)&kp_size[i]);
    ok = ok && get_stats(&st) && !purger_running();
    printf("# kept-trim: purged %llu bytes before the third round, %llu after\n",
           (unsigned long long)before, (unsigned long long)st.purged);
    report(ok && st.purged == before,
           "kept-trim: no purger thread; once each class refilled its trimmed page, threads "
           "one after another on the parked heap trimmed nothing more (%llu bytes purged in "
           "the third round, want 0)",
           (unsigned long long)(st.purged - before));
}

/* ---- remote -------------------------------------------------------------------------- */
#define RM_BLOCKS 256
static unsigned char *rm_block[RM_BLOCKS];

static void *rm_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < RM_BLOCKS; i++) {
        rm_block[i] = malloc(200);
        if (rm_block[i])
            memset(rm_block[i], i, 200);
    }
    return NULL;
}

static int rm_ours(const void *p)
{
    for (int i = 0; i < RM_BLOCKS; i++)
        if (rm_block[i] == p)
            return 1;
    return 0;
}

static unsigned char *rm_again[RM_BLOCKS];

static void *rm_taker(void *arg)
{
    int *hits = arg;
    for (int i = 0; i < RM_BLOCKS; i++) {
        rm_again[i] = malloc(200);
        if (rm_again[i]) {
            *hits += rm_ours(rm_again[i]);
            memset(rm_again[i], 0x5a, 200);
        }
    }
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

static void mode_remote(int twice)
{
    struct thpalloc_stats st0, st1;
    /* stdout's buffer, dlsym's and a first thread's set-up, before the figure to come back to */
    printf("# remote: %d blocks of 200 bytes\n", RM_BLOCKS);
    get_stats(&st0);
    run_thread(nothing, NULL);
    int have = get_stats(&st0);
    run_thread(rm_worker, NULL);
    int bad = 0;
    for (int i = 0; i < RM_BLOCKS; i++) {
        for (int k = 0; k < 200; k++)
            bad += !rm_block[i] || rm_block[i][k] != (unsigned char)i;
        free(rm_block[i]); /* a remote free into the exited thread's heap */
    }
    report(bad == 0, "remote: the exited thread's blocks held their contents (%d bad bytes)", bad);
    have = have && get_stats(&st1);
    report(have && st1.in_use == st0.in_use,
           "remote: freed into the parked heap, the bytes in use are back exactly (%llu -> "
           "%llu)",
           have ? (unsigned long long)st0.in_use : 0, have ? (unsigned long long)st1.in_use : 0);
    if (twice) {
        printf("# remote: a second free of %p\n", (void *)rm_block[7]);
        fflush(stdout);
        free(rm_block[7]); /* must abort: double free */
        report(0, "remote: the second free returned");
        return;
    }
    int hits = 0;
    run_thread(rm_taker, &hits);
    /* the rest: blocks the worker had carved and never handed out, in the same pages */
    report(hits >= RM_BLOCKS / 2,
           "remote: the next thread got the freed blocks again (%d of %d, at least half), and "
           "wrote them",
           hits, RM_BLOCKS);
    for (int i = 0; i < RM_BLOCKS; i++)
        free(rm_again[i]);
}

/* ---- unpark -------------------------------------------------------------------------- */
#define UP_THREADS 16
#define UP_BYTES (3 * MiB)
#define UP_SIZE 256

static void *up_worker(void *arg)
{
    (void)arg;
    size_t n = UP_BYTES / UP_SIZE;
    unsigned char **b = malloc(n * sizeof *b);
    if (!b)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(UP_SIZE);
        if (b[i])
            memset(b[i], 1, UP_SIZE);
    }
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    free(b);
    return NULL;
}

static void mode_unpark(void)
{
    pthread_t t[UP_THREADS];
    for (int i = 0; i < UP_THREADS; i++)
        pthread_create(&t[i], NULL, up_worker, NULL);
    for (int i = 0; i < UP_THREADS; i++)
        pthread_join(t[i], NULL);
    struct thpalloc_stats st0, st1;
    int have = get_stats(&st0);
    size_t n = UP_THREADS * UP_BYTES / 2 / UP_SIZE;
    unsigned char **b = malloc(n * sizeof *b);
    int bad = !b;
    for (size_t i = 0; b && i < n; i++) {
        b[i] = malloc(UP_SIZE);
        if (b[i])
            memset(b[i], 2, UP_SIZE);
        bad += !b[i];
    }
    have = have && get_stats(&st1);
    /* Without the parked heaps' chunks: theirs on top of the main thread's own. What they
     * hold depends on how many workers ran at once (12 MiB when one after another, 68 when
     * all 16 hold their 3 MiB together), so the bound is the larger of that and its blocks:
     * the main thread commits nothing beyond its blocks that the parked chunks could give. */
    size_t floor_ = have && st0.committed > n * UP_SIZE ? st0.committed : n * UP_SIZE;
    report(have && !bad && st1.committed <= floor_ + 6 * MiB,
           "unpark: after %d threads exited, the main thread's %zu MiB reused their chunks: "
           "committed %llu MiB before, %llu MiB after (at most 6 over the larger of its "
           "blocks and what was committed before)",
           UP_THREADS, n * UP_SIZE / MiB, have ? (unsigned long long)(st0.committed >> 20) : 0,
           have ? (unsigned long long)(st1.committed >> 20) : 0);
    for (size_t i = 0; b && i < n; i++)
        free(b[i]);
    free(b);
}

/* ---- fork ---------------------------------------------------------------------------- */
#define FK_THREADS 4
#define FK_BLOCKS 512
static unsigned char *fk_block[FK_THREADS][FK_BLOCKS];

static void *fk_worker(void *arg)
{
    unsigned char **b = arg;
    int id = (int)(b - fk_block[0]) / FK_BLOCKS;
    for (int i = 0; i < FK_BLOCKS; i++) {
        b[i] = malloc(16 + (size_t)(i % 40) * 8);
        if (b[i])
            memset(b[i], id * 31 + i, 16 + (size_t)(i % 40) * 8);
    }
    return NULL;
}

/* Frees every block the workers left, checking it; returns the bad ones. */
static int fk_free_all(void)
{
    int bad = 0;
    for (int t = 0; t < FK_THREADS; t++)
        for (int i = 0; i < FK_BLOCKS; i++) {
            unsigned char *p = fk_block[t][i];
            size_t n = 16 + (size_t)(i % 40) * 8;
            for (size_t k = 0; p && k < n; k++)
                bad += p[k] != (unsigned char)(t * 31 + i);
            bad += !p;
            free(p);
        }
    return bad;
}

static int fk_round(void)
{
    pthread_t t[FK_THREADS];
    for (int i = 0; i < FK_THREADS; i++)
        pthread_create(&t[i], NULL, fk_worker, fk_block[i]);
    for (int i = 0; i < FK_THREADS; i++)
        pthread_join(t[i], NULL);
    return 0;
}

static void mode_fork(void)
{
    fk_round(); /* the workers' heaps are parked, holding the blocks */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = fk_free_all();
        for (int r = 0; r < 8 && !bad; r++) {
            fk_round(); /* threads that take the parked heaps */
            bad += fk_free_all();
        }
        typedef size_t (*purge_t)(void);
        purge_t purge = (purge_t)dlsym(RTLD_DEFAULT, "thpalloc_purge");
        if (purge)
            purge();
        _exit(bad ? 1 : 0);
    }
    int bad = fk_free_all();
    for (int r = 0; r < 8; r++) {
        fk_round();
        bad += fk_free_all();
    }
    int status = 0;
    waitpid(pid, &status, 0);
    report(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "fork: the child freed the exited threads' blocks and ran threads on their parked "
           "heaps, every block intact (status %d)",
           status);
    report(bad == 0, "fork: so did the parent (%d bad)", bad);
}

/* ---- credit: stat_pages_dirty counted through the heaps (lib/chunk.c, dirty_credit) ------
 * A thread empties pages of one class (their slots wait, dirty) and takes those slots back
 * for another class: the bytes stay counted as its heap's credit. The statistics take the
 * credits off: they read as before, and an exited thread's credit is folded into the
 * global figure, not lost with its heap. */
#define CR_A 64  /* 256 blocks a 16 KiB page */
#define CR_B 128 /* 128 */
#define CR_NA (6 * 256)
#define CR_NB (4 * 128)
#define CR_THREADS 24 /* more than PARKED_MAX (16): some heaps are taken apart at exit */

static uint64_t pending_now(void)
{
    struct thpalloc_stats st;
    return get_stats(&st) ? st.purge_pending : UINT64_MAX;
}

/* Empties CR_NA / 256 pages of class CR_A, then takes their slots for CR_NB blocks of
 * class CR_B (kept in b). Returns the pending bytes between. */
static uint64_t cr_round(void **b, uint64_t *after)
{
    static __thread void *a[CR_NA];
    for (int i = 0; i < CR_NA; i++)
        a[i] = malloc(CR_A);
    for (int i = 0; i < CR_NA; i++)
        free(a[i]);
    uint64_t mid = pending_now();
    for (int i = 0; i < CR_NB; i++)
        b[i] = malloc(CR_B);
    *after = pending_now();
    return mid;
}

/* Exits holding its CR_B blocks (freed by main later): the slots it took back stay
 * credit to the end. */
static void *cr_keep[CR_THREADS + 1][CR_NB];

static void *cr_worker(void *arg)
{
    uint64_t after;
    cr_round(arg, &after);
    return NULL;
}

static void mode_credit(void)
{
    uint64_t p0 = pending_now(), after;
    uint64_t mid = cr_round(cr_keep[CR_THREADS], &after);
    printf("# credit: pending %llu, %llu with class %d's pages emptied, %llu once class %d "
           "took their slots\n",
           (unsigned long long)p0, (unsigned long long)mid, CR_A, (unsigned long long)after, CR_B);
    uint64_t taken = (uint64_t)(CR_NB / 128) << 14; /* the slots of CR_B's 4 pages */
    report(mid > p0 + taken && after == mid - taken,
           "credit: emptied pages wait (%llu -> %llu bytes); the 4 slots taken back by "
           "another class no longer do: %llu exactly (got %llu)",
           (unsigned long long)p0, (unsigned long long)mid, (unsigned long long)(mid - taken),
           (unsigned long long)after);
    uint64_t before = pending_now();
    for (int i = 0; i < CR_THREADS; i++)
        run_thread(cr_worker, cr_keep[i]);
    uint64_t exited = pending_now();
    for (int i = 0; i <= CR_THREADS; i++) /* the chunks empty: all of them can go */
        for (int j = 0; j < CR_NB; j++)
            free(cr_keep[i][j]);
    size_t (*purge)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    size_t purged = purge ? purge() : 0;
    uint64_t end = pending_now();
    printf("# credit: pending %llu before %d threads, %llu after, %llu after "
           "thpalloc_purge (%zu bytes purged)\n",
           (unsigned long long)before, CR_THREADS, (unsigned long long)exited,
           (unsigned long long)end, purged);
    report(end == 0,
           "credit: %d threads that took dirty slots back exited, some heaps taken apart: "
           "after thpalloc_purge nothing waits (%llu bytes; a credit lost at exit stays "
           "counted)",
           CR_THREADS, (unsigned long long)end);
}

static void mode_remote_single(void)
{
    mode_remote(0);
}

static void mode_remote_double(void)
{
    mode_remote(1);
}

static const struct test_mode modes[] = {
    {"refault", mode_refault},
    {"remote", mode_remote_single},
    {"remote-double", mode_remote_double},
    {"unpark", mode_unpark},
    {"fork", mode_fork},
    {"kept", mode_kept},
    {"kept-trim", mode_kept_trim},
    {"credit", mode_credit},
};

int main(int argc, char **argv)
{
    if (test_mode_run("purge-park", NULL, modes, sizeof modes / sizeof *modes,
                      argc > 1 ? argv[1] : NULL))
        return 2;
    printf("end\n");
    return report_failures ? 1 : 0;
}
