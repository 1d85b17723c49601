/* fixed: the tightest loop there is: malloc and free of one small size, in THREADS threads.
 *
 * usage: fixed [THREADS [OPS_MILLIONS [SIZE [BATCH]]]]   (defaults 1, 20, 32, 1)
 *
 * Each thread allocates BATCH blocks of SIZE bytes, writes a byte of each and frees them in
 * the same order, OPS_MILLIONS times in all (over all threads). With BATCH 1 it is the fast
 * path's cost alone: one malloc and one free of the same block. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH_MAX 1024

struct worker {
    pthread_t th;
    uint64_t ops;
    size_t size, batch;
    uint64_t sum;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    unsigned char *b[BATCH_MAX];
    uint64_t sum = 0;
    for (uint64_t i = 0; i < w->ops; i += w->batch) {
        for (size_t k = 0; k < w->batch; k++) {
            b[k] = bench_xmalloc(w->size);
            b[k][0] = (unsigned char)k;
        }
        for (size_t k = 0; k < w->batch; k++) {
            sum += b[k][0];
            free(b[k]);
        }
    }
    w->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[THREADS [OPS_MILLIONS [SIZE [BATCH]]]]";
    unsigned threads = (unsigned)bench_count(argc, argv, 1, 1, usage);
    uint64_t ops = (uint64_t)(bench_arg(argc, argv, 2, 20, usage) * 1e6);
    size_t size = (size_t)bench_count(argc, argv, 3, 32, usage);
    size_t batch = (size_t)bench_count(argc, argv, 4, 1, usage);
    if (batch > BATCH_MAX)
        batch = BATCH_MAX;

    struct worker *w = bench_map(threads * sizeof *w);
    double t0 = bench_now();
    for (unsigned t = 0; t < threads; t++) {
        w[t].ops = ops / threads;
        w[t].size = size;
        w[t].batch = batch;
        w[t].th = bench_thread(run, &w[t], 0);
    }
    uint64_t sum = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        sum += w[t].sum;
    }
    double t1 = bench_now();
    bench_sample();
    bench_sink = sum;
    char extra[128];
    snprintf(extra, sizeof extra, "threads=%u ops=%llu size=%zu batch=%zu", threads,
             (unsigned long long)ops, size, batch);
    bench_report("fixed", t1 - t0, extra);
    return 0;
}
