/* leakfree: allocate a batch, free most of it at once, keep a few, repeat: a slowly
 * growing leak among memory that is freed wholesale.
 *
 * usage: leakfree [ROUNDS [BATCH [KEEP_PER_MILLE]]]   (defaults 200, 20000, 20)
 *
 * Each round allocates BATCH blocks of 16 B .. 4 KiB (skewed small, bench_small_size) and
 * writes them; then frees all of them in one sweep, in allocation order, except about
 * KEEP_PER_MILLE in a thousand, picked at random, which stay allocated to the end (a
 * request handler that leaks a cache entry now and then, a parser whose results outlive
 * its scratch).  The kept blocks lie scattered among freed ones: an allocator that cannot
 * reuse the space around them, or keeps every page that still holds one, grows faster
 * than the leak.  elapsed_s covers the rounds; leaked_kib is what the kept blocks hold at
 * the end, checked (bench_block_read) and freed after the report. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *usage = "[ROUNDS [BATCH [KEEP_PER_MILLE]]]";
    uint64_t rounds = bench_count(argc, argv, 1, 200, usage);
    uint64_t batch = bench_count(argc, argv, 2, 20000, usage);
    double keep = bench_arg(argc, argv, 3, 20, usage);
    if (keep > 1000) {
        fprintf(stderr, "%s: KEEP_PER_MILLE above 1000\nusage: %s %s\n", argv[0], argv[0], usage);
        return 2;
    }
    uint64_t keep_below = (uint64_t)(keep * 65.536); /* of 65536 */

    unsigned char **cur = bench_map(batch * sizeof *cur);
    /* every block could be kept: the table is sized for the worst case only in virtual
     * memory, its untouched pages cost nothing */
    size_t cap = (size_t)(rounds * batch);
    unsigned char **kept = bench_map(cap * sizeof *kept);
    size_t nkept = 0, leaked = 0;
    bench_rng r;
    bench_rng_seed(&r, 4242);
    uint64_t every = rounds / 8 ? rounds / 8 : 1;

    double t0 = bench_now();
    for (uint64_t round = 0; round < rounds; round++) {
        for (uint64_t i = 0; i < batch; i++) {
            size_t n = bench_small_size(&r, 16, 4096);
            cur[i] = bench_xmalloc(n);
            bench_block_fill(cur[i], n, (unsigned char)(i + round));
        }
        /* the batch and the leak so far are live together: the round's peak */
        if (round % every == 0 || round == rounds - 1)
            bench_sample();
        for (uint64_t i = 0; i < batch; i++) {
            if (bench_rng_below(&r, 65536) < keep_below) {
                size_t n;
                memcpy(&n, cur[i], sizeof n);
                leaked += n;
                kept[nkept++] = cur[i];
            } else {
                free(cur[i]);
            }
        }
    }
    double t1 = bench_now();

    uint64_t sum = 0;
    for (size_t i = 0; i < nkept; i++)
        bench_block_read(kept[i], &sum);
    bench_sink = sum;
    char extra[160];
    snprintf(extra, sizeof extra, "ops=%llu kept=%zu leaked_kib=%zu",
             (unsigned long long)(rounds * batch), nkept, leaked / 1024);
    bench_report("leakfree", t1 - t0, extra);
    for (size_t i = 0; i < nkept; i++)
        free(kept[i]);
    bench_unmap(kept, cap * sizeof *kept);
    bench_unmap(cur, batch * sizeof *cur);
    return 0;
}
