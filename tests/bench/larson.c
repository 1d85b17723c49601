/* larson: a server simulation after Larson & Krishnan (1998).
 *
 * usage: larson [THREADS [ROUNDS [OPS_PER_ROUND [SLOTS]]]]   (defaults 4, 20, 50000, 2000)
 *
 * THREADS lineages, each owning an array of SLOTS objects of 16..1024 bytes.  A thread
 * replaces OPS_PER_ROUND random slots (free the old object, malloc and write a new one),
 * then starts a successor thread, hands it the array and exits: objects are freed by
 * threads other than the ones that allocated them, and thread heaps keep being abandoned
 * and (in a good allocator) reused, as in a server that serves each connection with a
 * short-lived thread.  Reports elapsed time for ROUNDS generations of every lineage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lineage {
    unsigned char **slot;
    size_t nslots;
    unsigned round;
    unsigned id;
    uint64_t sum;
    bench_rng rng;
};

static unsigned rounds;
static uint64_t ops_per_round;
static int failed;

static unsigned char *new_object(bench_rng *r, uint64_t tag)
{
    size_t n = bench_small_size(r, 16, 1024);
    unsigned char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "larson: malloc(%zu) failed\n", n);
        exit(1);
    }
    memcpy(p, &n, sizeof n);
    p[n - 1] = (unsigned char)tag;
    if (n > 64)
        memset(p + sizeof n, (int)tag, 48);
    return p;
}

static void *worker(void *arg)
{
    struct lineage *l = arg;
    for (uint64_t i = 0; i < ops_per_round; i++) {
        size_t k = (size_t)bench_rng_below(&l->rng, l->nslots);
        unsigned char *p = l->slot[k];
        size_t n;
        memcpy(&n, p, sizeof n);
        l->sum += p[n - 1];
        free(p);
        l->slot[k] = new_object(&l->rng, i);
    }
    if (++l->round < rounds) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker, l) == 0) {
            pthread_attr_destroy(&attr);
            return NULL;
        }
        pthread_attr_destroy(&attr);
        fprintf(stderr, "larson: pthread_create failed\n");
        failed = 1;
    }
    if (l->id == 0)
        bench_sample();
    bench_running_leave();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *usage = "[THREADS [ROUNDS [OPS_PER_ROUND [SLOTS]]]]";
    unsigned threads = (unsigned)bench_arg(argc, argv, 1, 4, usage);
    rounds = (unsigned)bench_arg(argc, argv, 2, 20, usage);
    ops_per_round = (uint64_t)bench_arg(argc, argv, 3, 50000, usage);
    size_t nslots = (size_t)bench_arg(argc, argv, 4, 2000, usage);

    struct lineage *l = bench_map(threads * sizeof *l);
    for (unsigned t = 0; t < threads; t++) {
        l[t].nslots = nslots;
        l[t].slot = bench_map(nslots * sizeof *l[t].slot);
        l[t].id = t;
        bench_rng_seed(&l[t].rng, 1000 + t);
        for (size_t k = 0; k < nslots; k++)
            l[t].slot[k] = new_object(&l[t].rng, k);
    }

    double t0 = bench_now();
    /* one count per lineage: its successors take the place over, the last one leaves */
    for (unsigned t = 0; t < threads; t++) {
        bench_running_enter(threads);
        bench_thread(worker, &l[t], 1);
    }
    bench_running_wait();
    double t1 = bench_now();

    uint64_t sum = 0;
    for (unsigned t = 0; t < threads; t++) {
        sum += l[t].sum;
        for (size_t k = 0; k < nslots; k++)
            free(l[t].slot[k]);
    }
    bench_sink = sum;
    if (failed)
        return 1;
    char extra[96];
    snprintf(extra, sizeof extra, "ops=%llu threads_created=%u",
             (unsigned long long)ops_per_round * rounds * threads, rounds * threads);
    bench_report("larson", t1 - t0, extra);
    return 0;
}
