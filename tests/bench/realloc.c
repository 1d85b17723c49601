/* realloc: strings and vectors grown by appending.
 *
 * usage: realloc [ROUNDS [COUNT [MAXLEN_KIB]]]   (defaults 20, 2000, 64)
 *
 * Each round builds COUNT buffers at once, appending to a random one at a time, so that
 * neighbours keep getting in the way of in-place growth: half are "strings" grown to their
 * exact length by realloc on every append (1..64 bytes at a time, as naive string builders
 * do), half are "vectors" that double their capacity.  Target lengths are skewed: most are
 * short, a few reach MAXLEN_KIB.  At the end of a round every buffer is checked and freed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    unsigned char *p;
    size_t len, cap, target;
};

static void grow(struct buf *b, size_t need, int exact)
{
    if (need <= b->cap)
        return;
    size_t cap = exact ? need : (b->cap ? b->cap * 2 : 16);
    while (cap < need)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        fprintf(stderr, "realloc: realloc(%zu) failed\n", cap);
        exit(1);
    }
    b->p = p;
    b->cap = cap;
}

int main(int argc, char **argv)
{
    const char *usage = "[ROUNDS [COUNT [MAXLEN_KIB]]]";
    unsigned rounds = (unsigned)bench_arg(argc, argv, 1, 20, usage);
    size_t count = (size_t)bench_arg(argc, argv, 2, 2000, usage);
    size_t maxlen = (size_t)(bench_arg(argc, argv, 3, 64, usage) * 1024);
    if (maxlen < 64)
        maxlen = 64;

    struct buf *b = bench_map(count * sizeof *b);
    size_t *active = bench_map(count * sizeof *active);
    bench_rng r;
    bench_rng_seed(&r, 99);
    uint64_t sum = 0, appends = 0, bytes = 0;
    unsigned char chunk[64];
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (unsigned char)('a' + i % 26);

    double t0 = bench_now();
    for (unsigned round = 0; round < rounds; round++) {
        for (size_t i = 0; i < count; i++) {
            b[i].p = NULL;
            b[i].len = b[i].cap = 0;
            b[i].target = bench_small_size(&r, 16, maxlen);
            active[i] = i;
        }
        size_t nopen = count;
        while (nopen) {
            size_t j = (size_t)bench_rng_below(&r, nopen);
            struct buf *x = &b[active[j]];
            size_t n = 1 + (size_t)bench_rng_below(&r, sizeof chunk);
            grow(x, x->len + n, (active[j] & 1) == 0);
            memcpy(x->p + x->len, chunk, n);
            x->len += n;
            appends++;
            if (x->len >= x->target)
                active[j] = active[--nopen];
        }
        if (round == 0)
            bench_sample();
        for (size_t i = 0; i < count; i++) {
            sum += b[i].p[b[i].len - 1] + b[i].p[b[i].len / 2];
            bytes += b[i].len;
            free(b[i].p);
        }
    }
    double t1 = bench_now();
    bench_sink = sum;
    char extra[96];
    snprintf(extra, sizeof extra, "appends=%llu bytes=%llu", (unsigned long long)appends,
             (unsigned long long)bytes);
    bench_report("realloc", t1 - t0, extra);
    return 0;
}
