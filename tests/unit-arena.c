/* unit-arena: the arena layer (lib/arena.c) with only what lies below it (os, meta,
 * registry, counters, the THP decision) and a stand-in for the policy: chunk runs handed
 * out 2 MiB-aligned and registered, a free chunk reused while still resident (a run of several, the
 * most resident one), purging (and at once what waits when fresh chunks are taken), wholly free
 * arenas unmapped after purge_delay but one spare, strict overcommit (chunks committed as handed
 * out, PROT_NONE again once purged), mappings of their own resized in place or moved. The figures
 * come from the kernel (/proc/self/maps). */
#include "arena.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the policy layer, stood in for ---- */
struct policy policy_in_force = {
    .thp = {.mode = THP_MODE_LARGE, .threshold = (size_t)2 << 20},
    .arena_size = (size_t)8 << 20, /* 4 chunks: arenas fill and empty quickly */
    .purge_delay_ms = 50,
    .purge = OS_PURGE_DONTNEED,
};
static int ranges;
void policy_ensure_loaded(void) {}
void introspect_add_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    ranges++;
}
void introspect_remove_range(void *base)
{
    (void)base;
    ranges--;
}
void introspect_set_dense(void) {}
void lib_fatal(const char *msg, const void *p)
{
    fprintf(stderr, "fatal: %s %p\n", msg, p);
    abort();
}

/* The protection of the mapping that holds addr, from /proc/self/maps ("rw-p", "---p"),
 * or "none" when nothing is mapped there (one of 4 rotating buffers, so that a message
 * can show two). */
static const char *prot_at(const void *addr)
{
    static char bufs[4][8];
    static unsigned k;
    char *perms = bufs[k++ % 4];
    strcpy(perms, "none");
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo, hi;
    char p[8];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, p) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi) {
            strcpy(perms, p);
            break;
        }
    if (f)
        fclose(f);
    return perms;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint8_t *get(size_t n, arena_t **a, bool *zero)
{
    return arena_alloc_chunks(n, CHUNK_SIZE, THP_USE_SMALL, CHUNK_SIZE, a, zero);
}

int main(void)
{
    os_overcommit_override(2); /* strict: read when the first arena is reserved */
    arena_t *a, *b;
    bool zero;
    uint8_t *p = get(1, &a, &zero);
    tap_ok(p && ((uintptr_t)p & CHUNK_MASK) == 0 && zero, "a chunk: 2 MiB-aligned, known zero");
    tap_ok(registry_lookup(p + CHUNK_SIZE) == &chunk_unused,
           "the arena's other chunks are registered as unused (a stray free aborts)");
    tap_ok(!strcmp(prot_at(p), "rw-p") && !strcmp(prot_at(p + CHUNK_SIZE), "---p"),
           "strict overcommit: the chunk handed out is committed (%s), the rest of the arena "
           "is not (%s)",
           prot_at(p), prot_at(p + CHUNK_SIZE));
    memset(p, 0x5a, 4096);
    arena_free_chunks(a, p, 1);
    uint8_t *q = get(1, &b, &zero);
    tap_ok(q == p && !zero && q[0] == 0x5a,
           "a freed chunk is handed out again while resident (not known zero)");
    arena_free_chunks(b, q, 1);
    sleep_ms(80);
    tap_ok(arena_purge_due(now_ms()) == 0 && !strcmp(prot_at(p), "---p"),
           "after purge_delay the free chunk is purged and decommitted (%s)", prot_at(p));
    q = get(1, &b, &zero);
    tap_ok(q == p && zero && !strcmp(prot_at(p), "rw-p"),
           "handed out again: committed again, and known zero");
    /* That take was a refault: the delayed purge gave the chunk back 0 ms before. Freed
     * again, it waits twice purge_delay while the process works, purge_delay once it
     * sleeps (purger.c tells). */
    arena_free_chunks(b, q, 1);
    uint32_t freed = now_ms(); /* the clock is passed in: no sleep a loaded machine stretches */
    arena_purge_due(freed + 75);
    tap_ok(!strcmp(prot_at(p), "rw-p"),
           "taken back right after its delayed purge (a refault), the chunk freed again waits "
           "longer than purge_delay (%s 75 ms after)",
           prot_at(p));
    purge_refault_asleep(true);
    arena_purge_due(now_ms() + 75);
    tap_ok(!strcmp(prot_at(p), "---p"), "once the process sleeps, it goes after purge_delay (%s)",
           prot_at(p));

    /* Three arenas' worth of chunks, all freed: after purge_delay twice (purged, then
     * idle), all but one arena are unmapped. */
    uint8_t *runs[12];
    arena_t *ar[12];
    for (int i = 0; i < 12; i++)
        runs[i] = get(1, &ar[i], &zero);
    int arenas_before = ranges;
    uint64_t reserved = atomic_load(&stat_reserved);
    for (int i = 0; i < 12; i++)
        arena_free_chunks(ar[i], runs[i], 1);
    sleep_ms(80);
    arena_purge_due(now_ms());
    tap_ok(ranges == arenas_before, "purged, the arenas stay for purge_delay (%d)", ranges);
    sleep_ms(80);
    arena_purge_due(now_ms());
    tap_ok(arenas_before >= 3 && ranges == 1,
           "then %d arenas become 1 (the spare); reserved %llu -> %llu MiB", arenas_before,
           (unsigned long long)(reserved >> 20),
           (unsigned long long)(atomic_load(&stat_reserved) >> 20));
    int unmapped = 0, registry_clear = 0;
    for (int i = 0; i < 12; i++) {
        unmapped += !strcmp(prot_at(runs[i]), "none");
        registry_clear += registry_lookup(runs[i]) == NULL;
    }
    tap_ok(unmapped >= 8 && unmapped == registry_clear,
           "%d of the 12 chunks' address space is unmapped, and the registry forgets exactly "
           "those (%d)",
           unmapped, registry_clear);

    /* A block of more than half an arena: a mapping of its own, resized with mremap. */
    uint8_t *big =
        arena_alloc_chunks(4, CHUNK_SIZE, THP_USE_LARGE_PIECE, 4 * CHUNK_SIZE, &b, &zero);
    tap_ok(big && b->dedicated && !strcmp(prot_at(big), "rw-p"),
           "4 chunks: a mapping of its own, read/write");
    for (size_t o = 0; o < 4 * CHUNK_SIZE; o += 4096)
        big[o] = (uint8_t)(o >> 12);
    chunk_t desc = {.kind = CHUNK_LARGE};
    registry_set(big, 4, &desc);
    uint8_t *big2 = arena_resize_dedicated(b, &desc, 40, 40 * CHUNK_SIZE);
    int kept = big2 != NULL;
    for (size_t o = 0; kept && o < 4 * CHUNK_SIZE; o += 4096)
        kept = big2[o] == (uint8_t)(o >> 12);
    tap_ok(kept && registry_lookup(big2 + 39 * CHUNK_SIZE) == &desc &&
               ((uintptr_t)big2 & CHUNK_MASK) == 0,
           "grown to 40 chunks (%s): contents kept, 2 MiB-aligned, registered to its end",
           big2 == big ? "in place" : "moved");
    uint8_t *big3 = arena_resize_dedicated(b, &desc, 2, 2 * CHUNK_SIZE);
    tap_ok(big3 == big2 && registry_lookup(big3 + 2 * CHUNK_SIZE) == NULL &&
               !strcmp(prot_at(big3 + 3 * CHUNK_SIZE), "none"),
           "shrunk to 2 chunks in place: the tail is unmapped and unregistered");
    registry_set(big3, 2, NULL);
    arena_free_chunks(b, big3, 2);
    tap_ok(!strcmp(prot_at(big3), "none"), "freed: the mapping is gone");

    /* The ms clock: a chunk freed weeks before the next look is due (a difference read as
     * int32_t took 30 days for 24.8 days in the future); a look whose clock read came a
     * moment before the free, as another thread's may, leaves it waiting. */
    uint8_t *w = get(1, &a, &zero);
    memset(w, 0x77, 4096);
    uint32_t t0 = now_ms();
    uint64_t pending = atomic_load(&stat_purge_pending);
    arena_free_chunks(a, w, 1);
    uint32_t next = arena_purge_due(t0 - 5);
    tap_ok(next != 0 && atomic_load(&stat_purge_pending) == pending + CHUNK_SIZE &&
               !strcmp(prot_at(w), "rw-p"),
           "a look at a time just before the free: the chunk waits (due in %d ms, %s)",
           (int)(next - t0), prot_at(w));
    const uint32_t days30 = 30u * 24 * 3600 * 1000;
    next = arena_purge_due(t0 + days30);
    tap_ok(next == 0 && atomic_load(&stat_purge_pending) == pending &&
               strcmp(prot_at(w), "rw-p") != 0,
           "a look 30 days after the free: the chunk is purged (%s), nothing waits", prot_at(w));

    /* Runs of several chunks: the freed run that is still resident before a purged one (first
     * fit took the lowest, fresh, while the resident one waited beside it); and a request
     * that has to take fresh chunks gives back as many of those waiting, at once. */
    arena_t *ax, *ay;
    uint8_t *x = get(2, &ax, &zero), *y = get(2, &ay, &zero);
    memset(x, 0x11, 2 * CHUNK_SIZE);
    memset(y, 0x22, 2 * CHUNK_SIZE);
    arena_free_chunks(ax, x, 2);
    arena_purge_chunks(true);
    arena_free_chunks(ay, y, 2);
    uint8_t *r = get(2, &a, &zero);
    tap_ok(r == y && !zero && r[0] == 0x22 && !strcmp(prot_at(x), "---p"),
           "2 chunks: the freed run still resident (%p), not the purged one at %p (got %p)", y, x,
           r);
    arena_free_chunks(a, r, 2);
    pending = atomic_load(&stat_purge_pending);
    uint64_t purged = atomic_load(&stat_purged);
    big = arena_alloc_chunks(3, CHUNK_SIZE, THP_USE_LARGE_PIECE, 3 * CHUNK_SIZE, &b, &zero);
    tap_ok(big && b->dedicated && !strcmp(prot_at(y), "---p") &&
               atomic_load(&stat_purge_pending) == pending - 2 * CHUNK_SIZE &&
               atomic_load(&stat_purged) == purged + 2 * CHUNK_SIZE,
           "3 fresh chunks (a mapping of their own): the 2 that waited are purged at once (%s), "
           "pending %llu -> %llu KiB",
           prot_at(y), (unsigned long long)(pending >> 10),
           (unsigned long long)(atomic_load(&stat_purge_pending) >> 10));
    arena_free_chunks(b, big, 3);
    return tap_done();
}
