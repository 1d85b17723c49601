/* status-holder: a process for thp-status's process-view tests. Run it under
 * LD_PRELOAD=$THPALLOC_LIB: it holds 4 blocks of 64 MiB (every page touched) and some
 * small objects, prints "block ADDRESS SIZE" for each block, the policy the library says
 * it is using ("policy KEY VALUE ORIGIN", from thpalloc_policy() when the library is
 * there), thpalloc's address ranges ("range BASE SIZE", from its thpalloc_introspect
 * table), then "ready PID", and sleeps until killed. With an argument N it holds N blocks
 * instead. It is not linked with thpalloc: without the preload it runs on glibc.
 *
 * With STATUS_HOLDER_CHARGE=1 in the environment it also does by hand what the library
 * does under strict overcommit when it commits a chunk, so that the tests find memory
 * charged to the commit limit (VmFlags "ac") inside the ranges whatever
 * vm.overcommit_memory is: see charge(). It prints "charge ADDRESS SIZE" for each
 * mapping it made. */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "intro-range.h" /* the types only: the symbols are looked up at run time */

#define BLOCK ((size_t)64 << 20)
#define MIB ((uintptr_t)1 << 20)
#define MAX_BLOCKS 64

/* An ordinary private mapping at addr (accounted, unlike thpalloc's MAP_NORESERVE ones). */
static void charge_at(uintptr_t addr, size_t len)
{
    void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED)
        printf("charge %#lx %zu\n", (unsigned long)addr, len);
}

/* In a range that holds no block (the small objects' arena, whose last chunks are free):
 * the 2 MiB below its last 2 MiB, and, where the address space after the range is free,
 * 1 MiB in and 1 MiB out across its end (a mapping only partly inside the range). */
static void charge(const struct thpalloc_introspect *t, char *const *blocks, int n)
{
    for (uint64_t i = 0; i < t->ranges_used; i++) {
        const struct thpalloc_range *r = intro_range(t, i);
        uintptr_t base = r->base, end = base + r->size;
        bool has_block = false;
        for (int b = 0; b < n; b++)
            has_block |= (uintptr_t)blocks[b] >= base && (uintptr_t)blocks[b] < end;
        if (!r->size || has_block || end - base < 8 * MIB)
            continue;
        charge_at(end - 4 * MIB, 2 * MIB);
        void *probe = mmap((void *)end, MIB, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (probe == (void *)end)
            charge_at(end - MIB, 2 * MIB);
        else if (probe != MAP_FAILED)
            munmap(probe, MIB); /* an old kernel took the address as a hint */
        return;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    char *blocks[MAX_BLOCKS];
    for (int i = 0; i < n; i++) {
        char *p = malloc(BLOCK);
        if (!p) {
            fprintf(stderr, "status-holder: malloc(64 MiB) failed\n");
            return 1;
        }
        memset(p, 0x5a, BLOCK);
        printf("block %p %zu\n", (void *)p, BLOCK);
        if (i < MAX_BLOCKS)
            blocks[i] = p;
    }
    for (int i = 0; i < 1000; i++) {
        char *s = malloc(48);
        if (s)
            memset(s, 1, 48); /* kept: small-object pages stay resident */
    }
    int (*policy)(struct thpalloc_setting *, size_t) =
        (int (*)(struct thpalloc_setting *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_policy");
    if (policy) {
        struct thpalloc_setting set[16];
        int k = policy(set, 16);
        for (int i = 0; i < k && i < 16; i++)
            printf("policy %s %s %s\n", set[i].key, set[i].value, set[i].origin);
    }
    const struct thpalloc_introspect *t = dlsym(RTLD_DEFAULT, "thpalloc_introspect");
    if (t) {
        for (uint64_t i = 0; i < t->ranges_used && i < THPALLOC_RANGES_MAX; i++)
            if (intro_range(t, i)->size)
                printf("range %#lx %lu\n", (unsigned long)intro_range(t, i)->base,
                       (unsigned long)intro_range(t, i)->size);
        const char *c = getenv("STATUS_HOLDER_CHARGE");
        if (c && !strcmp(c, "1"))
            charge(t, blocks, n < MAX_BLOCKS ? n : MAX_BLOCKS);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
