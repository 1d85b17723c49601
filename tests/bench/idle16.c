/* idle16: an idle multi-threaded process, for the footprint table.
 *
 * usage: idle16 [SECONDS [THREADS]]   (defaults 30, 16)
 *
 * THREADS threads each allocate a few small blocks (5 of 16..256 bytes and one of 1 KiB),
 * write them, and then every thread, the main one included, sleeps for SECONDS: the
 * shape of a daemon's worker pool waiting for work.  The runner starts it under each
 * allocator, reads Private_Dirty from /proc/PID/smaps_rollup once it has settled and kills
 * it: the memory an allocator costs per thread (thread caches, per-thread heaps, arenas)
 * shows here, on top of the process's own.  Run alone, it prints the usual result line
 * after SECONDS (elapsed_s: the sleep). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCKS 6

static pthread_barrier_t ready;
static double seconds;

static void *worker(void *arg)
{
    bench_rng r;
    bench_rng_seed(&r, (uint64_t)(uintptr_t)arg);
    unsigned char *blk[BLOCKS];
    uint64_t sum = 0;
    for (int i = 0; i < BLOCKS; i++) {
        size_t n = i == BLOCKS - 1 ? 1024 : bench_small_size(&r, 16, 256);
        blk[i] = bench_xmalloc(n);
        bench_block_fill(blk[i], n, (unsigned char)i);
    }
    pthread_barrier_wait(&ready);
    bench_sleep(seconds);
    for (int i = 0; i < BLOCKS; i++) {
        bench_block_read(blk[i], &sum);
        free(blk[i]);
    }
    bench_sink += sum;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[SECONDS [THREADS]]";
    seconds = bench_arg(argc, argv, 1, 30, usage);
    unsigned threads = (unsigned)bench_count(argc, argv, 2, 16, usage);
    pthread_t *tid = bench_map(threads * sizeof *tid);
    pthread_barrier_init(&ready, NULL, threads + 1);
    for (unsigned t = 0; t < threads; t++)
        tid[t] = bench_thread(worker, (void *)(uintptr_t)(t + 1), 0);
    pthread_barrier_wait(&ready);
    bench_sample();
    double t0 = bench_now();
    bench_sleep(seconds);
    for (unsigned t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    double t1 = bench_now();
    char extra[32];
    snprintf(extra, sizeof extra, "threads=%u", threads);
    bench_report("idle16", t1 - t0, extra);
    return 0;
}
