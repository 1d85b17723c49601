/* api-foreign-free: pointers that thpalloc did not hand out reach the interposed free,
 * realloc and malloc_usable_size: blocks from glibc's own __libc_malloc / __libc_calloc /
 * __libc_memalign / __libc_valloc / __libc_pvalloc, and blocks from a module dlopen()ed
 * with RTLD_DEEPBIND (its malloc is glibc's). They must go back to glibc (glibc's own
 * mallinfo2 sees them freed), keep their contents through realloc, report glibc's usable
 * size, and leave glibc's heap consistent. thpalloc_owns() is 0 for them, 1 for thpalloc's.
 *
 *   api-foreign-free DEEPBIND_MODULE_PATH
 *
 * Output: "ok - D" / "not ok - D" lines, "thp-only - ok - D" for checks that need thpalloc
 * (made when thpalloc is the process's malloc), "end" when done. Relayed by api-foreign.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thpalloc.h"

#include "relay-report.h"

/* glibc's own allocator entry points, exported by libc.so.6 (GLIBC_2.2.5). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

/* Hides a constant from the compiler (no -Walloc-size-larger-than). */
static size_t opaque(size_t v)
{
    __asm__ volatile("" : "+r"(v));
    return v;
}

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* glibc's own introspection, looked up in libc.so.6 itself (the process-wide symbols are
 * thpalloc's under the preload). */
static struct mallinfo2 (*glibc_mallinfo2)(void);
static int (*glibc_malloc_trim)(size_t);
static size_t (*glibc_usable)(void *);
static int (*glibc_malloc_info)(int, FILE *);
static int (*thp_owns)(const void *);
static int thp_in_charge; /* thpalloc_active() == 1 */

/* A check that only makes sense when thpalloc is the malloc. */
static void report_thp(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_thp(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(cond ? "thp-only - ok - " : "thp-only - not ok - ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)(seed * 31 + i * 13 + (i >> 9));
}

static int check_fill(const void *p, size_t n, unsigned seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)(seed * 31 + i * 13 + (i >> 9)))
            return 0;
    return 1;
}

static size_t glibc_in_use(void)
{
    struct mallinfo2 mi = glibc_mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* owns(p) == want, where thpalloc is in charge. */
static void owns_is(const void *p, int want, const char *what)
{
    if (!thp_in_charge)
        return;
    report_thp(thp_owns && thp_owns(p) == want, "thpalloc_owns(%s) == %d", what, want);
}

/* usable size through the interposed function == glibc's own, for a foreign block */
static int usable_is_glibcs(void *p)
{
    return malloc_usable_size(p) == glibc_usable(p);
}

static void test_free_counts(void)
{
    enum { N = 20000 };
    void **ps = __libc_malloc(N * sizeof *ps);
    size_t base = glibc_in_use();
    int bad = 0;
    for (int i = 0; i < N; i++) {
        ps[i] = __libc_malloc(16 + (size_t)(i % 200));
        fill(ps[i], 16 + (size_t)(i % 200), (unsigned)i);
    }
    size_t grown = glibc_in_use();
    for (int i = 0; i < N; i++) {
        if (!usable_is_glibcs(ps[i]) || !check_fill(ps[i], 16 + (size_t)(i % 200), (unsigned)i))
            bad++;
        if (i < 50)
            owns_is(ps[i], 0, "__libc_malloc block");
        free(ps[i]);
    }
    size_t after = glibc_in_use();
    __libc_free(ps);
    report(!bad, "malloc_usable_size(foreign) equals glibc's own for %d __libc_malloc blocks", N);
    report(grown >= base + N * 16 && after <= base + 64 * KiB,
           "free() of %d __libc_malloc blocks hands them back to glibc (glibc in-use %zu -> %zu -> "
           "%zu)",
           N, base, grown, after);

    /* glibc-mmapped blocks (above glibc's mmap threshold) */
    base = glibc_in_use();
    void *big = __libc_malloc(8 * MiB);
    fill(big, 8 * MiB, 7);
    grown = glibc_in_use();
    report(usable_is_glibcs(big), "malloc_usable_size(8M __libc_malloc block) equals glibc's");
    owns_is(big, 0, "8M __libc_malloc block");
    free(big);
    after = glibc_in_use();
    report(grown >= base + 8 * MiB && after + 8 * MiB <= grown,
           "free() of an 8M glibc-mmapped block unmaps it in glibc (in-use %zu -> %zu -> %zu)",
           base, grown, after);
}

/* realloc of a foreign block: grow through every size range, then shrink; contents kept. */
static void realloc_chain(const char *what, void *p, size_t n, unsigned seed)
{
    static const size_t steps[] = {24, 200, 4000, 70000, 300 * KiB, 3 * MiB, 40 * MiB, 1000, 10};
    int bad = 0;
    fill(p, n, seed);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t keep = n < steps[i] ? n : steps[i];
        void *q = realloc(p, steps[i]);
        if (!q) {
            bad++;
            break;
        }
        if (!check_fill(q, keep, seed) || malloc_usable_size(q) < steps[i])
            bad++;
        p = q;
        n = steps[i];
        fill(p, n, seed);
    }
    free(p);
    report(!bad, "realloc(%s) grows 24..40M and shrinks to 10 keeping contents", what);
}

static void test_realloc(void)
{
    realloc_chain("__libc_malloc(1)", __libc_malloc(1), 1, 1);
    realloc_chain("__libc_malloc(100)", __libc_malloc(100), 100, 2);
    realloc_chain("__libc_malloc(200K)", __libc_malloc(200 * KiB), 200 * KiB, 3);
    realloc_chain("__libc_malloc(5M) mmapped", __libc_malloc(5 * MiB), 5 * MiB, 4);
    realloc_chain("__libc_calloc(100,10)", __libc_calloc(100, 10), 1000, 5);
    realloc_chain("__libc_memalign(64,100)", __libc_memalign(64, 100), 100, 6);
    realloc_chain("__libc_memalign(4096,5000)", __libc_memalign(4096, 5000), 5000, 7);
    realloc_chain("__libc_memalign(2M,3M)", __libc_memalign(2 * MiB, 3 * MiB), 3 * MiB, 8);

    /* shrink by a little, grow by a little: glibc may resize in place */
    int bad = 0;
    for (unsigned i = 0; i < 200; i++) {
        size_t n = 100 + i * 37;
        void *p = __libc_malloc(n);
        fill(p, n, i);
        void *q = realloc(p, n - 50);
        if (!q || !check_fill(q, n - 50, i))
            bad++;
        void *r = q ? realloc(q, n + 50) : NULL;
        if (!r || !check_fill(r, n - 50, i))
            bad++;
        free(r ? r : q);
    }
    report(!bad, "realloc(foreign) by +-50 bytes keeps contents (200 sizes)");

    /* realloc(foreign, huge) fails cleanly, the block is intact and still freeable */
    void *p = __libc_malloc(300);
    fill(p, 300, 9);
    errno = 0;
    void *q = realloc(p, opaque(SIZE_MAX - 4096));
    int e = errno;
    report(q == NULL && e == ENOMEM && check_fill(p, 300, 9),
           "realloc(foreign, SIZE_MAX-4096) is NULL+ENOMEM and leaves the block intact");
    free(q ? q : p);

    /* glibc 2.36: realloc(p, 0) frees p and returns NULL */
    size_t base = glibc_in_use();
    p = __libc_malloc(1 * MiB); /* mmapped by glibc: in-use shows whether it went back */
    size_t grown = glibc_in_use();
    q = realloc(p, 0);
    size_t after = glibc_in_use();
    report(q == NULL && grown >= base + MiB && after + MiB <= grown,
           "realloc(foreign 1M, 0) returns NULL and frees the block in glibc");
    free(q);
}

static void test_kinds(void)
{
    struct {
        const char *what;
        void *p;
        size_t n;
    } k[] = {
        {"__libc_calloc(1000,10)", __libc_calloc(1000, 10), 10000},
        {"__libc_calloc(1,4M)", __libc_calloc(1, 4 * MiB), 4 * MiB},
        {"__libc_memalign(32,10)", __libc_memalign(32, 10), 10},
        {"__libc_memalign(256,1000)", __libc_memalign(256, 1000), 1000},
        {"__libc_memalign(64K,64K)", __libc_memalign(64 * KiB, 64 * KiB), 64 * KiB},
        {"__libc_memalign(2M,5M)", __libc_memalign(2 * MiB, 5 * MiB), 5 * MiB},
        {"__libc_valloc(100)", __libc_valloc(100), 100},
        {"__libc_pvalloc(5000)", __libc_pvalloc(5000), 5000},
        {"__libc_malloc(0)", __libc_malloc(0), 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        int ok = k[i].p != NULL;
        if (ok && strncmp(k[i].what, "__libc_calloc", 13) == 0) {
            const unsigned char *c = k[i].p;
            for (size_t j = 0; j < k[i].n; j++)
                ok &= c[j] == 0;
        }
        if (ok)
            fill(k[i].p, k[i].n, 3);
        ok = ok && usable_is_glibcs(k[i].p) && malloc_usable_size(k[i].p) >= k[i].n;
        owns_is(k[i].p, 0, k[i].what);
        size_t base = glibc_in_use();
        free(k[i].p);
        size_t after = glibc_in_use();
        report(ok && (k[i].n < 1024 || after < base),
               "%s: glibc's usable size, free() gives it back to glibc", k[i].what);
    }
}

/* Modules loaded with RTLD_DEEPBIND call glibc's malloc directly. */
static void test_deepbind(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    report(h != NULL, "dlopen(%s, RTLD_DEEPBIND)", path);
    if (!h) {
        printf("# %s\n", dlerror());
        return;
    }
    void *(*db_malloc)(size_t) = (void *(*)(size_t))dlsym(h, "foreign_db_malloc");
    void *(*db_calloc)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(h, "foreign_db_calloc");
    void *(*db_realloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(h, "foreign_db_realloc");
    int (*db_pm)(void **, size_t, size_t) =
        (int (*)(void **, size_t, size_t))dlsym(h, "foreign_db_posix_memalign");
    const char *(*db_dso)(void) = (const char *(*)(void))dlsym(h, "foreign_db_malloc_dso");
    if (!db_malloc || !db_calloc || !db_realloc || !db_pm || !db_dso) {
        report(0, "deepbind module exports its functions");
        return;
    }
    report(strcmp(db_dso(), "libc.so.6") == 0, "the deepbind module's malloc is glibc's (%s)",
           db_dso());

    enum { N = 5000 };
    void **ps = malloc(N * sizeof *ps);
    size_t base = glibc_in_use();
    for (int i = 0; i < N; i++) {
        size_t n = 8 + (size_t)(i * 7 % 3000);
        switch (i % 4) {
        case 0:
            ps[i] = db_malloc(n);
            break;
        case 1:
            ps[i] = db_calloc(1, n);
            break;
        case 2:
            ps[i] = db_realloc(db_malloc(4), n);
            break;
        default:
            if (db_pm(&ps[i], 128, n) != 0)
                ps[i] = NULL;
        }
        if (ps[i])
            fill(ps[i], n, (unsigned)i);
    }
    size_t grown = glibc_in_use();
    int bad = 0, usable_bad = 0, owned = 0;
    for (int i = 0; i < N; i++) {
        size_t n = 8 + (size_t)(i * 7 % 3000);
        if (!ps[i] || !check_fill(ps[i], n, (unsigned)i)) {
            bad++;
            continue;
        }
        if (!usable_is_glibcs(ps[i]))
            usable_bad++;
        if (thp_owns && thp_owns(ps[i]))
            owned++;
        if (i % 3 == 0) { /* realloc in main, then free in main */
            void *q = realloc(ps[i], n * 3);
            if (!q || !check_fill(q, n, (unsigned)i))
                bad++;
            ps[i] = q;
        }
        free(ps[i]);
    }
    free(ps);
    size_t after = glibc_in_use();
    report(!bad, "blocks from the deepbind module keep contents through realloc/free in main");
    report(!usable_bad, "malloc_usable_size of deepbind blocks equals glibc's");
    if (thp_in_charge)
        report_thp(thp_owns && owned == 0,
                   "thpalloc_owns() is 0 for all deepbind blocks (%d said 1)", owned);
    report(
        grown >= base + N * 8 && after <= base + 256 * KiB,
        "free() in main of %d deepbind blocks hands them back to glibc (in-use %zu -> %zu -> %zu)",
        N, base, grown, after);

    /* a big one: mmapped by glibc */
    void *big = db_malloc(16 * MiB);
    fill(big, 16 * MiB, 77);
    void *big2 = realloc(big, 20 * MiB);
    report(big2 && check_fill(big2, 16 * MiB, 77),
           "realloc in main of a 16M deepbind block to 20M keeps contents");
    free(big2);
    report(dlclose(h) == 0, "dlclose of the deepbind module");
}

/* thpalloc_owns for thpalloc's own blocks. */
static void test_owns(void)
{
    if (!thp_in_charge)
        return;
    static const size_t sizes[] = {1, 16, 100, 4096, 70000, 1 * MiB, 3 * MiB, 40 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = malloc(sizes[i]);
        report_thp(thp_owns && thp_owns(p) == 1, "thpalloc_owns(malloc(%zu)) == 1", sizes[i]);
        if (sizes[i] >= 32)
            report_thp(thp_owns && thp_owns(p + 16) == 0, "thpalloc_owns(malloc(%zu) + 16) == 0",
                       sizes[i]);
        free(p);
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, 100) != 0)
        p = NULL;
    report_thp(thp_owns && thp_owns(p) == 1, "thpalloc_owns(posix_memalign(4096,100)) == 1");
    free(p);
    p = aligned_alloc(2 * MiB, 2 * MiB);
    report_thp(thp_owns && thp_owns(p) == 1, "thpalloc_owns(aligned_alloc(2M,2M)) == 1");
    free(p);
    p = calloc(10, 10);
    report_thp(thp_owns && thp_owns(p) == 1, "thpalloc_owns(calloc(10,10)) == 1");
    p = realloc(p, 1000);
    report_thp(thp_owns && thp_owns(p) == 1, "thpalloc_owns(realloc(p,1000)) == 1");
    free(p);
    void *big = malloc(8 * MiB);
    free(big);
    report_thp(thp_owns && thp_owns(big) == 0, "thpalloc_owns() of a freed 8M block == 0");
    int local = 0;
    static int global_var;
    owns_is(NULL, 0, "NULL");
    owns_is(&local, 0, "a stack address");
    owns_is(&global_var, 0, "a static variable");
    owns_is((void *)(uintptr_t)16, 0, "(void *)16");
    owns_is((void *)UINTPTR_MAX, 0, "(void *)UINTPTR_MAX");
}

/* Threads freeing foreign blocks while allocating their own. */
struct worker {
    unsigned id;
    int bad;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    enum { N = 2000 };
    void *mine[N], *theirs[N];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            size_t n = 8 + (size_t)((i * 131 + w->id * 17) % 5000);
            mine[i] = malloc(n);
            theirs[i] = (i & 1) ? __libc_malloc(n) : __libc_memalign(64, n);
            if (!mine[i] || !theirs[i]) {
                w->bad++;
                return NULL;
            }
            fill(mine[i], n, w->id + (unsigned)i);
            fill(theirs[i], n, w->id * 3 + (unsigned)i);
        }
        for (int i = 0; i < N; i++) {
            size_t n = 8 + (size_t)((i * 131 + w->id * 17) % 5000);
            if (!check_fill(mine[i], n, w->id + (unsigned)i) ||
                !check_fill(theirs[i], n, w->id * 3 + (unsigned)i))
                w->bad++;
            if (i % 5 == 0) {
                void *q = realloc(theirs[i], n + 100);
                if (!q || !check_fill(q, n, w->id * 3 + (unsigned)i))
                    w->bad++;
                theirs[i] = q;
            }
            free(theirs[i]);
            free(mine[i]);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    enum { T = 4 };
    pthread_t t[T];
    struct worker w[T];
    int bad = 0;
    for (unsigned i = 0; i < T; i++) {
        w[i].id = i;
        w[i].bad = 0;
        if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0)
            bad++;
    }
    for (unsigned i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        bad += w[i].bad;
    }
    report(!bad, "4 threads freeing/reallocing foreign blocks among their own: contents kept");
}

/* glibc's heap after all of the above: a random workload with its own functions, then
 * glibc's malloc_trim and malloc_info, which walk its arenas (they abort on corruption). */
static void test_glibc_heap(void)
{
    enum { SLOTS = 4096, OPS = 200000 };
    void **slot = __libc_calloc(SLOTS, sizeof *slot);
    size_t *len = __libc_calloc(SLOTS, sizeof *len);
    unsigned x = 12345;
    int bad = 0;
    for (int op = 0; op < OPS; op++) {
        x = x * 1103515245u + 12345u;
        unsigned s = (x >> 8) % SLOTS;
        size_t n = 1 + (x >> 20) % ((x & 1) ? 512 : 70000);
        if (slot[s]) {
            if (!check_fill(slot[s], len[s], s))
                bad++;
            if (x & 2) {
                __libc_free(slot[s]);
                slot[s] = NULL;
                continue;
            }
            void *q = __libc_realloc(slot[s], n);
            if (!q) {
                bad++;
                continue;
            }
            slot[s] = q;
        } else {
            slot[s] = __libc_malloc(n);
        }
        len[s] = n;
        fill(slot[s], n, s);
    }
    for (int s = 0; s < SLOTS; s++) {
        if (slot[s] && !check_fill(slot[s], len[s], (unsigned)s))
            bad++;
        __libc_free(slot[s]);
    }
    __libc_free(slot);
    __libc_free(len);
    report(!bad,
           "glibc's heap still works: 200000 random __libc_malloc/realloc/free ops keep contents");
    glibc_malloc_trim(0);
    FILE *devnull = fopen("/dev/null", "w");
    int r = devnull ? glibc_malloc_info(0, devnull) : -1;
    if (devnull)
        fclose(devnull);
    report(r == 0, "glibc's malloc_trim(0) and malloc_info() walk its arenas without complaint");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DEEPBIND_MODULE\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc) {
        glibc_mallinfo2 = (struct mallinfo2(*)(void))dlsym(libc, "mallinfo2");
        glibc_malloc_trim = (int (*)(size_t))dlsym(libc, "malloc_trim");
        glibc_usable = (size_t(*)(void *))dlsym(libc, "malloc_usable_size");
        glibc_malloc_info = (int (*)(int, FILE *))dlsym(libc, "malloc_info");
    }
    if (!glibc_mallinfo2 || !glibc_malloc_trim || !glibc_usable || !glibc_malloc_info) {
        report(
            0,
            "glibc's own mallinfo2/malloc_trim/malloc_usable_size/malloc_info found in libc.so.6");
        printf("end\n");
        return 1;
    }
    thp_owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "thpalloc_owns");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "thpalloc_active");
    thp_in_charge = active && active() == 1;
    /* With LD_PRELOAD set, this test is about thpalloc: it must be there and in charge. */
    if (getenv("LD_PRELOAD")) {
        report_thp(thp_in_charge, "thpalloc_active() == 1 under the preload");
        report_thp(thp_owns != NULL, "thpalloc_owns is exported");
        thp_in_charge = 1; /* make the thpalloc_owns checks (they fail if it is missing) */
    }
    printf("# malloc %s glibc's\n",
           (void *)malloc == (void *)dlsym(libc, "malloc") ? "is" : "is not");

    test_free_counts();
    test_realloc();
    test_kinds();
    test_deepbind(argv[1]);
    test_owns();
    test_threads();
    test_glibc_heap();
    dlclose(libc);
    printf("end\n");
    return 0; /* failures are in the output */
}
