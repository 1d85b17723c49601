/* handoff: thousands of short-lived threads, each leaving a small long-lived object that a
 * later thread frees.
 *
 * usage: handoff [THREADS [CONCURRENT [KEEP]]]   (defaults 5000, 4, 256)
 *
 * THREADS threads are started, at most CONCURRENT at a time. Each allocates a few scratch
 * blocks it frees itself and one 16..256 B object it puts into a shared ring of KEEP slots;
 * the object it displaces (another, finished thread's) it frees. So most frees of the kept
 * objects are remote frees into the heap of a thread that has exited. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char **ring;
static size_t keep, ring_next;
static uint64_t seen;

static void *run(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    bench_rng r;
    bench_rng_seed(&r, 7000 + id);
    unsigned char *scratch[8];
    for (int k = 0; k < 8; k++) {
        size_t n = bench_small_size(&r, 16, 1024);
        scratch[k] = bench_xmalloc(n);
        memset(scratch[k], k, n);
    }
    size_t n = 16 + (size_t)bench_rng_below(&r, 241);
    unsigned char *obj = bench_xmalloc(n);
    memset(obj, (int)id, n);
    for (int k = 0; k < 8; k++)
        free(scratch[k]);
    pthread_mutex_lock(&ring_lock);
    unsigned char *old = ring[ring_next];
    ring[ring_next] = obj;
    ring_next = (ring_next + 1) % keep;
    if (old)
        seen += old[0];
    pthread_mutex_unlock(&ring_lock);
    free(old);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[THREADS [CONCURRENT [KEEP]]]";
    uint64_t threads = bench_count(argc, argv, 1, 5000, usage);
    unsigned conc = (unsigned)bench_count(argc, argv, 2, 4, usage);
    keep = (size_t)bench_count(argc, argv, 3, 256, usage);
    ring = bench_map(keep * sizeof *ring);
    pthread_t *th = bench_map(conc * sizeof *th);

    double t0 = bench_now();
    for (uint64_t i = 0; i < threads; i += conc) {
        unsigned m = threads - i < conc ? (unsigned)(threads - i) : conc;
        for (unsigned t = 0; t < m; t++)
            th[t] = bench_thread(run, (void *)(uintptr_t)(i + t), 0);
        for (unsigned t = 0; t < m; t++)
            pthread_join(th[t], NULL);
        if (i == threads / 2 / conc * conc)
            bench_sample();
    }
    double t1 = bench_now();
    for (size_t k = 0; k < keep; k++)
        free(ring[k]);
    bench_sink = seen;
    char extra[96];
    snprintf(extra, sizeof extra, "threads=%llu concurrent=%u keep=%zu",
             (unsigned long long)threads, conc, keep);
    bench_report("handoff", t1 - t0, extra);
    return 0;
}
