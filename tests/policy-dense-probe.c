/* policy-dense-probe: small-object memory that is nearly all in use becomes huge pages (thp_dense),
 * and goes back to 4 KiB pages and to the kernel once freed, for tests/policy-dense.sh.
 *
 *   policy-dense-probe SIZE [MIB]   fill MIB (default 48) of SIZE-byte blocks, written; sample at
 *                            once, after 3 s of a little other work, after freeing them all
 *                            and 3 s idle
 *   policy-dense-probe SIZE MIB hold  the same up to the second sample, then prints held and waits
 *                            for a signal (thp-status reads it meanwhile)
 *   policy-dense-probe can-collapse prints collapse=1 when this kernel collapses an anonymous
 *                            2 MiB range on request (MADV_COLLAPSE), else collapse=0 why=...
 *
 * Samples are key=value lines: rss_kb, anonhuge_kb (smaps_rollup) and, under thpalloc,
 * dense_huge_kb, collapses, splits (thpalloc_get_stats, looked up with dlsym). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct stats {
    uint64_t reserved, committed, huge_advised, in_use, purge_pending, purged, large_count, heaps,
        dense_huge, dense_collapses, dense_splits, dense_ahead;
};

static long rollup(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

/* kB of mappings huge-advised (VmFlags hg in smaps): what khugepaged may collapse however
 * sparse, besides the page faults */
static long huge_advised_kb(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    long size = 0, sum = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Size:", 5))
            size = atol(line + 5);
        else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg"))
            sum += size;
    }
    if (f)
        fclose(f);
    return sum;
}

static void sample(const char *when)
{
    struct stats s = {0};
    int (*get)(struct stats *, size_t) =
        (int (*)(struct stats *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    if (get)
        get(&s, sizeof s);
    printf("%s_rss_kb=%ld\n%s_anonhuge_kb=%ld\n%s_dense_huge_kb=%llu\n%s_collapses=%llu\n"
           "%s_splits=%llu\n%s_ahead=%llu\n%s_hg_kb=%ld\n",
           when, rollup("Rss"), when, rollup("AnonHugePages"), when,
           (unsigned long long)(s.dense_huge >> 10), when, (unsigned long long)s.dense_collapses,
           when, (unsigned long long)s.dense_splits, when, (unsigned long long)s.dense_ahead, when,
           huge_advised_kb());
    fflush(stdout);
}

static int can_collapse(void)
{
    size_t two = (size_t)2 << 20;
    char *m = mmap(NULL, 2 * two, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        printf("collapse=0 why=mmap\n");
        return 0;
    }
    char *a = (char *)(((uintptr_t)m + two - 1) & ~(uintptr_t)(two - 1));
    memset(a, 1, two);
    if (madvise(a, two, 25 /* MADV_COLLAPSE */) != 0) {
        printf("collapse=0 why=%s\n", strerror(errno));
        return 0;
    }
    printf("collapse=1\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "can-collapse"))
        return can_collapse();
    if (argc < 2)
        return 2;
    size_t size = strtoul(argv[1], NULL, 0), mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 48;
    size_t n = (mib << 20) / size;
    /* the pointers in a mapping of their own: not in the memory under test */
    char **b =
        mmap(NULL, n * sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return 2;
    for (size_t i = 0; i < n; i++) {
        if (!(b[i] = malloc(size)))
            return 2;
        memset(b[i], (int)(i | 1), size);
    }
    sample("filled");
    /* at work past purge_delay: new pages (other blocks' sizes) for the collapses, which a
     * process without the purger thread makes at its own calls */
    for (int round = 0; round < 30; round++) {
        usleep(100 * 1000);
        for (int k = 0; k < 64; k++)
            free(malloc(16 + (size_t)(k * 97 + round * 13) % 4000));
    }
    sample("busy");
    if (argc > 3 && !strcmp(argv[3], "hold")) {
        printf("held\n");
        fflush(stdout);
        pause();
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)b[i][size - 1] != (unsigned char)(i | 1)) {
            printf("corrupted=%zu\n", i);
            return 3;
        }
        free(b[i]);
    }
    sleep(3);
    sample("freed");
    return 0;
}
