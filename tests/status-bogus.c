/* status-bogus: a process whose thpalloc introspection block lies, for thp-status's tests.
 * Built with -rdynamic: it exports its own `thpalloc_introspect`. Run as a copy named
 * libthpalloc.so.1 ("self"), thp-status takes the executable for the library and reads
 * that block; run with the real library preloaded ("lib"), it writes the same lies into
 * the library's own block (any code in a process can). Usage: status-bogus self|lib MODE,
 * MODE one of
 *   sizes    two ranges of 2^63 bytes each (their sum wraps: "17592186044415 MiB")
 *   count    ranges_used 2^40
 *   outside  one 64 MiB range where nothing is mapped
 *   fields   state 7, thp mode 42, purge 9
 *   overlap  two ranges over the same mapping
 *   valid    (self only) one range over a 4 MiB mapping of its own, every field sane
 * It prints "ready PID" and sleeps until killed. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "thpalloc.h"

struct thpalloc_introspect thpalloc_introspect;

static void lie(struct thpalloc_introspect *t, const char *mode)
{
    t->magic = THPALLOC_INTROSPECT_MAGIC;
    t->version = 1;
    t->size = sizeof *t;
    t->active = 1;
    t->thp_mode = 2;
    t->thp_threshold = 2 << 20;
    t->arena_size = 64 << 20;
    t->purge_delay_ms = 1000;
    t->policy_loaded = 1;
    size_t len = 4 << 20;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        m = NULL;
    if (!strcmp(mode, "sizes")) {
        t->ranges_used = 2;
        t->range[0] = (struct thpalloc_range){(uintptr_t)m, (uint64_t)1 << 63};
        t->range[1] = (struct thpalloc_range){(uintptr_t)m + len, ((uint64_t)1 << 63) - (1 << 20)};
    } else if (!strcmp(mode, "count")) {
        t->ranges_used = (uint64_t)1 << 40;
    } else if (!strcmp(mode, "outside")) {
        t->ranges_used = 1;
        t->range[0] = (struct thpalloc_range){0x10000000000ULL, 64 << 20};
    } else if (!strcmp(mode, "fields")) {
        t->active = 7;
        t->thp_mode = 42;
        t->purge = 9;
    } else if (!strcmp(mode, "overlap")) {
        t->ranges_used = 2;
        t->range[0] = (struct thpalloc_range){(uintptr_t)m, len};
        t->range[1] = (struct thpalloc_range){(uintptr_t)m + 4096, 4096};
    } else { /* valid */
        t->ranges_used = 1;
        t->range[0] = (struct thpalloc_range){(uintptr_t)m, len};
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: status-bogus self|lib MODE\n");
        return 2;
    }
    struct thpalloc_introspect *t = &thpalloc_introspect;
    if (!strcmp(argv[1], "lib")) {
        void *h = dlopen("libthpalloc.so.1", RTLD_NOW | RTLD_NOLOAD);
        t = h ? dlsym(h, "thpalloc_introspect") : NULL;
        if (!t) {
            fprintf(stderr, "status-bogus: libthpalloc.so.1 is not loaded\n");
            return 1;
        }
    }
    lie(t, argv[2]);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
