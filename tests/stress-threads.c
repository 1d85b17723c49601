/* thpalloc stress test: multithreaded allocation patterns, run under
 * LD_PRELOAD=$THPALLOC_LIB by tests/stress-threads.sh (one TAP line per mode).
 *
 *   stress-threads [-g] [-s SECONDS] MODE
 *   stress-threads-nopie ...   the same, built as a non-PIE executable that takes malloc's
 *                              address (see STRESS_TAKE_MALLOC_ADDRESS)
 *
 * MODE is one of
 *   prodcons     producers malloc, consumers verify and free (and the reverse direction)
 *   manythreads  20000 short-lived threads handing blocks to their successors
 *   fork         a few hundred forks while 4 other threads allocate and free
 *   realloc      realloc chains 1 B -> several MiB -> 1 B in several threads at once
 *   soak         randomized multithreaded soak over a table of stamped live blocks
 *
 * By default the program insists that thpalloc is the process's malloc
 * (thpalloc_active() == 1, found with dlsym) and checks thpalloc_get_stats():
 * in_use must come back to its start value (nothing leaks), heaps must stay bounded.
 * -g ("glibc mode") skips those checks so the same program can run under any malloc.
 * Output (tests/relay-report.h): "# FAIL: ..." for each of the first 20 failures, then one
 * "ok - ..." or "not ok - ..." line and "end"; exit status 0 on success. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "relay-report.h"
#include "thpalloc.h"
#include "test-modes.h"

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

static int glibc_mode;

#ifdef STRESS_TAKE_MALLOC_ADDRESS
/* The stress-threads-nopie build: a non-PIE executable that takes malloc's address in its
 * code. The linker then makes the executable's PLT entry the canonical address of malloc
 * for the whole process (dlsym and every GOT see it), as in Debian's /usr/bin/python3.11.
 * A preloaded malloc must still know that it is in charge. */
static void *(*volatile malloc_address)(size_t);
#endif
static double soak_seconds = 5.0;
static atomic_long failures;

typedef int (*get_stats_fn)(struct thpalloc_stats *, size_t);
typedef int (*active_fn)(void);
static get_stats_fn p_get_stats;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* Cap the noise: the first 20 failures are enough to diagnose. */
    if (atomic_fetch_add(&failures, 1) < 20)
        printf("# FAIL: %s\n", buf); /* one call: threads' lines do not mix */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- random numbers and patterns ------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t rnd(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    return mix64(z);
}

/* The pattern word that belongs at byte offset off (a multiple of 8) of a block whose
 * seed is seed. Position-dependent, so a block keeps a valid pattern when realloc moves
 * or resizes it. */
static inline uint64_t patword(uint64_t seed, size_t off)
{
    uint64_t x = (seed ^ (uint64_t)off) * 0x9e3779b97f4a7c15ULL;
    return x ^ (x >> 29);
}

static inline unsigned char patbyte(uint64_t seed, size_t off)
{
    uint64_t w = patword(seed, off & ~(size_t)7);
    return (unsigned char)(w >> (8 * (off & 7)));
}

/* Fills bytes [from, len) of p with the pattern of seed. p must be 8-aligned. */
static void pat_fill(void *p, size_t from, size_t len, uint64_t seed)
{
    unsigned char *b = p;
    size_t i = from;
    while (i < len && (i & 7))
        b[i] = patbyte(seed, i), i++;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = patword(seed, i);
        memcpy(b + i, &w, 8);
    }
    for (; i < len; i++)
        b[i] = patbyte(seed, i);
}

/* Returns the first offset in [from, len) that does not hold the pattern, or -1. */
static long pat_check(const void *p, size_t from, size_t len, uint64_t seed)
{
    const unsigned char *b = p;
    size_t i = from;
    for (; i < len && (i & 7); i++)
        if (b[i] != patbyte(seed, i))
            return (long)i;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        if (w != patword(seed, i)) {
            for (size_t j = i; j < i + 8; j++)
                if (b[j] != patbyte(seed, j))
                    return (long)j;
        }
    }
    for (; i < len; i++)
        if (b[i] != patbyte(seed, i))
            return (long)i;
    return -1;
}

/* A size between 16 B and 64 KiB, log-uniform, with 1 in `big_one_in` between 1 and 4 MiB. */
static size_t random_size(uint64_t *s, unsigned big_one_in)
{
    uint64_t r = rnd(s);
    if (big_one_in && r % big_one_in == 0)
        return 1 * MiB + (size_t)(rnd(s) % (3 * MiB + 1));
    unsigned shift = 4 + (unsigned)((r >> 20) % 13); /* 16 B .. 64 KiB */
    size_t lo = (size_t)1 << shift;
    size_t sz = lo + (size_t)((r >> 32) % lo);
    return sz > 64 * KiB ? 64 * KiB : sz;
}

static void check_block(const void *p, size_t size, const char *what)
{
    if (!p) {
        fail("%s: allocation of %zu bytes returned NULL (errno %d)", what, size, errno);
        return;
    }
    /* glibc always aligns to 16 (alignof(max_align_t)) and programs rely on it; a
     * drop-in replacement must too. Other mallocs (-g) only owe the C standard's
     * alignment: that of the largest power of two not above the size, capped at 16. */
    size_t align = 16;
    if (glibc_mode)
        while (align > 1 && align > size)
            align /= 2;
    if ((uintptr_t)p % align)
        fail("%s: block %p of %zu bytes is not %zu-aligned", what, p, size, align);
    size_t us = malloc_usable_size((void *)p);
    if (us < size)
        fail("%s: malloc_usable_size(%p) = %zu < requested %zu", what, p, us, size);
}

static void *xmalloc(size_t size, const char *what)
{
    void *p = malloc(size);
    check_block(p, size, what);
    if (!p) {
        printf("# FAIL: out of memory, giving up\n");
        exit(2);
    }
    return p;
}

/* ---- thpalloc hooks ---------------------------------------------------------------- */

static int thpalloc_setup(void)
{
    if (glibc_mode)
        return 0;
    active_fn act = (active_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "thpalloc_active");
    p_get_stats = (get_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    if (!act || !p_get_stats) {
        fail("thpalloc symbols not found (thpalloc_active=%p thpalloc_get_stats=%p): "
             "is LD_PRELOAD=$THPALLOC_LIB set?",
             (void *)(uintptr_t)act, (void *)(uintptr_t)p_get_stats);
        return -1;
    }
    int a = act();
    /* Counted as a failure, but the mode still runs: what a wrongly dormant allocator
     * breaks (thread exit, fork) is worth seeing too. */
    if (a != 1)
        fail("thpalloc_active() = %d, expected 1 (thpalloc serves malloc but thinks another "
             "allocator is in charge?)",
             a);
    return 0;
}

static int get_stats(struct thpalloc_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!p_get_stats)
        return -1;
    if (p_get_stats(st, sizeof *st) != 0) {
        fail("thpalloc_get_stats failed: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void print_stats(const char *when, const struct thpalloc_stats *st)
{
    printf("# %s: in_use=%" PRIu64 " committed=%" PRIu64 " reserved=%" PRIu64
           " purge_pending=%" PRIu64 " heaps=%" PRIu64 " large_count=%" PRIu64
           " huge_advised=%" PRIu64 "\n",
           when, st->in_use, st->committed, st->reserved, st->purge_pending, st->heaps,
           st->large_count, st->huge_advised);
}

/* Leak check: in_use must come back to within `slack` bytes of where it started. */
static struct thpalloc_stats start_stats;

static void leak_check_begin(void)
{
    if (glibc_mode)
        return;
    get_stats(&start_stats);
    print_stats("start", &start_stats);
}

static void leak_check_end(size_t slack)
{
    if (glibc_mode)
        return;
    struct thpalloc_stats st;
    if (get_stats(&st) != 0)
        return;
    print_stats("end", &st);
    int64_t delta = (int64_t)st.in_use - (int64_t)start_stats.in_use;
    if (delta > (int64_t)slack || delta < -(int64_t)slack)
        fail("in_use changed by %" PRId64 " bytes from start to end (allowed: +-%zu): leak "
             "or miscount",
             delta, slack);
    else
        printf("# in_use delta %" PRId64 " bytes (allowed +-%zu)\n", delta, slack);
}

/* ---- a bounded MPMC queue (mutex + condition variables) ---------------------------- */

struct msg {
    void *p;
    size_t size; /* the producer's id in the top 8 bits (sizes stay under 2^24) */
    uint64_t seed;
};
#define MSG_ID_SHIFT (sizeof(size_t) * 8 - 8)

struct queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct msg *buf;
    size_t cap, head, count;
    int closed;
};

static void q_init(struct queue *q, size_t cap)
{
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->buf = xmalloc(cap * sizeof *q->buf, "queue");
    q->cap = cap;
    q->head = q->count = 0;
    q->closed = 0;
}

static void q_destroy(struct queue *q)
{
    free(q->buf);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

static void q_push(struct queue *q, struct msg m)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == q->cap)
        pthread_cond_wait(&q->not_full, &q->mu);
    q->buf[(q->head + q->count++) % q->cap] = m;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

/* Returns 0 and the message, or -1 when the queue is closed and drained. */
static int q_pop(struct queue *q, struct msg *m)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->mu);
    if (q->count == 0) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    *m = q->buf[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* Non-blocking pop: 0 with a message, -1 when empty. */
static int q_trypop(struct queue *q, struct msg *m)
{
    int r = -1;
    pthread_mutex_lock(&q->mu);
    if (q->count) {
        *m = q->buf[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        pthread_cond_signal(&q->not_full);
        r = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

static void q_close(struct queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

static void verify_and_free(struct msg m, const char *what)
{
    long bad = pat_check(m.p, 0, m.size, m.seed);
    if (bad >= 0)
        fail("%s: block %p (%zu bytes, seed %#" PRIx64 ") corrupted at offset %ld", what, m.p,
             m.size, m.seed, bad);
    free(m.p);
}

/* ---- (a) producer / consumer ------------------------------------------------------- */

#define PC_PRODUCERS 3
#define PC_CONSUMERS 3
#define PC_ITEMS 100000 /* per producer */

static struct queue pc_fwd;                /* producers -> consumers */
static struct queue pc_back[PC_PRODUCERS]; /* consumers -> producer i (reverse direction) */
static atomic_long pc_consumed, pc_returned;

static void *pc_producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rs = 0x1000 + id;
    struct msg m;
    for (uint64_t seq = 0; seq < PC_ITEMS; seq++) {
        size_t size = random_size(&rs, 400);
        uint64_t seed = mix64(((uint64_t)id << 48) ^ (seq << 8) ^ size);
        void *p = xmalloc(size, "producer malloc");
        pat_fill(p, 0, size, seed);
        q_push(&pc_fwd, (struct msg){p, size | ((size_t)id << MSG_ID_SHIFT), seed});
        /* Reverse direction: blocks that consumers allocated for us. */
        while (q_trypop(&pc_back[id], &m) == 0) {
            verify_and_free(m, "producer (reverse) verify");
            atomic_fetch_add(&pc_returned, 1);
        }
    }
    return NULL;
}

static void *pc_consumer(void *arg)
{
    uint64_t rs = 0x2000 + (uintptr_t)arg;
    uint64_t n = 0;
    struct msg m;
    while (q_pop(&pc_fwd, &m) == 0) {
        unsigned from = (unsigned)(m.size >> MSG_ID_SHIFT);
        m.size &= ((size_t)1 << MSG_ID_SHIFT) - 1;
        verify_and_free(m, "consumer verify");
        atomic_fetch_add(&pc_consumed, 1);
        /* Every 4th message: allocate here, free in the producer's thread. */
        if (++n % 4 == 0) {
            size_t size = random_size(&rs, 0);
            uint64_t seed = mix64(rnd(&rs));
            void *p = xmalloc(size, "consumer malloc");
            pat_fill(p, 0, size, seed);
            q_push(&pc_back[from], (struct msg){p, size, seed});
        }
    }
    return NULL;
}

static void mode_prodcons(void)
{
    pthread_t prod[PC_PRODUCERS], cons[PC_CONSUMERS];
    q_init(&pc_fwd, 256);
    /* Big enough that a consumer never blocks on the reverse queue while the producer it
     * feeds is blocked on the forward queue. */
    for (int i = 0; i < PC_PRODUCERS; i++)
        q_init(&pc_back[i], PC_ITEMS);
    leak_check_begin();
    for (uintptr_t i = 0; i < PC_CONSUMERS; i++)
        pthread_create(&cons[i], NULL, pc_consumer, (void *)i);
    for (uintptr_t i = 0; i < PC_PRODUCERS; i++)
        pthread_create(&prod[i], NULL, pc_producer, (void *)i);
    for (int i = 0; i < PC_PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    q_close(&pc_fwd);
    for (int i = 0; i < PC_CONSUMERS; i++)
        pthread_join(cons[i], NULL);
    /* Leftover reverse blocks: freed by the main thread, a third thread. */
    struct msg m;
    for (int i = 0; i < PC_PRODUCERS; i++)
        while (q_trypop(&pc_back[i], &m) == 0) {
            verify_and_free(m, "main (reverse) verify");
            atomic_fetch_add(&pc_returned, 1);
        }
    long consumed = atomic_load(&pc_consumed), returned = atomic_load(&pc_returned);
    printf("# prodcons: %ld blocks producer->consumer, %ld consumer->producer\n", consumed,
           returned);
    if (consumed != (long)PC_PRODUCERS * PC_ITEMS)
        fail("prodcons: consumed %ld blocks, expected %ld", consumed,
             (long)PC_PRODUCERS * PC_ITEMS);
    /* each consumer sends back floor(its count / 4) */
    if (returned > consumed / 4 || returned < consumed / 4 - PC_CONSUMERS)
        fail("prodcons: %ld blocks came back, expected about %ld", returned, consumed / 4);
    leak_check_end(512 * KiB);
    q_destroy(&pc_fwd);
    for (int i = 0; i < PC_PRODUCERS; i++)
        q_destroy(&pc_back[i]);
}

/* ---- (b) many short-lived threads -------------------------------------------------- */

#define MT_THREADS 20000
#define MT_WAVE 8    /* threads alive at once */
#define MT_BLOCKS 24 /* allocated by each thread */
#define MT_HANDOFF 6 /* of which passed on to later threads */
#define MT_POOL 4096

static pthread_mutex_t mt_mu = PTHREAD_MUTEX_INITIALIZER;
static struct msg mt_pool[MT_POOL];
static size_t mt_pool_n;
static atomic_long mt_handed;

static void *mt_thread(void *arg)
{
    uint64_t rs = mix64((uintptr_t)arg + 77);
    struct msg own[MT_BLOCKS], got[MT_HANDOFF * MT_WAVE];
    size_t ngot = 0;
    for (int i = 0; i < MT_BLOCKS; i++) {
        size_t size =
            (rnd(&rs) % 16 == 0) ? 64 * KiB + rnd(&rs) % (192 * KiB) : 16 + rnd(&rs) % 2000;
        own[i] = (struct msg){xmalloc(size, "short-lived thread malloc"), size, rnd(&rs)};
        pat_fill(own[i].p, 0, size, own[i].seed);
    }
    /* Take what earlier (probably exited) threads left, leave some of ours. */
    pthread_mutex_lock(&mt_mu);
    while (mt_pool_n && ngot < MT_HANDOFF * MT_WAVE)
        got[ngot++] = mt_pool[--mt_pool_n];
    for (int i = 0; i < MT_HANDOFF && mt_pool_n < MT_POOL; i++) {
        mt_pool[mt_pool_n++] = own[i];
        own[i].p = NULL;
    }
    pthread_mutex_unlock(&mt_mu);
    for (size_t i = 0; i < ngot; i++)
        verify_and_free(got[i], "block from an earlier thread");
    atomic_fetch_add(&mt_handed, (long)ngot);
    for (int i = 0; i < MT_BLOCKS; i++)
        if (own[i].p)
            verify_and_free(own[i], "own block");
    return NULL;
}

static void mode_manythreads(void)
{
    struct thpalloc_stats st;
    uint64_t max_heaps = 0, max_committed = 0;
    pthread_t th[MT_WAVE];
    leak_check_begin();
    uint64_t heaps0 = start_stats.heaps, committed0 = start_stats.committed;
    double t0 = now_s();
    for (int n = 0; n < MT_THREADS; n += MT_WAVE) {
        for (int i = 0; i < MT_WAVE; i++)
            if (pthread_create(&th[i], NULL, mt_thread, (void *)(uintptr_t)(n + i)) != 0) {
                fail("pthread_create failed after %d threads", n + i);
                return;
            }
        for (int i = 0; i < MT_WAVE; i++)
            pthread_join(th[i], NULL);
        if (!glibc_mode && (n / MT_WAVE) % 25 == 0 && get_stats(&st) == 0) {
            if (st.heaps > max_heaps)
                max_heaps = st.heaps;
            if (st.committed > max_committed)
                max_committed = st.committed;
        }
    }
    /* What the last threads left in the pool: freed by the main thread. */
    for (size_t i = 0; i < mt_pool_n; i++)
        verify_and_free(mt_pool[i], "leftover pool block");
    long handed = atomic_load(&mt_handed);
    printf("# manythreads: %d threads in %.2f s, %ld blocks freed by a later thread\n", MT_THREADS,
           now_s() - t0, handed + (long)mt_pool_n);
    mt_pool_n = 0;
    if (handed < (long)MT_THREADS * MT_HANDOFF / 2)
        fail("manythreads: only %ld blocks handed between threads", handed);
    if (!glibc_mode && get_stats(&st) == 0) {
        printf("# heaps: start %" PRIu64 ", max seen %" PRIu64 ", end %" PRIu64
               "; committed: start %" PRIu64 " max %" PRIu64 " end %" PRIu64 "\n",
               heaps0, max_heaps, st.heaps, committed0, max_committed, st.committed);
        /* At most MT_WAVE threads (+ main) are alive at once: heaps must be reused or
         * released, not pile up (20000 threads would give ~20000 heaps). */
        if (max_heaps > heaps0 + MT_WAVE + 64)
            fail("heaps grew to %" PRIu64 " (start %" PRIu64 ", at most %d threads alive)",
                 max_heaps, heaps0, MT_WAVE + 1);
        if (st.heaps > heaps0 + MT_WAVE + 64)
            fail("heaps at end = %" PRIu64 " (start %" PRIu64 "): heaps of exited threads leak",
                 st.heaps, heaps0);
        /* Chunks of exited threads must be adopted/reused, not abandoned. */
        if (max_committed > committed0 + 256 * MiB)
            fail("committed grew by %" PRIu64 " MiB over the run: chunks of exited threads "
                 "not reused",
                 (max_committed - committed0) / MiB);
    }
    leak_check_end(512 * KiB);
}

/* ---- (c) fork while other threads allocate ----------------------------------------- */

#define FK_FORKS 300
#define FK_INFLIGHT 4
#define FK_BG 4

static atomic_int fk_stop;
static atomic_long fk_bg_ops;

static void *fk_background(void *arg)
{
    uint64_t rs = mix64(0xf0f0 + (uintptr_t)arg);
    struct msg slots[64] = {{0}};
    long ops = 0;
    while (!atomic_load_explicit(&fk_stop, memory_order_relaxed)) {
        struct msg *s = &slots[rnd(&rs) % 64];
        if (s->p)
            verify_and_free(*s, "fork-test background thread");
        s->size = random_size(&rs, 200);
        s->seed = rnd(&rs);
        s->p = xmalloc(s->size, "fork-test background malloc");
        pat_fill(s->p, 0, s->size < 4096 ? s->size : 4096, s->seed);
        s->size = s->size < 4096 ? s->size : 4096; /* only the stamped prefix is checked */
        ops++;
    }
    for (int i = 0; i < 64; i++)
        if (slots[i].p)
            verify_and_free(slots[i], "fork-test background thread");
    atomic_fetch_add(&fk_bg_ops, ops);
    return NULL;
}

static void *fk_child_thread(void *arg)
{
    uint64_t rs = (uintptr_t)arg;
    for (int i = 0; i < 200; i++) {
        size_t size = random_size(&rs, 50);
        void *p = malloc(size);
        if (!p)
            return (void *)1;
        pat_fill(p, 0, size, rs);
        if (pat_check(p, 0, size, rs) >= 0)
            return (void *)2;
        free(p);
    }
    return NULL;
}

/* Runs in the child of a fork from a multithreaded parent. Only async-signal-safe
 * reporting (write) and _exit, except for the children that deliberately use exit(). */
static void fk_child(int n, struct msg inherited)
{
    alarm(10); /* a child deadlocked in malloc dies with SIGALRM instead of hanging */
    uint64_t rs = mix64(0xc41d + (uint64_t)n);
    /* Memory allocated by the parent before the fork must be intact and freeable. */
    if (pat_check(inherited.p, 0, inherited.size, inherited.seed) >= 0)
        _exit(10);
    free(inherited.p);
    void *blocks[32];
    size_t sizes[32];
    uint64_t seeds[32];
    for (int i = 0; i < 32; i++) {
        sizes[i] = random_size(&rs, 16);
        seeds[i] = rnd(&rs);
        blocks[i] = malloc(sizes[i]);
        if (!blocks[i])
            _exit(11);
        pat_fill(blocks[i], 0, sizes[i], seeds[i]);
    }
    for (int i = 0; i < 32; i += 2) {
        void *q = realloc(blocks[i], sizes[i] * 2 + 1);
        if (!q)
            _exit(12);
        blocks[i] = q;
    }
    for (int i = 0; i < 32; i++) {
        if (pat_check(blocks[i], 0, sizes[i], seeds[i]) >= 0)
            _exit(13);
        free(blocks[i]);
    }
    if (n % 3 == 0) {
        pthread_t t;
        void *ret = (void *)-1;
        if (pthread_create(&t, NULL, fk_child_thread, (void *)(uintptr_t)(n + 1)) != 0)
            _exit(14);
        pthread_join(t, &ret);
        if (ret != NULL)
            _exit(15);
    }
    if (n % 4 == 0)
        exit(0); /* atexit handlers and library destructors run in the child too */
    _exit(0);
}

static void mode_fork(void)
{
    pthread_t bg[FK_BG];
    pid_t pids[FK_INFLIGHT] = {0};
    int done = 0, started = 0, bad = 0;
    uint64_t rs = 0xf02c;
    leak_check_begin();
    for (uintptr_t i = 0; i < FK_BG; i++)
        pthread_create(&bg[i], NULL, fk_background, (void *)i);
    double t0 = now_s();
    while (done < FK_FORKS) {
        for (int slot = 0; slot < FK_INFLIGHT && started < FK_FORKS; slot++) {
            if (pids[slot])
                continue;
            struct msg inh;
            inh.size = random_size(&rs, 8);
            inh.seed = rnd(&rs);
            inh.p = xmalloc(inh.size, "pre-fork malloc");
            pat_fill(inh.p, 0, inh.size, inh.seed);
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) {
                fail("fork #%d failed: %s", started, strerror(errno));
                free(inh.p);
                started = done = FK_FORKS;
                break;
            }
            if (pid == 0)
                fk_child(started, inh);
            verify_and_free(inh, "parent block after fork");
            pids[slot] = pid;
            started++;
        }
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            break;
        for (int slot = 0; slot < FK_INFLIGHT; slot++)
            if (pids[slot] == pid)
                pids[slot] = 0;
        done++;
        if (WIFSIGNALED(status)) {
            bad++;
            fail("fork child %d killed by signal %d%s", (int)pid, WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (SIGALRM: deadlocked after fork?)" : "");
        } else if (WEXITSTATUS(status) != 0) {
            bad++;
            fail("fork child %d exited with status %d (10: inherited block corrupted, "
                 "11: malloc NULL, 12: realloc NULL, 13: content corrupted, 14/15: thread)",
                 (int)pid, WEXITSTATUS(status));
        }
    }
    atomic_store(&fk_stop, 1);
    for (int i = 0; i < FK_BG; i++)
        pthread_join(bg[i], NULL);
    printf("# fork: %d children in %.2f s, %d failed; background threads did %ld "
           "malloc/free pairs\n",
           done, now_s() - t0, bad, atomic_load(&fk_bg_ops));
    if (done != FK_FORKS)
        fail("only %d of %d children were reaped", done, FK_FORKS);
    leak_check_end(512 * KiB);
}

/* ---- (d) realloc chains ------------------------------------------------------------ */

#define RC_THREADS 4
#define RC_MAX (6 * MiB)
#define RC_ROUNDS 12

static void *rc_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t rs = mix64(0x4ea1 + id);
    for (int round = 0; round < RC_ROUNDS; round++) {
        uint64_t seed = rnd(&rs);
        size_t size = 1;
        unsigned char *p = xmalloc(1, "realloc chain start");
        pat_fill(p, 0, 1, seed);
        void *noise[64] = {0};
        int steps = 0;
        /* Grow: factor 1.05 .. 1.3, plus a few bytes, so every size region is crossed. */
        while (size < RC_MAX) {
            size_t nsize = size + size / 20 + (size_t)(rnd(&rs) % (size / 4 + 8)) + 1;
            if (nsize > RC_MAX)
                nsize = RC_MAX;
            unsigned char *q = realloc(p, nsize);
            check_block(q, nsize, "realloc grow");
            if (!q) {
                free(p);
                return NULL;
            }
            long bad = pat_check(q, 0, size, seed);
            if (bad >= 0)
                fail("realloc grow %zu -> %zu (thread %lu, round %d): old content lost at "
                     "offset %ld",
                     size, nsize, (unsigned long)id, round, bad);
            pat_fill(q, size, nsize, seed);
            p = q;
            size = nsize;
            /* Something allocated right after the block makes in-place growth harder. */
            int k = steps++ % 64;
            free(noise[k]);
            noise[k] = malloc(16 + rnd(&rs) % 512);
        }
        /* Same-size realloc must keep the content. */
        unsigned char *q = realloc(p, size);
        check_block(q, size, "realloc same size");
        if (q && pat_check(q, 0, size, seed) >= 0)
            fail("realloc to the same size lost content");
        p = q ? q : p;
        /* Shrink back down to 1 byte. */
        while (size > 1) {
            size_t nsize = size - 1 - size / 4 - (size_t)(rnd(&rs) % (size / 4 + 1));
            if (nsize < 1 || nsize >= size)
                nsize = 1;
            q = realloc(p, nsize);
            check_block(q, nsize, "realloc shrink");
            if (!q) {
                free(p);
                return NULL;
            }
            long bad = pat_check(q, 0, nsize, seed);
            if (bad >= 0)
                fail("realloc shrink %zu -> %zu (thread %lu, round %d): content lost at "
                     "offset %ld",
                     size, nsize, (unsigned long)id, round, bad);
            p = q;
            size = nsize;
            int k = steps++ % 64;
            free(noise[k]);
            noise[k] = malloc(16 + rnd(&rs) % 4096);
        }
        free(p);
        for (int k = 0; k < 64; k++)
            free(noise[k]);
        /* realloc(NULL, n) is malloc(n). */
        p = realloc(NULL, 100);
        check_block(p, 100, "realloc(NULL, 100)");
        free(p);
    }
    return NULL;
}

static void mode_realloc(void)
{
    pthread_t th[RC_THREADS];
    leak_check_begin();
    double t0 = now_s();
    for (uintptr_t i = 0; i < RC_THREADS; i++)
        pthread_create(&th[i], NULL, rc_thread, (void *)i);
    for (int i = 0; i < RC_THREADS; i++)
        pthread_join(th[i], NULL);
    printf("# realloc: %d threads x %d chains 1 B -> %zu MiB -> 1 B in %.2f s\n", RC_THREADS,
           RC_ROUNDS, RC_MAX / MiB, now_s() - t0);
    leak_check_end(256 * KiB);
}

/* ---- (e) randomized soak ----------------------------------------------------------- */

#define SK_THREADS 4
#define SK_SLOTS 2048

/* Every live block starts with this header (when it is big enough), so that a block that
 * ends up in the wrong slot, or that another block overlaps, is noticed. */
struct stamp {
    uint64_t seed;
    uint64_t size;
    uint64_t slot;
    uint64_t check;
};

static _Atomic(void *) sk_table[SK_SLOTS];
static atomic_long sk_ops, sk_checked_bytes;
static double sk_deadline;

static void sk_stamp(void *p, size_t size, size_t slot, uint64_t seed)
{
    pat_fill(p, 0, size, seed);
    if (size >= sizeof(struct stamp)) {
        struct stamp s = {seed, size, slot, mix64(seed ^ size ^ slot)};
        memcpy(p, &s, sizeof s);
    }
}

/* Every soak block is at least sizeof(struct stamp) bytes, so every block has a header. */
static int sk_verify(const void *p, size_t slot, size_t *size_out, uint64_t *seed_out)
{
    struct stamp s;
    size_t us = malloc_usable_size((void *)p);
    if (us < sizeof s) {
        fail("soak: block %p in slot %zu: malloc_usable_size %zu < %zu", p, slot, us, sizeof s);
        return -1;
    }
    memcpy(&s, p, sizeof s);
    if (s.check != mix64(s.seed ^ s.size ^ s.slot) || s.slot != slot || s.size > us) {
        fail("soak: block %p in slot %zu has a broken header (slot %" PRIu64 " size %" PRIu64
             " usable %zu): overlapping blocks or a stale pointer",
             p, slot, s.slot, s.size, us);
        return -1;
    }
    long bad = pat_check(p, sizeof s, s.size, s.seed);
    if (bad >= 0) {
        fail("soak: block %p (%" PRIu64 " bytes, slot %zu) corrupted at offset %ld", p, s.size,
             slot, bad);
        return -1;
    }
    atomic_fetch_add_explicit(&sk_checked_bytes, (long)s.size, memory_order_relaxed);
    *size_out = s.size;
    *seed_out = s.seed;
    return 0;
}

static size_t sk_size(uint64_t *rs)
{
    uint64_t r = rnd(rs) % 1000;
    if (r < 700)
        return 32 + rnd(rs) % 512;
    if (r < 950)
        return 512 + rnd(rs) % (64 * KiB);
    if (r < 997)
        return 64 * KiB + rnd(rs) % (448 * KiB);
    return 1 * MiB + rnd(rs) % (4 * MiB);
}

static void *sk_alloc(uint64_t *rs, size_t size)
{
    void *p = NULL;
    size_t align;
    switch (rnd(rs) % 8) {
    case 0: {
        p = calloc(1, size);
        check_block(p, size, "soak calloc");
        if (p) {
            const unsigned char *b = p;
            size_t step = size > 65536 ? 4093 : 1;
            for (size_t i = 0; i < size; i += step)
                if (b[i]) {
                    fail("soak: calloc(%zu) block %p not zero at offset %zu", size, p, i);
                    break;
                }
        }
        return p;
    }
    case 1:
        align = (size_t)1 << (4 + rnd(rs) % 9); /* 16 .. 4096 */
        if (posix_memalign(&p, align, size) != 0)
            p = NULL;
        break;
    case 2:
        align = (size_t)1 << (4 + rnd(rs) % 18); /* up to 2 MiB */
        p = aligned_alloc(align, (size + align - 1) / align * align);
        break;
    default:
        p = malloc(size);
        check_block(p, size, "soak malloc");
        return p;
    }
    check_block(p, size, "soak aligned allocation");
    if (p && (uintptr_t)p % align)
        fail("soak: block %p not aligned to %zu", p, align);
    return p;
}

static void *sk_thread(void *arg)
{
    uint64_t rs = mix64(0x50a1 + (uintptr_t)arg);
    long ops = 0;
    while ((ops & 255) || now_s() < sk_deadline) {
        size_t slot = rnd(&rs) % SK_SLOTS;
        void *p = atomic_exchange(&sk_table[slot], NULL);
        size_t size;
        uint64_t seed;
        if (p) {
            if (sk_verify(p, slot, &size, &seed) != 0) {
                /* leak it: freeing a corrupted block could crash before the report */
                ops++;
                continue;
            }
            uint64_t r = rnd(&rs) % 4;
            if (r == 0) {
                /* realloc: content up to min(old, new) must survive */
                size_t nsize = sk_size(&rs);
                void *q = realloc(p, nsize);
                check_block(q, nsize, "soak realloc");
                if (!q) {
                    free(p);
                    ops++;
                    continue;
                }
                size_t keep = size < nsize ? size : nsize;
                long bad = pat_check(q, sizeof(struct stamp), keep, seed);
                if (bad >= 0)
                    fail("soak: realloc %zu -> %zu lost content at offset %ld", size, nsize, bad);
                sk_stamp(q, nsize, slot, rnd(&rs));
                void *expect = NULL;
                if (!atomic_compare_exchange_strong(&sk_table[slot], &expect, q))
                    free(q);
            } else {
                free(p);
            }
        } else {
            size = sk_size(&rs);
            seed = rnd(&rs);
            p = sk_alloc(&rs, size);
            if (p) {
                sk_stamp(p, size, slot, seed);
                void *expect = NULL;
                if (!atomic_compare_exchange_strong(&sk_table[slot], &expect, p))
                    free(p);
            }
        }
        ops++;
    }
    atomic_fetch_add(&sk_ops, ops);
    return NULL;
}

static void mode_soak(void)
{
    pthread_t th[SK_THREADS];
    leak_check_begin();
    double t0 = now_s();
    sk_deadline = t0 + soak_seconds;
    for (uintptr_t i = 0; i < SK_THREADS; i++)
        pthread_create(&th[i], NULL, sk_thread, (void *)i);
    for (int i = 0; i < SK_THREADS; i++)
        pthread_join(th[i], NULL);
    /* Final sweep: every block left in the table is checked, then freed by main. */
    size_t live = 0, size;
    uint64_t seed;
    for (size_t i = 0; i < SK_SLOTS; i++) {
        void *p = atomic_exchange(&sk_table[i], NULL);
        if (!p)
            continue;
        live++;
        if (sk_verify(p, i, &size, &seed) == 0)
            free(p);
    }
    printf("# soak: %ld operations by %d threads in %.2f s, %ld MiB verified, %zu blocks "
           "live at the end\n",
           atomic_load(&sk_ops), SK_THREADS, now_s() - t0,
           atomic_load(&sk_checked_bytes) / (long)MiB, live);
    if (atomic_load(&sk_ops) < 1000)
        fail("soak: only %ld operations", atomic_load(&sk_ops));
    leak_check_end(512 * KiB);
}

/* ---- main ---------------------------------------------------------------------------- */

static const struct test_mode modes[] = {
    {"prodcons", mode_prodcons}, {"manythreads", mode_manythreads},
    {"fork", mode_fork},         {"realloc", mode_realloc},
    {"soak", mode_soak},
};

static void usage(void)
{
    test_mode_run("stress-threads", "[-g] [-s SECONDS]", modes, sizeof modes / sizeof *modes, NULL);
    exit(2);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "gs:")) != -1) {
        switch (opt) {
        case 'g':
            glibc_mode = 1;
            break;
        case 's':
            soak_seconds = atof(optarg);
            break;
        default:
            usage();
        }
    }
    if (optind + 1 != argc)
        usage();
    const char *mode = argv[optind];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("# stress-threads %s%s\n", mode, glibc_mode ? " (no thpalloc checks)" : "");
#ifdef STRESS_TAKE_MALLOC_ADDRESS
    malloc_address = malloc;
    Dl_info di;
    if (dladdr((void *)(uintptr_t)malloc_address, &di) && di.dli_fname)
        printf("# non-PIE build: &malloc = %p lies in %s\n", (void *)(uintptr_t)malloc_address,
               di.dli_fname);
#endif
    if (thpalloc_setup() != 0) {
        report(0, "thpalloc is the process's malloc");
        return 1;
    }
    if (test_mode_run("stress-threads", "[-g] [-s SECONDS]", modes, sizeof modes / sizeof *modes,
                      mode))
        exit(2);
    long f = atomic_load(&failures);
    report(f == 0, "every check passed (%ld failure(s))", f);
    puts("end");
    return f ? 1 : 0;
}
