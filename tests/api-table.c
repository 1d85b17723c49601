/* api-table: edge cases of the malloc API, one line per case, in a form that does not
 * depend on the allocator (no addresses, no exact usable sizes). tests/api-conformance.sh
 * runs it under glibc and under LD_PRELOAD=libthpalloc.so.1 and compares line by line.
 *
 *   api-table          print the table
 *   api-table --which  print which object's malloc this process uses, and thpalloc_active()
 *
 * Every line is "case: result". A result says only what glibc 2.36 and a correct
 * replacement must agree on. Built with -fno-builtin so that the compiler neither folds
 * nor removes the calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thpalloc.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
/* Word-size dependent edges (the program is also built with -m32, tests/m32-suites.sh):
 * BEYOND no process can map; ALIGN_BEYOND a power of two no mapping is aligned to;
 * ROOT * ROOT wraps to 0. */
#if SIZE_MAX > 0xffffffffu
#define BEYOND ((size_t)1 << 47)
#define BEYOND_S "2^47"
#define ALIGN_BEYOND ((size_t)1 << 47)
#define ALIGN_BEYOND_S "2^47"
#define ROOT ((size_t)1 << 32)
#define ROOT_S "2^32"
#else
#define BEYOND ((size_t)7 << 29)
#define BEYOND_S "3.5G"
#define ALIGN_BEYOND ((size_t)1 << 31)
#define ALIGN_BEYOND_S "2^31"
#define ROOT ((size_t)1 << 16)
#define ROOT_S "2^16"
#endif
/* errno before every call: a value no allocator sets, so "kept" can be seen. */
#define SENTINEL EDOM

static size_t pagesize;

/* Hides a constant from the compiler (no -Walloc-size-larger-than, no folding). */
static size_t opaque(size_t v)
{
    __asm__ volatile("" : "+r"(v));
    return v;
}

static void *opaque_ptr(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static const char *err_name(int e)
{
    static char buf[32];
    switch (e) {
    case SENTINEL:
        return "errno-kept";
    case ENOMEM:
        return "ENOMEM";
    case EINVAL:
        return "EINVAL";
    case 0:
        return "errno=0";
    default:
        snprintf(buf, sizeof buf, "errno=%d", e);
        return buf;
    }
}

static const char *ret_name(int r)
{
    static char buf[32];
    switch (r) {
    case 0:
        return "0";
    case ENOMEM:
        return "ENOMEM";
    case EINVAL:
        return "EINVAL";
    default:
        snprintf(buf, sizeof buf, "%d", r);
        return buf;
    }
}

static int aligned(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

static size_t next_pow2(size_t a)
{
    size_t r = 1;
    while (r < a)
        r <<= 1;
    return r;
}

/* Fills the whole usable size, then checks usable size is stable and >= want. */
static int usable_ok(void *p, size_t want)
{
    size_t u = malloc_usable_size(p);
    if (u < want)
        return 0;
    memset(p, 0xa5, u);
    if (malloc_usable_size(p) != u)
        return 0;
    const unsigned char *c = p;
    return c[0] == 0xa5 && c[u - 1] == 0xa5;
}

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)(seed + i * 7 + (i >> 8));
}

static int check_fill(const void *p, size_t n, unsigned seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)(seed + i * 7 + (i >> 8)))
            return 0;
    return 1;
}

/* In a 32-bit process a block of nearly PTRDIFF_MAX (2 GiB) bytes may or may not be had,
 * depending on how the allocator pads it and on the address space around it: there both
 * outcomes are right, and the line only says whether the outcome was a right one. */
static int undecided(size_t n)
{
#if SIZE_MAX > 0xffffffffu
    (void)n;
    return 0;
#else
    return n <= PTRDIFF_MAX && n > PTRDIFF_MAX - 64 * MiB;
#endif
}

static void line_either(const char *name, int good)
{
    printf("%s: %s\n", name, good ? "a good block, or NULL ENOMEM (32-bit edge)" : "BAD");
}

/* ---- a call that returns a pointer: "NAME: NULL ENOMEM" or "NAME: nonnull errno-kept" */
static void line_ptr(const char *name, void *p, int e, const char *extra)
{
    printf("%s: %s %s%s%s\n", name, p ? "nonnull" : "NULL", err_name(e), extra ? ", " : "",
           extra ? extra : "");
}

static void case_malloc(const char *name, size_t n)
{
    errno = SENTINEL;
    void *p = malloc(opaque(n));
    int e = errno;
    const char *extra = NULL;
    if (p)
        extra = aligned(p, 16) && usable_ok(p, n) ? "16-aligned usable>=n" : "BAD align/usable";
    if (undecided(n))
        line_either(name, p ? e == SENTINEL && extra[0] != 'B' : e == ENOMEM);
    else
        line_ptr(name, p, e, extra);
    free(p);
}

static void case_calloc(const char *name, size_t a, size_t b)
{
    errno = SENTINEL;
    void *p = calloc(opaque(a), opaque(b));
    int e = errno;
    const char *extra = NULL;
    if (p) {
        size_t n = a * b, i;
        const unsigned char *c = p;
        for (i = 0; i < n && c[i] == 0; i++)
            ;
        extra = i == n && aligned(p, 16) ? "zeroed 16-aligned" : "BAD zero/align";
    }
    if ((!b || a <= SIZE_MAX / b) && undecided(a * b))
        line_either(name, p ? e == SENTINEL && extra[0] != 'B' : e == ENOMEM);
    else
        line_ptr(name, p, e, extra);
    free(p);
}

/* realloc of a live block to a size that cannot be had: NULL, ENOMEM, old block intact. */
static void case_realloc_fail(const char *name, size_t old, size_t n, int array, size_t m)
{
    void *p = malloc(old);
    fill(p, old, 3);
    errno = SENTINEL;
    void *q = array ? reallocarray(opaque_ptr(p), opaque(n), opaque(m))
                    : realloc(opaque_ptr(p), opaque(n));
    int e = errno;
    char extra[64];
    int good;
    if (q) {
        snprintf(extra, sizeof extra, "(unexpected success)");
        good = e == SENTINEL && check_fill(q, old, 3) && usable_ok(q, array ? n * m : n);
        free(q);
    } else {
        good = e == ENOMEM && check_fill(p, old, 3) && malloc_usable_size(p) >= old;
        snprintf(extra, sizeof extra, "original %s",
                 check_fill(p, old, 3) && malloc_usable_size(p) >= old ? "intact" : "DAMAGED");
        free(p);
    }
    if ((!array || !m || n <= SIZE_MAX / m) && undecided(array ? n * m : n))
        line_either(name, good);
    else
        line_ptr(name, q, e, extra);
}

static void case_posix_memalign(const char *name, size_t align, size_t n)
{
    void *marker = (void *)(uintptr_t)0x5a5a5a5a;
    void *p = marker;
    int r = posix_memalign(&p, opaque(align), opaque(n));
    if (undecided(n)) {
        line_either(name, r == 0 ? p && p != marker && aligned(p, align) && usable_ok(p, n)
                                 : r == ENOMEM && p == marker);
        if (r == 0)
            free(p);
    } else if (r == 0) {
        const char *ok =
            p && p != marker && aligned(p, align) && usable_ok(p, n) ? "aligned usable>=n" : "BAD";
        printf("%s: ret=0 p=%s %s\n", name, p == NULL ? "NULL" : "nonnull", ok);
        if (p != marker)
            free(p);
    } else {
        printf("%s: ret=%s p-%s\n", name, ret_name(r), p == marker ? "untouched" : "CHANGED");
    }
}

/* memalign/aligned_alloc. glibc 2.36 treats both alike: alignment <= 16 is malloc,
 * a non-power-of-two alignment is rounded up to the next power of two, above
 * SIZE_MAX/2+1 is EINVAL. */
static void case_memalign(const char *name, int which, size_t align, size_t n)
{
    errno = SENTINEL;
    void *p = which ? aligned_alloc(opaque(align), opaque(n)) : memalign(opaque(align), opaque(n));
    int e = errno;
    char extra[80] = "";
    if (p) {
        size_t want = next_pow2(align < 16 ? 16 : align);
        snprintf(extra, sizeof extra, "%s%zu usable>=n",
                 aligned(p, want) ? "aligned" : "NOT-aligned", want);
        if (!usable_ok(p, n))
            snprintf(extra, sizeof extra, "BAD usable");
    }
    if (undecided(n))
        line_either(name, p ? e == SENTINEL && extra[0] == 'a' : e == ENOMEM);
    else
        line_ptr(name, p, e, p ? extra : NULL);
    free(p);
}

static void case_valloc(const char *name, int pv, size_t n)
{
    errno = SENTINEL;
    void *p = pv ? pvalloc(opaque(n)) : valloc(opaque(n));
    int e = errno;
    const char *extra = NULL;
    if (p) {
        size_t want = n;
        if (pv)
            want = (n + pagesize - 1) / pagesize * pagesize;
        extra = aligned(p, pagesize) && usable_ok(p, want)
                    ? (pv ? "page-aligned usable>=roundup(n,page)" : "page-aligned usable>=n")
                    : "BAD";
    }
    if (undecided(n))
        line_either(name, p ? e == SENTINEL && extra[0] != 'B' : e == ENOMEM);
    else
        line_ptr(name, p, e, extra);
    free(p);
}

/* ---- sweeps ---- */

/* Alignments 16 .. 4 MiB through posix_memalign, aligned_alloc and memalign. */
static void sweep_alignments(void)
{
    static const char *fn[3] = {"posix_memalign", "aligned_alloc", "memalign"};
    for (int f = 0; f < 3; f++) {
        for (size_t a = 16; a <= 4 * MiB; a <<= 1) {
            size_t sizes[] = {1, a / 2 + 1, a - 1, a, a + 1, 3 * a + 5};
            int bad = 0, nulls = 0;
            void *keep[6];
            for (int i = 0; i < 6; i++) {
                void *p = NULL;
                if (f == 0) {
                    if (posix_memalign(&p, a, sizes[i]) != 0)
                        p = NULL;
                } else if (f == 1) {
                    p = aligned_alloc(a, sizes[i]);
                } else {
                    p = memalign(a, sizes[i]);
                }
                keep[i] = p;
                if (!p) {
                    nulls++;
                    continue;
                }
                if (!aligned(p, a) || !usable_ok(p, sizes[i]))
                    bad++;
            }
            /* all six live at once: none overlaps another (each still holds its fill) */
            for (int i = 0; i < 6; i++)
                if (keep[i])
                    fill(keep[i], sizes[i], (unsigned)i);
            for (int i = 0; i < 6; i++)
                if (keep[i] && !check_fill(keep[i], sizes[i], (unsigned)i))
                    bad++;
            for (int i = 0; i < 6; i++)
                free(keep[i]);
            printf("%s align=%zu sizes 1..3a+5: %s\n", fn[f], a,
                   nulls ? "got NULL"
                   : bad ? "MISALIGNED/BAD usable"
                         : "aligned, usable>=n, writable, disjoint");
        }
    }
}

/* malloc: 16-byte alignment, usable size >= request, whole usable size writable, usable
 * size stable, blocks disjoint; for every size 1..2048 and a spread up to 9 MiB. */
static void sweep_malloc_range(const char *label, const size_t *sizes, size_t count)
{
    void **ps = malloc(count * sizeof *ps);
    size_t bad = 0, nulls = 0;
    for (size_t i = 0; i < count; i++) {
        ps[i] = malloc(sizes[i]);
        if (!ps[i]) {
            nulls++;
            continue;
        }
        if (!aligned(ps[i], 16) || !usable_ok(ps[i], sizes[i]))
            bad++;
    }
    for (size_t i = 0; i < count; i++)
        if (ps[i])
            fill(ps[i], sizes[i], (unsigned)i);
    for (size_t i = 0; i < count; i++)
        if (ps[i] && !check_fill(ps[i], sizes[i], (unsigned)i))
            bad++;
    for (size_t i = 0; i < count; i++)
        free(ps[i]);
    free(ps);
    printf("malloc sizes %s: %s\n", label,
           nulls ? "got NULL"
           : bad ? "BAD alignment/usable/overlap"
                 : "16-aligned, usable>=n, writable, disjoint");
}

static void sweep_malloc(void)
{
    size_t sizes[4096];
    size_t n = 0;
    for (size_t s = 1; s <= 2048; s++)
        sizes[n++] = s;
    sweep_malloc_range("1..2048 every byte", sizes, n);

    n = 0;
    for (size_t s = 2049; s <= 256 * KiB; s += s / 16 + 1)
        sizes[n++] = s;
    sweep_malloc_range("2049..256K geometric", sizes, n);

    n = 0;
    for (size_t p = 32; p <= 8 * MiB; p <<= 1) {
        sizes[n++] = p - 1;
        sizes[n++] = p;
        sizes[n++] = p + 1;
    }
    sweep_malloc_range("2^k-1,2^k,2^k+1 up to 8M+1", sizes, n);

    n = 0;
    for (size_t s = 256 * KiB; s <= 9 * MiB; s += s / 8 + 4093)
        sizes[n++] = s;
    sweep_malloc_range("256K..9M geometric", sizes, n);
}

/* calloc returns zeroed memory even where the allocator reuses a dirty block. */
static void sweep_calloc_reuse(void)
{
    static const size_t sizes[] = {1,     8,     16,     24,      100,         1000,   4096,
                                   10000, 65536, 100000, 1 * MiB, 2 * MiB + 1, 5 * MiB};
    enum { BATCH = 16, ROUNDS = 12 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        int bad = 0, nulls = 0;
        for (int r = 0; r < ROUNDS && !bad; r++) {
            void *ps[BATCH];
            for (int i = 0; i < BATCH; i++) {
                ps[i] = malloc(n);
                if (ps[i])
                    memset(ps[i], 0xff, malloc_usable_size(ps[i]));
            }
            for (int i = 0; i < BATCH; i++)
                free(ps[i]);
            for (int i = 0; i < BATCH; i++) {
                ps[i] = (r & 1) ? calloc(1, n) : calloc(n, 1);
                if (!ps[i]) {
                    nulls++;
                    continue;
                }
                const unsigned char *c = ps[i];
                for (size_t j = 0; j < n; j++)
                    if (c[j]) {
                        bad++;
                        break;
                    }
            }
            for (int i = 0; i < BATCH; i++)
                free(ps[i]);
        }
        printf("calloc(%zu) after freeing dirty blocks of that size: %s\n", n,
               nulls ? "got NULL"
               : bad ? "NOT ZEROED"
                     : "zeroed");
    }
    /* calloc of a block right after a realloc shrink freed the tail */
    int bad = 0;
    for (int r = 0; r < 50; r++) {
        unsigned char *p = malloc(4096);
        memset(p, 0xff, 4096);
        p = realloc(p, 64);
        unsigned char *q = calloc(1, 2000);
        for (size_t j = 0; j < 2000; j++)
            bad |= q[j];
        free(q);
        free(p);
    }
    printf("calloc after realloc shrink: %s\n", bad ? "NOT ZEROED" : "zeroed");
}

/* realloc grows and shrinks through every kind of block and keeps the contents. */
static void sweep_realloc_chain(void)
{
    static const size_t sizes[] = {1,       15,          16,          17,      24,          100,
                                   1000,    1024,        4095,        4097,    65536,       200000,
                                   1 * MiB, 2 * MiB - 1, 2 * MiB + 1, 8 * MiB, 9 * MiB + 17};
    const size_t count = sizeof sizes / sizeof sizes[0];
    unsigned char *p = malloc(1);
    p[0] = 0x3c;
    size_t have = 1;
    int bad = 0;
    fill(p, 1, 11);
    for (size_t i = 1; i < count; i++) { /* grow */
        unsigned char *q = realloc(p, sizes[i]);
        if (!q || !check_fill(q, have, 11) || malloc_usable_size(q) < sizes[i]) {
            bad++;
            if (!q)
                break;
        }
        p = q;
        fill(p, sizes[i], 11);
        have = sizes[i];
    }
    for (size_t i = count - 1; i-- > 0;) { /* shrink */
        unsigned char *q = realloc(p, sizes[i]);
        if (!q || !check_fill(q, sizes[i], 11) || malloc_usable_size(q) < sizes[i]) {
            bad++;
            if (!q)
                break;
        }
        p = q;
    }
    free(p);
    printf("realloc grow 1..9M then shrink back: %s\n", bad ? "CONTENTS LOST" : "contents kept");

    /* same size, and +-1 around the current usable size */
    bad = 0;
    for (size_t i = 0; i < count; i++) {
        size_t n = sizes[i];
        unsigned char *a = malloc(n);
        fill(a, n, 5);
        unsigned char *b = realloc(a, n);
        if (!b || !check_fill(b, n, 5))
            bad++;
        size_t u = malloc_usable_size(b);
        unsigned char *c = realloc(b, u + 1);
        if (!c || !check_fill(c, n, 5))
            bad++;
        free(c);
    }
    printf("realloc to same size and to usable+1: %s\n", bad ? "CONTENTS LOST" : "contents kept");
}

static void errno_kept(const char *name, int e)
{
    printf("errno kept by successful %s: %s\n", name, e == SENTINEL ? "yes" : "no");
}

/* Successful calls do not touch errno (glibc 2.36 keeps it in all of these). */
static void sweep_errno(void)
{
    void *p, *q;
    int e;
#define KEEP(name, stmt)                                                                           \
    do {                                                                                           \
        errno = SENTINEL;                                                                          \
        stmt;                                                                                      \
        e = errno;                                                                                 \
        errno_kept(name, e);                                                                       \
    } while (0)
    KEEP("malloc(100)", p = malloc(100));
    KEEP("free(small)", free(p));
    KEEP("malloc(200K)", p = malloc(200 * KiB));
    KEEP("free(200K)", free(p));
    KEEP("malloc(64M)", p = malloc(64 * MiB));
    KEEP("free(64M)", free(p));
    KEEP("calloc(10,10)", p = calloc(10, 10));
    KEEP("realloc grow 100->1M", q = realloc(p, MiB));
    KEEP("realloc shrink 1M->10", p = realloc(q, 10));
    KEEP("malloc_usable_size", (void)malloc_usable_size(p));
    KEEP("free(10)", free(p));
    KEEP("calloc(1,32M)", p = calloc(1, 32 * MiB));
    KEEP("free(32M)", free(p));
    KEEP("posix_memalign(4096,100)", (void)posix_memalign(&p, 4096, 100));
    KEEP("free(posix_memalign)", free(p));
    KEEP("aligned_alloc(64,64)", p = aligned_alloc(64, 64));
    KEEP("free(aligned_alloc)", free(p));
    KEEP("memalign(2M,3M)", p = memalign(2 * MiB, 3 * MiB));
    KEEP("free(memalign)", free(p));
    KEEP("valloc(100)", p = valloc(100));
    KEEP("free(valloc)", free(p));
    KEEP("free(NULL)", free(NULL));
    KEEP("realloc(NULL,50)", p = realloc(NULL, 50));
    KEEP("reallocarray(p,10,10)", p = reallocarray(p, 10, 10));
    KEEP("realloc(p,0)", p = realloc(p, 0));
    free(p);
#undef KEEP
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static size_t mallinfo1_uord(void)
{
    struct mallinfo mi = mallinfo();
    return (size_t)(unsigned)mi.uordblks;
}
#pragma GCC diagnostic pop

/* Requests no machine of this size can back (40 GiB, 1 TiB, 64 TiB; a 1 TiB alignment)
 * through every entry point. glibc maps them charged, so the kernel's overcommit policy
 * answers: NULL + ENOMEM under the default heuristic on a machine with less memory and
 * swap than asked for, a pointer under vm.overcommit_memory = 1. Either way thpalloc must
 * answer the same in the same run. A block that is had is not touched, only freed. */
static void cases_absurd(void)
{
#if SIZE_MAX > 0xffffffffu
    static const struct {
        size_t n;
        const char *s;
    } big[] = {{(size_t)40 << 30, "40G"}, {(size_t)1 << 40, "1T"}, {(size_t)64 << 40, "64T"}};
    char name[80];
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        size_t n = opaque(big[i].n);
        for (int fn = 0; fn < 8; fn++) {
            static const char *const fns[] = {"malloc",         "calloc",        "realloc",
                                              "posix_memalign", "aligned_alloc", "memalign",
                                              "valloc",         "pvalloc"};
            void *p = NULL, *old = NULL;
            int rc = 0;
            errno = SENTINEL;
            switch (fn) {
            case 0:
                p = malloc(n);
                break;
            case 1:
                p = calloc(opaque(1), n);
                break;
            case 2:
                old = malloc(opaque(100));
                memset(old, 0x5a, 100);
                p = realloc(old, n);
                break;
            case 3:
                rc = posix_memalign(&p, 64, n);
                break;
            case 4:
                p = aligned_alloc(4096, n);
                break;
            case 5:
                p = memalign(2 * MiB, n);
                break;
            case 6:
                p = valloc(n);
                break;
            default:
                p = pvalloc(n);
                break;
            }
            int e = fn == 3 ? rc : errno;
            snprintf(name, sizeof name, "%s(%s) beyond this machine", fns[fn], big[i].s);
            const char *extra = NULL;
            if (fn == 2 && !p) {
                unsigned char *o = old;
                int intact = 1;
                for (int k = 0; k < 100; k++)
                    intact &= o[k] == 0x5a;
                extra = intact ? "original intact" : "original DAMAGED";
                free(old);
            }
            line_ptr(name, p, e, extra);
            free(p);
        }
    }
    for (int fn = 0; fn < 3; fn++) {
        void *p = NULL;
        int rc = 0;
        errno = SENTINEL;
        size_t tib = opaque((size_t)1 << 40);
        if (fn == 0)
            rc = posix_memalign(&p, tib, 8);
        else if (fn == 1)
            p = aligned_alloc(tib, 8);
        else
            p = memalign(tib, 8);
        snprintf(name, sizeof name, "%s(1T alignment,8)",
                 fn == 0   ? "posix_memalign"
                 : fn == 1 ? "aligned_alloc"
                           : "memalign");
        line_ptr(name, p, fn == 0 ? rc : errno, NULL);
        free(p);
    }
#endif
}

static void case_mallinfo(void)
{
    enum { N = 10 * 1024 };
    struct mallinfo2 before = mallinfo2();
    size_t before1 = mallinfo1_uord();
    void **ps = malloc(N * sizeof *ps);
    for (int i = 0; i < N; i++) {
        ps[i] = malloc(1024); /* 10 MiB of 1 KiB blocks */
        memset(ps[i], 1, 1024);
    }
    struct mallinfo2 after = mallinfo2();
    size_t after1 = mallinfo1_uord();
    printf("mallinfo2 uordblks after 10M of 1K blocks: %s\n",
           after.uordblks >= before.uordblks + 10 * MiB ? "grows by >=10M"
                                                        : "does not grow by 10M");
    printf("mallinfo uordblks after 10M of 1K blocks: %s\n",
           after1 >= before1 + 10 * MiB ? "grows by >=10M" : "does not grow by 10M");
    for (int i = 0; i < N; i++)
        free(ps[i]);
    free(ps);
    struct mallinfo2 freed = mallinfo2();
    printf("mallinfo2 uordblks after freeing them: %s\n",
           freed.uordblks + 10 * MiB <= after.uordblks ? "shrinks by >=10M"
                                                       : "does not shrink by 10M");
}

static void cases_mallopt(void)
{
    printf("mallopt(M_MXFAST,1000): %d\n", mallopt(M_MXFAST, 1000));
    printf("mallopt(M_MXFAST,-1): %d\n", mallopt(M_MXFAST, -1));
    printf("mallopt(M_MXFAST,64): %d\n", mallopt(M_MXFAST, 64));
    printf("mallopt(M_ARENA_MAX,2): %d\n", mallopt(M_ARENA_MAX, 2));
    printf("mallopt(M_TRIM_THRESHOLD,256K): %d\n", mallopt(M_TRIM_THRESHOLD, 256 * 1024));
    printf("mallopt(M_MMAP_THRESHOLD,256K): %d\n", mallopt(M_MMAP_THRESHOLD, 256 * 1024));
    printf("mallopt(unknown 12345,1): %d\n", mallopt(12345, 1));
    int t = malloc_trim(0);
    printf("malloc_trim(0): %s\n", t == 0 || t == 1 ? "0 or 1" : "OTHER");
    t = malloc_trim(SIZE_MAX / 2);
    printf("malloc_trim(SIZE_MAX/2): %s\n", t == 0 || t == 1 ? "0 or 1" : "OTHER");
    void *p = malloc(100);
    printf("malloc after mallopt/malloc_trim: %s\n", p ? "nonnull" : "NULL");
    free(p);
}

static int which(void)
{
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    const char *dso = "unknown";
    if (m && dladdr(m, &info) && info.dli_fname) {
        dso = strrchr(info.dli_fname, '/');
        dso = dso ? dso + 1 : info.dli_fname;
    }
    printf("malloc-dso: %s\n", dso);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "thpalloc_active");
    if (active)
        printf("thpalloc_active: %d\n", active());
    else
        printf("thpalloc_active: absent\n");
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_version");
    const char *v = version ? version() : NULL;
    printf("thpalloc_version: %s\n", !version ? "absent"
                                     : v && strcmp(v, THPALLOC_VERSION_STRING) == 0
                                         ? "matches header"
                                         : "DIFFERS from header");
    return 0;
}

int main(int argc, char **argv)
{
    pagesize = (size_t)sysconf(_SC_PAGESIZE);
    if (argc > 1 && strcmp(argv[1], "--which") == 0)
        return which();
    setvbuf(stdout, NULL, _IOLBF, 0);

    const size_t PMAX = PTRDIFF_MAX;
    case_malloc("malloc(0)", 0);
    case_malloc("malloc(1)", 1);
    case_malloc("malloc(PTRDIFF_MAX-4096)", PMAX - 4096);
    case_malloc("malloc(PTRDIFF_MAX)", PMAX);
    case_malloc("malloc(PTRDIFF_MAX+1)", PMAX + 1);
    case_malloc("malloc(SIZE_MAX-(2M-1))", SIZE_MAX - (2 * MiB - 1));
    case_malloc("malloc(SIZE_MAX)", SIZE_MAX);
    case_malloc("malloc(" BEYOND_S ") beyond the address space", BEYOND);

    case_calloc("calloc(0,0)", 0, 0);
    case_calloc("calloc(0,1)", 0, 1);
    case_calloc("calloc(1,0)", 1, 0);
    case_calloc("calloc(SIZE_MAX/2,3)", SIZE_MAX / 2, 3);
    case_calloc("calloc(SIZE_MAX,SIZE_MAX)", SIZE_MAX, SIZE_MAX);
    case_calloc("calloc(" ROOT_S "+1," ROOT_S ") wraps to " ROOT_S, ROOT + 1, ROOT);
    case_calloc("calloc(PTRDIFF_MAX/2+1,2)", PMAX / 2 + 1, 2);
    case_calloc("calloc(1,PTRDIFF_MAX)", 1, PMAX);
    case_calloc("calloc(3,5)", 3, 5);

    {
        errno = SENTINEL;
        void *p = realloc(NULL, opaque(0));
        line_ptr("realloc(NULL,0)", p, errno, NULL);
        free(p);
        errno = SENTINEL;
        p = realloc(NULL, opaque(100));
        line_ptr("realloc(NULL,100)", p, errno, p && usable_ok(p, 100) ? "usable>=n" : NULL);
        free(p);
        errno = SENTINEL;
        p = realloc(NULL, opaque(SIZE_MAX));
        line_ptr("realloc(NULL,SIZE_MAX)", p, errno, NULL);
        /* glibc 2.36: realloc(p, 0) frees p and returns NULL */
        static const size_t olds[] = {16, 1000, 300 * KiB, 4 * MiB};
        for (int i = 0; i < 4; i++) {
            char name[64];
            void *o = malloc(olds[i]);
            errno = SENTINEL;
            p = realloc(opaque_ptr(o), opaque(0));
            snprintf(name, sizeof name, "realloc(p[%zu],0)", olds[i]);
            line_ptr(name, p, errno, NULL);
            free(p);
        }
    }
    case_realloc_fail("realloc(p[100],SIZE_MAX)", 100, SIZE_MAX, 0, 0);
    case_realloc_fail("realloc(p[100],PTRDIFF_MAX+1)", 100, PMAX + 1, 0, 0);
    case_realloc_fail("realloc(p[100],PTRDIFF_MAX)", 100, PMAX, 0, 0);
    case_realloc_fail("realloc(p[100]," BEYOND_S ")", 100, BEYOND, 0, 0);
    case_realloc_fail("realloc(p[4M],PTRDIFF_MAX)", 4 * MiB, PMAX, 0, 0);
    case_realloc_fail("realloc(p[4M],SIZE_MAX-(2M-1))", 4 * MiB, SIZE_MAX - (2 * MiB - 1), 0, 0);
    case_realloc_fail("reallocarray(p[100],SIZE_MAX/2,3) overflow", 100, SIZE_MAX / 2, 1, 3);
    case_realloc_fail("reallocarray(p[100]," ROOT_S "," ROOT_S ") overflow", 100, ROOT, 1, ROOT);
    case_realloc_fail("reallocarray(p[4M],2*" ROOT_S ",0.5*" ROOT_S "+1) overflow", 4 * MiB,
                      2 * ROOT, 1, ROOT / 2 + 1);
    {
        errno = SENTINEL;
        void *p = reallocarray(NULL, opaque(0), opaque(0));
        line_ptr("reallocarray(NULL,0,0)", p, errno, NULL);
        free(p);
        errno = SENTINEL;
        p = reallocarray(NULL, opaque(16), opaque(16));
        line_ptr("reallocarray(NULL,16,16)", p, errno, p && usable_ok(p, 256) ? "usable>=n" : NULL);
        errno = SENTINEL;
        p = reallocarray(p, opaque(0), opaque(16));
        line_ptr("reallocarray(p,0,16)", p, errno, NULL);
        free(p);
    }

    case_posix_memalign("posix_memalign(&p,0,8)", 0, 8);
    case_posix_memalign("posix_memalign(&p,1,8)", 1, 8);
    case_posix_memalign("posix_memalign(&p,3,8)", 3, 8);
    case_posix_memalign("posix_memalign(&p,4,8)", 4, 8);
    case_posix_memalign("posix_memalign(&p,8,8)", 8, 8);
    case_posix_memalign("posix_memalign(&p,16,8)", 16, 8);
    case_posix_memalign("posix_memalign(&p,24,8)", 24, 8);
    case_posix_memalign("posix_memalign(&p,48,8)", 48, 8);
    case_posix_memalign("posix_memalign(&p,16,0)", 16, 0);
    case_posix_memalign("posix_memalign(&p,4096,0)", 4096, 0);
    case_posix_memalign("posix_memalign(&p,16,SIZE_MAX)", 16, SIZE_MAX);
    case_posix_memalign("posix_memalign(&p,4096,PTRDIFF_MAX)", 4096, PMAX);
    case_posix_memalign("posix_memalign(&p,2M,SIZE_MAX-(2M-1))", 2 * MiB, SIZE_MAX - (2 * MiB - 1));
    case_posix_memalign("posix_memalign(&p,SIZE_MAX/2+1,8)", SIZE_MAX / 2 + 1, 8);
    case_posix_memalign("posix_memalign(&p,SIZE_MAX/2+9,8)", SIZE_MAX / 2 + 9, 8);
    case_posix_memalign("posix_memalign(&p," ALIGN_BEYOND_S ",8)", ALIGN_BEYOND, 8);

    for (int w = 1; w >= 0; w--) {
        const char *fn = w ? "aligned_alloc" : "memalign";
        static const size_t al[][2] = {{0, 8},
                                       {1, 8},
                                       {8, 8},
                                       {16, 0},
                                       {24, 48},
                                       {3, 10},
                                       {48, 10},
                                       {100, 10},
                                       {64, 65},
                                       {4096, 1},
                                       {4097, 10},
                                       {65536, 10},
                                       {2 * MiB + 1, 10},
                                       {2 * MiB, 3 * MiB}};
        char name[80];
        for (size_t i = 0; i < sizeof al / sizeof al[0]; i++) {
            snprintf(name, sizeof name, "%s(%zu,%zu)", fn, al[i][0], al[i][1]);
            case_memalign(name, w, al[i][0], al[i][1]);
        }
        snprintf(name, sizeof name, "%s(SIZE_MAX/2+2,1)", fn);
        case_memalign(name, w, SIZE_MAX / 2 + 2, 1);
        snprintf(name, sizeof name, "%s(SIZE_MAX/2+1,1)", fn);
        case_memalign(name, w, SIZE_MAX / 2 + 1, 1);
        snprintf(name, sizeof name, "%s(SIZE_MAX,1)", fn);
        case_memalign(name, w, SIZE_MAX, 1);
        snprintf(name, sizeof name, "%s(4096,SIZE_MAX)", fn);
        case_memalign(name, w, 4096, SIZE_MAX);
        snprintf(name, sizeof name, "%s(64,PTRDIFF_MAX)", fn);
        case_memalign(name, w, 64, PMAX);
        snprintf(name, sizeof name, "%s(2M,SIZE_MAX-(2M-1))", fn);
        case_memalign(name, w, 2 * MiB, SIZE_MAX - (2 * MiB - 1));
    }

    case_valloc("valloc(0)", 0, 0);
    case_valloc("valloc(1)", 0, 1);
    case_valloc("valloc(page+1)", 0, pagesize + 1);
    case_valloc("valloc(3M)", 0, 3 * MiB);
    case_valloc("valloc(SIZE_MAX)", 0, SIZE_MAX);
    case_valloc("valloc(PTRDIFF_MAX)", 0, PMAX);
    case_valloc("pvalloc(0)", 1, 0);
    case_valloc("pvalloc(1)", 1, 1);
    case_valloc("pvalloc(page)", 1, pagesize);
    case_valloc("pvalloc(page+1)", 1, pagesize + 1);
    case_valloc("pvalloc(3M+1)", 1, 3 * MiB + 1);
    case_valloc("pvalloc(SIZE_MAX)", 1, SIZE_MAX);
    case_valloc("pvalloc(SIZE_MAX-page+2) rounding overflows", 1, SIZE_MAX - pagesize + 2);
    case_valloc("pvalloc(PTRDIFF_MAX)", 1, PMAX);

    printf("malloc_usable_size(NULL): %zu\n", malloc_usable_size(opaque_ptr(NULL)));
    errno = SENTINEL;
    free(opaque_ptr(NULL));
    printf("free(NULL): returns, %s\n", err_name(errno));

    cases_absurd();
    sweep_alignments();
    sweep_malloc();
    sweep_calloc_reuse();
    sweep_realloc_chain();
    sweep_errno();
    case_mallinfo();
    cases_mallopt();
    printf("end of table\n");
    return 0;
}
