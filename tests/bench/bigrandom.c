/* bigrandom: big blocks of random size, one after the other.
 *
 * usage: bigrandom [COUNT [MIN_MIB [MAX_MIB]]]   (defaults 200, 5, 25)
 *
 * COUNT times: malloc a block of a random size between MIN_MIB and MAX_MIB (any byte
 * count, not a multiple of the page), write every 4 KiB page of it, read its header and
 * tail back, free it.
 * Unlike bigblock, whose blocks all have one size, every block here differs from the last:
 * an allocator that keeps freed big blocks must split or grow them to reuse them, one that
 * unmaps them pays every page fault again, and huge pages pay back on each fault.
 * elapsed_s: the loop; rss_kib / anonhuge_kib: the sample with the largest RSS (a block
 * written, before its free); ns_per_page: elapsed over the pages written. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const char *usage = "[COUNT [MIN_MIB [MAX_MIB]]]";
    unsigned count = (unsigned)bench_count(argc, argv, 1, 200, usage);
    double min_mib = bench_arg(argc, argv, 2, 5, usage);
    double max_mib = bench_arg(argc, argv, 3, 25, usage);
    size_t lo = (size_t)(min_mib * 1048576.0);
    size_t hi = (size_t)(max_mib * 1048576.0);
    if (lo < 16 || hi < lo) {
        fprintf(stderr, "usage: %s %s (MIN_MIB <= MAX_MIB)\n", argv[0], usage);
        return 2;
    }
    bench_rng r;
    bench_rng_seed(&r, 55);
    uint64_t sum = 0;
    double pages = 0, bytes = 0;

    double t0 = bench_now();
    for (unsigned i = 0; i < count; i++) {
        size_t n = lo + (size_t)bench_rng_below(&r, hi - lo + 1);
        unsigned char *p = bench_xmalloc(n);
        bench_block_fill(p, n, (unsigned char)i);
        bench_sample();
        bench_block_read(p, &sum);
        free(p);
        pages += (double)((n + 4095) / 4096);
        bytes += (double)n;
    }
    double t1 = bench_now();
    bench_sink = sum;
    char extra[128];
    snprintf(extra, sizeof extra, "blocks=%u mean_mib=%.1f ns_per_page=%.1f rss_end_kib=%ld", count,
             bytes / count / 1048576.0, (t1 - t0) * 1e9 / pages,
             bench_proc_kib("/proc/self/status", "VmRSS"));
    bench_report("bigrandom", t1 - t0, extra);
    return 0;
}
