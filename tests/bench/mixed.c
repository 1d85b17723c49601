/* mixed: many threads allocating and freeing mixed sizes with short lifetimes.
 *
 * usage: mixed [THREADS [OPS_MILLIONS [LIVE]]]   (defaults 4, 4, 256)
 *
 * Each thread keeps a bounded live set of LIVE slots and replaces a random one per step with
 * a block of 16 B..1 MiB: sizes log-uniform over that range (each power of two as likely as
 * the next), so small, medium and large paths all take part, every block written at its
 * head and tail. Nothing is shared between threads. OPS_MILLIONS is the total over all
 * threads. The category where a general allocator's many size paths meet thread caches. */
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
    bench_rng r;
    bench_rng_seed(&r, 900 + w->id);
    /* log-uniform in [16 B, 1 MiB): a power of two from 2^4 to 2^19, then uniform below
     * the next one */
    for (size_t i = 0; i < SIZE_TABLE; i++) {
        size_t base = (size_t)16 << bench_rng_below(&r, 16);
        sizes[i] = base + (size_t)bench_rng_below(&r, base);
    }
    unsigned char **slot = bench_map(w->live * sizeof *slot);
    size_t *len = bench_map(w->live * sizeof *len);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < w->ops; i++) {
        uint64_t x = bench_rng_next(&r);
        size_t k = (size_t)(((unsigned __int128)(x >> 16) * w->live) >> 48);
        if (slot[k]) {
            sum += slot[k][0] + slot[k][len[k] - 1];
            free(slot[k]);
        }
        size_t n = sizes[x & (SIZE_TABLE - 1)];
        unsigned char *p = bench_xmalloc(n);
        memset(p, (int)i, n < 64 ? n : 64);
        p[n - 1] = (unsigned char)x;
        slot[k] = p;
        len[k] = n;
        if (w->id == 0 && i == w->ops / 2)
            bench_sample();
    }
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
    unsigned threads = (unsigned)bench_count(argc, argv, 1, 4, usage);
    uint64_t ops = (uint64_t)(bench_arg(argc, argv, 2, 4, usage) * 1e6);
    size_t live = (size_t)bench_count(argc, argv, 3, 256, usage);

    struct worker *w = bench_map(threads * sizeof *w);
    double t0 = bench_now();
    for (unsigned t = 0; t < threads; t++) {
        w[t].id = t;
        w[t].ops = ops / threads;
        w[t].live = live;
        w[t].th = bench_thread(run, &w[t], 0);
    }
    uint64_t sum = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        sum += w[t].sum;
    }
    double t1 = bench_now();
    bench_sink = sum;
    char extra[96];
    snprintf(extra, sizeof extra, "threads=%u ops=%llu live=%zu", threads, (unsigned long long)ops,
             live);
    bench_report("mixed", t1 - t0, extra);
    return 0;
}
