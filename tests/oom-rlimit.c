/* oom-rlimit: out of address space (RLIMIT_AS = VmSize + 256 MiB) is NULL + ENOMEM,
 * never a crash, and the allocator recovers once memory is freed.
 *
 *   oom-rlimit one KIND SIZE   allocate SIZE-byte blocks with KIND until NULL, check errno,
 *                              free them all, check they fit again, then a mix of sizes
 *   oom-rlimit grow            one block grown by realloc until NULL; old block intact
 *   oom-rlimit threads         4 threads at once, each its own size class, twice
 *
 * KIND: malloc calloc realloc posix_memalign aligned_alloc.
 * Output: "ok - D" / "not ok - D", "# ..." diagnostics, "end" when done (oom-rlimit.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "proc-status.h"
#include "relay-report.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define HEADROOM (256 * MiB)
/* Requested bytes after which "never NULL" is declared (the limit did not work). */
#define CAP ((size_t)1 << 30)

static size_t vm_size(void)
{
    return proc_status_bytes("VmSize");
}

static int set_limit(void)
{
    size_t vm = vm_size();
    struct rlimit rl;
    if (vm == 0 || getrlimit(RLIMIT_AS, &rl) != 0)
        return -1;
    rl.rlim_cur = vm + HEADROOM;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
        return -1;
    printf("# VmSize %zu MiB, RLIMIT_AS set to %zu MiB\n", vm / MiB, (size_t)rl.rlim_cur / MiB);
    fflush(stdout);
    return setrlimit(RLIMIT_AS, &rl);
}

enum kind { K_MALLOC, K_CALLOC, K_REALLOC, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC };
static const char *const kind_name[] = {"malloc", "calloc", "realloc", "posix_memalign",
                                        "aligned_alloc"};

struct result {
    int ok_errno;  /* the failure said ENOMEM */
    int other_bad; /* realloc damaged the old block, calloc not zero, ... */
    int err;       /* what it said */
};

/* One allocation of `size` bytes by `kind`. NULL on failure, with r->err set. */
static void *alloc_one(enum kind k, size_t size, struct result *r)
{
    void *p = NULL;
    errno = 0;
    switch (k) {
    case K_MALLOC:
        p = malloc(size);
        break;
    case K_CALLOC:
        p = calloc(1, size);
        if (p && (((unsigned char *)p)[0] || ((unsigned char *)p)[size - 1]))
            r->other_bad++;
        break;
    case K_REALLOC: {
        /* a half-size block grown to full size */
        size_t half = size / 2;
        unsigned char *old = malloc(half);
        if (!old) {
            r->err = errno;
            return NULL;
        }
        old[0] = 0x11;
        old[half - 1] = 0x22;
        errno = 0;
        p = realloc(old, size);
        if (!p) {
            r->err = errno;
            if (old[0] != 0x11 || old[half - 1] != 0x22)
                r->other_bad++;
            free(old);
            return NULL;
        }
        if (((unsigned char *)p)[0] != 0x11 || ((unsigned char *)p)[half - 1] != 0x22)
            r->other_bad++;
        break;
    }
    case K_POSIX_MEMALIGN: {
        int ret = posix_memalign(&p, 64, size);
        if (ret != 0) {
            r->err = ret;
            return NULL;
        }
        if ((uintptr_t)p % 64)
            r->other_bad++;
        return p;
    }
    case K_ALIGNED_ALLOC:
        p = aligned_alloc(4096, size);
        if (p && (uintptr_t)p % 4096)
            r->other_bad++;
        break;
    }
    if (!p)
        r->err = errno;
    return p;
}

/* Chains blocks through their first word; the last byte holds a check mark. */
struct chain {
    void *head;
    size_t count;
};

static void push(struct chain *c, void *p, size_t size)
{
    *(void **)p = c->head;
    ((unsigned char *)p)[size - 1] = (unsigned char)(0xa0 + (c->count & 15));
    c->head = p;
    c->count++;
}

/* Frees the whole chain; returns the number of blocks whose check mark changed. */
static size_t free_chain(struct chain *c, size_t size)
{
    size_t bad = 0, i = c->count;
    while (c->head) {
        void *next = *(void **)c->head;
        i--;
        if (((unsigned char *)c->head)[size - 1] != (unsigned char)(0xa0 + (i & 15)))
            bad++;
        free(c->head);
        c->head = next;
    }
    c->count = 0;
    return bad;
}

/* Allocates until NULL (or CAP). Returns 1 if it got NULL. */
static int fill_until_null(enum kind k, size_t size, struct chain *c, struct result *r)
{
    for (;;) {
        void *p = alloc_one(k, size, r);
        if (!p)
            return 1;
        push(c, p, size);
        if (c->count * size >= CAP)
            return 0;
    }
}

static int mix_works(const char **what)
{
    static const size_t sizes[] = {16, 1 * KiB, 64 * KiB, 512 * KiB, 4 * MiB, 16 * MiB};
    void *ps[6];
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        ps[i] = malloc(sizes[i]);
        if (!ps[i]) {
            ok = 0;
            *what = i == 0   ? "16"
                    : i == 1 ? "1K"
                    : i == 2 ? "64K"
                    : i == 3 ? "512K"
                    : i == 4 ? "4M"
                             : "16M";
            break;
        }
        memset(ps[i], 0x33, sizes[i]);
    }
    for (int i = 0; i < 6; i++)
        if (ok || ps[i])
            free(ps[i]);
    return ok;
}

static int run_one(enum kind k, size_t size)
{
    const char *kn = kind_name[k];
    struct chain c = {NULL, 0};
    struct result r = {0, 0, 0};
    int got_null = fill_until_null(k, size, &c, &r);
    size_t first = c.count;
    report(got_null,
           "%s(%zu): returns NULL once the address space is used up (after %zu blocks, %zu MiB)",
           kn, size, first, first * size / MiB);
    if (!got_null) {
        free_chain(&c, size);
        return 0;
    }
    report(r.err == ENOMEM, "%s(%zu): the failure is ENOMEM (got %s)", kn, size,
           r.err == ENOMEM ? "ENOMEM" : strerror(r.err));
    /* At least a quarter of the headroom was usable before NULL (an allocator that gives
     * up long before the limit is not "out of memory"). Small blocks may cost twice
     * their size (glibc: 32 bytes per 16-byte block), aligned ones a page. */
    size_t cost = k == K_ALIGNED_ALLOC && size < 4096 ? 4096 : size < 32 ? 32 : size;
    report(first * cost >= HEADROOM / 4,
           "%s(%zu): at least 64 MiB worth of blocks before NULL (%zu MiB)", kn, size,
           first * cost / MiB);
    /* a second try fails the same way */
    struct result r2 = {0, 0, 0};
    void *again = alloc_one(k, size, &r2);
    if (again)
        push(&c, again, size);
    report(again || r2.err == ENOMEM, "%s(%zu): another try while full is NULL+ENOMEM or works", kn,
           size);
    size_t damaged = free_chain(&c, size);
    report(damaged == 0 && r.other_bad == 0 && r2.other_bad == 0,
           "%s(%zu): every block kept its contents (%zu damaged, %d bad results)", kn, size,
           damaged, r.other_bad + r2.other_bad);

    /* after freeing all: the same again */
    struct result r3 = {0, 0, 0};
    got_null = fill_until_null(k, size, &c, &r3);
    size_t second = c.count;
    report(second >= first / 2 && (!got_null || r3.err == ENOMEM),
           "%s(%zu): after freeing everything, at least half as many fit again (%zu then %zu)", kn,
           size, first, second);
    free_chain(&c, size);
    const char *what = "";
    int mix = mix_works(&what);
    report(mix, "%s(%zu): after freeing everything, malloc of 16, 1K, 64K, 512K, 4M, 16M works%s%s",
           kn, size, mix ? "" : " -- failed at ", what);
    return 1;
}

/* One block grown by realloc (x1.5) until NULL: ENOMEM, old block intact and freeable. */
static void run_grow(void)
{
    size_t n = 16;
    unsigned char *p = malloc(n);
    memset(p, 0x5c, n);
    int bad = 0;
    for (;;) {
        size_t m = n + n / 2;
        errno = 0;
        unsigned char *q = realloc(p, m);
        if (!q) {
            int e = errno;
            report(e == ENOMEM, "realloc growth: NULL with ENOMEM at %zu MiB", m / MiB);
            report(p[0] == 0x5c && p[n / 2] == 0x5c && p[n - 1] == 0x5c,
                   "realloc growth: old block intact after the failure");
            break;
        }
        if (q[0] != 0x5c || q[n / 2] != 0x5c || q[n - 1] != 0x5c)
            bad++;
        memset(q + n, 0x5c, m - n);
        p = q;
        n = m;
        if (n >= CAP) {
            report(0, "realloc growth: NULL before 1 GiB");
            break;
        }
    }
    report(!bad, "realloc growth: contents kept at every step");
    report(n >= HEADROOM / 4, "realloc growth: reached at least 64 MiB (%zu MiB)", n / MiB);
    free(p);
    p = malloc(HEADROOM / 2);
    report(p != NULL, "realloc growth: after freeing it, malloc(128M) works");
    if (p)
        memset(p, 1, HEADROOM / 2);
    free(p);
}

/* ---- 4 threads at once ---- */
enum { NTHREADS = 4 };
static pthread_barrier_t barrier;
static const size_t thread_size[NTHREADS] = {16, 1 * KiB, 64 * KiB, 4 * MiB};

struct thread_res {
    size_t count[2], again;
    int err[2], damaged;
};

struct targ {
    int id;
    struct thread_res res;
};

static void *worker(void *arg)
{
    struct targ *a = arg;
    size_t size = thread_size[a->id];
    struct chain c = {NULL, 0};
    for (int round = 0; round < 2; round++) {
        struct result r = {0, 0, 0};
        pthread_barrier_wait(&barrier); /* all start together */
        fill_until_null(a->id == 1 ? K_CALLOC : K_MALLOC, size, &c, &r);
        a->res.count[round] = c.count;
        a->res.err[round] = r.err;
        pthread_barrier_wait(&barrier); /* all full: now free */
        a->res.damaged += (int)free_chain(&c, size) + r.other_bad;
        pthread_barrier_wait(&barrier);
    }
    /* all freed: each thread gets 10 blocks of its size */
    for (int i = 0; i < 10; i++) {
        void *p = malloc(size);
        if (p) {
            push(&c, p, size);
            a->res.again++;
        }
    }
    free_chain(&c, size);
    return NULL;
}

static void run_threads(void)
{
    pthread_t t[NTHREADS];
    struct targ a[NTHREADS];
    memset(a, 0, sizeof a);
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    /* threads (and their stacks) exist before the limit is set; they wait at the barrier */
    for (int i = 0; i < NTHREADS; i++) {
        a[i].id = i;
        if (i > 0 && pthread_create(&t[i], NULL, worker, &a[i]) != 0) {
            report(0, "threads: pthread_create");
            return;
        }
    }
    if (set_limit() != 0) {
        report(0, "threads: setrlimit(RLIMIT_AS)");
        return;
    }
    worker(&a[0]); /* the main thread is worker 0 */
    for (int i = 1; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    size_t total[2] = {0, 0};
    for (int i = 0; i < NTHREADS; i++) {
        size_t size = thread_size[i];
        report(a[i].res.err[0] == ENOMEM && a[i].res.err[1] == ENOMEM,
               "threads: thread %d (%s %zu) ends with NULL+ENOMEM both rounds (%zu, %zu blocks)", i,
               i == 1 ? "calloc" : "malloc", size, a[i].res.count[0], a[i].res.count[1]);
        report(a[i].res.damaged == 0, "threads: thread %d blocks kept their contents", i);
        report(a[i].res.again == 10,
               "threads: thread %d allocates again after all freed (%zu of 10)", i, a[i].res.again);
        total[0] += a[i].res.count[0] * size;
        total[1] += a[i].res.count[1] * size;
    }
    report(total[1] >= total[0] / 2,
           "threads: the second round fits at least half as much as the first (%zu MiB, %zu MiB)",
           total[0] / MiB, total[1] / MiB);
    const char *what = "";
    int mix = mix_works(&what);
    report(mix, "threads: afterwards malloc of 16, 1K, 64K, 512K, 4M, 16M works%s%s",
           mix ? "" : " -- failed at ", what);
}

static int parse_kind(const char *s, enum kind *k)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(s, kind_name[i]) == 0) {
            *k = (enum kind)i;
            return 0;
        }
    return -1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("# oom-rlimit %s\n", argc > 1 ? argv[1] : "");
    enum kind k;
    if (argc == 4 && strcmp(argv[1], "one") == 0 && parse_kind(argv[2], &k) == 0) {
        size_t size = strtoull(argv[3], NULL, 0);
        if (set_limit() != 0) {
            report(0, "setrlimit(RLIMIT_AS)");
            return 1;
        }
        run_one(k, size);
    } else if (argc == 2 && strcmp(argv[1], "grow") == 0) {
        if (set_limit() != 0) {
            report(0, "setrlimit(RLIMIT_AS)");
            return 1;
        }
        run_grow();
    } else if (argc == 2 && strcmp(argv[1], "threads") == 0) {
        run_threads();
    } else {
        fprintf(stderr, "usage: %s one KIND SIZE | grow | threads\n", argv[0]);
        return 2;
    }
    printf("end\n");
    return 0;
}
