/* frag: fragmentation and memory given back.
 *
 * usage: frag [TOTAL_MIB [FREE_PERCENT [SLEEP_S]]]   (defaults 200, 90, 1.5)
 *
 * Fill TOTAL_MIB with small objects (16..256 bytes, skewed), write them all, then free
 * FREE_PERCENT of them chosen at random (scattered: the survivors pin pages everywhere),
 * sleep SLEEP_S (longer than a typical purge delay), do a little allocator activity (some
 * allocators only purge from inside malloc/free) and report the resident set: rss_kib is
 * VmRSS at that point, live_kib what the program still holds.  elapsed_s is the fill + free
 * time without the sleep.  Bookkeeping arrays are mmap'ed directly and count the same
 * for every allocator. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *usage = "[TOTAL_MIB [FREE_PERCENT [SLEEP_S]]]";
    double total_mib = bench_arg(argc, argv, 1, 200, usage);
    double free_pct = bench_arg(argc, argv, 2, 90, usage);
    double sleep_s = argc > 3 ? bench_arg(argc, argv, 3, 1.5, usage) : 1.5;
    size_t total = (size_t)(total_mib * 1048576.0);

    /* average object ~ 70 bytes: size the pointer table generously */
    size_t cap = total / 16 + 16;
    unsigned char **obj = bench_map(cap * sizeof *obj);
    bench_rng r;
    bench_rng_seed(&r, 4242);
    size_t count = 0, bytes = 0;

    double t0 = bench_now();
    while (bytes < total && count < cap) {
        size_t n = bench_small_size(&r, 16, 256);
        unsigned char *p = bench_xmalloc(n);
        memset(p, (int)count, n);
        p[0] = (unsigned char)(n - 1); /* sizes are <= 256: n - 1 fits */
        obj[count++] = p;
        bytes += n;
    }
    bench_sample();
    uint64_t threshold = (uint64_t)(free_pct / 100.0 * 1e6);
    size_t live = 0, kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (bench_rng_below(&r, 1000000) < threshold) {
            free(obj[i]);
            obj[i] = NULL;
        } else {
            live += (size_t)obj[i][0] + 1;
            kept++;
        }
    }
    double t1 = bench_now();
    /* the survivors stay allocated until exit; the table goes now, so that the RSS below
     * is the allocator's (plus the program's fixed few hundred KiB) */
    bench_unmap(obj, cap * sizeof *obj);
    long rss_after_free = bench_proc_kib("/proc/self/status", "VmRSS");

    bench_sleep(sleep_s);
    /* a little activity: purges that wait for the next malloc/free happen now */
    for (int i = 0; i < 1000; i++) {
        void *p = bench_xmalloc(64);
        bench_sink += (uintptr_t)p;
        free(p);
    }
    long rss_end = bench_proc_kib("/proc/self/status", "VmRSS");
    long huge_end = bench_proc_kib("/proc/self/smaps_rollup", "AnonHugePages");
    char extra[256];
    snprintf(extra, sizeof extra,
             "objects=%zu kept=%zu filled_kib=%zu live_kib=%zu rss_after_free_kib=%ld "
             "retained_kib=%ld anonhuge_end_kib=%ld",
             count, kept, bytes / 1024, live / 1024, rss_after_free, rss_end, huge_end);
    bench_report("frag", t1 - t0, extra);
    return 0;
}
