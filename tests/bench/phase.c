/* phase: a small process's busy phase, then a light steady state: is the phase's memory
 * given back while the process carries on?
 *
 * usage: phase [PHASE_MIB [STEADY_S]]   (defaults 12, 1.5)
 *
 * Fill PHASE_MIB with blocks of 16 B .. 64 KiB (log-uniform: small and medium alike, a
 * config load or a burst of requests), write them all, free them all in random order, then
 * run STEADY_S seconds of light work: 64 live blocks of 16 B .. 32 KiB, one replaced every
 * millisecond. rss_after_free_kib is VmRSS right after the frees, retained_kib VmRSS at the
 * end, live_kib what the steady state holds. 12 MiB stays below thpalloc's purger thread
 * (16 MiB): what comes back, comes back from the process's own calls. elapsed_s is the
 * phase alone. Bookkeeping arrays are mmap'ed directly and count the same for every
 * allocator. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEADY_SLOTS 64

/* 16 << k plus a random part of that band, k in 0..12: 16 B .. 64 KiB, every band alike */
static size_t log_size(bench_rng *r, unsigned bands)
{
    size_t base = (size_t)16 << bench_rng_below(r, bands);
    return base + (size_t)bench_rng_below(r, base);
}

int main(int argc, char **argv)
{
    const char *usage = "[PHASE_MIB [STEADY_S]]";
    double phase_mib = bench_arg(argc, argv, 1, 12, usage);
    double steady_s = bench_arg(argc, argv, 2, 1.5, usage);
    size_t total = (size_t)(phase_mib * 1048576.0);

    size_t cap = total / 16 + 16;
    unsigned char **obj = bench_map(cap * sizeof *obj);
    bench_rng r;
    bench_rng_seed(&r, 7171);
    size_t count = 0, bytes = 0;

    double t0 = bench_now();
    while (bytes < total && count < cap) {
        size_t n = log_size(&r, 12);
        unsigned char *p = bench_xmalloc(n);
        bench_block_fill(p, n, (unsigned char)count);
        obj[count++] = p;
        bytes += n;
    }
    bench_sample();
    /* in random order: the blocks go back as a program's would, not as one sweep */
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)bench_rng_below(&r, i);
        unsigned char *t = obj[i - 1];
        obj[i - 1] = obj[j];
        obj[j] = t;
    }
    for (size_t i = 0; i < count; i++)
        free(obj[i]);
    double t1 = bench_now();
    bench_unmap(obj, cap * sizeof *obj);
    long rss_after_free = bench_proc_kib("/proc/self/status", "VmRSS");

    unsigned char *slot[STEADY_SLOTS] = {0};
    size_t slot_len[STEADY_SLOTS] = {0};
    double end = bench_now() + steady_s;
    struct timespec ms = {0, 1000000L};
    unsigned long ops = 0;
    while (bench_now() < end) {
        unsigned i = (unsigned)bench_rng_below(&r, STEADY_SLOTS);
        free(slot[i]);
        slot_len[i] = log_size(&r, 11);
        slot[i] = bench_xmalloc(slot_len[i]);
        bench_block_fill(slot[i], slot_len[i], (unsigned char)ops++);
        nanosleep(&ms, NULL);
    }
    size_t live = 0;
    for (unsigned i = 0; i < STEADY_SLOTS; i++)
        live += slot_len[i];
    long rss_end = bench_proc_kib("/proc/self/status", "VmRSS");
    char extra[256];
    snprintf(extra, sizeof extra,
             "blocks=%zu filled_kib=%zu steady_ops=%lu live_kib=%zu rss_after_free_kib=%ld "
             "retained_kib=%ld",
             count, bytes / 1024, ops, live / 1024, rss_after_free, rss_end);
    bench_report("phase", t1 - t0, extra);
    for (unsigned i = 0; i < STEADY_SLOTS; i++)
        free(slot[i]);
    return 0;
}
