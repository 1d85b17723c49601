/* policy-commit-strict: what thpalloc charges to the kernel's commit limit, read from the kernel
 * (/proc/self/smaps: VmFlags "ac" marks a mapping charged, VM_ACCOUNT). Runs under
 * LD_PRELOAD of libthpalloc.so.1, with the overcommit mode injected (tests/policy-shim.c)
 * or the machine's own.
 *
 *   policy-commit-strict strict    mode 2: no reserved-but-unused range is charged; the charge
 *                           follows use (grows with blocks, falls after a purge); the
 *                           mappings stay few under a churn of chunk runs; RLIMIT_DATA
 *                           (which counts what is charged) gives NULL + ENOMEM, then
 *                           allocation recovers
 *   policy-commit-strict lax       modes 0/1: arenas are not charged, a block with a mapping of
 *                           its own is
 *
 * Output: "ok - D" / "not ok - D", "# ..." diagnostics, "end" (relayed by policy-commit-strict.sh).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fill-chain.h"
#include "proc-status.h"
#include "relay-report.h"
#include "intro-range.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct thpalloc_introspect *intro;
static int (*get_stats)(struct thpalloc_stats *, size_t);
static size_t (*purge_now)(void);

struct charge {
    size_t reserved; /* bytes of mappings inside thpalloc's ranges */
    size_t charged;  /* of which VmFlags carry "ac" */
    size_t vmas;     /* mappings inside the ranges */
    size_t all_vmas; /* mappings of the process */
};

static int in_ranges(uint64_t lo, uint64_t hi)
{
    for (uint64_t i = 0; i < intro->ranges_used && i < THPALLOC_RANGES_MAX; i++) {
        const struct thpalloc_range *r = intro_range(intro, i);
        if (r->size && lo >= r->base && hi <= r->base + r->size)
            return 1;
    }
    return 0;
}

/* "ac" as a whole token of a VmFlags line. */
static int has_ac(const char *flags)
{
    for (const char *f = flags; *f;) {
        while (*f == ' ')
            f++;
        if (f[0] == 'a' && f[1] == 'c' && (f[2] == ' ' || f[2] == '\n' || f[2] == '\0'))
            return 1;
        while (*f && *f != ' ')
            f++;
    }
    return 0;
}

static struct charge read_charge(void)
{
    struct charge c = {0, 0, 0, 0};
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return c;
    char line[512];
    uint64_t lo = 0, hi = 0;
    int ours = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long a, b;
        if (sscanf(line, "%llx-%llx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            lo = a;
            hi = b;
            ours = in_ranges(lo, hi);
            c.all_vmas++;
            if (ours) {
                c.vmas++;
                c.reserved += hi - lo;
            }
        } else if (!strncmp(line, "VmFlags:", 8) && ours && has_ac(line + 8)) {
            c.charged += hi - lo;
        }
    }
    fclose(f);
    return c;
}

static size_t committed(void)
{
    struct thpalloc_stats s;
    memset(&s, 0, sizeof s);
    get_stats(&s, sizeof s);
    return s.committed;
}

static void show(const char *when, struct charge c)
{
    printf("# %s: reserved %zu KiB, charged %zu KiB, committed (stats) %zu KiB, %zu mappings "
           "in the arenas, %zu in all\n",
           when, c.reserved / KiB, c.charged / KiB, committed() / KiB, c.vmas, c.all_vmas);
}

/* Random-ish sizes without libc's rand state (which allocates nothing, but keeps it simple). */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int strict(void)
{
    void *first = malloc(100); /* the first arena: the mode is read now */
    struct charge c0 = read_charge();
    show("one small block", c0);
    report(c0.reserved >= 64 * MiB && c0.charged == committed() && c0.charged <= 4 * MiB,
           "strict: after one malloc(100), %zu KiB of %zu KiB reserved is charged, as much as "
           "is committed (%zu KiB)",
           c0.charged / KiB, c0.reserved / KiB, committed() / KiB);

    /* A block of each size class up to 4 KiB, some of them 64 KiB-page classes elsewhere
     * (2960, 3440, 3632 B): their first pages share the one small chunk, so that a small
     * process is charged one chunk, not two. */
    void *each[52];
    int nsmall = 0;
    for (size_t sz = 16; sz <= 4096 && nsmall < 48; sz = sz < 128 ? sz + 16 : sz + sz / 8)
        each[nsmall++] = malloc(sz);
    each[nsmall++] = malloc(2960);
    each[nsmall++] = malloc(3440);
    each[nsmall++] = malloc(3632);
    struct charge ce = read_charge();
    show("a block of each class up to 4 KiB", ce);
    report(ce.charged == c0.charged && committed() == c0.charged,
           "strict: a block of each of %d classes up to 4 KiB: still %zu KiB charged "
           "(committed %zu KiB)",
           nsmall, ce.charged / KiB, committed() / KiB);
    for (int i = 0; i < nsmall; i++)
        free(each[i]);

    /* 40 MiB of 100 KiB blocks: the charge grows with use. */
    enum { N = 400 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(100 * KiB);
        memset(blocks[i], i, 100 * KiB);
    }
    struct charge c1 = read_charge();
    show("40 MB of 100 KB blocks", c1);
    report(c1.charged == committed() && c1.charged >= 40 * MiB && c1.charged <= 48 * MiB,
           "strict: 40 MB of blocks: charged %zu KiB == committed, between 40 and 48 MiB",
           c1.charged / KiB);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    purge_now();
    struct charge c2 = read_charge();
    show("freed and purged", c2);
    report(c2.charged == committed() && c2.charged <= c0.charged + 4 * MiB,
           "strict: freed and purged: charged %zu KiB == committed, back within 4 MiB of the "
           "start (%zu KiB)",
           c2.charged / KiB, c0.charged / KiB);

    /* Churn of chunk runs (2..20 MiB blocks in the arenas, 8 live), purged at once: each
     * commit and decommit splits a mapping, neighbours must merge again. */
    void *live[8] = {0};
    size_t most = 0;
    for (int i = 0; i < 3000; i++) {
        int k = (int)(next_rand() % 8);
        free(live[k]);
        size_t size = (2 + next_rand() % 19) * MiB - 4096;
        live[k] = malloc(size);
        if (live[k])
            ((char *)live[k])[size - 1] = 1;
        if (i % 64 == 0) {
            purge_now();
            struct charge c = read_charge();
            if (c.vmas > most)
                most = c.vmas;
        }
    }
    struct charge c3 = read_charge();
    show("churn, 8 chunk runs live", c3);
    report(c3.charged == committed(), "strict: churn of chunk runs: charged %zu KiB == committed",
           c3.charged / KiB);
    /* Per live block at most its huge pieces, its tail and the hole after it (advice and
     * commit split mappings), per arena its ends and the heap's own chunks. */
    size_t arenas = c3.reserved / (64 * MiB) + 1;
    report(most <= 3 * 8 + 2 * arenas + 8,
           "strict: churn of chunk runs: at most %zu mappings in the arenas (bound %zu: live "
           "runs and the holes between them, not one per commit)",
           most, 3 * 8 + 2 * arenas + 8);
    for (int k = 0; k < 8; k++)
        free(live[k]);
    purge_now();
    struct charge c4 = read_charge();
    show("churn freed and purged", c4);
    report(c4.charged == committed() && c4.vmas <= 2 * arenas + 6,
           "strict: churn freed and purged: charged %zu KiB == committed, %zu mappings in the "
           "arenas (neighbours merged again)",
           c4.charged / KiB, c4.vmas);

    /* RLIMIT_DATA counts private writable memory: in strict mode only what is committed, so
     * the limit is met chunk by chunk with NULL + ENOMEM, and allocation recovers. (A few
     * blocks more than 64 fit: chunks committed before the limit have room.) */
    struct rlimit rl;
    getrlimit(RLIMIT_DATA, &rl);
    struct rlimit lim = rl;
    size_t data_now = proc_status_bytes("VmData");
    lim.rlim_cur = data_now + 64 * MiB;
    setrlimit(RLIMIT_DATA, &lim);
    size_t got;
    int err;
    void *head = fill_chain(MiB, 1024, true, &got, &err);
    report(err == ENOMEM && got >= 40 && got <= 80,
           "strict: RLIMIT_DATA of VmData + 64 MiB: NULL + ENOMEM after %zu blocks of 1 MiB", got);
    free_chain(head);
    void *again = malloc(MiB);
    report(again != NULL, "strict: after freeing them, malloc(1 MiB) succeeds under the limit");
    free(again);
    setrlimit(RLIMIT_DATA, &rl);
    free(first);
    return 0;
}

static int lax(void)
{
    void *first = malloc(100);
    struct charge c0 = read_charge();
    show("one small block", c0);
    report(c0.reserved >= 64 * MiB && c0.charged == 0,
           "default mode: of %zu KiB reserved, nothing is charged (MAP_NORESERVE)",
           c0.reserved / KiB);
    void *big = malloc(100 * MiB); /* a mapping of its own */
    struct charge c1 = read_charge();
    show("a 100 MiB block", c1);
    report(big && c1.charged == 100 * MiB,
           "default mode: a 100 MiB block's own mapping is charged whole (%zu KiB), as glibc's is",
           c1.charged / KiB);
    free(big);
    struct charge c2 = read_charge();
    report(c2.charged == 0, "default mode: freed, nothing is charged (%zu KiB)", c2.charged / KiB);
    free(first);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    intro = dlsym(RTLD_DEFAULT, "thpalloc_introspect");
    get_stats = (int (*)(struct thpalloc_stats *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    purge_now = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    if (!intro || !get_stats || !purge_now) {
        fprintf(stderr, "policy-commit-strict: run me under LD_PRELOAD=libthpalloc.so.1\n");
        return 2;
    }
    int rc = 2;
    if (argc == 2 && !strcmp(argv[1], "strict"))
        rc = strict();
    else if (argc == 2 && !strcmp(argv[1], "lax"))
        rc = lax();
    else
        fprintf(stderr, "usage: policy-commit-strict strict|lax\n");
    if (rc == 0)
        printf("end\n");
    return rc ? rc : report_failures != 0;
}
