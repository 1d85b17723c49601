/* api-dormant-check: run with another allocator preloaded before thpalloc
 * (LD_PRELOAD="api-dormant-fake.so:libthpalloc.so.1"): that allocator wins malloc, and
 * thpalloc, loaded all the same, must do nothing at all.
 *
 *   api-dormant-check dormant   thpalloc's symbols are there, thpalloc_active() == 0, its
 *                           statistics stay zero however much the program allocates
 *   api-dormant-check active    (thpalloc first) thpalloc_active() == 1 and it reserves memory
 *   api-dormant-check workload  only the allocation workload (for syscall comparisons)
 *
 * Output: "ok - D" / "not ok - D", "# ..." diagnostics, "end" when done (api-dormant.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thpalloc.h"

#include "relay-report.h"

static const char *dso_of(const char *sym)
{
    void *f = dlsym(RTLD_DEFAULT, sym);
    Dl_info info;
    if (!f || !dladdr(f, &info) || !info.dli_fname)
        return "none";
    const char *b = strrchr(info.dli_fname, '/');
    return b ? b + 1 : info.dli_fname;
}

static void *thread_main(void *arg)
{
    size_t *sum = arg;
    for (int i = 0; i < 2000; i++) {
        char *p = malloc(16 + (size_t)(i % 3000));
        if (!p)
            continue;
        p[0] = (char)i;
        *sum += (size_t)p[0];
        p = realloc(p, 100);
        free(p);
    }
    return NULL;
}

/* The same allocations whatever the mode. */
static void workload(void)
{
    static const size_t sizes[] = {1, 16, 100, 1000, 4096, 70000, 300000, 1 << 20};
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            char *p = malloc(sizes[i]);
            if (p)
                memset(p, 1, sizes[i]);
            char *q = calloc(1, sizes[i]);
            p = realloc(p, sizes[i] * 2);
            void *a = NULL;
            if (posix_memalign(&a, 4096, sizes[i]) != 0)
                a = NULL;
            void *b = aligned_alloc(64, 64);
            void *c = memalign(1 << 16, sizes[i]);
            free(p);
            free(q);
            free(a);
            free(b);
            free(c);
        }
    pthread_t t[2];
    size_t sum[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, thread_main, &sum[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    char *s = strdup("dormant");
    free(s);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "workload") == 0) {
        /* a marker in the strace output: what follows is the program's, not ld.so's */
        int fd = open("/nonexistent/api-dormant-check-main", O_RDONLY);
        if (fd >= 0)
            close(fd);
        workload();
        printf("end\n");
        return 0;
    }
    int dormant = strcmp(mode, "dormant") == 0;
    if (!dormant && strcmp(mode, "active") != 0) {
        fprintf(stderr, "usage: %s dormant|active|workload\n", argv[0]);
        return 2;
    }
    int (*marker)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "dormant_fake_marker");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "thpalloc_active");
    int (*get_stats)(struct thpalloc_stats *, size_t) =
        (int (*)(struct thpalloc_stats *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_get_stats");
    size_t (*purge)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "thpalloc_owns");

    report(marker && marker() == 42, "the fake allocator is loaded");
    const char *winner = dso_of("malloc");
    printf("# malloc is from %s, free from %s, thpalloc_active from %s\n", winner, dso_of("free"),
           dso_of("thpalloc_active"));
    if (dormant)
        report(strcmp(winner, "api-dormant-fake.so") == 0, "malloc is the fake's (%s)", winner);
    else
        report(strstr(winner, "thpalloc") != NULL, "malloc is thpalloc's (%s)", winner);
    report(active && get_stats && purge && owns,
           "thpalloc is loaded: thpalloc_active/get_stats/purge/owns found with dlsym");
    if (!active || !get_stats || !purge || !owns) {
        printf("end\n");
        return 0;
    }
    report(active() == !dormant, "thpalloc_active() == %d", !dormant);

    workload();
    char *keep = malloc(5 << 20);
    if (keep)
        memset(keep, 1, 5 << 20);
    char *small = malloc(100);
    struct thpalloc_stats st;
    memset(&st, 0xee, sizeof st);
    int r = get_stats(&st, sizeof st);
    report(r == 0, "thpalloc_get_stats() returns 0");
    printf("# reserved %llu committed %llu huge_advised %llu in_use %llu purge_pending %llu purged "
           "%llu "
           "large_count %llu heaps %llu\n",
           (unsigned long long)st.reserved, (unsigned long long)st.committed,
           (unsigned long long)st.huge_advised, (unsigned long long)st.in_use,
           (unsigned long long)st.purge_pending, (unsigned long long)st.purged,
           (unsigned long long)st.large_count, (unsigned long long)st.heaps);
    if (dormant) {
        report(st.reserved == 0, "dormant: reserved == 0 after the program allocated (%llu)",
               (unsigned long long)st.reserved);
        report(st.committed == 0 && st.in_use == 0 && st.large_count == 0 && st.heaps == 0 &&
                   st.huge_advised == 0 && st.purge_pending == 0 && st.purged == 0,
               "dormant: every statistic is 0");
        report(purge() == 0, "dormant: thpalloc_purge() == 0");
        report(owns(small) == 0 && owns(keep) == 0,
               "dormant: thpalloc_owns() is 0 for the fake's blocks");
    } else {
        report(st.reserved > 0 && st.in_use >= (5 << 20), "active: reserved > 0 and in_use >= 5M");
        report(owns(small) == 1 && owns(keep) == 1,
               "active: thpalloc_owns() is 1 for malloc's blocks");
    }
    free(keep);
    free(small);
    printf("end\n");
    return 0;
}
