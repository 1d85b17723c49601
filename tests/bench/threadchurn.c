/* threadchurn: batches of fresh threads that allocate, free and exit.
 *
 * usage: threadchurn [BATCHES [THREADS [OPS [LIVE]]]]   (defaults 100, 8, 40000, 1000)
 *
 * Each batch starts THREADS new threads.  A thread allocates LIVE blocks (mostly 16..1024
 * bytes, skewed; one in 32 of 4..32 KiB), replaces OPS random ones (free, malloc, write),
 * then frees three quarters of what it holds and exits, leaving the other quarter to the
 * main thread, which reads and frees those blocks after joining the batch (frees of blocks
 * whose owner has exited).  A program that serves jobs with threads created on demand
 * does this all day: what matters is whether the memory of exited threads is reused, so
 * the runner runs this at several batch counts and compares the peaks (VmHWM), which a
 * good allocator keeps flat.  rss_end_kib: VmRSS after the last batch, everything freed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

struct worker {
    unsigned char **slot; /* LIVE blocks; the kept quarter stays here for main */
    uint64_t seed;
    uint64_t sum;
    int sample; /* this thread records the RSS sample at its peak */
};

static uint64_t ops;
static size_t live;

static size_t block_size(bench_rng *r)
{
    if (bench_rng_below(r, 32) == 0)
        return 4096 + (size_t)bench_rng_below(r, 28 * 1024);
    return bench_small_size(r, 16, 1024);
}

static unsigned char *new_block(bench_rng *r, uint64_t tag)
{
    size_t n = block_size(r);
    unsigned char *p = bench_xmalloc(n);
    bench_block_fill(p, n, (unsigned char)tag);
    return p;
}

static void *worker(void *arg)
{
    struct worker *w = arg;
    bench_rng r;
    bench_rng_seed(&r, w->seed);
    for (size_t k = 0; k < live; k++)
        w->slot[k] = new_block(&r, k);
    for (uint64_t i = 0; i < ops; i++) {
        size_t k = (size_t)bench_rng_below(&r, live);
        bench_block_read(w->slot[k], &w->sum);
        free(w->slot[k]);
        w->slot[k] = new_block(&r, i);
        if (w->sample && i == ops / 2)
            bench_sample();
    }
    /* keep every fourth block for the main thread to free after the join */
    for (size_t k = 0; k < live; k++) {
        if (k % 4 != 0) {
            bench_block_read(w->slot[k], &w->sum);
            free(w->slot[k]);
            w->slot[k] = NULL;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[BATCHES [THREADS [OPS [LIVE]]]]";
    unsigned batches = (unsigned)bench_count(argc, argv, 1, 100, usage);
    unsigned threads = (unsigned)bench_count(argc, argv, 2, 8, usage);
    ops = bench_count(argc, argv, 3, 40000, usage);
    live = (size_t)bench_count(argc, argv, 4, 1000, usage);

    struct worker *w = bench_map(threads * sizeof *w);
    unsigned char **slots = bench_map(threads * live * sizeof *slots);
    pthread_t *tid = bench_map(threads * sizeof *tid);
    uint64_t sum = 0;

    double t0 = bench_now();
    for (unsigned b = 0; b < batches; b++) {
        for (unsigned t = 0; t < threads; t++) {
            w[t].slot = slots + (size_t)t * live;
            w[t].seed = (uint64_t)b * threads + t + 1;
            w[t].sum = 0;
            w[t].sample = (t == 0);
            tid[t] = bench_thread(worker, &w[t], 0);
        }
        for (unsigned t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        for (unsigned t = 0; t < threads; t++) {
            sum += w[t].sum;
            for (size_t k = 0; k < live; k += 4) {
                bench_block_read(w[t].slot[k], &sum);
                free(w[t].slot[k]);
            }
        }
    }
    double t1 = bench_now();
    bench_sink = sum;
    char extra[160];
    snprintf(extra, sizeof extra,
             "batches=%u threads=%u threads_created=%llu ops=%llu rss_end_kib=%ld", batches,
             threads, (unsigned long long)batches * threads,
             (unsigned long long)batches * threads * (ops + live),
             bench_proc_kib("/proc/self/status", "VmRSS"));
    bench_report("threadchurn", t1 - t0, extra);
    return 0;
}
