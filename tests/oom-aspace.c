/* oom-aspace: address space comes back. Under RLIMIT_AS (VmSize + 768 MiB), a process that
 * filled its address space with blocks of one size and freed them all can allocate blocks
 * of every other size, and of an arena or more (64 MiB, 256 MiB), from the thread that
 * filled it and from another one; and the address space stays bounded over many phases of
 * alternating sizes.
 *
 *   oom-aspace exhaust SIZE   fill with SIZE-byte blocks until NULL, free all, then every
 *                             size in the main thread and in a new thread
 *   oom-aspace phases N       N phases of ~24 MiB of blocks of a size that changes each
 *                             phase (16 B .. 40 MiB), all freed; VmSize at the end
 *   oom-aspace tailpad        a 5 MiB block on the chunks of a freed 8 MiB one: its tail
 *                             chunk keeps its huge page (no refault), and after purge_delay
 *                             (run with THPALLOC_PURGE_DELAY=200ms) and a chunk-level event
 *                             only what the block uses of it stays resident
 *   oom-aspace remap          realloc of a 200 MiB block (a mapping of its own, every page
 *                             written) to 400 MiB and back to 100 MiB: contents kept, and
 *                             the peak RSS shows that no copy was made (mremap)
 *
 * Output: "ok - D" / "not ok - D", "# ..." diagnostics, "end" (relayed by oom-aspace.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fill-chain.h"
#include "proc-status.h"
#include "relay-report.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define HEADROOM (768 * MiB)
#define CAP ((size_t)4 << 30) /* requested bytes after which the limit did not work */

static size_t vm_size(void)
{
    return proc_status_bytes("VmSize");
}

/* Every size range: small and medium classes, big classes, chunk runs in an arena, and
 * blocks of an arena (64 MiB: a mapping of its own) and more. */
static const size_t check_sizes[] = {16,       100,      1000,      4096,    8 * KiB + 1,
                                     30000,    64 * KiB, 200 * KiB, 1 * MiB, 3 * MiB,
                                     20 * MiB, 64 * MiB, 256 * MiB};
#define NCHECK (sizeof check_sizes / sizeof check_sizes[0])

/* Allocates, writes both ends of and frees one block of each size; returns how many
 * failed and names the first in *first_bad. */
static int check_every_size(size_t *first_bad)
{
    int bad = 0;
    for (size_t i = 0; i < NCHECK; i++) {
        size_t n = check_sizes[i];
        unsigned char *p = malloc(n);
        if (!p) {
            if (!bad++)
                *first_bad = n;
            continue;
        }
        p[0] = 1;
        p[n - 1] = 2;
        free(p);
    }
    return bad;
}

static void *thread_check(void *arg)
{
    size_t *first_bad = arg;
    return (void *)(intptr_t)check_every_size(first_bad);
}

static int exhaust(size_t size)
{
    struct rlimit rl;
    size_t vm = vm_size();
    if (vm == 0 || getrlimit(RLIMIT_AS, &rl) != 0)
        return 2;
    rl.rlim_cur = vm + HEADROOM;
    if ((rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) ||
        setrlimit(RLIMIT_AS, &rl) != 0)
        return 2;
    printf("# VmSize %zu MiB, RLIMIT_AS %zu MiB\n", vm / MiB, (size_t)rl.rlim_cur / MiB);
    /* Fill: blocks chained through their first word. */
    size_t count;
    int err;
    void *head = fill_chain(size, CAP / size, false, &count, &err);
    size_t total = count * size;
    report(total <= CAP && err == ENOMEM,
           "%zu-byte blocks: NULL + ENOMEM after %zu blocks (%zu MiB)", size, count, total / MiB);
    free_chain(head);
    size_t vm_freed = vm_size();
    printf("# VmSize after freeing them all: %zu MiB\n", vm_freed / MiB);
    size_t bad_main = 0, bad_thread = 0;
    int n_main = check_every_size(&bad_main);
    report(n_main == 0,
           "after %zu-byte blocks were freed, the main thread gets every size 16 B .. 256 MiB "
           "(%d failed, first %zu)",
           size, n_main, bad_main);
    pthread_t t;
    void *ret = (void *)(intptr_t)-1;
    if (pthread_create(&t, NULL, thread_check, &bad_thread) == 0)
        pthread_join(t, &ret);
    report(ret == 0,
           "after %zu-byte blocks were freed, another thread gets every size 16 B .. 256 MiB "
           "(%d failed, first %zu)",
           size, (int)(intptr_t)ret, bad_thread);
    return 0;
}

static int phases(long n)
{
    static const size_t sizes[] = {16,        48,        700,     5000,     20000,
                                   100 * KiB, 700 * KiB, 3 * MiB, 12 * MiB, 40 * MiB};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    size_t start = 0, peak = 0;
    void **blocks = calloc(2 * 1024 * 1024, sizeof *blocks);
    if (!blocks)
        return 2;
    int fails = 0;
    for (long ph = 0; ph < n; ph++) {
        size_t size = sizes[(size_t)ph * 7 % nsizes];
        size_t count = 24 * MiB / size;
        if (count == 0)
            count = 1;
        for (size_t i = 0; i < count; i++) {
            blocks[i] = malloc(size);
            if (!blocks[i]) {
                fails++;
                count = i;
                break;
            }
            memset(blocks[i], (int)ph, size < 64 ? size : 64);
        }
        for (size_t i = 0; i < count; i++)
            free(blocks[i]);
        size_t vm = vm_size();
        if (ph == (long)nsizes - 1)
            start = vm; /* every size seen once */
        if (vm > peak)
            peak = vm;
    }
    size_t end = vm_size();
    printf("# VmSize after the first %zu phases %zu MiB, at the end %zu MiB, peak %zu MiB\n",
           nsizes, start / MiB, end / MiB, peak / MiB);
    report(fails == 0, "%ld phases of alternating sizes: no allocation failed", n);
    report(end <= start + 128 * MiB,
           "%ld phases: VmSize at the end (%zu MiB) within 2 arenas of the start (%zu MiB)", n,
           end / MiB, start / MiB);
    free(blocks);
    return 0;
}

/* The block's pages move (mremap) instead of being copied: a copy would hold both blocks
 * resident at once (200 + 200 MiB), a move never more than the block. */
static int remap(void)
{
    size_t n = 200 * MiB;
    unsigned char *p = malloc(n);
    if (!p)
        return 2;
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (unsigned char)(i >> 12);
    size_t before = proc_status_bytes("VmHWM");
    unsigned char *q = realloc(p, 2 * n);
    size_t after = proc_status_bytes("VmHWM");
    int kept = q != NULL;
    for (size_t i = 0; kept && i < n; i += 4096)
        kept = q[i] == (unsigned char)(i >> 12);
    report(kept, "realloc(200 MiB block, 400 MiB): contents kept");
    printf("# VmHWM before %zu MiB, after %zu MiB\n", before / MiB, after / MiB);
    report(q && after < before + 50 * MiB,
           "realloc(200 MiB block, 400 MiB) moved its pages: peak RSS %zu -> %zu MiB (a copy "
           "makes it +200)",
           before / MiB, after / MiB);
    if (!q)
        return 0;
    for (size_t i = n; i < 2 * n; i += 4096)
        q[i] = 1;
    size_t vm = proc_status_bytes("VmSize");
    unsigned char *r = realloc(q, n / 2);
    size_t vm2 = proc_status_bytes("VmSize");
    kept = r != NULL;
    for (size_t i = 0; kept && i < n / 2; i += 4096)
        kept = r[i] == (unsigned char)(i >> 12);
    report(kept && vm2 + 250 * MiB <= vm,
           "realloc(400 MiB block, 100 MiB): contents kept, VmSize %zu -> %zu MiB", vm / MiB,
           vm2 / MiB);
    free(r);
    return 0;
}

/* Rss and AnonHugePages (KiB) of the mappings inside [lo, hi), from /proc/self/smaps. */
static void rss_of(uintptr_t lo, uintptr_t hi, size_t *rss, size_t *huge)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long a, b;
    size_t v;
    int in = 0;
    *rss = *huge = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = a >= lo && b <= hi;
        else if (in && sscanf(line, "Rss: %zu kB", &v) == 1)
            *rss += v;
        else if (in && sscanf(line, "AnonHugePages: %zu kB", &v) == 1)
            *huge += v;
    }
    if (f)
        fclose(f);
}

static int tailpad(void)
{
    unsigned char *big = malloc(8 * MiB);
    if (!big)
        return 2;
    memset(big, 1, 8 * MiB);
    free(big);
    size_t n = 5 * MiB;
    unsigned char *p = malloc(n);
    if (!p)
        return 2;
    memset(p, 2, n);
    uintptr_t lo = (uintptr_t)p, hi = lo + 6 * MiB;
    size_t rss0, huge0, rss1, huge1;
    rss_of(lo, hi, &rss0, &huge0);
    printf("# 5 MiB block at %p: Rss %zu kB, AnonHugePages %zu kB\n", (void *)p, rss0, huge0);
    if (huge0 < 6 * 1024) {
        report(1,
               "tail pad: no huge page on the tail chunk here (THP %s): nothing to purge "
               "# SKIP",
               huge0 ? "partial" : "unavailable");
        free(p);
        return 0;
    }
    report(rss0 >= 6 * 1024, "the tail chunk kept its huge page: Rss %zu kB for 5 MiB", rss0);
    struct timespec ts = {0, 600 * 1000000L};
    nanosleep(&ts, NULL);
    /* A chunk-level event: what the purger does once 16 MiB wait, a process with less
     * pending gets at its next one (as for free chunks). */
    free(malloc(3 * MiB));
    rss_of(lo, hi, &rss1, &huge1);
    int kept = 1;
    for (size_t i = 0; i < n; i += 4096)
        kept &= p[i] == 2;
    report(kept && rss1 <= 5 * 1024 + 8 && huge1 <= 4 * 1024,
           "after purge_delay the tail's unused part is gone: Rss %zu kB, AnonHugePages %zu "
           "kB, contents kept",
           rss1, huge1);
    free(p);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = 2;
    if (argc == 3 && strcmp(argv[1], "exhaust") == 0)
        rc = exhaust(strtoull(argv[2], NULL, 0));
    else if (argc == 2 && strcmp(argv[1], "tailpad") == 0)
        rc = tailpad();
    else if (argc == 2 && strcmp(argv[1], "remap") == 0)
        rc = remap();
    else if (argc == 3 && strcmp(argv[1], "phases") == 0)
        rc = phases(strtol(argv[2], NULL, 0));
    else
        fprintf(stderr, "usage: oom-aspace exhaust SIZE | phases N | remap\n");
    if (rc == 0)
        printf("end\n");
    return rc ? rc : report_failures != 0;
}
