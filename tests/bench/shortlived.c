/* shortlived: small short-lived objects in one thread, after a logic minimiser (espresso).
 *
 * usage: shortlived [ROUNDS [TERMS [CANDIDATES]]]   (defaults 300, 20000, 4)
 *
 * A "cover" of about TERMS product terms, each a malloc'ed node (a link, a cost and 1..12
 * 64-bit words of literals: 24..112 bytes) on a singly linked list.  A round walks the
 * list; for each term it builds CANDIDATES new terms from it and its neighbour (each with
 * a scratch array malloc'ed and freed at once), keeps the cheapest and frees the others;
 * the candidate replaces the term when it is not dearer (or by chance), and the list is
 * rebuilt in the new order.  The cover's target size swings between 1/2 and 3/2 of TERMS
 * over 16 rounds (terms are dropped or added), so the working set moves and changes size
 * as a minimiser's expand / reduce passes do.  Over 90 % of the allocations are freed
 * within microseconds; the rest live for a few rounds.  elapsed_s: all ROUNDS. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORDS 12

struct term {
    struct term *next;
    uint32_t nwords;
    uint32_t cost;
    uint64_t bits[];
};

static struct term *term_new(uint32_t nwords)
{
    struct term *t = bench_xmalloc(sizeof *t + nwords * sizeof t->bits[0]);
    t->next = NULL;
    t->nwords = nwords;
    return t;
}

static struct term *term_random(bench_rng *r)
{
    struct term *t = term_new(1 + (uint32_t)bench_rng_below(r, MAX_WORDS));
    t->cost = 0;
    for (uint32_t i = 0; i < t->nwords; i++) {
        t->bits[i] = bench_rng_next(r);
        t->cost += (uint32_t)__builtin_popcountll(t->bits[i]);
    }
    return t;
}

/* A candidate from a and b: a consensus-like mix of their literals, with a few flips. */
static struct term *candidate(const struct term *a, const struct term *b, bench_rng *r)
{
    uint32_t n = a->nwords;
    uint64_t x = bench_rng_next(r);
    if ((x & 3) == 0 && n < MAX_WORDS)
        n++;
    else if ((x & 3) == 1 && n > 1)
        n--;
    /* a scratch array, as a minimiser's set operations use: freed at once */
    uint64_t *tmp = bench_xmalloc(2 * n * sizeof *tmp);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t wa = i < a->nwords ? a->bits[i] : ~0ull;
        uint64_t wb = i < b->nwords ? b->bits[i] : ~0ull;
        tmp[i] = wa & wb;
        tmp[n + i] = (wa | wb) ^ (bench_rng_next(r) & bench_rng_next(r) & bench_rng_next(r));
    }
    struct term *c = term_new(n);
    c->cost = 0;
    for (uint32_t i = 0; i < n; i++) {
        c->bits[i] = (x >> 8) & 1 ? tmp[i] | tmp[n + i] : tmp[n + i];
        c->cost += (uint32_t)__builtin_popcountll(c->bits[i]);
    }
    free(tmp);
    return c;
}

int main(int argc, char **argv)
{
    const char *usage = "[ROUNDS [TERMS [CANDIDATES]]]";
    unsigned rounds = (unsigned)bench_count(argc, argv, 1, 300, usage);
    size_t terms = (size_t)bench_count(argc, argv, 2, 20000, usage);
    unsigned ncand = (unsigned)bench_count(argc, argv, 3, 4, usage);
    bench_rng r;
    bench_rng_seed(&r, 2718);
    struct term *cover = NULL;
    size_t count = 0;
    for (; count < terms; count++) {
        struct term *t = term_random(&r);
        t->next = cover;
        cover = t;
    }

    uint64_t sum = 0, allocs = 0, replaced = 0;
    double t0 = bench_now();
    for (unsigned round = 0; round < rounds; round++) {
        /* target: a triangle wave between terms/2 and 3*terms/2, period 16 rounds */
        unsigned phase = round % 16;
        unsigned tri = phase < 8 ? phase : 16 - phase;
        size_t target = terms / 2 + terms * tri / 8;
        /* chance (of 65536) per term to drop it, or to add one more term */
        uint64_t p_drop = count > target ? (uint64_t)(count - target) * 65536 / count : 0;
        uint64_t p_add = count < target ? (uint64_t)(target - count) * 65536 / count : 0;
        struct term *next_cover = NULL;
        size_t next_count = 0;
        for (struct term *t = cover, *next; t; t = next) {
            next = t->next;
            const struct term *partner = next ? next : (next_cover ? next_cover : t);
            struct term *best = NULL;
            for (unsigned c = 0; c < ncand; c++) {
                struct term *cand = candidate(t, partner, &r);
                allocs += 2;
                if (!best || cand->cost < best->cost) {
                    free(best);
                    best = cand;
                } else {
                    free(cand);
                }
            }
            uint64_t x = bench_rng_next(&r);
            if (best->cost <= t->cost || (x & 7) == 0) {
                sum += t->cost;
                free(t);
                t = best;
                replaced++;
            } else if ((x >> 16 & 0xffff) < p_add) {
                best->next = next_cover;
                next_cover = best;
                next_count++;
            } else {
                free(best);
            }
            if ((x >> 32 & 0xffff) < p_drop) {
                sum += t->cost;
                free(t);
                continue;
            }
            t->next = next_cover;
            next_cover = t;
            next_count++;
        }
        cover = next_cover;
        count = next_count;
        if (count < 2) {
            /* never let the cover die out: reseed it */
            for (; count < 2; count++) {
                struct term *t = term_random(&r);
                t->next = cover;
                cover = t;
            }
        }
        if (phase == 8)
            bench_sample();
    }
    double t1 = bench_now();
    bench_sample();
    size_t end_count = 0;
    while (cover) {
        struct term *next = cover->next;
        sum += cover->cost;
        free(cover);
        cover = next;
        end_count++;
    }
    bench_sink = sum;
    char extra[128];
    snprintf(extra, sizeof extra, "rounds=%u allocs=%llu replaced=%llu terms_end=%zu", rounds,
             (unsigned long long)allocs, (unsigned long long)replaced, end_count);
    bench_report("shortlived", t1 - t0, extra);
    return 0;
}
