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
 *   more     six ranges, the two beyond the block's four in a "table" where nothing is mapped
 *   values   arena_size 12345, purge delay 2^40 ms, thp_threshold 2^57 - 1 (each within the
 *            bounds once checked, none a value the library can hold)
 *   files    a range for each of its mappings (the executable, libc, the stack...), the
 *            ones beyond the block's four in a table of its own
 *   valid    (self only) one range over a 4 MiB mapping of its own, every field sane
 *   many     (self only) six 1 MiB ranges of a 6 MiB mapping, two of them in a table of
 *            their own (version 2's `more`)
 *   v1       (self only) a version 1 block (thpalloc 0.1.0: every slot in the block) with
 *            one range over a 4 MiB mapping
 *   anon     range 0 over a mapping of 3 MiB and a page, the others over every other
 *            unnamed anonymous mapping of its own (each passes the plausibility checks;
 *            none is an arena of thpalloc's); prints "range0 ADDRESS" and "names 0|1"
 *            (whether the kernel names anonymous mappings) before "ready"
 *   arena128 (self) one range over a 4 MiB mapping on 2 MiB boundaries, named
 *            [anon:thpalloc] where the kernel names mappings, and arena_size 128M; (lib)
 *            arena_size 128M written into the library's own block, nothing else changed
 *   more-map (lib only) the lie of "more", then six blocks of 80 MiB, each a range the
 *            library records: it must keep writing its own table, not the one the block
 *            now points to
 * It prints "ready PID" and sleeps until killed. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#include "thpalloc.h"

/* Version 1's layout: version 2's head, then every slot. */
struct introspect_v1 {
    uint64_t magic;
    uint32_t version, size, active;
    int32_t thp_mode;
    uint64_t thp_threshold, arena_size;
    int64_t purge_delay_ms;
    uint32_t purge, policy_loaded;
    uint64_t ranges_used, ranges_overflow;
    struct thpalloc_range range[THPALLOC_RANGES_MAX];
};
_Static_assert(offsetof(struct introspect_v1, range) == offsetof(struct thpalloc_introspect, more),
               "version 1's head is version 2's");

union {
    struct thpalloc_introspect v2;
    struct introspect_v1 v1;
} thpalloc_introspect;

static void sane(struct thpalloc_introspect *t)
{
    t->magic = THPALLOC_INTROSPECT_MAGIC;
    t->version = 2;
    t->size = sizeof *t;
    t->active = 1;
    t->thp_mode = 2;
    t->thp_threshold = 2 << 20;
    t->arena_size = 64 << 20;
    t->purge_delay_ms = 1000;
    t->policy_loaded = 1;
}

static void *map(size_t len)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static int names = -1; /* whether the kernel names anonymous mappings */

/* A 2 MiB-aligned mapping of len bytes named as thpalloc names its arenas. */
static uint8_t *arena_like(size_t len)
{
    uint8_t *m = map(len + (2 << 20));
    if (!m)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)m + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
    names = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)a, len,
                  (unsigned long)"thpalloc") == 0;
    return a;
}

/* /proc/self/maps as it is now (its first 64 KiB). */
static char *self_maps(void)
{
    static char text[1 << 16];
    FILE *f = fopen("/proc/self/maps", "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[got] = '\0';
    return text;
}

/* The line after l; NULL after the last. */
static char *next_line(char *l)
{
    char *nl = strchr(l, '\n');
    return nl ? nl + 1 : NULL;
}

/* Range n: in the block's own slots, or beyond them in the table more. */
static void set_range(struct thpalloc_introspect *t, struct thpalloc_range *more, uint64_t n,
                      struct thpalloc_range r)
{
    if (n < THPALLOC_RANGES_INLINE)
        t->range[n] = r;
    else
        more[n - THPALLOC_RANGES_INLINE] = r;
}

/* Ranges over its unnamed anonymous mappings: the first over one of 3 MiB and a page. */
static void anon_ranges(struct thpalloc_introspect *t)
{
    size_t len = (3 << 20) + 4096;
    uint8_t *m = map(len);
    uint8_t *probe = map(4096);
    names = probe && prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)probe, 4096UL,
                           (unsigned long)"probe") == 0;
    struct thpalloc_range *more = calloc(THPALLOC_RANGES_MAX, sizeof *more);
    t->range[0] = (struct thpalloc_range){(uintptr_t)m, len};
    uint64_t n = 1;
    for (char *l = self_maps(); l && *l && n < THPALLOC_RANGES_MAX; l = next_line(l)) {
        unsigned long long b, e, ino;
        int pos = 0;
        if (sscanf(l, "%llx-%llx %*s %*x %*x:%*x %llu%n", &b, &e, &ino, &pos) == 3 && pos &&
            ino == 0 && l[pos + strspn(l + pos, " ")] == '\n' &&
            (e <= (uintptr_t)m || b >= (uintptr_t)m + len))
            set_range(t, more, n++, (struct thpalloc_range){b, e - b});
    }
    t->ranges_used = n;
    t->more = (uintptr_t)more;
    printf("range0 %#lx\nnames %d\n", (unsigned long)(uintptr_t)m, names);
}

static void lie(struct thpalloc_introspect *t, const char *mode)
{
    sane(t);
    if (!strcmp(mode, "anon")) {
        anon_ranges(t);
        return;
    }
    if (!strcmp(mode, "arena128")) {
        t->ranges_used = 1;
        t->range[0] = (struct thpalloc_range){(uintptr_t)arena_like(4 << 20), 4 << 20};
        t->arena_size = 128 << 20;
        return;
    }
    size_t len = 4 << 20;
    uint8_t *m = map(len);
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
    } else if (!strcmp(mode, "more")) {
        t->ranges_used = THPALLOC_RANGES_INLINE + 2;
        for (int i = 0; i < THPALLOC_RANGES_INLINE; i++)
            t->range[i] = (struct thpalloc_range){(uintptr_t)m + ((size_t)i << 20), 1 << 20};
        t->more = 0x10000000000ULL;
    } else if (!strcmp(mode, "values")) {
        t->ranges_used = 1;
        t->range[0] = (struct thpalloc_range){(uintptr_t)m, len};
        t->thp_threshold = ((uint64_t)1 << 57) - 1;
        t->arena_size = 12345;
        t->purge_delay_ms = (int64_t)1 << 40;
    } else if (!strcmp(mode, "files")) {
        struct thpalloc_range *more = calloc(THPALLOC_RANGES_MAX, sizeof *more);
        uint64_t n = 0;
        for (char *l = self_maps(); l && *l && n < THPALLOC_RANGES_MAX; l = next_line(l)) {
            unsigned long long b, e;
            if (sscanf(l, "%llx-%llx", &b, &e) == 2 && e < (1ULL << 47))
                set_range(t, more, n++, (struct thpalloc_range){b, e - b});
        }
        t->ranges_used = n;
        t->more = (uintptr_t)more;
    } else if (!strcmp(mode, "many")) {
        uint8_t *six = map(6 << 20);
        struct thpalloc_range *more = calloc(THPALLOC_RANGES_MAX, sizeof *more);
        t->ranges_used = 6;
        for (int i = 0; i < 6; i++)
            set_range(t, more, i,
                      (struct thpalloc_range){(uintptr_t)six + ((size_t)i << 20), 1 << 20});
        t->more = (uintptr_t)more;
    } else if (!strcmp(mode, "v1")) {
        /* the same head (sane's fields), then version 1's slots where `more` was */
        struct introspect_v1 *o = (struct introspect_v1 *)t;
        o->magic = THPALLOC_INTROSPECT_MAGIC_V1;
        o->version = 1;
        o->size = sizeof *o;
        o->ranges_used = 1;
        o->range[0] = (struct thpalloc_range){(uintptr_t)m, len};
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
    struct thpalloc_introspect *t = &thpalloc_introspect.v2;
    if (!strcmp(argv[1], "lib")) {
        void *h = dlopen("libthpalloc.so.1", RTLD_NOW | RTLD_NOLOAD);
        t = h ? dlsym(h, "thpalloc_introspect") : NULL;
        if (!t) {
            fprintf(stderr, "status-bogus: libthpalloc.so.1 is not loaded\n");
            return 1;
        }
    }
    bool map_after = !strcmp(argv[2], "more-map");
    if (!strcmp(argv[1], "lib") && !strcmp(argv[2], "arena128"))
        t->arena_size = 128 << 20; /* the library's own block, one value changed */
    else
        lie(t, map_after ? "more" : argv[2]);
    for (int i = 0; map_after && i < 6; i++) {
        char *b = malloc((size_t)80 << 20);
        if (!b) {
            fprintf(stderr, "status-bogus: malloc(80 MiB) failed\n");
            return 1;
        }
        b[0] = 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
