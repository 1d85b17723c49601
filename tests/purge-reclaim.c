/* purge-reclaim: memory inside the pages of an idle thread's heap goes back to the kernel
 * (lib/reclaim.c), for tests/purge-reclaim.sh. Residency is read from the kernel with
 * mincore(2), OS page by OS page, so every check is exact.
 *
 *   purge-reclaim kept|holes|holes-filtered|inside|busy|fork|kept-fork|background|nobarrier|
 *               hole-double-free|loop|recycle|reset-double-free|remote|split|emptied|reuse|
 *               extent-reuse|cache-age|extent-guard|dirty-count
 *
 * A worker thread allocates on command and otherwise waits on a condition variable (no
 * allocator call: idle, as far as thpalloc can tell); the main thread makes thpalloc
 * reclaim with thpalloc_purge() (or waits for the background purger) and checks. Output:
 * "ok - ..." / "not ok - ..." lines and "end" (tests/api-taplib.sh's relay()). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "relay-report.h"
#include "seccomp-deny.h"
#include "test-modes.h"

#define OSP ((uintptr_t)4096)

/* The extension API, looked up: the program does not link libthpalloc (the script
 * preloads it). */
static size_t (*purge_fn)(void);
static size_t purge_now(void)
{
    return purge_fn();
}
#define NSMALL 1300
#define SMALL 48

/* ---- a worker that is idle between commands ---------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void (*job)(void);
static int job_done = 1;

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (job_done)
            pthread_cond_wait(&cv, &mu);
        void (*fn)(void) = job;
        pthread_mutex_unlock(&mu);
        if (!fn)
            return NULL;
        fn();
        pthread_mutex_lock(&mu);
        job_done = 1;
        pthread_cond_broadcast(&cv);
    }
}

/* Runs fn on the worker and waits for it. */
static void on_worker(void (*fn)(void))
{
    pthread_mutex_lock(&mu);
    job = fn;
    job_done = 0;
    pthread_cond_broadcast(&cv);
    while (!job_done)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static pthread_t worker;
static void worker_start(void)
{
    if (pthread_create(&worker, NULL, worker_main, NULL) != 0) {
        printf("not ok - pthread_create\n");
        exit(1);
    }
}

static void worker_stop(void)
{
    pthread_mutex_lock(&mu);
    job = NULL;
    job_done = 0;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(worker, NULL);
}

/* ---- residency ------------------------------------------------------------------------ */

static int resident(const void *p)
{
    unsigned char v;
    void *page = (void *)((uintptr_t)p & ~(OSP - 1));
    if (mincore(page, OSP, &v) != 0)
        return -1;
    return v & 1;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131 + i * 7);
}

static int intact(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed * 131 + i * 7))
            return 0;
    return 1;
}

/* ---- kept: the empty page a heap keeps for its class -------------------------------- */

static unsigned char *small[NSMALL];
static unsigned char *again[2 * NSMALL];
static int alloc_ok;

/* n blocks of SMALL bytes into b[], block i filled with seed i; 0 when one fails. */
static int alloc_filled(unsigned char **b, int n)
{
    for (int i = 0; i < n; i++) {
        b[i] = malloc(SMALL);
        if (!b[i])
            return 0;
        fill(b[i], SMALL, (unsigned)i);
    }
    return 1;
}

static void job_fill_small(void)
{
    alloc_ok = alloc_filled(small, NSMALL);
}

static void job_free_all_small(void)
{
    for (int i = 0; i < NSMALL; i++)
        free(small[i]);
}

static int again_n = NSMALL;
static int again_ok;
static void job_alloc_again(void)
{
    again_ok = 1;
    for (int i = 0; i < again_n; i++) {
        again[i] = malloc(SMALL);
        if (!again[i]) {
            again_ok = 0;
            return;
        }
        fill(again[i], SMALL, (unsigned)i + 7777);
    }
    for (int i = 0; i < again_n; i++)
        if (!intact(again[i], SMALL, (unsigned)i + 7777))
            again_ok = 0;
}

static void job_free_again(void)
{
    for (int i = 0; i < again_n; i++)
        free(again[i]);
}

/* OS pages that only our blocks [0, n) overlap, by whether any live one does. */
static void count_pages(int keep_every, int *holes_res, int *holes, int *live_res, int *live)
{
    *holes_res = *holes = *live_res = *live = 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < NSMALL; i++) {
        uintptr_t a = (uintptr_t)small[i];
        if (a < lo)
            lo = a;
        if (a + SMALL > hi)
            hi = a + SMALL;
    }
    for (uintptr_t pg = lo & ~(OSP - 1); pg < hi; pg += OSP) {
        int any_live = 0, any_ours = 0;
        for (int i = 0; i < NSMALL; i++) {
            uintptr_t a = (uintptr_t)small[i];
            if (a + SMALL <= pg || a >= pg + OSP)
                continue;
            any_ours = 1;
            if (keep_every && i % keep_every == 0)
                any_live = 1;
        }
        if (!any_ours)
            continue;
        int r = resident((void *)pg);
        if (any_live) {
            (*live)++;
            *live_res += r == 1;
        } else {
            (*holes)++;
            *holes_res += r == 1;
        }
    }
}

static int reclaim_and_count(int keep_every, int *holes, int *live_res, int *live)
{
    int holes_res;
    size_t got = purge_now();
    count_pages(keep_every, &holes_res, holes, live_res, live);
    printf("# thpalloc_purge() returned %zu bytes; %d of %d free OS pages resident, %d of %d "
           "with live blocks\n",
           got, holes_res, *holes, *live_res, *live);
    return holes_res;
}

static void test_kept(void)
{
    worker_start();
    on_worker(job_fill_small);
    report(alloc_ok, "the worker allocated %d blocks of %d bytes", NSMALL, SMALL);
    on_worker(job_free_all_small);
    int holes_res0, holes0, lr, l;
    count_pages(0, &holes_res0, &holes0, &lr, &l);
    /* No purger thread runs yet: the page the heap keeps empty (one 16 KiB page of the four)
     * is trimmed at once, as nothing else would purge it if the process went idle now
     * (heap.c, page_trim_kept); the other three wait in their slots for purge_delay. */
    report(holes0 >= 12 && holes0 - holes_res0 >= 1 && holes0 - holes_res0 <= 4,
           "freed, with no purger thread the page the heap keeps is trimmed at once (%d of %d "
           "OS pages resident)",
           holes_res0, holes0);
    /* Filled again, the trim was a refault: the class's kept page stays resident from then
     * on, for the reclaimer to purge once the heap is idle. */
    on_worker(job_fill_small);
    report(alloc_ok, "the worker filled the page again");
    on_worker(job_free_all_small);
    count_pages(0, &holes_res0, &holes0, &lr, &l);
    report(holes_res0 == holes0 && holes0 >= 12,
           "freed again after that refault, the page the heap keeps is resident (%d of %d OS "
           "pages)",
           holes_res0, holes0);
    int holes;
    int res = reclaim_and_count(0, &holes, &lr, &l);
    report(res == 0, "after reclaim none of its %d OS pages is resident (%d are)", holes, res);
    on_worker(job_alloc_again);
    report(again_ok, "the worker allocates %d blocks of that class again, all intact", again_n);
    on_worker(job_free_again);
    worker_stop();
}

/* ---- split: the first blocks of many classes share one page slot ---------------------- */

/* One block in each of these classes (all up to 1 KiB): a fresh heap gives each class a
 * 1 KiB sub-page of one 16 KiB slot, so the twelve share three OS pages. */
static const size_t split_sizes[] = {16, 32, 48, 64, 96, 128, 160, 256, 384, 512, 768, 1024};
#define NSPLIT (sizeof split_sizes / sizeof split_sizes[0])
static unsigned char *split_blk[NSPLIT];

/* Blocks b[i] of sizes[i] for i = first, first + step, ... < n, block i filled with seed
 * i + seed; alloc_ok 0 when one fails. */
static void alloc_sized(unsigned char **b, const size_t *sizes, size_t n, size_t first, size_t step,
                        unsigned seed)
{
    alloc_ok = 1;
    for (size_t i = first; i < n; i += step) {
        b[i] = malloc(sizes[i]);
        if (!b[i]) {
            alloc_ok = 0;
            return;
        }
        fill(b[i], sizes[i], (unsigned)i + seed);
    }
}

static void job_split_alloc(void)
{
    alloc_sized(split_blk, split_sizes, NSPLIT, 0, 1, 0);
}

/* the even ones again, filled anew */
static void job_split_alloc_again(void)
{
    alloc_sized(split_blk, split_sizes, NSPLIT, 0, 2, 100);
}

static void job_split_free(void)
{
    for (size_t i = 0; i < NSPLIT; i++)
        free(split_blk[i]);
}

/* Eight classes more: sixteen sub-pages fill the first split slot, the rest take a second. */
static const size_t more_sizes[] = {176, 208, 240, 288, 320, 352, 416, 480};
#define NMORE (sizeof more_sizes / sizeof more_sizes[0])
static unsigned char *more_blk[NMORE];

static void job_more_alloc(void)
{
    alloc_sized(more_blk, more_sizes, NMORE, 0, 1, 200);
}

static void job_more_free(void)
{
    for (size_t i = 0; i < NMORE; i++)
        free(more_blk[i]);
}

/* Distinct OS pages under blocks b[0..n), and how many of them are resident. */
static int pages_of(unsigned char *const *b, size_t nb, int *res)
{
    uintptr_t pages[NSPLIT + NMORE];
    int n = 0;
    *res = 0;
    for (size_t i = 0; i < nb; i++) {
        uintptr_t pg = (uintptr_t)b[i] & ~(OSP - 1);
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= pages[k] == pg;
        if (!seen) {
            pages[n++] = pg;
            *res += resident((void *)pg) == 1;
        }
    }
    return n;
}

/* Distinct OS pages under the first blocks, and how many of them are resident. */
static int split_pages(int *res)
{
    return pages_of(split_blk, NSPLIT, res);
}

static void test_split(void)
{
    size_t (*usable)(void *) = (size_t(*)(void *))dlsym(RTLD_DEFAULT, "malloc_usable_size");
    worker_start();
    on_worker(job_split_alloc);
    report(alloc_ok, "the worker allocated one block in each of %zu classes", NSPLIT);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 0; i < NSPLIT; i++) {
        uintptr_t a = (uintptr_t)split_blk[i];
        lo = a < lo ? a : lo;
        hi = a + split_sizes[i] > hi ? a + split_sizes[i] : hi;
    }
    report((lo >> 14) == ((hi - 1) >> 14), "they lie in one 16 KiB slot (%#lx..%#lx)",
           (unsigned long)lo, (unsigned long)hi);
    int res, n = split_pages(&res);
    report(n == 3 && res == 3, "they share 3 OS pages, all resident (%d pages, %d resident)", n,
           res);
    int sizes_ok = 1;
    for (size_t i = 0; i < NSPLIT; i++)
        sizes_ok &= usable(split_blk[i]) == split_sizes[i];
    report(sizes_ok, "malloc_usable_size gives each block its class size");
    /* Remote frees of every other block, then the worker takes those classes again. */
    for (size_t i = 0; i < NSPLIT; i += 2)
        free(split_blk[i]);
    on_worker(job_split_alloc_again);
    int intact_all = 1;
    for (size_t i = 0; i < NSPLIT; i++)
        intact_all &= intact(split_blk[i], split_sizes[i], (unsigned)i + (i % 2 ? 0 : 100));
    report(alloc_ok && intact_all,
           "freed by another thread and allocated again: every block intact");
    n = split_pages(&res);
    report(n == 3, "the blocks allocated again are in the same 3 OS pages (%d)", n);
    on_worker(job_split_free);
    size_t got = purge_now();
    n = split_pages(&res);
    report(res == 0,
           "all freed, after reclaim none of the %d OS pages is resident (%d are; "
           "thpalloc_purge() returned %zu)",
           n, res, got);
    on_worker(job_split_alloc);
    n = split_pages(&res);
    report(alloc_ok && n == 3 && res == 3,
           "allocated again: the same sharing (%d pages, %d "
           "resident)",
           n, res);
    intact_all = 1;
    for (size_t i = 0; i < NSPLIT; i++)
        intact_all &= intact(split_blk[i], split_sizes[i], (unsigned)i);
    report(intact_all, "and every block holds what was written");
    on_worker(job_more_alloc);
    unsigned char *all[NSPLIT + NMORE];
    for (size_t i = 0; i < NSPLIT; i++)
        all[i] = split_blk[i];
    for (size_t i = 0; i < NMORE; i++)
        all[NSPLIT + i] = more_blk[i];
    n = pages_of(all, NSPLIT + NMORE, &res);
    uintptr_t slot0 = (uintptr_t)more_blk[0] >> 14,
              slot_last = (uintptr_t)more_blk[NMORE - 1] >> 14;
    report(alloc_ok && n == 5 && res == 5 && slot0 != slot_last,
           "%zu classes more: the first slot's last sub-pages, then a second split slot (%d OS "
           "pages for %zu classes, %d resident)",
           NMORE, n, NSPLIT + NMORE, res);
    int sizes_more = 1;
    for (size_t i = 0; i < NMORE; i++)
        sizes_more &= usable(more_blk[i]) == more_sizes[i] &&
                      intact(more_blk[i], more_sizes[i], (unsigned)i + 200);
    report(sizes_more, "their blocks have their class sizes and hold what was written");
    on_worker(job_more_free);
    on_worker(job_split_free);
    got = purge_now();
    n = pages_of(all, NSPLIT + NMORE, &res);
    report(res == 0,
           "all freed, after reclaim none of the %d OS pages of both slots is resident "
           "(%d are)",
           n, res);
    worker_stop();
}

/* ---- remote: full pages that only other threads freed into --------------------------- */

#define NREMOTE 8000 /* 48-byte blocks: about six 64 KiB pages, five of them full */
static unsigned char *remote[NREMOTE];

static void job_fill_remote(void)
{
    alloc_ok = alloc_filled(remote, NREMOTE);
}

/* The worker's pages fill up and go to its full list; the main thread frees every block
 * (cross-thread frees into full pages) while the worker stays idle: without the purger
 * collecting those frees, the pages would stay resident until the worker allocates. */
static void test_remote(void)
{
    worker_start();
    on_worker(job_fill_remote);
    report(alloc_ok, "the worker allocated %d blocks of %d bytes", NREMOTE, SMALL);
    int bad = 0;
    for (int i = 0; i < NREMOTE; i++)
        bad += !intact(remote[i], SMALL, (unsigned)i);
    for (int i = 0; i < NREMOTE; i++)
        free(remote[i]); /* from the main thread */
    int before = 0, after = 0, total = 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < NREMOTE; i++) {
        uintptr_t a = (uintptr_t)remote[i];
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    for (uintptr_t p = lo & ~(OSP - 1); p <= hi; p += OSP) {
        total++;
        before += resident((void *)p) == 1;
    }
    purge_now();
    for (uintptr_t p = lo & ~(OSP - 1); p <= hi; p += OSP)
        after += resident((void *)p) == 1;
    report(bad == 0, "the blocks were intact when the main thread freed them");
    report(before >= total * 9 / 10, "freed by another thread, %d of %d OS pages were resident",
           before, total);
    report(after <= 16, "after reclaim %d of them are (the frees into full pages collected)",
           after);
    again_n = NREMOTE / 4;
    on_worker(job_alloc_again);
    report(again_ok, "the worker allocates %d blocks of that class again, all intact", again_n);
    on_worker(job_free_again);
    again_n = NSMALL;
    worker_stop();
}

/* ---- holes: a small page with scattered live blocks ---------------------------------- */

#define KEEP_EVERY 128
static void job_free_most_small(void)
{
    for (int i = 0; i < NSMALL; i++)
        if (i % KEEP_EVERY)
            free(small[i]);
}

static int live_intact(void)
{
    for (int i = 0; i < NSMALL; i += KEEP_EVERY)
        if (!intact(small[i], SMALL, (unsigned)i))
            return 0;
    return 1;
}

static int overlaps_live(void)
{
    for (int j = 0; j < again_n; j++)
        for (int i = 0; i < NSMALL; i += KEEP_EVERY)
            if ((uintptr_t)again[j] < (uintptr_t)small[i] + SMALL &&
                (uintptr_t)small[i] < (uintptr_t)again[j] + SMALL)
                return 1;
    return 0;
}

static void job_free_live_small(void)
{
    for (int i = 0; i < NSMALL; i += KEEP_EVERY)
        free(small[i]);
}

static void test_holes(void)
{
    worker_start();
    on_worker(job_fill_small);
    report(alloc_ok, "the worker allocated %d blocks of %d bytes", NSMALL, SMALL);
    on_worker(job_free_most_small);
    int holes, live_res, live;
    int res = reclaim_and_count(KEEP_EVERY, &holes, &live_res, &live);
    report(holes >= 4 && res == 0, "every OS page with no live block went back (%d resident of %d)",
           res, holes);
    report(live_res == live, "every OS page with a live block stayed (%d of %d)", live_res, live);
    report(live_intact(), "the %d live blocks kept their contents",
           (NSMALL + KEEP_EVERY - 1) / KEEP_EVERY);
    size_t again2 = purge_now();
    report(again2 == 0, "a second reclaim finds nothing new (%zu bytes)", again2);
    again_n = 2 * NSMALL;
    on_worker(job_alloc_again);
    report(again_ok, "the worker allocates %d more blocks (the holes and beyond), intact", again_n);
    report(!overlaps_live(), "none of them overlaps a live block");
    report(live_intact(), "the live blocks are still intact");
    on_worker(job_free_again);
    on_worker(job_free_live_small);
    worker_stop();
}

/* A block in a hole is free: freeing it again is a double free, caught. */
static void test_hole_double_free(void)
{
    worker_start();
    on_worker(job_fill_small);
    on_worker(job_free_most_small);
    purge_now();
    int victim = -1;
    for (int i = 0; i < NSMALL && victim < 0; i++)
        if (i % KEEP_EVERY && resident(small[i]) == 0)
            victim = i;
    if (victim < 0) {
        printf("not ok - hole-double-free: no block in a hole\n");
        exit(1);
    }
    printf("# freeing block %d again (in a hole)\n", victim);
    fflush(stdout);
    free(small[victim]); /* must abort */
    printf("not ok - hole-double-free: the second free returned\n");
    exit(1);
}

/* A block of a page the reclaimer reset (kept, empty, purged) is free: freeing it again
 * is a double free, caught although the page has no blocks on its lists. */
static void test_reset_double_free(void)
{
    worker_start();
    on_worker(job_fill_small);
    on_worker(job_free_all_small);
    purge_now();
    /* the last block's page is the one the heap kept (the class's only page left) */
    printf("# freeing block %d again (its page was reset)\n", NSMALL - 1);
    fflush(stdout);
    free(small[NSMALL - 1]); /* must abort */
    printf("not ok - reset-double-free: the second free returned\n");
    exit(1);
}

/* ---- inside: the OS pages of free extents of an idle thread -------------------------- */

static size_t inside_size;
static unsigned char *blk[16];
static void job_fill_blocks(void)
{
    alloc_ok = 1;
    for (int i = 0; i < 16; i++) {
        blk[i] = malloc(inside_size);
        if (!blk[i]) {
            alloc_ok = 0;
            return;
        }
        fill(blk[i], inside_size, (unsigned)i);
    }
}

static void job_free_odd_blocks(void)
{
    for (int i = 1; i < 16; i += 2)
        free(blk[i]);
}

static void job_refill_odd_blocks(void)
{
    alloc_ok = 1;
    for (int i = 1; i < 16; i += 2) {
        blk[i] = malloc(inside_size);
        if (!blk[i]) {
            alloc_ok = 0;
            return;
        }
        fill(blk[i], inside_size, (unsigned)i + 99);
    }
    for (int i = 1; i < 16; i += 2)
        if (!intact(blk[i], inside_size, (unsigned)i + 99))
            alloc_ok = 0;
}

static void job_free_blocks(void)
{
    for (int i = 0; i < 16; i++)
        free(blk[i]);
}

static void test_inside_one(size_t size)
{
    inside_size = size;
    on_worker(job_fill_blocks);
    report(alloc_ok, "%zu-byte blocks: the worker allocated and filled 16 blocks", size);
    on_worker(job_free_odd_blocks);
    purge_now();
    int inner = 0, inner_res = 0, head_res = 0, live_pages = 0, live_res = 0;
    for (int i = 0; i < 16; i++) {
        uintptr_t a = (uintptr_t)blk[i];
        for (uintptr_t pg = (a + OSP - 1) & ~(OSP - 1); pg + OSP <= a + size; pg += OSP) {
            if (i % 2 == 0) {
                live_pages++;
                live_res += resident((void *)pg) == 1;
            } else if (pg >= a + 32) {
                inner++;
                inner_res += resident((void *)pg) == 1;
            }
        }
        if (i % 2)
            head_res += resident((void *)a) == 1;
    }
    printf("# inside %zu: free blocks: %d of %d inner OS pages resident, %d of 8 first pages; "
           "live blocks: %d of %d\n",
           size, inner_res, inner, head_res, live_res, live_pages);
    report(inner > 8 && inner_res == 0,
           "%zu-byte blocks: the OS pages inside the 8 free blocks went back (%d of %d resident)",
           size, inner_res, inner);
    report(live_res == live_pages, "%zu-byte blocks: the 8 live blocks stayed resident (%d of %d)",
           size, live_res, live_pages);
    int ok = 1;
    for (int i = 0; i < 16; i += 2)
        ok &= intact(blk[i], size, (unsigned)i);
    report(ok, "%zu-byte blocks: the live blocks kept their contents", size);
    on_worker(job_refill_odd_blocks);
    report(alloc_ok, "%zu-byte blocks: blocks of that size are handed out again and hold data",
           size);
    on_worker(job_free_blocks);
}

static void test_inside(void)
{
    worker_start();
    test_inside_one((size_t)20 << 10);  /* extents the worker keeps in its cache */
    test_inside_one((size_t)200 << 10); /* extents back in the shared runs at once */
    worker_stop();
}

/* ---- busy: reclaim while threads allocate as fast as they can ----------------------- */

#define BUSY_THREADS 4
#define BUSY_SLOTS 512
static volatile int busy_stop;
static int busy_bad[BUSY_THREADS];
static unsigned long busy_ops[BUSY_THREADS];

static void *busy_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned char *slot[BUSY_SLOTS] = {0};
    size_t len[BUSY_SLOTS] = {0};
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
    while (!busy_stop) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned i = (unsigned)(x % BUSY_SLOTS);
        if (slot[i]) {
            if (!intact(slot[i], len[i], i + (unsigned)t * 1000))
                busy_bad[t]++;
            free(slot[i]);
            slot[i] = NULL;
        } else {
            unsigned k = (unsigned)(x >> 32) % 100;
            len[i] = k < 70   ? 16 + (x >> 40) % 500
                     : k < 95 ? 1024 + (x >> 40) % 40000
                              : 100000 + (x >> 40) % 200000;
            slot[i] = malloc(len[i]);
            if (!slot[i]) {
                busy_bad[t]++;
                continue;
            }
            fill(slot[i], len[i], i + (unsigned)t * 1000);
        }
        busy_ops[t]++;
    }
    for (unsigned i = 0; i < BUSY_SLOTS; i++) {
        if (slot[i] && !intact(slot[i], len[i], i + (unsigned)t * 1000))
            busy_bad[t]++;
        free(slot[i]);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_busy(void)
{
    pthread_t th[BUSY_THREADS];
    for (int t = 0; t < BUSY_THREADS; t++)
        pthread_create(&th[t], NULL, busy_main, (void *)(intptr_t)t);
    unsigned long calls = 0;
    size_t bytes = 0;
    double end = now_s() + 3.0;
    while (now_s() < end) {
        bytes += purge_now();
        calls++;
    }
    busy_stop = 1;
    int bad = 0;
    unsigned long ops = 0;
    for (int t = 0; t < BUSY_THREADS; t++) {
        pthread_join(th[t], NULL);
        bad += busy_bad[t];
        ops += busy_ops[t];
    }
    printf("# busy: %lu thpalloc_purge() calls gave back %zu bytes while %d threads made %lu "
           "calls\n",
           calls, bytes, BUSY_THREADS, ops);
    report(bad == 0, "no block lost its contents (%d bad) under %lu reclaims", bad, calls);
    report(ops > 10000 && calls > 100, "the threads and the reclaimer both made progress");
}

/* ---- fork: reclaim in one thread while another forks -------------------------------- */

static void *purge_loop(void *arg)
{
    (void)arg;
    while (!busy_stop)
        purge_now();
    return NULL;
}

static void test_fork(void)
{
    pthread_t th[2], p;
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, busy_main, (void *)(intptr_t)t);
    pthread_create(&p, NULL, purge_loop, NULL);
    int good = 0, n = 200;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* the child: its heap must not be held by a purger it does not have */
            for (int k = 0; k < 1000; k++)
                free(malloc(16 + (size_t)k * 40));
            purge_now();
            _exit(0);
        }
        int st;
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            good++;
    }
    busy_stop = 1;
    pthread_join(p, NULL);
    int bad = 0;
    for (int t = 0; t < 2; t++) {
        pthread_join(th[t], NULL);
        bad += busy_bad[t];
    }
    report(good == n, "%d of %d children forked during reclaims allocated and exited 0", good, n);
    report(bad == 0, "the parent's threads kept their blocks intact");
}

/* ---- recycle: heaps of exiting threads reused while the purger reclaims ------------- */

static void *short_lived(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    unsigned char *b[64];
    size_t len[64];
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        len[i] = 16 + (seed * 7919u + (unsigned)i * 104729u) % 30000;
        b[i] = malloc(len[i]);
        if (!b[i])
            return (void *)1;
        fill(b[i], len[i], seed + (unsigned)i);
    }
    for (int i = 0; i < 64; i += 2) {
        bad += !intact(b[i], len[i], seed + (unsigned)i);
        free(b[i]);
    }
    for (int i = 1; i < 64; i += 2) {
        bad += !intact(b[i], len[i], seed + (unsigned)i);
        free(b[i]);
    }
    return (void *)(uintptr_t)bad;
}

static void *spawner(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    unsigned long n = 0, bad = 0;
    while (!busy_stop) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)(id * 1000003u + n)) != 0)
            continue;
        void *r;
        pthread_join(t, &r);
        bad += (uintptr_t)r;
        n++;
    }
    busy_ops[id] = n;
    busy_bad[id] = (int)bad;
    return NULL;
}

static void test_recycle(void)
{
    /* idle heaps to reclaim, holding blocks */
    worker_start();
    on_worker(job_fill_small);
    on_worker(job_free_most_small);
    pthread_t sp[BUSY_THREADS];
    for (int t = 0; t < BUSY_THREADS; t++)
        pthread_create(&sp[t], NULL, spawner, (void *)(uintptr_t)t);
    unsigned long calls = 0;
    double end = now_s() + 3.0;
    while (now_s() < end) {
        purge_now();
        calls++;
    }
    busy_stop = 1;
    unsigned long threads = 0;
    int bad = 0;
    for (int t = 0; t < BUSY_THREADS; t++) {
        pthread_join(sp[t], NULL);
        threads += busy_ops[t];
        bad += busy_bad[t];
    }
    printf("# recycle: %lu short-lived threads, %lu thpalloc_purge() calls\n", threads, calls);
    report(bad == 0 && threads > 100,
           "%lu threads created and exited during %lu reclaims, their heaps recycled: every "
           "block intact (%d bad)",
           threads, calls, bad);
    report(live_intact(), "the idle worker's live blocks are intact");
    on_worker(job_free_live_small);
    worker_stop();
}

/* ---- background: the purger does it on its own after purge_delay --------------------- */

static void job_churn(void)
{
    /* 64 MiB through the arena: enough pending purge to start the background purger */
    for (int r = 0; r < 4; r++) {
        void *b[4];
        for (int i = 0; i < 4; i++) {
            b[i] = malloc((size_t)4 << 20);
            if (b[i])
                memset(b[i], 1, (size_t)4 << 20);
        }
        for (int i = 0; i < 4; i++)
            free(b[i]);
    }
}

static void test_background(void)
{
    worker_start();
    on_worker(job_churn);
    on_worker(job_fill_small);
    on_worker(job_free_most_small);
    double t0 = now_s();
    int holes_res = -1, holes = 0, lr, l;
    double gone = -1;
    while (now_s() - t0 < 3.0) {
        count_pages(KEEP_EVERY, &holes_res, &holes, &lr, &l);
        if (holes_res == 0) {
            gone = now_s() - t0;
            break;
        }
        usleep(20000);
    }
    printf("# background: the free OS pages went back after %.0f ms (purge_delay 200ms)\n",
           gone * 1000);
    report(gone >= 0.15 && gone <= 1.5,
           "with no call from the idle worker, its free OS pages went back between "
           "purge_delay and 1.5 s (%.0f ms)",
           gone * 1000);
    report(lr == l, "the OS pages with live blocks stayed (%d of %d)", lr, l);
    report(live_intact(), "the live blocks kept their contents");
    on_worker(job_free_live_small);
    worker_stop();
}

/* ---- nobarrier: without membarrier, nothing is touched ------------------------------- */

static int refuse_membarrier(void)
{
    return seccomp_deny(__NR_membarrier, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
}

/* holes-filtered: a filter that kills the process on process_madvise, as an allow-list that
 * does not know the call would (the library gives the holes back with one madvise each). */
static void test_holes_filtered(void)
{
#ifdef SYS_process_madvise
    report(seccomp_deny(SYS_process_madvise, SECCOMP_RET_KILL_PROCESS) == 0,
           "a seccomp filter kills the process on process_madvise");
#endif
    test_holes();
}

static void test_nobarrier(void)
{
    report(refuse_membarrier() == 0, "a seccomp filter refuses membarrier (ENOSYS)");
    worker_start();
    on_worker(job_fill_small);
    on_worker(job_free_most_small);
    int holes, lr, l;
    int res = reclaim_and_count(KEEP_EVERY, &holes, &lr, &l);
    report(res == holes, "the idle heap is left alone (%d of %d free OS pages resident)", res,
           holes);
    report(live_intact(), "the live blocks are intact");
    again_n = NSMALL;
    on_worker(job_alloc_again);
    report(again_ok, "the worker allocates normally");
    on_worker(job_free_again);
    on_worker(job_free_live_small);
    worker_stop();
}

/* ---- loop: malloc/free of one block in a loop keeps its page ------------------------ */

struct stats_head {
    uint64_t reserved, committed, huge_advised, in_use, purge_pending, purged;
};

static void test_loop(void)
{
    int (*get)(struct stats_head *, size_t) =
        (int (*)(struct stats_head *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    static const size_t sizes[] = {100, 5000, 20000, 60000, 200000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        int kept = 1, early = 0;
        struct stats_head a, b;
        for (int i = 0; i < 1000; i++) {
            void *p = malloc(n);
            ((volatile char *)p)[0] = 1;
            get(&a, sizeof a);
            free(p);
            get(&b, sizeof b);
            /* Nothing goes back to the kernel, and no chunk to the arena. A small block's
             * page is kept; an extent (above 8 KiB) goes back to the shared runs, resident,
             * and counts as waiting for purge until the next malloc takes it again. In the
             * first pairs a small class may once leave its sub-page for a page of its own
             * (SUB_KEEPS_MAX in lib/types.h: 32), whose frees take the fast path; or,
             * with no purger thread, trim the page it keeps once, until the next malloc
             * carves it again (a refault: heap.c, page_trim_kept). */
            int same = b.purged == a.purged && b.committed == a.committed &&
                       (n > 8192 || b.purge_pending == a.purge_pending);
            if (i < 64)
                early += !same;
            else
                kept &= same;
        }
        report(kept && early <= (n <= 8192 ? 1 : 0),
               "1000 malloc/free pairs of %zu bytes: no free gives the block's page back "
               "(%d changes in the first 64; pending %llu -> %llu, committed %llu -> %llu "
               "bytes at the last)",
               n, early, (unsigned long long)a.purge_pending, (unsigned long long)b.purge_pending,
               (unsigned long long)a.committed, (unsigned long long)b.committed);
    }
}

/* ---- emptied: a thread waits while another frees what it allocated ---------------------- */

#define NDISP 16000 /* 256-byte blocks: 4 MiB */
static unsigned char *disp[NDISP];

/* The process's anonymous memory (smaps_rollup), KiB. */
static long anon_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Anonymous: %ld", &v) == 1)
            break;
    fclose(f);
    return v;
}

static void job_free_alloc_disp(void)
{
    for (size_t i = 0; i < NDISP; i++)
        free(disp[i]); /* another thread's blocks: remote frees that nobody collects */
    alloc_ok = 1;
    for (size_t i = 0; i < NDISP && alloc_ok; i++) {
        disp[i] = malloc(256);
        alloc_ok = disp[i] != NULL;
        if (alloc_ok)
            fill(disp[i], 256, (unsigned)i);
    }
}

static void job_free_disp(void)
{
    for (size_t i = 0; i < NDISP; i++)
        free(disp[i]);
}

static void test_emptied(void)
{
    worker_start();
    alloc_ok = 1;
    for (size_t i = 0; i < NDISP && alloc_ok; i++) {
        disp[i] = malloc(256);
        alloc_ok = disp[i] != NULL;
        if (alloc_ok)
            memset(disp[i], 7, 256);
    }
    report(alloc_ok, "main allocated %d blocks of 256 B", NDISP);
    long before = anon_kib();
    /* main waits in pthread_cond_wait, outside the allocator, while the worker frees its
     * blocks and needs chunks of its own for as many */
    on_worker(job_free_alloc_disp);
    long after = anon_kib();
    int intact_all = 1;
    for (size_t i = 0; i < NDISP && alloc_ok; i++)
        intact_all &= intact(disp[i], 256, (unsigned)i);
    report(alloc_ok && intact_all, "the worker freed them and allocated as many, intact");
    report(before > 0 && after >= 0 && after <= before + 1024,
           "the pages the worker emptied in the waiting thread's heap went back before it took "
           "new ones: anonymous memory %ld -> %ld KiB (4 MiB more without)",
           before, after);
    on_worker(job_free_disp);
    worker_stop();
}

/* ---- reuse: what is freed into full pages is taken again before new memory --------------- */

#define REUSE_BASE 400000 /* long-lived 64-byte blocks: 300000 first, the rest among the others */
#define REUSE_RING 50000  /* short-lived ones, freed oldest first */
#define REUSE_OPS 3000000
static void *reuse_base[REUSE_BASE], *reuse_ring[REUSE_RING];

static void test_reuse(void)
{
    /* the arrays are the program's own .bss: written before the first figure */
    memset(reuse_base, 0, sizeof reuse_base);
    memset(reuse_ring, 0, sizeof reuse_ring);
    long before = anon_kib();
    size_t nbase = 0, head = 0, n = 0;
    int ok = 1;
    for (; nbase < 300000 && ok; nbase++)
        ok = (reuse_base[nbase] = malloc(64)) != NULL;
    uint64_t x = 88172645463325252u;
    for (long i = 0; i < REUSE_OPS && ok; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (n == REUSE_RING) {
            free(reuse_ring[head]);
            head = (head + 1) % REUSE_RING;
            n--;
        }
        void *p = malloc(64);
        ok = p != NULL;
        memset(p, 1, 64);
        reuse_ring[(head + n++) % REUSE_RING] = p;
        /* now and then a long-lived block among them: their pages never empty */
        if ((x & 63) == 0 && nbase < REUSE_BASE && ok)
            ok = (reuse_base[nbase++] = malloc(64)) != NULL;
    }
    long after = anon_kib();
    size_t live_kib = (nbase + n) * 64 / 1024;
    report(ok && before > 0 && after > 0 &&
               (size_t)(after - before) <= live_kib + live_kib / 16 + 1024,
           "%zu long-lived and %zu short-lived 64-byte blocks, 3 M replaced oldest first: "
           "anonymous memory +%ld KiB for %zu KiB live (bound +6.25 %% + 1 MiB)",
           nbase, n, after - before, live_kib);
    while (n) {
        free(reuse_ring[head]);
        head = (head + 1) % REUSE_RING;
        n--;
    }
    for (size_t i = 0; i < nbase; i++)
        free(reuse_base[i]);
}

/* ---- cache-age: a busy thread's cached extents go back after purge_delay ------------- */

#define AGE_BLOCKS 3 /* 120 KiB: the cache holds 128 */
#define AGE_SIZE ((size_t)40 << 10)
static unsigned char *age_block[AGE_BLOCKS];

static void job_age_fill_free(void)
{
    free(malloc(SMALL)); /* a heap of its own: extents alone do not make one */
    for (int i = 0; i < AGE_BLOCKS; i++) {
        age_block[i] = malloc(AGE_SIZE);
        if (age_block[i])
            fill(age_block[i], AGE_SIZE, (unsigned)i);
    }
    for (int i = 0; i < AGE_BLOCKS; i++)
        free(age_block[i]); /* into the worker's extent cache */
}

/* 1.5 s of small blocks taken and given back: slow paths all along, no extent. */
static void job_age_busy(void)
{
    static void *b[2000];
    double t0 = now_s();
    while (now_s() - t0 < 1.5) {
        for (int i = 0; i < 2000; i++)
            b[i] = malloc(SMALL);
        for (int i = 0; i < 2000; i++)
            free(b[i]);
    }
}

static int age_resident(void)
{
    int n = 0;
    for (int i = 0; i < AGE_BLOCKS; i++)
        for (size_t off = 0; off < AGE_SIZE; off += OSP)
            n += resident(age_block[i] + off) == 1;
    return n;
}

static void test_cache_age(void)
{
    free(malloc(SMALL)); /* the main thread's heap: with the worker's, the caches are on */
    worker_start();
    on_worker(job_age_fill_free);
    int pages = (int)(AGE_BLOCKS * AGE_SIZE / OSP), before = age_resident();
    report(before == pages,
           "the worker freed %d blocks of %zu KiB into its cache, "
           "resident (%d of %d OS pages)",
           AGE_BLOCKS, AGE_SIZE >> 10, before, pages);
    on_worker(job_age_busy);
    int after = age_resident();
    report(after == 0,
           "after 1.5 s of work with no extent (purge_delay 200ms), none of them is "
           "resident (%d of %d): the busy thread's cache gave them back",
           after, pages);
    worker_stop();
}

/* Until a second thread allocates, the process frees its extents into the shared runs at
 * once, so that a request of another length reuses what it freed; afterwards a freed extent
 * waits in the freeing thread's cache for a request of its length, or up to a quarter
 * shorter (extent-cache.c). Run
 * before any other thread of this program exists. */
static void *alloc_once(void *arg)
{
    free(malloc(SMALL));
    return arg;
}

static void test_extent_reuse(void)
{
    free(malloc(SMALL)); /* a heap for the main thread: extents alone do not make one */
    char *a = malloc(40 << 10), *fence = malloc(40 << 10);
    free(a);
    char *b = malloc(12 << 10);
    report(b == a,
           "one thread: a freed 40 KiB extent serves the next 12 KiB request "
           "(%p, freed %p)",
           (void *)b, (void *)a);
    pthread_t t;
    if (pthread_create(&t, NULL, alloc_once, NULL) || pthread_join(t, NULL)) {
        report(0, "pthread_create");
        return;
    }
    char *c = malloc(40 << 10), *fence2 = malloc(40 << 10);
    free(c);
    char *d = malloc(12 << 10);
    report(d != c,
           "after a second thread allocated, the freed 40 KiB extent waits "
           "in the thread's cache (12 KiB at %p, freed %p)",
           (void *)d, (void *)c);
    char *e = malloc(40 << 10);
    report(e == c, "and the next 40 KiB request takes it from there (%p)", (void *)e);
    /* A request up to a quarter shorter takes it too, whole; a shorter one does not. */
    size_t (*usable)(void *) = (size_t(*)(void *))dlsym(RTLD_DEFAULT, "malloc_usable_size");
    free(e);
    char *f = malloc(12 << 10); /* the resident run left of the first 40 KiB fits it */
    report(f != c, "a 12 KiB request leaves the cached 40 KiB extent (%p, cached %p)", (void *)f,
           (void *)c);
    char *g = malloc(32 << 10);
    report(g == c && usable(g) == (40 << 10),
           "a 32 KiB request takes it, whole (%p, usable %zu bytes)", (void *)g, usable(g));
    free(b);
    free(d);
    free(f);
    free(g);
    free(fence);
    free(fence2);
}

/* A thread's extent cache never makes it touch fresh memory: a request that no resident
 * free run fits gets the cached blocks back in the runs first, merged, and takes them. */
static void test_extent_guard(void)
{
    free(malloc(SMALL)); /* a heap for the main thread */
    pthread_t t;
    if (pthread_create(&t, NULL, alloc_once, NULL) || pthread_join(t, NULL)) {
        report(0, "pthread_create");
        return;
    }
    char *fence0 = malloc(40 << 10), *q[4], *fence1;
    for (int i = 0; i < 4; i++)
        q[i] = malloc(48 << 10);
    fence1 = malloc(40 << 10);
    for (int i = 0; i < 4; i++)
        memset(q[i], 0x5a, 48 << 10);
    report(q[1] == q[0] + (48 << 10) && q[3] == q[0] + 3 * (48 << 10),
           "four 48 KiB blocks side by side (%p .. %p)", (void *)q[0], (void *)q[3]);
    for (int i = 0; i < 4; i++)
        free(q[i]); /* into the thread's cache: 192 KiB */
    char *big = malloc(160 << 10);
    report(big == q[0],
           "a 160 KiB request that no resident run fits takes the cached blocks, merged "
           "(%p, first cached %p)",
           (void *)big, (void *)q[0]);
    free(big);
    free(fence0);
    free(fence1);
}

/* ---- dirty-count: an empty page's slot counts what was carved of it ------------------- */

#define NDIRTY 64
static void job_dirty_count(void)
{
    int (*get)(struct stats_head *, size_t) =
        (int (*)(struct stats_head *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    size_t (*usable)(void *) = (size_t(*)(void *))dlsym(RTLD_DEFAULT, "malloc_usable_size");
    const uintptr_t medium_page = (uintptr_t)64 << 10; /* MEDIUM_PAGE_SIZE */
    char *p[NDIRTY];
    for (int i = 0; i < NDIRTY; i++) {
        p[i] = malloc(6000);
        memset(p[i], 0x5a, 6000);
    }
    size_t bs = usable(p[0]);
    uintptr_t last = (uintptr_t)p[NDIRTY - 1] & ~(medium_page - 1);
    /* One block freed from each other page: they are back in the class's queue, so the
     * last page, once empty, is not its class's only page and goes back to its chunk,
     * dirty (a page kept empty would count nothing). */
    uintptr_t seen = 0;
    unsigned k = 0;
    for (int i = 0; i < NDIRTY; i++) {
        uintptr_t page = (uintptr_t)p[i] & ~(medium_page - 1);
        if (page == last) {
            k++;
        } else if (page != seen) {
            seen = page;
            free(p[i]);
            p[i] = NULL;
        }
    }
    struct stats_head a, b;
    get(&a, sizeof a);
    for (int i = 0; i < NDIRTY; i++)
        if (p[i] && ((uintptr_t)p[i] & ~(medium_page - 1)) == last) {
            free(p[i]);
            p[i] = NULL;
        }
    get(&b, sizeof b);
    /* A block above 4 KiB is carved one at a time (page_extend): k blocks, rounded to
     * the OS page, are all of the slot that was ever written. */
    uint64_t want = ((uint64_t)k * bs + OSP - 1) & ~(uint64_t)(OSP - 1);
    uint64_t got = b.purge_pending - a.purge_pending;
    report(k >= 1 && want < medium_page && got == want,
           "the emptied 64 KiB page of %u blocks of %zu bytes counts %llu bytes waiting for "
           "purge (want %llu: what was carved, not the whole slot)",
           k, bs, (unsigned long long)got, (unsigned long long)want);
    purge_now();
    struct stats_head c;
    get(&c, sizeof c);
    report(c.purged - b.purged >= want && c.purge_pending <= a.purge_pending,
           "thpalloc_purge gives it back: purged +%llu bytes, pending %llu -> %llu bytes",
           (unsigned long long)(c.purged - b.purged), (unsigned long long)b.purge_pending,
           (unsigned long long)c.purge_pending);
    for (int i = 0; i < NDIRTY; i++)
        free(p[i]);
}

static void test_dirty_count(void)
{
    worker_start(); /* a fresh heap: its pages' slots are fresh, so carved is written */
    on_worker(job_dirty_count);
    worker_stop();
}

/* A page kept empty while the purger thread runs is not trimmed at its retire (the purger
 * reclaims it once the thread is idle), and a loop of malloc/free then keeps it without the
 * retire (kept_quiet, alloc.c); a fork's child has no purger thread, so there the next
 * retire trims it (heap.c, page_trim_kept; thread.c, heap_forget_kept). */
static void *kf_blocks[400000];
static void test_kept_fork(void)
{
    /* 40 MB freed waits for its purge: the purger thread starts at a free's safe point */
    size_t n = sizeof kf_blocks / sizeof kf_blocks[0];
    for (size_t i = 0; i < n; i++)
        kf_blocks[i] = malloc(100);
    for (size_t i = 0; i < n; i++)
        free(kf_blocks[i]);
    free(malloc(100 << 10));
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    unsigned char *p = NULL;
    for (int i = 0; i < 1000; i++) {
        p = malloc(SMALL);
        p[0] = (unsigned char)i;
        free(p);
    }
    int threads = 0;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            threads = atoi(line + 8);
    if (f)
        fclose(f);
    report(threads >= 2, "the purger thread runs (%d threads)", threads);
    report(resident(p) == 1, "the parent's kept page stays resident at its last free");
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *q = malloc(SMALL);
        q[0] = 1;
        free(q);
        /* the same 16 KiB page (a class of 48 B has one here) */
        _exit(((uintptr_t)q ^ (uintptr_t)p) >= 16384 ? 2 : resident(p) == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    report(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "in the child, without a purger thread, the free that empties the kept "
           "page again trims it (child exit %d: 1 resident, 2 another page)",
           WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static const struct test_mode modes[] = {
    {"kept", test_kept},
    {"holes", test_holes},
    {"holes-filtered", test_holes_filtered},
    {"hole-double-free", test_hole_double_free},
    {"inside", test_inside},
    {"busy", test_busy},
    {"fork", test_fork},
    {"kept-fork", test_kept_fork},
    {"background", test_background},
    {"nobarrier", test_nobarrier},
    {"loop", test_loop},
    {"recycle", test_recycle},
    {"reset-double-free", test_reset_double_free},
    {"remote", test_remote},
    {"split", test_split},
    {"emptied", test_emptied},
    {"reuse", test_reuse},
    {"extent-reuse", test_extent_reuse},
    {"cache-age", test_cache_age},
    {"extent-guard", test_extent_guard},
    {"dirty-count", test_dirty_count},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *what = argc > 1 ? argv[1] : "";
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "thpalloc_active");
    purge_fn = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    if (!active || !purge_fn || !active()) {
        printf("not ok - thpalloc is not the malloc in charge\n");
        return 1;
    }
    if (test_mode_run("purge-reclaim", NULL, modes, sizeof modes / sizeof *modes, what))
        return 2;
    printf("end\n");
    return report_failures != 0;
}
