/* policy-hugepage-probe SIZE_BYTES
 *
 * mallocs SIZE_BYTES, writes every byte, and reports how much of it the kernel backs with
 * transparent huge pages. Used by tests/policy-hugepage-large.sh, with and without
 * LD_PRELOAD=$THPALLOC_LIB. Prints key=value lines:
 *   size_kb              the request
 *   thpalloc_active      1, 0, or -1 when the thpalloc symbols are not there
 *   anon_huge_before_kb  AnonHugePages of /proc/self/smaps_rollup before the malloc
 *   anon_huge_after_kb   ... after writing the block
 *   anon_huge_delta_kb   the difference
 *   huge_pct             delta as a percentage of the block's size
 *   hg_kb                bytes of the block (KiB) inside mappings with VmFlags "hg"
 *                        (MADV_HUGEPAGE), from /proc/self/smaps
 *   hg_pct               hg_kb as a percentage of the block's size
 *   huge_advised_delta   change of thpalloc_get_stats().huge_advised (bytes; -1 without)
 *   thp_fault_alloc / thp_fault_fallback   /proc/vmstat deltas (system-wide)
 * The /proc files are read with open/read into static buffers so that reading them does
 * not allocate (which could itself move the figures). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read-whole.h"
#include "thpalloc.h"

static char buf[8 << 20];

static size_t slurp(const char *path)
{
    return read_whole(path, buf, sizeof buf);
}

/* The value (in kB) of "key:" in a /proc file of "Key:   123 kB" lines, or -1. */
static long field(const char *path, const char *key)
{
    if (!slurp(path))
        return -1;
    size_t kl = strlen(key);
    for (char *line = buf; line && *line;) {
        if (!strncmp(line, key, kl) && (line[kl] == ':' || line[kl] == ' '))
            return strtol(line + kl + 1, NULL, 10);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return -1;
}

/* KiB of [lo, hi) covered by smaps mappings whose VmFlags contain "hg". */
static long hg_kib(uintptr_t lo, uintptr_t hi)
{
    if (!slurp("/proc/self/smaps"))
        return -1;
    uint64_t total = 0;
    uintptr_t start = 0, end = 0;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') &&
            strchr(line, '-') < strchr(line, ' ')) {
            start = a;
            end = b;
        } else if (!strncmp(line, "VmFlags:", 8)) {
            if (strstr(line, " hg")) {
                uintptr_t s = start > lo ? start : lo, e = end < hi ? end : hi;
                if (e > s)
                    total += e - s;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return (long)(total / 1024);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: policy-hugepage-probe SIZE_BYTES\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0);
    int (*active)(void) = (int (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "thpalloc_active");
    int (*get_stats)(struct thpalloc_stats *, size_t) = (int (*)(struct thpalloc_stats *, size_t))(
        uintptr_t)dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    struct thpalloc_stats st0 = {0}, st1 = {0};
    int act = active ? active() : -1;

    long fa0 = field("/proc/vmstat", "thp_fault_alloc");
    long ff0 = field("/proc/vmstat", "thp_fault_fallback");
    long before = field("/proc/self/smaps_rollup", "AnonHugePages");
    if (get_stats)
        get_stats(&st0, sizeof st0);
    unsigned char *p = malloc(size);
    if (!p) {
        printf("error=malloc failed\n");
        return 1;
    }
    memset(p, 0x5a, size);
    long after = field("/proc/self/smaps_rollup", "AnonHugePages");
    long fa1 = field("/proc/vmstat", "thp_fault_alloc");
    long ff1 = field("/proc/vmstat", "thp_fault_fallback");
    if (get_stats)
        get_stats(&st1, sizeof st1);
    long hg = hg_kib((uintptr_t)p, (uintptr_t)p + size);
    /* keep the block (and its contents) alive until after the measurements */
    volatile unsigned char sink = p[size - 1];
    (void)sink;

    long size_kb = (long)(size / 1024);
    long delta = after - before;
    printf("size_kb=%ld\n", size_kb);
    printf("block=%p\n", (void *)p);
    printf("thpalloc_active=%d\n", act);
    printf("anon_huge_before_kb=%ld\n", before);
    printf("anon_huge_after_kb=%ld\n", after);
    printf("anon_huge_delta_kb=%ld\n", delta);
    printf("huge_pct=%ld\n", size_kb ? delta * 100 / size_kb : 0);
    printf("hg_kb=%ld\n", hg);
    printf("hg_pct=%ld\n", size_kb ? hg * 100 / size_kb : 0);
    printf("huge_advised_delta=%" PRId64 "\n",
           get_stats ? (int64_t)st1.huge_advised - (int64_t)st0.huge_advised : -1);
    printf("thp_fault_alloc=%ld\n", fa1 - fa0);
    printf("thp_fault_fallback=%ld\n", ff1 - ff0);
    free(p);
    return 0;
}
