/* private: private working sets in N threads.
 *
 * usage: private [THREADS [OPS_MILLIONS [LIVE]]]   (defaults 2, 4, 20000)
 *
 * Each thread churns its own working set of about LIVE objects of 16..4096 bytes (skewed
 * to small sizes): replace a random object, write it, read the old one back.  Nothing is
 * shared, so an allocator should scale linearly here; a global lock or false sharing
 * between thread caches shows up directly.  OPS_MILLIONS is the total over all threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE_TABLE 4096

struct worker {
    pthread_t th;
    unsigned id;
    uint64_t ops;
    size_t live;
    uint64_t sum;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    size_t *sizes = bench_map(SIZE_TABLE * sizeof *sizes);
    bench_size_table(sizes, SIZE_TABLE, 16, 4096, 500 + w->id);
    unsigned char **slot = bench_map(w->live * sizeof *slot);
    size_t *len = bench_map(w->live * sizeof *len);
    bench_rng r;
    bench_rng_seed(&r, 600 + w->id);
    uint64_t sum = 0;
    for (size_t k = 0; k < w->live; k++) {
        len[k] = sizes[k % SIZE_TABLE];
        slot[k] = bench_xmalloc(len[k]);
        memset(slot[k], (int)k, len[k]);
    }
    for (uint64_t i = 0; i < w->ops; i++) {
        uint64_t x = bench_rng_next(&r);
        size_t k = (size_t)(((unsigned __int128)(x >> 16) * w->live) >> 48);
        unsigned char *p = slot[k];
        size_t n = len[k];
        sum += p[0] + p[n - 1];
        free(p);
        n = sizes[x & (SIZE_TABLE - 1)];
        p = bench_xmalloc(n);
        size_t head = n < 128 ? n : 128;
        memset(p, (int)i, head);
        p[n - 1] = (unsigned char)x;
        slot[k] = p;
        len[k] = n;
    }
    if (w->id == 0)
        bench_sample();
    for (size_t k = 0; k < w->live; k++)
        free(slot[k]);
    bench_unmap(slot, w->live * sizeof *slot);
    bench_unmap(len, w->live * sizeof *len);
    bench_unmap(sizes, SIZE_TABLE * sizeof *sizes);
    w->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[THREADS [OPS_MILLIONS [LIVE]]]";
    unsigned threads = (unsigned)bench_arg(argc, argv, 1, 2, usage);
    uint64_t ops = (uint64_t)(bench_arg(argc, argv, 2, 4, usage) * 1e6);
    size_t live = (size_t)bench_arg(argc, argv, 3, 20000, usage);
    if (threads < 1)
        threads = 1;
    if (live < 1)
        live = 1;

    struct worker *w = bench_map(threads * sizeof *w);
    double t0 = bench_now();
    for (unsigned t = 0; t < threads; t++) {
        w[t].id = t;
        w[t].ops = ops / threads;
        w[t].live = live;
        if (pthread_create(&w[t].th, NULL, run, &w[t])) {
            fprintf(stderr, "private: pthread_create failed\n");
            return 1;
        }
    }
    uint64_t sum = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        sum += w[t].sum;
    }
    double t1 = bench_now();
    bench_sink = sum;
    char extra[96];
    snprintf(extra, sizeof extra, "threads=%u ops=%llu", threads, (unsigned long long)ops);
    bench_report("private", t1 - t0, extra);
    return 0;
}
