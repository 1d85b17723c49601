/* oom-mmapfail: run under LD_PRELOAD="oom-mmapfail-interpose.so:ALLOCATOR" with
 * MMAPFAIL_AFTER=N. From the Nth anonymous mmap (and mremap, mprotect; madvise with
 * MMAPFAIL_MADVISE=1) on, the kernel "fails": every allocation must then either work or
 * return NULL with ENOMEM (posix_memalign: return ENOMEM), blocks that were handed out
 * keep their contents, calloc memory is zero, and once mmapfail_set(0) turns the failures
 * off at run time the allocator recovers: every allocation works again.
 *
 * Output: "ok - D" / "not ok - D", "# ..." diagnostics, "stat injected=F nulls=X" and
 * "end" when done (read by oom-mmapfail.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay-report.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static const size_t sizes[] = {16,        100,     1 * KiB, 8 * KiB, 64 * KiB,
                               300 * KiB, 1 * MiB, 3 * MiB, 9 * MiB, 40 * MiB};
#define NSIZES (sizeof sizes / sizeof sizes[0])
enum { KINDS = 8, SLOTS = 160 };
/* kinds: malloc, calloc, realloc, posix_memalign(256), aligned_alloc(4096), memalign(2M),
 * valloc, calloc of a size just freed dirty (after thpalloc_purge() where it exists) */

static void *slot[SLOTS];
static size_t slot_n[SLOTS];
static unsigned char slot_seed[SLOTS];

struct tally {
    long tries, nulls, bad_errno, not_zero, misaligned, damaged;
};

/* Blocks are written and checked at sparse positions (all of the first and last 16 KiB,
 * then one byte in 65521 (every 16th page)): big blocks would otherwise make each run slow. */
static size_t next_index(size_t i, size_t n)
{
    const size_t edge = 16 * KiB;
    if (i + 1 < edge || i + 1 + edge >= n)
        return i + 1;
    size_t j = (i / 65521 + 1) * 65521;
    return j + edge >= n ? n - edge : j;
}

/* The first `keep` bytes of a block filled for a larger or equal size (after realloc):
 * the positions below 16 KiB and the multiples of 65521 were written whatever the size. */
static int intact_prefix(const void *p, size_t keep, unsigned char seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < keep; i = i + 1 < 16 * KiB ? i + 1 : (i / 65521 + 1) * 65521)
        if (c[i] != (unsigned char)(seed + (i & 0x3f)))
            return 0;
    return 1;
}

static void fill(void *p, size_t n, unsigned char seed)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i = next_index(i, n))
        c[i] = (unsigned char)(seed + (i & 0x3f));
}

static int intact(const void *p, size_t n, unsigned char seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i = next_index(i, n))
        if (c[i] != (unsigned char)(seed + (i & 0x3f)))
            return 0;
    return 1;
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i = next_index(i, n))
        if (c[i])
            return 0;
    return 1;
}

static size_t (*thp_purge)(void);

/* One allocation into slot s (freeing what was there, or reallocating it). */
static void step(int kind, size_t n, int s, struct tally *t)
{
    void *p = NULL;
    int err = 0;
    t->tries++;
    if (kind != 2 && slot[s]) {
        if (!intact(slot[s], slot_n[s], slot_seed[s]))
            t->damaged++;
        free(slot[s]);
        slot[s] = NULL;
    }
    errno = 0;
    switch (kind) {
    case 0:
        p = malloc(n);
        err = errno;
        break;
    case 1:
        p = calloc(n, 1);
        err = errno;
        if (p && !all_zero(p, n))
            t->not_zero++;
        break;
    case 2: /* realloc: the old block must survive a failure */
        if (slot[s] && !intact(slot[s], slot_n[s], slot_seed[s]))
            t->damaged++;
        p = realloc(slot[s], n);
        err = errno;
        if (p) {
            size_t keep = slot[s] ? (slot_n[s] < n ? slot_n[s] : n) : 0;
            if (keep && !intact_prefix(p, keep, slot_seed[s]))
                t->damaged++;
            slot[s] = NULL;
        } else if (slot[s] && !intact(slot[s], slot_n[s], slot_seed[s])) {
            t->damaged++;
        }
        break;
    case 3: {
        int r = posix_memalign(&p, 256, n);
        if (r != 0) {
            p = NULL;
            err = r;
        } else if ((uintptr_t)p % 256) {
            t->misaligned++;
        }
        break;
    }
    case 4:
        p = aligned_alloc(4096, n);
        err = errno;
        if (p && (uintptr_t)p % 4096)
            t->misaligned++;
        break;
    case 5:
        p = memalign(2 * MiB, n);
        err = errno;
        if (p && (uintptr_t)p % (2 * MiB))
            t->misaligned++;
        break;
    case 6:
        p = valloc(n);
        err = errno;
        if (p && (uintptr_t)p % 4096)
            t->misaligned++;
        break;
    case 7: { /* a dirty block freed (and purged), then calloc of the same size: zero */
        void *d = malloc(n);
        if (d) {
            for (size_t i = 0; i < n; i = next_index(i, n))
                ((unsigned char *)d)[i] = 0xff;
            free(d);
        }
        if (thp_purge)
            thp_purge();
        errno = 0;
        p = calloc(1, n);
        err = errno;
        if (p && !all_zero(p, n))
            t->not_zero++;
        break;
    }
    }
    if (!p) {
        t->nulls++;
        if (err != ENOMEM)
            t->bad_errno++;
        return;
    }
    slot[s] = p;
    slot_n[s] = n;
    slot_seed[s] = (unsigned char)(t->tries * 7 + 1);
    fill(p, n, slot_seed[s]);
}

static void workload(struct tally *t, int rounds)
{
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < KINDS; k++)
            for (size_t i = 0; i < NSIZES; i++)
                step(k, sizes[(i + (size_t)r) % NSIZES],
                     (int)((k * NSIZES + i + (size_t)r * 3) % SLOTS), t);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer to allocate while mmap fails */
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "mmapfail_set");
    long (*calls)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "mmapfail_calls");
    long (*failed)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "mmapfail_failed");
    thp_purge = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    if (!set || !calls || !failed) {
        report(0, "the mmapfail interposer is preloaded (mmapfail_set found)");
        printf("end\n");
        return 0;
    }

    struct tally t = {0, 0, 0, 0, 0, 0};
    workload(&t, 2);
    long injected = failed();
    printf("# failing: %ld mapping calls, %ld failed; %ld of %ld allocations NULL\n", calls(),
           injected, t.nulls, t.tries);
    report(t.bad_errno == 0,
           "while mmap fails: every NULL comes with ENOMEM (%ld of %ld NULL, %ld other errno)",
           t.nulls, t.tries, t.bad_errno);
    report(t.not_zero == 0, "while mmap fails: calloc memory is zero (%ld not)", t.not_zero);
    report(t.misaligned == 0, "while mmap fails: aligned allocations are aligned (%ld not)",
           t.misaligned);
    report(t.damaged == 0, "while mmap fails: live blocks keep their contents (%ld damaged)",
           t.damaged);

    /* failures off: everything must work again */
    set(0);
    struct tally u = {0, 0, 0, 0, 0, 0};
    workload(&u, 2);
    report(u.nulls == 0, "after mmap works again: no allocation fails (%ld of %ld NULL)", u.nulls,
           u.tries);
    report(u.not_zero == 0 && u.misaligned == 0 && u.damaged == 0,
           "after mmap works again: zeroed, aligned, contents kept (%ld, %ld, %ld bad)", u.not_zero,
           u.misaligned, u.damaged);
    size_t damaged = 0;
    for (int s = 0; s < SLOTS; s++) {
        if (slot[s] && !intact(slot[s], slot_n[s], slot_seed[s]))
            damaged++;
        free(slot[s]);
        slot[s] = NULL;
    }
    unsigned char *big = malloc(100 * MiB);
    if (big)
        for (size_t i = 0; i < 100 * MiB; i += 4096)
            big[i] = 1;
    report(damaged == 0 && big != NULL,
           "after mmap works again: all blocks intact and freed, malloc(100M) works");
    free(big);

    /* and failing once more, then recovering once more */
    set(1);
    struct tally v = {0, 0, 0, 0, 0, 0};
    workload(&v, 1);
    set(0);
    report(v.bad_errno == 0 && v.damaged == 0 && v.not_zero == 0,
           "failing again after recovery: NULL+ENOMEM only, nothing damaged");
    for (int s = 0; s < SLOTS; s++)
        free(slot[s]);
    printf("stat injected=%ld nulls=%ld\n", injected, t.nulls + v.nulls);
    printf("end\n");
    return 0;
}
