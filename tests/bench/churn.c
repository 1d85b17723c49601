/* churn: small-object churn in one thread.
 *
 * usage: churn [OPS_MILLIONS [LIVE]]   (defaults 10 and 50000)
 *
 * A table of 1.5 * LIVE slots; each operation picks a random slot: a live object there is
 * checked and freed, and half the time a new object takes its place; an empty slot gets a
 * new object.  The steady state holds about LIVE objects of 8..512 bytes (skewed towards
 * 16..64 B, see bench_small_size).  New objects are written (first 8 bytes, one byte per
 * cache line, middle, tail) and read back when freed, so the allocator's placement shows in the
 * cache and TLB behaviour, not only its bookkeeping. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE_TABLE 8192

int main(int argc, char **argv)
{
    const char *usage = "[OPS_MILLIONS [LIVE]]";
    uint64_t ops = (uint64_t)(bench_arg(argc, argv, 1, 10, usage) * 1e6);
    size_t live = (size_t)bench_arg(argc, argv, 2, 50000, usage);
    size_t nslots = live + live / 2;
    if (nslots < 2)
        nslots = 2;

    static size_t sizes[SIZE_TABLE];
    bench_size_table(sizes, SIZE_TABLE, 8, 512, 42);
    unsigned char **slot = bench_map(nslots * sizeof *slot);
    uint16_t *len = bench_map(nslots * sizeof *len);
    bench_rng r;
    bench_rng_seed(&r, 7);
    uint64_t sum = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t x = bench_rng_next(&r);
        size_t k = (size_t)(((unsigned __int128)(x >> 16) * nslots) >> 48);
        unsigned char *p = slot[k];
        if (p) {
            size_t n = len[k];
            sum += p[0] + p[n - 1] + p[n / 2];
            free(p);
            slot[k] = NULL;
            if (x & 1)
                continue;
        }
        size_t n = sizes[(x >> 1) & (SIZE_TABLE - 1)];
        p = malloc(n);
        if (!p) {
            fprintf(stderr, "churn: malloc(%zu) failed\n", n);
            return 1;
        }
        memset(p, (int)i, 8);
        for (size_t off = 64; off < n; off += 64)
            p[off] = (unsigned char)off;
        p[n / 2] = (unsigned char)i;
        p[n - 1] = (unsigned char)(i >> 8);
        slot[k] = p;
        len[k] = (uint16_t)n;
        if ((i & 0xfffff) == 0)
            bench_sample();
    }
    double t1 = bench_now();
    bench_sample();
    size_t count = 0;
    for (size_t k = 0; k < nslots; k++) {
        if (slot[k]) {
            count++;
            free(slot[k]);
        }
    }
    bench_sink = sum;
    char extra[128];
    snprintf(extra, sizeof extra, "ops=%llu live_end=%zu", (unsigned long long)ops, count);
    bench_report("churn", t1 - t0, extra);
    bench_unmap(slot, nslots * sizeof *slot);
    bench_unmap(len, nslots * sizeof *len);
    return 0;
}
