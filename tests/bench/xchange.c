/* xchange: short-lived threads exchanging mixed-size blocks, as in a threaded server.
 *
 * usage: xchange [THREADS_TOTAL [CONCURRENT [OPS_PER_THREAD [SLOTS]]]]
 *        (defaults 800, 4, 3000, 2048)
 *
 * A shared table of SLOTS blocks.  CONCURRENT worker threads run at any time; each makes
 * OPS_PER_THREAD exchanges and exits, and the main thread starts another in its place
 * until THREADS_TOTAL have run: threads are created and exit all the time.  An exchange
 * allocates a block (16 B .. 64 KiB, skewed towards small; one in 128 of 64 KiB .. 1 MiB),
 * writes it (header, every page, tail), swaps it into a random slot and reads and frees
 * the block it took out, which another thread (often one that has exited) allocated: a
 * request buffer allocated by one thread and released by another.  elapsed_s: from the
 * first thread to the last one's end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static unsigned char **slot;
static size_t nslots;
static uint64_t ops_per_thread;
static uint64_t total_sum;

static size_t block_size(bench_rng *r)
{
    if (bench_rng_below(r, 128) == 0)
        return (64 << 10) + (size_t)bench_rng_below(r, (1 << 20) - (64 << 10));
    return bench_small_size(r, 16, 64 << 10);
}

static void *worker(void *arg)
{
    bench_rng r;
    bench_rng_seed(&r, (uint64_t)(uintptr_t)arg);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < ops_per_thread; i++) {
        size_t n = block_size(&r);
        unsigned char *p = bench_xmalloc(n);
        bench_block_fill(p, n, (unsigned char)i);
        size_t k = (size_t)bench_rng_below(&r, nslots);
        unsigned char *old = __atomic_exchange_n(&slot[k], p, __ATOMIC_ACQ_REL);
        if (old) {
            bench_block_read(old, &sum);
            free(old);
        }
    }
    __atomic_fetch_add(&total_sum, sum, __ATOMIC_RELAXED);
    bench_running_leave();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[THREADS_TOTAL [CONCURRENT [OPS_PER_THREAD [SLOTS]]]]";
    unsigned total = (unsigned)bench_count(argc, argv, 1, 800, usage);
    unsigned conc = (unsigned)bench_count(argc, argv, 2, 4, usage);
    ops_per_thread = bench_count(argc, argv, 3, 3000, usage);
    nslots = (size_t)bench_count(argc, argv, 4, 2048, usage);
    slot = bench_map(nslots * sizeof *slot);

    double t0 = bench_now();
    for (unsigned created = 0; created < total; created++) {
        bench_running_enter(conc);
        /* detached: the main thread only counts the running ones, it never joins */
        bench_thread(worker, (void *)(uintptr_t)(created + 1), 1);
        if (created % 16 == 0)
            bench_sample();
    }
    bench_running_wait();
    double t1 = bench_now();

    uint64_t sum = total_sum;
    for (size_t k = 0; k < nslots; k++) {
        if (slot[k]) {
            bench_block_read(slot[k], &sum);
            free(slot[k]);
        }
    }
    bench_sink = sum;
    char extra[128];
    snprintf(extra, sizeof extra, "threads_created=%u concurrent=%u ops=%llu slots=%zu", total,
             conc, (unsigned long long)total * ops_per_thread, nslots);
    bench_report("xchange", t1 - t0, extra);
    bench_unmap(slot, nslots * sizeof *slot);
    return 0;
}
