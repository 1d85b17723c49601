/* bigblock: large-block first touch.
 *
 * usage: bigblock SIZE_MIB [TOTAL_MIB [ROUNDS]]   (defaults: TOTAL_MIB 512, ROUNDS 3)
 *
 * A round mallocs max(1, TOTAL_MIB / SIZE_MIB) blocks of SIZE_MIB (fractions allowed: 1.5,
 * 2.2) one after the other, writes one byte in every 4 KiB page of each as soon as it has
 * it, then frees them all.  All blocks of a round are live together, so in the first round
 * every page is a first touch, whatever the allocator caches: that is where huge pages pay
 * (one 2 MiB fault instead of 512, fewer TLB misses).  Sizes just above 2 MiB (2.2) show
 * whether the allocator pins a second huge page for a small tail; sizes below 2 MiB what it
 * does with blocks that cannot fill one.
 *
 * elapsed_s: the first round (pure first touch).  reuse_s: the mean of the later rounds,
 * where an allocator may hand back memory it kept.  rss_kib / anonhuge_kib are sampled at
 * the end of the first round, with every block live. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static uint64_t touch(unsigned char *p, size_t n, unsigned char v)
{
    uint64_t sum = 0;
    for (size_t off = 0; off < n; off += 4096) {
        p[off] = v;
        sum += p[off];
    }
    p[n - 1] = v;
    return sum;
}

int main(int argc, char **argv)
{
    const char *usage = "SIZE_MIB [TOTAL_MIB [ROUNDS]]";
    if (argc < 2) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    double mib = bench_arg(argc, argv, 1, 2, usage);
    double total_mib = bench_arg(argc, argv, 2, 512, usage);
    unsigned rounds = (unsigned)bench_arg(argc, argv, 3, 3, usage);
    size_t n = (size_t)(mib * 1048576.0);
    if (n < 1)
        n = 1;
    size_t count = (size_t)(total_mib / mib);
    if (count < 1)
        count = 1;
    if (rounds < 1)
        rounds = 1;
    unsigned char **blk = bench_map(count * sizeof *blk);
    uint64_t sum = 0;
    double first = 0, reuse = 0;

    for (unsigned r = 0; r < rounds; r++) {
        double t0 = bench_now();
        for (size_t i = 0; i < count; i++) {
            blk[i] = bench_xmalloc(n);
            /* never 0: a page written with zeros reads as unused in thp-status --scan */
            sum += touch(blk[i], n, (unsigned char)(1 + (r + i) % 255));
        }
        double t1 = bench_now();
        if (r == 0)
            bench_sample();
        double t2 = bench_now();
        for (size_t i = 0; i < count; i++)
            free(blk[i]);
        double t3 = bench_now();
        if (r == 0)
            first = (t1 - t0) + (t3 - t2);
        else
            reuse += (t1 - t0) + (t3 - t2);
    }
    bench_sink = sum;
    char extra[160];
    double pages = (double)count * (double)((n + 4095) / 4096);
    snprintf(extra, sizeof extra, "size_mib=%g blocks=%zu rounds=%u ns_per_page=%.1f reuse_s=%.6f",
             mib, count, rounds, first * 1e9 / pages, rounds > 1 ? reuse / (rounds - 1) : 0.0);
    bench_report("bigblock", first, extra);
    bench_unmap(blk, count * sizeof *blk);
    return 0;
}
