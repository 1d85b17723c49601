/* xthread: producer/consumer threads that free each other's blocks.
 *
 * usage: xthread [ITEMS_MILLIONS [BATCH [QUEUE]]]   (defaults 4, 64, 32)
 *
 * 2 producers and 2 consumers.  Each producer allocates blocks of 16..1024 bytes (skewed),
 * fills their first cache line and sends them in batches (a malloc'ed array of BATCH
 * pointers) round-robin to the consumers' bounded queues (QUEUE batches each; producers
 * block when a queue is full).  Consumers read and free every block and the batch array:
 * every free is a remote free, the path thread-caching allocators handle differently.
 * Consumers also allocate a small "reply" per batch that the producer that sent it frees
 * (remote frees in the other direction).
 *
 * Left to the scheduler, a run's time depends on where the 4 threads land on the CPUs: on a
 * loaded 2-CPU machine runs fall in two groups (all on one CPU, or spread with blocks crossing
 * between caches; docs/benchmarks-log.md, 2026-12-05 xthread's two modes). XTHREAD_PIN fixes
 * the placement for measurements: `one` (every thread on the first CPU the process may use),
 * `split` (consumers on the first, producers on the second: every block crosses), `pairs`
 * (consumer i and producer i on CPU i: half the batches cross). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPROD 2
#define NCONS 2

struct batch {
    size_t n;
    unsigned producer;
    unsigned char *item[];
};

struct queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    size_t cap, head, count;
    void **slot;
    int closed;
};

static struct queue to_cons[NCONS];
static struct queue to_prod[NPROD]; /* replies, freed by the producer */
static size_t batch_size;
static uint64_t items_per_producer;
static uint64_t checksum[NPROD + NCONS];

static void q_init(struct queue *q, size_t cap)
{
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->cap = cap;
    q->head = q->count = 0;
    q->closed = 0;
    q->slot = bench_map(cap * sizeof *q->slot);
}

/* Blocking put; with nonblock set, returns 0 instead of waiting on a full queue. */
static int q_put(struct queue *q, void *p, int nonblock)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == q->cap) {
        if (nonblock) {
            pthread_mutex_unlock(&q->mu);
            return 0;
        }
        pthread_cond_wait(&q->not_full, &q->mu);
    }
    q->slot[(q->head + q->count) % q->cap] = p;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 1;
}

/* Blocking get (NULL when closed and empty); with nonblock set, NULL when empty. */
static void *q_get(struct queue *q, int nonblock)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0) {
        if (q->closed || nonblock) {
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        pthread_cond_wait(&q->not_empty, &q->mu);
    }
    void *p = q->slot[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return p;
}

static void q_close(struct queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

static uint64_t drain_replies(unsigned id, int nonblock)
{
    uint64_t sum = 0;
    unsigned char *r;
    while ((r = q_get(&to_prod[id], nonblock)) != NULL) {
        sum += r[0];
        free(r);
    }
    return sum;
}

static void *producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    bench_rng r;
    bench_rng_seed(&r, 100 + id);
    uint64_t sum = 0, made = 0;
    unsigned next = id;
    while (made < items_per_producer) {
        size_t n = batch_size;
        if (items_per_producer - made < n)
            n = (size_t)(items_per_producer - made);
        struct batch *b = bench_xmalloc(sizeof *b + n * sizeof b->item[0]);
        b->n = n;
        b->producer = id;
        for (size_t i = 0; i < n; i++) {
            size_t sz = bench_small_size(&r, 16, 1024);
            unsigned char *p = bench_xmalloc(sz);
            memset(p, (int)(made + i), sz < 64 ? sz : 64);
            p[sz - 1] = 1;
            b->item[i] = p;
        }
        made += n;
        q_put(&to_cons[next++ % NCONS], b, 0);
        sum += drain_replies(id, 1);
    }
    checksum[id] = sum;
    return NULL;
}

static void *consumer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t sum = 0;
    struct batch *b;
    while ((b = q_get(&to_cons[id], 0)) != NULL) {
        for (size_t i = 0; i < b->n; i++) {
            sum += b->item[i][0];
            free(b->item[i]);
        }
        unsigned char *reply = bench_xmalloc(32 + (sum & 63));
        reply[0] = (unsigned char)sum;
        unsigned to = b->producer;
        free(b);
        /* a full reply queue means the producer is busy: drop the reply ourselves */
        if (!q_put(&to_prod[to], reply, 1))
            free(reply);
    }
    checksum[NPROD + id] = sum;
    return NULL;
}

/* XTHREAD_PIN: fills cpu[] (consumers, then producers) with the CPUs to pin to; 0 when
 * unset. Exits 2 on an unknown value or when the placement needs 2 CPUs and has one. */
static int pin_plan(int cpu[NCONS + NPROD])
{
    const char *mode = getenv("XTHREAD_PIN");
    if (!mode || !*mode)
        return 0;
    cpu_set_t set;
    int first = -1, second = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
            if (CPU_ISSET(c, &set)) {
                if (first < 0)
                    first = c;
                else
                    second = c;
            }
    int two = strcmp(mode, "split") == 0 || strcmp(mode, "pairs") == 0;
    if (strcmp(mode, "one") != 0 && !two) {
        fprintf(stderr, "xthread: XTHREAD_PIN=%s: one, split or pairs\n", mode);
        exit(2);
    }
    if (first < 0 || (two && second < 0)) {
        fprintf(stderr, "xthread: XTHREAD_PIN=%s needs %d CPUs\n", mode, two ? 2 : 1);
        exit(2);
    }
    for (unsigned i = 0; i < NCONS + NPROD; i++) {
        unsigned pair = i < NCONS ? i : i - NCONS;
        int on_second =
            strcmp(mode, "split") == 0 ? i >= NCONS : strcmp(mode, "pairs") == 0 && pair % 2;
        cpu[i] = on_second ? second : first;
    }
    fprintf(stderr, "xthread: pinned (%s): consumers on CPUs %d %d, producers on %d %d\n", mode,
            cpu[0], cpu[1], cpu[2], cpu[3]);
    return 1;
}

/* pthread_create, on CPU cpu when pinned (set before the thread starts: no run elsewhere) */
static int start(pthread_t *t, void *(*fn)(void *), unsigned id, int pinned, int cpu)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pinned) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    int rc = pthread_create(t, &attr, fn, (void *)(uintptr_t)id);
    pthread_attr_destroy(&attr);
    return rc;
}

int main(int argc, char **argv)
{
    const char *usage = "[ITEMS_MILLIONS [BATCH [QUEUE]]]";
    uint64_t items = (uint64_t)(bench_arg(argc, argv, 1, 4, usage) * 1e6);
    batch_size = (size_t)bench_arg(argc, argv, 2, 64, usage);
    size_t qcap = (size_t)bench_arg(argc, argv, 3, 32, usage);
    items_per_producer = items / NPROD + 1;

    for (unsigned i = 0; i < NCONS; i++)
        q_init(&to_cons[i], qcap);
    for (unsigned i = 0; i < NPROD; i++)
        q_init(&to_prod[i], qcap * 4);

    int cpu[NCONS + NPROD];
    int pinned = pin_plan(cpu);
    pthread_t prod[NPROD], cons[NCONS];
    double t0 = bench_now();
    for (unsigned i = 0; i < NCONS; i++)
        if (start(&cons[i], consumer, i, pinned, cpu[i])) {
            fprintf(stderr, "xthread: pthread_create failed\n");
            return 1;
        }
    for (unsigned i = 0; i < NPROD; i++)
        if (start(&prod[i], producer, i, pinned, cpu[NCONS + i])) {
            fprintf(stderr, "xthread: pthread_create failed\n");
            return 1;
        }
    for (unsigned i = 0; i < NPROD; i++)
        pthread_join(prod[i], NULL);
    bench_sample();
    for (unsigned i = 0; i < NCONS; i++)
        q_close(&to_cons[i]);
    for (unsigned i = 0; i < NCONS; i++)
        pthread_join(cons[i], NULL);
    uint64_t sum = 0;
    for (unsigned i = 0; i < NPROD; i++)
        sum += drain_replies(i, 1);
    double t1 = bench_now();
    for (unsigned i = 0; i < NPROD + NCONS; i++)
        sum += checksum[i];
    bench_sink = sum;
    char extra[64];
    snprintf(extra, sizeof extra, "items=%llu", (unsigned long long)(items_per_producer * NPROD));
    bench_report("xthread", t1 - t0, extra);
    return 0;
}
