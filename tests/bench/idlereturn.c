/* idlereturn: what an idle process gives back.
 *
 * usage: idlereturn [TOTAL_MIB [FREE_PERCENT [SLEEP_S]]]   (defaults 1024, 90, 3)
 *
 * Allocate TOTAL_MIB in blocks of 1..64 KiB (uniform, every byte written), free
 * FREE_PERCENT of them chosen at random, then sleep SLEEP_S with no allocator call at all
 * and report VmRSS: the memory a process that went idle after a busy phase still holds.
 * Unlike frag (which makes a few calls after its wait, for allocators that purge only from
 * inside malloc and free), nothing here runs after the frees: only an allocator that gives
 * memory back on its own, or at the free, shows a low figure.  rss_kib at the full point
 * (bench_sample) is the peak; retained_kib (VmRSS after the sleep) is the figure of interest,
 * live_kib what the program still holds.  The pointer and size tables are mmap'ed directly (the
 * same for every allocator) and unmapped before the sleep. */
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
    double total_mib = bench_arg(argc, argv, 1, 1024, usage);
    double free_pct = bench_arg(argc, argv, 2, 90, usage);
    double sleep_s = argc > 3 ? bench_arg(argc, argv, 3, 3, usage) : 3;
    size_t total = (size_t)(total_mib * 1048576.0);
    size_t cap = total / 1024 + 16; /* blocks are at least 1 KiB */
    unsigned char **obj = bench_map(cap * sizeof *obj);
    uint32_t *size = bench_map(cap * sizeof *size);
    bench_rng r;
    bench_rng_seed(&r, 777);
    size_t count = 0, bytes = 0;

    double t0 = bench_now();
    while (bytes < total && count < cap) {
        size_t n = 1024 + (size_t)bench_rng_below(&r, 63 * 1024 + 1);
        obj[count] = bench_xmalloc(n);
        memset(obj[count], (int)count, n);
        size[count++] = (uint32_t)n;
        bytes += n;
    }
    bench_sample();
    long rss_full = bench_proc_kib("/proc/self/status", "VmRSS");
    uint64_t threshold = (uint64_t)(free_pct / 100.0 * 1e6);
    size_t live = 0, kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (bench_rng_below(&r, 1000000) < threshold) {
            free(obj[i]);
        } else {
            live += size[i];
            kept++;
        }
    }
    double t1 = bench_now();
    bench_unmap(obj, cap * sizeof *obj);
    bench_unmap(size, cap * sizeof *size);
    long rss_after_free = bench_proc_kib("/proc/self/status", "VmRSS");

    bench_sleep(sleep_s);
    long rss_idle = bench_proc_kib("/proc/self/status", "VmRSS");
    char extra[256];
    snprintf(extra, sizeof extra,
             "blocks=%zu kept=%zu filled_kib=%zu live_kib=%zu full_kib=%ld "
             "rss_after_free_kib=%ld retained_kib=%ld",
             count, kept, bytes / 1024, live / 1024, rss_full, rss_after_free, rss_idle);
    bench_report("idlereturn", t1 - t0, extra);
    return 0;
}
