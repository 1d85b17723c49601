/* listdrain: a server's list type, pushed and popped: is memory given back per freed block
 * or per batch?
 *
 * usage: listdrain [ROUNDS [ELEMENTS [HELPERS]]]   (defaults 5, 300000, 0)
 *
 * A FIFO of 8 KiB nodes (a key-value server's quicklist of listpacks): each round pushes
 * ELEMENTS elements of 512 B at the tail, the tail node grown by realloc one element at a
 * time (a new node once it holds 8 KiB), then pops them all from the head, the head node
 * shrunk by realloc one element at a time (the rest moved to its front, as a listpack
 * deletes) and freed once empty. The next round's pushes fault in again whatever the pops
 * gave back. HELPERS threads allocate a block each and then wait, idle, for the end (a
 * server's background threads). freed_mib is what the pops released (elements times 512 B,
 * every round): a syscall count divided by it is calls per MiB freed. elapsed_s covers all
 * rounds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELEM 512
#define NODE_ELEMS 16 /* 8 KiB of elements a node */

struct node {
    unsigned char *data; /* count elements from the front */
    unsigned count;
};

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_done;

static void *helper(void *arg)
{
    (void)arg;
    void *p = bench_xmalloc(256); /* a heap of its own, as a server thread's start-up makes */
    pthread_mutex_lock(&idle_lock);
    while (!idle_done)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    free(p);
    return NULL;
}

static unsigned char *xrealloc(unsigned char *p, size_t n)
{
    unsigned char *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "listdrain: realloc(%zu) failed\n", n);
        exit(1);
    }
    return q;
}

int main(int argc, char **argv)
{
    const char *usage = "[ROUNDS [ELEMENTS [HELPERS]]]";
    unsigned rounds = (unsigned)bench_count(argc, argv, 1, 5, usage);
    size_t elements = (size_t)bench_count(argc, argv, 2, 300000, usage);
    unsigned helpers =
        argc > 3 && strcmp(argv[3], "0") ? (unsigned)bench_count(argc, argv, 3, 0, usage) : 0;

    pthread_t *tids = bench_map((helpers + 1) * sizeof *tids);
    for (unsigned i = 0; i < helpers; i++)
        tids[i] = bench_thread(helper, NULL, 0);

    size_t cap = elements / NODE_ELEMS + 2;
    struct node *fifo = bench_map(cap * sizeof *fifo);
    unsigned char elem[ELEM];
    uint64_t sum = 0;

    double t0 = bench_now();
    for (unsigned round = 0; round < rounds; round++) {
        size_t head = 0, tail = 0; /* nodes [head, tail) */
        for (size_t i = 0; i < elements; i++) {
            if (tail == head || fifo[tail - 1].count == NODE_ELEMS) {
                fifo[tail].data = NULL;
                fifo[tail].count = 0;
                tail++;
            }
            struct node *t = &fifo[tail - 1];
            memset(elem, (int)(i & 0xff), 8);
            t->data = xrealloc(t->data, (size_t)(t->count + 1) * ELEM);
            memcpy(t->data + (size_t)t->count * ELEM, elem, ELEM);
            t->count++;
        }
        if (round == 0)
            bench_sample();
        for (size_t i = 0; i < elements; i++) {
            struct node *h = &fifo[head];
            sum += h->data[0];
            if (--h->count == 0) {
                free(h->data);
                head++;
            } else {
                memmove(h->data, h->data + ELEM, (size_t)h->count * ELEM);
                h->data = xrealloc(h->data, (size_t)h->count * ELEM);
            }
        }
        if (head != tail) {
            fprintf(stderr, "listdrain: %zu nodes left after the pops\n", tail - head);
            return 1;
        }
    }
    double t1 = bench_now();
    bench_sink += sum;

    pthread_mutex_lock(&idle_lock);
    idle_done = 1;
    pthread_cond_broadcast(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
    for (unsigned i = 0; i < helpers; i++)
        pthread_join(tids[i], NULL);

    char extra[96];
    snprintf(extra, sizeof extra, "helpers=%u freed_mib=%.1f", helpers,
             (double)rounds * (double)elements * ELEM / (1024.0 * 1024.0));
    bench_report("listdrain", t1 - t0, extra);
    return 0;
}
