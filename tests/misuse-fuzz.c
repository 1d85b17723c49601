/* misuse-fuzz: random heap traffic in several threads with heap misuse injected at random
 * points, each misuse in a fork child; run by tests/misuse-fuzz.sh under thpalloc and under
 * plain glibc (issue 46 item 4).
 *
 *   misuse-fuzz [--seed S] [--steps N] [--threads T] [--rounds R] [--seconds SECS]
 *               [--only I] [--kinds K,K] [--blocks B,B] [--purge-wait MS]
 *               [--allocator thpalloc|glibc] [--report-only] [--known PAIRS] [--verbose]
 *
 * The parent: T worker threads make random calls of malloc, calloc, realloc, free, memalign,
 * posix_memalign, aligned_alloc, valloc, malloc_usable_size and (rarely) malloc_trim, with
 * sizes in every small class (1 B .. 8 KiB), extents (8 KiB .. 1 MiB) and large blocks
 * (> 1 MiB); they hand blocks to each other through a shared exchange, and each exits after
 * a random number of steps (its blocks go to the exchange or are freed), replaced by a new
 * thread, until N steps are made (or SECS seconds have passed).
 *
 * The oracle: every live block is in a set of intervals (lib's memory never holds it:
 * mmap) and carries a pattern of its own (a hash of its id and the offset: over the whole
 * block up to 4 KiB, its first and last 256 bytes and a word every 4 KiB above (64 KiB
 * above 1 MiB)), checked
 * whenever the block is touched (freed, reallocated, handed over, taken) and every 128
 * steps for all of a thread's blocks. No allocation may return memory that overlaps a live
 * block; malloc_usable_size must be at least the size asked for; calloc's memory is zero;
 * aligned blocks are aligned. A block is taken out of the set before it is freed (so a
 * correct allocator can never make the oracle fail) and put in after it is allocated.
 *
 * Injections: R rounds over every (misuse kind x block kind) pair (or injections every 200
 * steps until SECS pass), spread over the run. The injecting worker forks; the child (only
 * that thread survives a fork: the others' blocks are taken over as the child's, those
 * half-written at the fork only kept as live intervals) sets the misuse up with blocks of
 * its own, creates the helper threads it needs before any block is freed (a thread's
 * creation allocates: it could take the freed block's address and turn the misuse into a
 * free of a live block), performs the misuse, then goes on with the oracle on: it allocates
 * many blocks of the same size (a block listed twice comes out twice), frees the
 * neighbours but a few (a page whose count a double free brought down too far is retired
 * under live blocks), allocates again, runs random steps in itself and two new threads,
 * calls malloc_trim(0), checks every block and allocates once more; then exits 0. The
 * parent reads how the child ended:
 *   caught    SIGABRT with an allocator's message on stderr ("thpalloc: ..." or glibc's
 *             own, which thpalloc hands foreign pointers to): "at call" when the misuse
 *             call itself never returned, "later" when a later call stopped
 *   harmless  exit 0, the oracle intact
 *   BROKEN    the oracle failed (overlap, pattern smashed, bad size or alignment), another
 *             signal (SIGSEGV; SIGALRM: a hang of 30 s), SIGABRT without a message
 *   n/a       the freed block's address had been handed out again (to a tracked block)
 *             before the second free: no misuse to make
 * Misuse kinds (P the block, X another of its size, B and C other threads, M the child's
 * first thread, which allocated P unless said otherwise):
 *   none               the control: nothing (must be harmless everywhere)
 *   double-free        free(P); free(P)
 *   double-free-aba    free(P); free(X); free(P)
 *   double-free-later  free(P); 1..64 random steps (other sizes); free(P)
 *   remote-then-owner  B frees P (B exited or still alive); M frees P
 *   owner-then-remote  M frees P; B frees P (B with a heap, or (thpalloc) its first call)
 *   remote-twice       B frees P; B (or C) frees P again
 *   owner-exited       A allocates P and its neighbours; A (or M, remotely) frees P; A
 *                      exits; M frees P
 *   after-trim         M (or B) frees P; malloc_trim(0); M frees P
 *   after-purge        M (or B) frees P; M sleeps --purge-wait ms (the purger reclaims its
 *                      idle heap); M frees P (under thpalloc every child starts the purger
 *                      thread first, a 24 MiB block freed: its creation allocates)
 *   race               M and B (or B and C) free P at the same moment
 *   free-interior      free(P + off), off in 1, 8, 16, 24, 32, 48, 64, size/2, 4096 (< size)
 *   realloc-interior   realloc(P + off, n)
 *   usable-interior    malloc_usable_size(P + off)
 *   realloc-freed      free(P); realloc(P, n)
 *   free-foreign       free of a pointer no malloc returned: into a stack buffer, a global,
 *   realloc-foreign    an mmap'd page (the 16 bytes before it zero); the pointed-to memory is
 *                      a live interval: an allocation inside it is BROKEN
 * Block kinds: small (2 B .. 8 KiB, malloc or calloc), aligned (memalign(32..4096), 2 B ..
 * 4 KiB), extent (8 KiB .. 1 MiB), large (1 .. 8 MiB), huge (33 .. 41 MiB: more than half an
 * arena, a mapping of its own in thpalloc, mmap'd by glibc); for the foreign kinds stack,
 * global and mmap. Small and aligned blocks get 0, 1, 2..32 or 250 live neighbours of the
 * same size, the others 0..2.
 *
 * Output (tests/relay-report.h): "# " lines (the seed first, then each injection that was
 * not caught at its call, then the table), and for each pair "ok - KIND/BLOCK: ..." that
 * fails when a misuse was BROKEN (--allocator glibc or --report-only: only the control's; the
 * rest is the table; a pair in --known KIND/BLOCK,... (either may be *): "# SKIP" when it
 * broke), "ok - parent oracle", then "end". A BROKEN injection's line gives the seed and its
 * index: --seed S --only I --threads 0 runs it alone, without the workers.
 * Exit status 0, or 1 when a check failed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "purger-running.h"
#include "relay-report.h"

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)
#define MAXREC (1u << 17)    /* live blocks, all threads and the exchange */
#define OWN_MAX 8192u        /* blocks one thread holds (a fork child: all of them) */
#define EXCH_MAX 512u        /* the exchange between threads */
#define LIVE_CAP 300u        /* a worker frees more than it allocates above this */
#define LARGE_CAP (32 * MiB) /* a worker's large blocks together */
#define FULL_MAX 4096        /* blocks up to this get the pattern all over */
#define CHILD_ALARM 30
#define MAXWORKERS 64

/* ---- random numbers: splitmix64 ---- */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t rnd(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    return mix64(*s);
}
static uint64_t below(uint64_t *s, uint64_t n)
{
    return n ? rnd(s) % n : 0;
}

/* ---- what the parent and a child share ---- */
enum { PH_SETUP, PH_MISUSE, PH_RETURNED, PH_DONE, PH_NA = 9 };
struct shared {
    _Atomic int phase;
    char why[512];  /* the oracle's failure */
    char note[256]; /* what the misuse call returned */
};
static struct shared *shm;
static int in_child;
static int glibc_mode; /* the process's malloc is glibc's */

__attribute__((format(printf, 1, 2), noreturn)) static void oracle_fail(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (in_child) {
        memcpy(shm->why, buf, sizeof shm->why);
        shm->why[sizeof shm->why - 1] = 0;
        _exit(3);
    }
    /* the parent: other threads run on; say it and stop at once */
    char line[600];
    int n = snprintf(line, sizeof line, "not ok - parent oracle (no misuse): %s\n", buf);
    fflush(stdout);
    if (write(1, line, (size_t)n) < 0)
        _exit(1);
    _exit(1);
}

/* ---- the pattern ---- */
static void pat_fill(unsigned char *p, uint64_t id, size_t a, size_t b)
{
    for (size_t k = a; k < b;) {
        uint64_t w = mix64(id ^ ((k >> 3) * 0xd6e8feb86659fd93ULL));
        size_t off = k & 7, n = 8 - off;
        if (n > b - k)
            n = b - k;
        memcpy(p + k, (unsigned char *)&w + off, n);
        k += n;
    }
}
/* the first offset in [a, b) that does not hold the pattern, or (size_t)-1 */
static size_t pat_check(const unsigned char *p, uint64_t id, size_t a, size_t b)
{
    for (size_t k = a; k < b;) {
        uint64_t w = mix64(id ^ ((k >> 3) * 0xd6e8feb86659fd93ULL));
        size_t off = k & 7, n = 8 - off;
        if (n > b - k)
            n = b - k;
        if (memcmp(p + k, (unsigned char *)&w + off, n))
            return k;
        k += n;
    }
    return (size_t)-1;
}
static size_t zero_check(const unsigned char *p, size_t a, size_t b)
{
    for (size_t k = a; k < b; k++)
        if (p[k])
            return k;
    return (size_t)-1;
}

/* The parts of a block of SIZE bytes that carry the pattern, clipped to [0, lim):
 * calls f on each. */
typedef size_t (*region_fn)(unsigned char *p, uint64_t id, size_t a, size_t b);
static size_t fill_fn(unsigned char *p, uint64_t id, size_t a, size_t b)
{
    pat_fill(p, id, a, b);
    return (size_t)-1;
}
static size_t check_fn(unsigned char *p, uint64_t id, size_t a, size_t b)
{
    return pat_check(p, id, a, b);
}
static size_t zero_fn(unsigned char *p, uint64_t id, size_t a, size_t b)
{
    (void)id;
    return zero_check(p, a, b);
}
static size_t regions(unsigned char *p, uint64_t id, size_t size, size_t lim, region_fn f)
{
#define REGION(a, b)                                                                               \
    do {                                                                                           \
        size_t a_ = (a), b_ = (b) < lim ? (b) : lim;                                               \
        if (a_ < b_) {                                                                             \
            size_t r_ = f(p, id, a_, b_);                                                          \
            if (r_ != (size_t)-1)                                                                  \
                return r_;                                                                         \
        }                                                                                          \
    } while (0)
    if (size <= FULL_MAX) {
        REGION(0, size);
        return (size_t)-1;
    }
    REGION(0, 256);
    /* a word in every OS page up to 1 MiB (a purge inside a live block zeroes one), in
     * every 64 KiB above (a fault per page made the large blocks cost most of the run) */
    size_t stride = size <= MiB ? 4096 : 65536;
    for (size_t o = stride; o + 8 <= size - 256; o += stride)
        REGION(o, o + 8);
    REGION(size - 256, size);
    return (size_t)-1;
#undef REGION
}

/* ---- the oracle's set of live blocks ---- */
typedef struct {
    uintptr_t p;
    size_t size;
    uint64_t id;
    uint32_t align;
    uint8_t stable; /* its pattern is all written (a fork child may check it) */
    uint8_t pinned; /* foreign memory: never checked, never freed */
} rec_t;
typedef struct {
    uintptr_t lo, hi;
    uint32_t rec;
} iv_t;
static rec_t *recs;
static uint32_t *rec_free, nrec_free;
static iv_t *ivs;
static uint32_t niv;
static pthread_mutex_t orc_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_id = 1;

static void *oracle_map(size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(99);
    }
    return m;
}

static uint32_t iv_lower(uintptr_t lo) /* the first interval starting at or above lo */
{
    uint32_t a = 0, b = niv;
    while (a < b) {
        uint32_t m = (a + b) / 2;
        if (ivs[m].lo < lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}
/* the live interval overlapping [lo, hi), or -1 (orc_lock held) */
static long iv_overlap(uintptr_t lo, uintptr_t hi)
{
    uint32_t i = iv_lower(lo);
    if (i < niv && ivs[i].lo < hi)
        return i;
    if (i > 0 && ivs[i - 1].hi > lo)
        return i - 1;
    return -1;
}

/* Puts [p, p + size) in the set: the allocation must not overlap a live block. */
static uint32_t orc_add(void *p, size_t size, uint32_t align, const char *how)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + (size ? size : 1);
    pthread_mutex_lock(&orc_lock);
    long o = iv_overlap(lo, hi);
    if (o >= 0) {
        rec_t *r = &recs[ivs[o].rec];
        oracle_fail(
            "%s returned %p (%zu bytes), which overlaps the live block %p (%zu bytes, id %llu%s)",
            how, p, size, (void *)r->p, r->size, (unsigned long long)r->id,
            r->pinned ? ", foreign memory" : "");
    }
    if (!nrec_free || niv >= MAXREC)
        oracle_fail("the oracle is full (%u live blocks)", niv);
    uint32_t ri = rec_free[--nrec_free];
    recs[ri] = (rec_t){.p = lo, .size = size, .id = atomic_fetch_add(&next_id, 1), .align = align};
    uint32_t i = iv_lower(lo);
    memmove(&ivs[i + 1], &ivs[i], (niv - i) * sizeof *ivs);
    ivs[i] = (iv_t){lo, hi, ri};
    niv++;
    pthread_mutex_unlock(&orc_lock);
    return ri;
}
static void orc_stable(uint32_t ri)
{
    pthread_mutex_lock(&orc_lock);
    recs[ri].stable = 1;
    pthread_mutex_unlock(&orc_lock);
}
static void orc_remove(uint32_t ri)
{
    pthread_mutex_lock(&orc_lock);
    uintptr_t lo = recs[ri].p;
    uint32_t i = iv_lower(lo);
    if (i >= niv || ivs[i].lo != lo || ivs[i].rec != ri)
        oracle_fail("internal: block %p is not in the set", (void *)lo);
    memmove(&ivs[i], &ivs[i + 1], (niv - i - 1) * sizeof *ivs);
    niv--;
    rec_free[nrec_free++] = ri;
    pthread_mutex_unlock(&orc_lock);
}
/* whether some live block holds address p */
static int orc_holds(uintptr_t p)
{
    pthread_mutex_lock(&orc_lock);
    int held = iv_overlap(p, p + 1) >= 0;
    pthread_mutex_unlock(&orc_lock);
    return held;
}

static void rec_check(uint32_t ri, const char *when)
{
    rec_t r = recs[ri];
    if (r.pinned)
        return;
    size_t bad = regions((unsigned char *)r.p, r.id, r.size, r.size, check_fn);
    if (bad != (size_t)-1)
        oracle_fail("block %p (%zu bytes, id %llu) %s: byte %zu is 0x%02x, not its pattern",
                    (void *)r.p, r.size, (unsigned long long)r.id, when, bad,
                    ((unsigned char *)r.p)[bad]);
}

/* ---- a thread's blocks ---- */
typedef struct {
    uint64_t rng;
    uint32_t *own;
    uint32_t nown;
    size_t avoid_lo, avoid_hi; /* sizes not to allocate (double-free-later) */
    size_t large_bytes;
    uint64_t steps;
} ws_t;

static uint32_t exch[EXCH_MAX], nexch;
static pthread_mutex_t exch_lock = PTHREAD_MUTEX_INITIALIZER;

static void ws_init(ws_t *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->rng = seed;
    w->own = oracle_map(OWN_MAX * sizeof *w->own);
}
static void ws_release(ws_t *w)
{
    munmap(w->own, OWN_MAX * sizeof *w->own);
}

static size_t size_small(uint64_t *r)
{
    uint64_t k = below(r, 100);
    if (k < 55)
        return 1 + below(r, 256);
    if (k < 80)
        return 257 + below(r, 768);
    return 1025 + below(r, 8192 - 1024);
}
static size_t size_extent(uint64_t *r)
{
    /* log-uniform over 8 KiB .. 1 MiB */
    unsigned sh = 13 + (unsigned)below(r, 7);
    size_t lo = (size_t)1 << sh;
    size_t s = lo + below(r, lo);
    return s <= 8 * KiB ? 8 * KiB + 1 : (s > MiB ? MiB : s);
}
static size_t size_large(uint64_t *r)
{
    return MiB + 1 + below(r, 7 * MiB);
}
static size_t size_any(ws_t *w)
{
    for (int tries = 0;; tries++) {
        uint64_t k = below(&w->rng, 100);
        size_t s = k < 80   ? size_small(&w->rng)
                   : k < 97 ? size_extent(&w->rng)
                            : size_large(&w->rng);
        if (s > MiB && w->large_bytes + s > LARGE_CAP)
            continue;
        if (tries < 16 && s >= w->avoid_lo && s <= w->avoid_hi)
            continue;
        return s;
    }
}

enum {
    HOW_MALLOC,
    HOW_CALLOC,
    HOW_MEMALIGN,
    HOW_POSIX_MEMALIGN,
    HOW_ALIGNED_ALLOC,
    HOW_VALLOC,
    HOW_REALLOC_NULL
};
static const char *const how_name[] = {"malloc",        "calloc", "memalign",     "posix_memalign",
                                       "aligned_alloc", "valloc", "realloc(NULL)"};

/* Allocates SIZE bytes by HOW (aligned to ALIGN for the aligned ways), checks and records
 * the block, writes its pattern. */
static uint32_t t_alloc(ws_t *w, size_t size, int how, size_t align)
{
    void *p = NULL;
    char desc[80];
    switch (how) {
    case HOW_MALLOC:
        p = malloc(size);
        break;
    case HOW_CALLOC: {
        size_t n = 1 + below(&w->rng, 4);
        size = (size + n - 1) / n * n;
        p = calloc(n, size / n);
        break;
    }
    case HOW_MEMALIGN:
        p = memalign(align, size);
        break;
    case HOW_POSIX_MEMALIGN: {
        int e = posix_memalign(&p, align, size);
        if (e)
            p = NULL;
        break;
    }
    case HOW_ALIGNED_ALLOC:
        size = (size + align - 1) / align * align;
        p = aligned_alloc(align, size);
        break;
    case HOW_VALLOC:
        align = 4096;
        p = valloc(size);
        break;
    default:
        p = realloc(NULL, size);
        break;
    }
    if (how < HOW_MEMALIGN || how > HOW_VALLOC)
        align = size >= 16 ? 16 : 1;
    snprintf(desc, sizeof desc, "%s(%zu, align %zu)", how_name[how], size, align);
    if (!p)
        oracle_fail("%s returned NULL (errno %d)", desc, errno);
    if ((uintptr_t)p % align)
        oracle_fail("%s returned %p: not aligned", desc, p);
    size_t u = malloc_usable_size(p);
    if (u < size)
        oracle_fail("%s returned %p: malloc_usable_size says %zu", desc, p, u);
    uint32_t ri = orc_add(p, size, (uint32_t)align, desc);
    if (how == HOW_CALLOC) {
        size_t bad = size <= 64 * KiB ? zero_check(p, 0, size) : regions(p, 0, size, size, zero_fn);
        if (bad != (size_t)-1)
            oracle_fail("%s returned %p: byte %zu is 0x%02x, not zero", desc, p, bad,
                        ((unsigned char *)p)[bad]);
    }
    regions(p, recs[ri].id, size, size, fill_fn);
    orc_stable(ri);
    if (size > MiB)
        w->large_bytes += size;
    return ri;
}

static void own_push(ws_t *w, uint32_t ri)
{
    if (w->nown >= OWN_MAX)
        oracle_fail("internal: a thread holds %u blocks", w->nown);
    w->own[w->nown++] = ri;
}
static uint32_t own_take(ws_t *w, uint32_t i)
{
    uint32_t ri = w->own[i];
    w->own[i] = w->own[--w->nown];
    return ri;
}

/* the proper free of a block: checked, out of the set, then freed */
static void t_free(ws_t *w, uint32_t ri)
{
    rec_check(ri, "before its free");
    void *p = (void *)recs[ri].p;
    if (w && recs[ri].size > MiB && w->large_bytes >= recs[ri].size)
        w->large_bytes -= recs[ri].size;
    orc_remove(ri);
    free(p);
}

static uint32_t t_realloc(ws_t *w, uint32_t ri, size_t n)
{
    rec_check(ri, "before its realloc");
    rec_t old = recs[ri];
    if (old.size > MiB && w->large_bytes >= old.size)
        w->large_bytes -= old.size;
    orc_remove(ri);
    void *q = realloc((void *)old.p, n);
    char desc[96];
    snprintf(desc, sizeof desc, "realloc(%p [%zu bytes], %zu)", (void *)old.p, old.size, n);
    if (!q)
        oracle_fail("%s returned NULL (errno %d)", desc, errno);
    if ((uintptr_t)q % (n >= 16 ? 16 : 1))
        oracle_fail("%s returned %p: not aligned", desc, q);
    size_t u = malloc_usable_size(q);
    if (u < n)
        oracle_fail("%s returned %p: malloc_usable_size says %zu", desc, q, u);
    uint32_t nr = orc_add(q, n, 16, desc);
    recs[nr].id = old.id; /* the contents moved: the same pattern */
    size_t keep = old.size < n ? old.size : n;
    size_t bad = regions(q, old.id, old.size, keep, check_fn);
    if (bad != (size_t)-1)
        oracle_fail("%s returned %p: byte %zu was not kept (0x%02x)", desc, q, bad,
                    ((unsigned char *)q)[bad]);
    regions(q, old.id, n, n, fill_fn);
    orc_stable(nr);
    if (n > MiB)
        w->large_bytes += n;
    return nr;
}

static size_t pick_align(uint64_t *r)
{
    static const size_t al[] = {16, 32, 64, 128, 256, 512, 1024, 4096, 4096, 65536};
    return al[below(r, sizeof al / sizeof al[0])];
}

static void own_check_all(ws_t *w, const char *when)
{
    for (uint32_t i = 0; i < w->nown; i++)
        rec_check(w->own[i], when);
}

static void exch_check_all(void)
{
    pthread_mutex_lock(&exch_lock);
    for (uint32_t i = 0; i < nexch; i++)
        rec_check(exch[i], "in the exchange");
    pthread_mutex_unlock(&exch_lock);
}

/* One random step of a thread. */
static void step(ws_t *w)
{
    uint64_t r = below(&w->rng, 1000);
    w->steps++;
    if (w->nown > LIVE_CAP && r < 450)
        r += 450; /* too many: free instead */
    if (!w->nown && r >= 350)
        r = 0; /* nothing to realloc, free or hand over */
    if (r < 300) {
        if (w->nown < OWN_MAX - 1) {
            uint64_t k = below(&w->rng, 20);
            int how = k < 14    ? HOW_MALLOC
                      : k < 16  ? HOW_CALLOC
                      : k == 16 ? HOW_REALLOC_NULL
                                : HOW_MALLOC;
            own_push(w, t_alloc(w, size_any(w), how, 16));
        }
    } else if (r < 350) {
        size_t s = below(&w->rng, 4) ? size_small(&w->rng) : size_extent(&w->rng);
        if (s >= w->avoid_lo && s <= w->avoid_hi)
            s = w->avoid_hi + 1;
        int how = HOW_MEMALIGN + (int)below(&w->rng, 4);
        own_push(w, t_alloc(w, s, how, pick_align(&w->rng)));
    } else if (r < 450) {
        uint32_t i = (uint32_t)below(&w->rng, w->nown);
        w->own[i] = t_realloc(w, w->own[i], size_any(w));
    } else if (r < 750) {
        t_free(w, own_take(w, (uint32_t)below(&w->rng, w->nown)));
    } else if (r < 800) {
        uint32_t ri = w->own[below(&w->rng, w->nown)];
        size_t u = malloc_usable_size((void *)recs[ri].p);
        if (u < recs[ri].size)
            oracle_fail("malloc_usable_size(%p) = %zu, below its %zu bytes", (void *)recs[ri].p, u,
                        recs[ri].size);
    } else if (r < 850) {
        uint32_t i = (uint32_t)below(&w->rng, w->nown), ri = w->own[i];
        rec_check(ri, "handed to the exchange");
        pthread_mutex_lock(&exch_lock);
        if (nexch < EXCH_MAX) {
            exch[nexch++] = ri;
            own_take(w, i);
        }
        pthread_mutex_unlock(&exch_lock);
    } else if (r < 900) {
        uint32_t ri = UINT32_MAX;
        pthread_mutex_lock(&exch_lock);
        if (nexch && w->nown < OWN_MAX - 1) {
            uint32_t i = (uint32_t)below(&w->rng, nexch);
            ri = exch[i];
            exch[i] = exch[--nexch];
        }
        pthread_mutex_unlock(&exch_lock);
        if (ri != UINT32_MAX) {
            rec_check(ri, "taken from the exchange");
            if (recs[ri].size > MiB)
                w->large_bytes += recs[ri].size;
            own_push(w, ri);
        }
    } else if (r == 999 && below(&w->rng, 8) == 0) {
        malloc_trim(0);
    } else {
        rec_check(w->own[below(&w->rng, w->nown)], "at a look");
    }
    if (w->steps % 128 == 0)
        own_check_all(w, "at a periodic check");
}

/* A thread's end: its blocks go to the exchange while there is room, the rest is freed. */
static void ws_leave(ws_t *w)
{
    while (w->nown) {
        uint32_t ri = own_take(w, (uint32_t)below(&w->rng, w->nown));
        int kept = 0;
        if (below(&w->rng, 2)) {
            rec_check(ri, "left by an exiting thread");
            pthread_mutex_lock(&exch_lock);
            if (nexch < EXCH_MAX) {
                exch[nexch++] = ri;
                kept = 1;
            }
            pthread_mutex_unlock(&exch_lock);
        }
        if (!kept)
            t_free(w, ri);
    }
}

/* ---- misuse kinds ---- */
enum {
    K_NONE,
    K_DF_NOW,
    K_DF_ABA,
    K_DF_LATER,
    K_DF_REMOTE_OWNER,
    K_DF_OWNER_REMOTE,
    K_DF_REMOTE2,
    K_DF_EXITED,
    K_DF_TRIM,
    K_DF_PURGE,
    K_DF_RACE,
    K_FREE_INTERIOR,
    K_REALLOC_INTERIOR,
    K_USABLE_INTERIOR,
    K_REALLOC_FREED,
    K_FREE_FOREIGN,
    K_REALLOC_FOREIGN,
    NKINDS
};
static const char *const kind_name[NKINDS] = {"none",
                                              "double-free",
                                              "double-free-aba",
                                              "double-free-later",
                                              "remote-then-owner",
                                              "owner-then-remote",
                                              "remote-twice",
                                              "owner-exited",
                                              "after-trim",
                                              "after-purge",
                                              "race",
                                              "free-interior",
                                              "realloc-interior",
                                              "usable-interior",
                                              "realloc-freed",
                                              "free-foreign",
                                              "realloc-foreign"};
enum { B_SMALL, B_ALIGNED, B_EXTENT, B_LARGE, B_HUGE, B_STACK, B_GLOBAL, B_MMAP, NBLOCKS };
static const char *const block_name[NBLOCKS] = {"small", "aligned", "extent", "large",
                                                "huge",  "stack",   "global", "mmap"};

typedef struct {
    int kind, block;
} combo_t;
static combo_t combos[NKINDS * NBLOCKS];
static int ncombos;

typedef struct {
    uint64_t index;
    int kind, block;
    size_t size, size2, align, off;
    int nb;
    unsigned variant;
    unsigned dist;
    int fresh; /* the child's work (P's owner) in a new thread: a heap of its own */
    int warm;  /* blocks of P's size allocated, then freed, before P */
    uint64_t seed;
} inj_t;

static uint64_t opt_seed;
static int opt_purge_wait = 300;

static inj_t inj_params(uint64_t i)
{
    inj_t j = {.index = i};
    combo_t c = combos[i % (uint64_t)ncombos];
    uint64_t r = mix64(opt_seed * 0x9e3779b97f4a7c15ULL + i + 1);
    j.kind = c.kind;
    j.block = c.block;
    j.seed = rnd(&r);
    j.variant = (unsigned)below(&r, 8);
    j.dist = 1 + (unsigned)below(&r, 64);
    j.fresh = (int)below(&r, 2);
    {
        static const int warms[] = {0, 0, 64, 400};
        j.warm = warms[below(&r, 4)];
    }
    switch (j.block) {
    case B_SMALL:
        j.size = below(&r, 3) ? size_small(&r) : 16 * (1 + below(&r, 8));
        if (j.size < 2)
            j.size = 2;
        j.size2 = size_small(&r);
        break;
    case B_ALIGNED:
        j.align = (size_t)32 << below(&r, 8);
        if (j.align > 4096)
            j.align = 4096;
        j.size = 2 + below(&r, 4095);
        j.size2 = size_small(&r);
        break;
    case B_EXTENT:
        j.size = size_extent(&r);
        j.size2 = size_extent(&r);
        break;
    case B_LARGE:
        j.size = size_large(&r);
        j.size2 = size_large(&r);
        break;
    case B_HUGE:
        j.size = 33 * MiB + below(&r, 8 * MiB);
        j.size2 = size_large(&r);
        break;
    default:
        j.size = 64;
        j.size2 = 1 + below(&r, 512);
        break;
    }
    if (j.block <= B_ALIGNED) {
        uint64_t k = below(&r, 4);
        j.nb = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 2 + (int)below(&r, 31) : 250;
    } else if (j.block <= B_HUGE) {
        j.nb = (int)below(&r, 3);
    }
    static const size_t offs[] = {1, 8, 16, 24, 32, 48, 64, 0, 4096};
    for (int t = 0; t < 32; t++) {
        size_t o = offs[below(&r, sizeof offs / sizeof offs[0])];
        if (!o)
            o = j.size / 2 & ~(size_t)15;
        if (o && o < j.size) {
            j.off = o;
            break;
        }
    }
    if (!j.off)
        j.off = 1;
    return j;
}

static void inj_describe(const inj_t *j, char *buf, size_t n)
{
    int w = snprintf(buf, n, "inj %llu %s/%s size %zu", (unsigned long long)j->index,
                     kind_name[j->kind], block_name[j->block], j->size);
    if (j->align)
        w += snprintf(buf + w, n - (size_t)w, " align %zu", j->align);
    if (j->block <= B_HUGE)
        w += snprintf(buf + w, n - (size_t)w, ", %d live neighbours, %d warm-up, %s heap", j->nb,
                      j->warm, j->fresh ? "fresh" : "inherited");
    switch (j->kind) {
    case K_DF_LATER:
        snprintf(buf + w, n - (size_t)w, ", %u steps between", j->dist);
        break;
    case K_DF_REMOTE_OWNER:
        snprintf(buf + w, n - (size_t)w, ", B %s", j->variant & 1 ? "alive" : "exited");
        break;
    case K_DF_OWNER_REMOTE:
        snprintf(buf + w, n - (size_t)w, ", B %s",
                 (j->variant & 2) && !glibc_mode ? "without a heap" : "with a heap");
        break;
    case K_DF_REMOTE2:
        snprintf(buf + w, n - (size_t)w, ", second free by %s", j->variant & 1 ? "B" : "C");
        break;
    case K_DF_EXITED:
        snprintf(buf + w, n - (size_t)w, ", first free by %s",
                 j->variant & 1 ? "A (owner)" : "M (remote)");
        break;
    case K_DF_TRIM:
    case K_DF_PURGE:
        snprintf(buf + w, n - (size_t)w, ", first free by %s",
                 j->variant & 1 ? "B (remote)" : "M (owner)");
        break;
    case K_DF_RACE:
        snprintf(buf + w, n - (size_t)w, ", %s",
                 j->variant & 2 ? "B and C (remote)" : "M (owner) and B");
        break;
    case K_FREE_INTERIOR:
    case K_REALLOC_INTERIOR:
    case K_USABLE_INTERIOR:
        snprintf(buf + w, n - (size_t)w, ", P+%zu", j->off);
        break;
    default:
        break;
    }
}

/* ---- the child's helper threads: created before any misuse, then told what to do ---- */
enum { CMD_NONE, CMD_FREE_REC, CMD_MISFREE, CMD_RACE, CMD_ALLOC_SET, CMD_EXIT };
typedef struct {
    pthread_t t;
    ws_t ws;
    _Atomic int cmd;
    _Atomic int armed;
    uint32_t rec;
    void *ptr;
    int warm;
    const inj_t *j;
} helper_t;
static _Atomic int race_go;
static uint32_t setup_p, setup_nb[256];
static int setup_nnb;

static void set_phase(int ph)
{
    atomic_store(&shm->phase, ph);
}

/* The second free of P is no misuse when P is live again (the child's own allocations took
 * its address): the case does not apply, the child says so and ends. */
static void not_if_live(void *P)
{
    if (orc_holds((uintptr_t)P)) {
        set_phase(PH_NA);
        _exit(0);
    }
}

/* The misuse itself: P freed, between the phases the parent reads. */
static void misuse_free(void *P)
{
    set_phase(PH_MISUSE);
    free(P);
    set_phase(PH_RETURNED);
}

/* P freed again, unless it is live again (not_if_live). */
static void free_again(void *P)
{
    not_if_live(P);
    misuse_free(P);
}

static uint32_t alloc_block(ws_t *w, const inj_t *j);

static void *helper_main(void *arg)
{
    helper_t *h = arg;
    if (h->warm)
        t_free(&h->ws, t_alloc(&h->ws, 48, HOW_MALLOC, 16)); /* a heap of its own */
    for (;;) {
        int c;
        while ((c = atomic_load(&h->cmd)) == CMD_NONE)
            sched_yield();
        switch (c) {
        case CMD_FREE_REC:
            t_free(&h->ws, h->rec);
            break;
        case CMD_MISFREE:
            set_phase(PH_MISUSE);
            free(h->ptr);
            set_phase(PH_RETURNED);
            break;
        case CMD_RACE:
            atomic_store(&h->armed, 1);
            while (!atomic_load(&race_go))
                ;
            free(h->ptr);
            break;
        case CMD_ALLOC_SET: /* owner-exited: this thread allocates P and the neighbours */
            setup_p = alloc_block(&h->ws, h->j);
            for (int i = 0; i < setup_nnb; i++)
                setup_nb[i] = alloc_block(&h->ws, h->j);
            break;
        case CMD_EXIT:
            return NULL;
        }
        atomic_store(&h->cmd, CMD_NONE);
    }
}
static void helper_start(helper_t *h, int warm, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    ws_init(&h->ws, seed);
    h->warm = warm;
    if (pthread_create(&h->t, NULL, helper_main, h))
        oracle_fail("pthread_create failed");
}
static void helper_do(helper_t *h, int cmd)
{
    atomic_store(&h->cmd, cmd);
    while (atomic_load(&h->cmd) != CMD_NONE)
        sched_yield();
}
static void helper_stop(helper_t *h)
{
    atomic_store(&h->cmd, CMD_EXIT);
    pthread_join(h->t, NULL);
    ws_release(&h->ws);
}

static uint32_t alloc_block(ws_t *w, const inj_t *j)
{
    switch (j->block) {
    case B_ALIGNED:
        return t_alloc(w, j->size, HOW_MEMALIGN, j->align);
    case B_SMALL:
        return t_alloc(w, j->size, below(&w->rng, 4) ? HOW_MALLOC : HOW_CALLOC, 16);
    default:
        return t_alloc(w, j->size, HOW_MALLOC, 16);
    }
}

/* ---- the child ---- */
static char global_buf[8192] __attribute__((aligned(64)));

static void *child_worker(void *arg)
{
    ws_t *w = arg;
    for (int i = 0; i < 200; i++)
        step(w);
    ws_leave(w);
    return NULL;
}

static unsigned drain_count(const inj_t *j)
{
    if (j->block == B_SMALL || j->block == B_ALIGNED) {
        size_t s = j->size < 16 ? 16 : j->size;
        unsigned d = (unsigned)(2 * 65536 / s + 16);
        return d > 1200 ? 1200 : d;
    }
    return j->block == B_EXTENT ? 6 : j->block == B_LARGE ? 3 : 2;
}

/* allocates a drain's blocks of the misused size: a block listed twice comes out twice */
static void drain(ws_t *w, const inj_t *j)
{
    if (j->block > B_HUGE)
        return;
    unsigned d = drain_count(j);
    for (unsigned i = 0; i < d && w->nown < OWN_MAX - 1; i++)
        own_push(w, alloc_block(w, j));
}

static uintptr_t misused_p;   /* P */
static size_t misused_usable; /* malloc_usable_size(P) while it was live */

/* A double free that slipped through leaves its page's count of blocks in use one short:
 * the page is retired (and purged) when its last block but one is freed. So: every block
 * of P's usable size is freed but R, the one nearest to P; malloc_trim(0) purges what is
 * free; R must still hold its pattern, and the drain that follows must not hand it out. */
static void isolate(ws_t *w)
{
    uint32_t keep = UINT32_MAX;
    uintptr_t best = UINTPTR_MAX;
    for (uint32_t k = 0; k < w->nown; k++) {
        rec_t *r = &recs[w->own[k]];
        if (r->pinned || malloc_usable_size((void *)r->p) != misused_usable)
            continue;
        uintptr_t d = r->p > misused_p ? r->p - misused_p : misused_p - r->p;
        if (d < best) {
            best = d;
            keep = w->own[k];
        }
    }
    for (uint32_t k = 0; k < w->nown;) {
        uint32_t ri = w->own[k];
        if (ri != keep && !recs[ri].pinned &&
            malloc_usable_size((void *)recs[ri].p) == misused_usable)
            t_free(w, own_take(w, k));
        else
            k++;
    }
    malloc_trim(0);
    if (keep != UINT32_MAX)
        rec_check(keep, "(the block nearest to P, its page-mates freed, then malloc_trim(0))");
}

static void post_misuse(ws_t *w, const inj_t *j)
{
    if (j->block <= B_HUGE)
        isolate(w);
    drain(w, j);
    /* the neighbours go, but a few: a page retired while they live is found */
    int keep = 1 + (int)below(&w->rng, 3);
    for (int i = keep; i < setup_nnb; i++) {
        for (uint32_t k = 0; k < w->nown; k++)
            if (w->own[k] == setup_nb[i]) {
                t_free(w, own_take(w, k));
                break;
            }
    }
    /* and the drained blocks (the last ones in own, mostly) */
    unsigned d = j->block <= B_HUGE ? drain_count(j) : 0;
    for (unsigned i = 0; i < d && w->nown > 0; i++)
        t_free(w, own_take(w, w->nown - 1));
    drain(w, j);
    own_check_all(w, "after the misuse");
    /* random traffic in this thread and two new ones */
    static ws_t cw[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        ws_init(&cw[i], rnd(&w->rng));
        if (pthread_create(&t[i], NULL, child_worker, &cw[i]))
            oracle_fail("pthread_create failed");
    }
    for (int i = 0; i < 200; i++)
        step(w);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    malloc_trim(0);
    own_check_all(w, "after malloc_trim(0)");
    exch_check_all();
    drain(w, j);
    own_check_all(w, "at the end");
    exch_check_all();
}

/* The child of an injection: takes over the live blocks, sets up, misuses, goes on. */
static void *child_body(void *arg)
{
    const inj_t *j = arg;
    static ws_t m;
    char stack_buf[8192] __attribute__((aligned(64)));
    ws_init(&m, j->seed);
    /* every block written whole before the fork is this thread's now */
    pthread_mutex_lock(&orc_lock);
    for (uint32_t i = 0; i < niv; i++)
        if (recs[ivs[i].rec].stable && !recs[ivs[i].rec].pinned && m.nown < OWN_MAX / 2)
            m.own[m.nown++] = ivs[i].rec;
    pthread_mutex_unlock(&orc_lock);
    nexch = 0;
    own_check_all(&m, "inherited at the fork");

    helper_t hb, hc;
    int use_b = 0, use_c = 0;
    int warm_b = 1;
    switch (j->kind) {
    case K_DF_REMOTE_OWNER:
    case K_DF_OWNER_REMOTE:
    case K_DF_REMOTE2:
    case K_DF_EXITED:
    case K_DF_RACE:
        use_b = 1;
        break;
    case K_DF_TRIM:
    case K_DF_PURGE:
        use_b = j->variant & 1;
        break;
    default:
        break;
    }
    if (j->kind == K_DF_REMOTE2 && !(j->variant & 1))
        use_c = 1;
    if (j->kind == K_DF_RACE && (j->variant & 2))
        use_c = 1;
    if (j->kind == K_DF_OWNER_REMOTE && (j->variant & 2) && !glibc_mode)
        warm_b = 0; /* the misuse is B's first call (glibc would carve its tcache then) */
    if (use_b)
        helper_start(&hb, warm_b, rnd(&m.rng));
    if (use_c)
        helper_start(&hc, 1, rnd(&m.rng));
    if (!glibc_mode) {
        /* thpalloc's purger thread first, in every child (the fork left none): its creation
         * allocates (glibc's dtv, about 300 bytes), and started at the end of the first
         * free of P it could take P's address, so that the second free would free it */
        char *big = malloc(24 * MiB);
        free(big);
        t_free(&m, t_alloc(&m, 64, HOW_MALLOC, 16)); /* a safe point: the purger starts */
        for (int i = 0; i < 50 && !purger_running(); i++)
            usleep(2000);
        if (j->kind == K_DF_PURGE)
            snprintf(shm->note, sizeof shm->note, "purger thread %s",
                     purger_running() ? "running" : "NOT running");
    }

    /* the class's pages as a busy program has them: carved, then freed */
    if (j->block <= B_HUGE && j->warm) {
        static uint32_t wb[400];
        int nw = j->block >= B_LARGE ? 2 : j->warm;
        for (int i = 0; i < nw; i++)
            wb[i] = alloc_block(&m, j);
        for (int i = 0; i < nw; i++)
            t_free(&m, wb[i]);
    }
    /* P and its neighbours */
    void *foreign = NULL;
    uint32_t pr = UINT32_MAX;
    setup_nnb = j->nb;
    if (j->block <= B_HUGE) {
        if (j->kind == K_DF_EXITED) {
            hb.j = j;
            helper_do(&hb, CMD_ALLOC_SET);
            pr = setup_p;
        } else {
            pr = alloc_block(&m, j);
            for (int i = 0; i < setup_nnb; i++)
                setup_nb[i] = alloc_block(&m, j);
        }
        for (int i = 0; i < setup_nnb; i++)
            own_push(&m, setup_nb[i]);
    } else {
        unsigned char *base;
        if (j->block == B_STACK)
            base = (unsigned char *)stack_buf;
        else if (j->block == B_GLOBAL)
            base = (unsigned char *)global_buf;
        else {
            base = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (base == MAP_FAILED)
                oracle_fail("mmap failed");
            base += 4096 - 64;
        }
        memset(base, 0, 64 + 4096);
        foreign = base + 64;
        uint32_t fr = orc_add(base, 64 + 4096, 1, "foreign memory");
        recs[fr].pinned = 1;
    }
    void *P = pr != UINT32_MAX ? (void *)recs[pr].p : foreign;
    misused_p = (uintptr_t)P;
    misused_usable = pr != UINT32_MAX ? malloc_usable_size(P) : 0;
    void *X = NULL;
    void *got = NULL;
    int got_used = 0;
    size_t usable = 0;

    switch (j->kind) {
    case K_NONE:
        own_push(&m, pr);
        set_phase(PH_MISUSE);
        set_phase(PH_RETURNED);
        break;
    case K_DF_NOW:
        t_free(&m, pr);
        misuse_free(P);
        break;
    case K_DF_ABA: {
        uint32_t xr = alloc_block(&m, j);
        X = (void *)recs[xr].p;
        t_free(&m, pr);
        t_free(&m, xr);
        misuse_free(P);
        break;
    }
    case K_DF_LATER:
        t_free(&m, pr);
        m.avoid_lo = j->size / 2;
        m.avoid_hi = j->size * 2;
        for (unsigned i = 0; i < j->dist; i++)
            step(&m);
        m.avoid_lo = m.avoid_hi = 0;
        free_again(P);
        break;
    case K_DF_REMOTE_OWNER:
        hb.rec = pr;
        helper_do(&hb, CMD_FREE_REC);
        if (!(j->variant & 1)) {
            helper_stop(&hb);
            use_b = 0;
        }
        misuse_free(P);
        break;
    case K_DF_OWNER_REMOTE:
        t_free(&m, pr);
        hb.ptr = P;
        helper_do(&hb, CMD_MISFREE);
        break;
    case K_DF_REMOTE2:
        hb.rec = pr;
        helper_do(&hb, CMD_FREE_REC);
        if (use_c) {
            hc.ptr = P;
            helper_do(&hc, CMD_MISFREE);
        } else {
            hb.ptr = P;
            helper_do(&hb, CMD_MISFREE);
        }
        break;
    case K_DF_EXITED:
        if (j->variant & 1) {
            hb.rec = pr;
            helper_do(&hb, CMD_FREE_REC);
        } else {
            t_free(&m, pr);
        }
        helper_stop(&hb);
        use_b = 0;
        misuse_free(P);
        break;
    case K_DF_TRIM:
    case K_DF_PURGE:
        if (use_b) {
            hb.rec = pr;
            helper_do(&hb, CMD_FREE_REC);
        } else {
            t_free(&m, pr);
        }
        if (j->kind == K_DF_TRIM)
            malloc_trim(0);
        else
            usleep((useconds_t)opt_purge_wait * 1000);
        free_again(P);
        break;
    case K_DF_RACE: {
        rec_check(pr, "before its free");
        orc_remove(pr); /* both frees below: one is the misuse */
        hb.ptr = P;
        atomic_store(&hb.cmd, CMD_RACE);
        if (use_c) {
            hc.ptr = P;
            atomic_store(&hc.cmd, CMD_RACE);
        }
        while (!atomic_load(&hb.armed) || (use_c && !atomic_load(&hc.armed)))
            sched_yield();
        set_phase(PH_MISUSE);
        atomic_store(&race_go, 1);
        if (!use_c)
            free(P);
        while (atomic_load(&hb.cmd) != CMD_NONE || (use_c && atomic_load(&hc.cmd) != CMD_NONE))
            sched_yield();
        set_phase(PH_RETURNED);
        break;
    }
    case K_FREE_INTERIOR:
        own_push(&m, pr);
        set_phase(PH_MISUSE);
        free((char *)P + j->off);
        set_phase(PH_RETURNED);
        break;
    case K_REALLOC_INTERIOR:
        own_push(&m, pr);
        set_phase(PH_MISUSE);
        got = realloc((char *)P + j->off, j->size2);
        set_phase(PH_RETURNED);
        got_used = 1;
        break;
    case K_USABLE_INTERIOR:
        own_push(&m, pr);
        set_phase(PH_MISUSE);
        usable = malloc_usable_size((char *)P + j->off);
        set_phase(PH_RETURNED);
        snprintf(shm->note, sizeof shm->note, "malloc_usable_size returned %zu", usable);
        break;
    case K_REALLOC_FREED:
        t_free(&m, pr);
        not_if_live(P);
        set_phase(PH_MISUSE);
        got = realloc(P, j->size2);
        set_phase(PH_RETURNED);
        got_used = 1;
        break;
    case K_FREE_FOREIGN:
        set_phase(PH_MISUSE);
        free(foreign);
        set_phase(PH_RETURNED);
        break;
    case K_REALLOC_FOREIGN:
        set_phase(PH_MISUSE);
        got = realloc(foreign, j->size2);
        set_phase(PH_RETURNED);
        got_used = 1;
        break;
    }
    (void)X;
    if (got_used) {
        snprintf(shm->note, sizeof shm->note, "realloc returned %p", got);
        if (got) {
            /* whatever it holds, it must be memory of its own */
            uint32_t gr = orc_add(got, j->size2, 1, "the misused realloc");
            regions(got, recs[gr].id, j->size2, j->size2, fill_fn);
            orc_stable(gr);
            own_push(&m, gr);
        }
    }
    if (use_b)
        helper_stop(&hb);
    if (use_c)
        helper_stop(&hc);
    post_misuse(&m, j);
    set_phase(PH_DONE);
    _exit(0);
}

/* The child of an injection: the work in this thread (the one that forked: its heap holds
 * the parent's blocks) or in a new one. */
static void child_run(const inj_t *j)
{
    in_child = 1;
    if (!j->fresh) {
        child_body((void *)j);
        return;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, child_body, (void *)j))
        oracle_fail("pthread_create failed");
    pthread_join(t, NULL);
}

/* ---- the parent's side of an injection ---- */
enum { R_AT, R_LATER, R_HARMLESS, R_BROKEN, R_NA, NRES };
typedef struct {
    unsigned n[NRES], injected;
    char msg[120];
    char broken[400];
} tally_t;
static tally_t tally[NKINDS * NBLOCKS];
static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
static int memfd = -1;
static int opt_verbose, opt_report_only;
static const char *opt_known = "";

/* whether KIND/BLOCK is in the --known list ("kind/block", either part may be "*") */
static int known(int kind, int block)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", opt_known);
    for (char *save, *s = strtok_r(buf, ", ", &save); s; s = strtok_r(NULL, ", ", &save)) {
        char *slash = strchr(s, '/');
        if (!slash)
            continue;
        *slash = 0;
        if ((!strcmp(s, "*") || !strcmp(s, kind_name[kind])) &&
            (!strcmp(slash + 1, "*") || !strcmp(slash + 1, block_name[block])))
            return 1;
    }
    return 0;
}

/* the allocator's message on the child's stderr, or NULL */
static const char *find_message(char *err)
{
    static const char *const glibc_words[] = {"free(): ",
                                              "realloc(): ",
                                              "malloc(): ",
                                              "double free or corruption",
                                              "munmap_chunk(): ",
                                              "corrupted size",
                                              "corrupted double-linked",
                                              "malloc_consolidate(): ",
                                              "_int_malloc(): ",
                                              "_int_free(): ",
                                              "tcache_thread_shutdown(): ",
                                              "malloc_usable_size"};
    for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "thpalloc: ", 10) && strstr(line, "(): "))
            return line;
        /* glibc's malloc_printerr: "FUNCTION(): what" */
        size_t id = strspn(line, "abcdefghijklmnopqrstuvwxyz_");
        if (id && !strncmp(line + id, "(): ", 4))
            return line;
        for (size_t i = 0; i < sizeof glibc_words / sizeof glibc_words[0]; i++)
            if (strstr(line, glibc_words[i]))
                return line;
    }
    return NULL;
}

static void inject(uint64_t i)
{
    inj_t j = inj_params(i);
    char desc[200];
    inj_describe(&j, desc, sizeof desc);
    if (ftruncate(memfd, 0) < 0 || lseek(memfd, 0, SEEK_SET) < 0)
        oracle_fail("memfd: %s", strerror(errno));
    memset(shm, 0, sizeof *shm);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        oracle_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(memfd, 2);
        alarm(CHILD_ALARM);
        child_run(&j);
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    char err[4096];
    ssize_t got = pread(memfd, err, sizeof err - 1, 0);
    err[got > 0 ? got : 0] = 0;
    char err_copy[4096];
    memcpy(err_copy, err, sizeof err);
    const char *msg = find_message(err_copy);
    int phase = atomic_load(&shm->phase);
    int res;
    char why[600] = "";
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && msg && phase >= PH_MISUSE) {
        res = phase == PH_MISUSE ? R_AT : R_LATER;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && phase == PH_DONE) {
        res = R_HARMLESS;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && phase == PH_NA) {
        res = R_NA;
    } else {
        res = R_BROKEN;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
            snprintf(why, sizeof why, "oracle: %s", shm->why);
        else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            snprintf(why, sizeof why, "hung (%d s)", CHILD_ALARM);
        else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
            snprintf(why, sizeof why, "SIGABRT %s",
                     msg ? "before the misuse" : "without a message");
        else if (WIFSIGNALED(st))
            snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(st),
                     strsignal(WTERMSIG(st)));
        else
            snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
        char *nl = strchr(err, '\n');
        if (nl)
            *nl = 0;
        if (err[0])
            snprintf(why + strlen(why), sizeof why - strlen(why), "; stderr: %.150s", err);
        snprintf(why + strlen(why), sizeof why - strlen(why), " (phase %d)", phase);
    }
    int ci = j.kind * NBLOCKS + j.block;
    tally_t *t = &tally[ci];
    t->n[res]++;
    if (res != R_NA)
        t->injected++;
    if ((res == R_AT || res == R_LATER) && !t->msg[0])
        snprintf(t->msg, sizeof t->msg, "%s", msg);
    if (res == R_BROKEN && !t->broken[0])
        snprintf(t->broken, sizeof t->broken, "%s: %s", desc, why);
    static const char *const res_name[] = {"caught at the call", "caught later", "harmless",
                                           "BROKEN", "n/a"};
    if (res == R_BROKEN || opt_verbose || (res == R_LATER && !glibc_mode) ||
        (res == R_HARMLESS && !glibc_mode && j.kind != K_NONE)) {
        char line[1200];
        int n = snprintf(line, sizeof line, "# %s %s: %s%s%s%s%s [--seed %llu --only %llu]\n",
                         res_name[res], desc, why, res == R_AT || res == R_LATER ? msg : "",
                         shm->note[0] ? " (" : "", shm->note, shm->note[0] ? ")" : "",
                         (unsigned long long)opt_seed, (unsigned long long)j.index);
        fflush(stdout);
        if (write(1, line, (size_t)n) < 0)
            _exit(1);
    }
}

/* ---- the parent's workers ---- */
static _Atomic uint64_t global_steps, next_inject_at, inject_next;
static uint64_t opt_steps = 20000, inject_total, inject_spacing;
static int opt_only = -1;
static double deadline;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int want_more_injections(void)
{
    if (opt_only >= 0)
        return atomic_load(&inject_next) == 0;
    if (deadline > 0)
        return now_s() < deadline;
    return atomic_load(&inject_next) < inject_total;
}

static void maybe_inject(void)
{
    uint64_t g = atomic_fetch_add(&global_steps, 1);
    if (g < atomic_load(&next_inject_at) || !want_more_injections())
        return;
    if (pthread_mutex_trylock(&inject_lock))
        return;
    if (g >= atomic_load(&next_inject_at) && want_more_injections()) {
        uint64_t i = atomic_fetch_add(&inject_next, 1);
        atomic_store(&next_inject_at, g + inject_spacing);
        inject(opt_only >= 0 ? (uint64_t)opt_only : i);
    }
    pthread_mutex_unlock(&inject_lock);
}

static int workload_done(void)
{
    if (deadline > 0)
        return now_s() >= deadline;
    return atomic_load(&global_steps) >= opt_steps;
}

static void *worker_main(void *arg)
{
    ws_t *w = arg;
    uint64_t seg = 300 + below(&w->rng, 2700);
    for (uint64_t s = 0; s < seg && !workload_done(); s++) {
        step(w);
        maybe_inject();
    }
    ws_leave(w);
    return NULL;
}

/* fork: no thread holds the oracle's or the exchange's lock in the child */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&orc_lock);
    pthread_mutex_lock(&exch_lock);
}
static void atfork_release(void)
{
    pthread_mutex_unlock(&exch_lock);
    pthread_mutex_unlock(&orc_lock);
}

static int set_filter(const char *list, const char *const *names, int n, char *on)
{
    memset(on, 0, (size_t)n);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        int k;
        for (k = 0; k < n && strcmp(s, names[k]); k++)
            ;
        if (k == n) {
            fprintf(stderr, "misuse-fuzz: unknown name '%s'\n", s);
            return -1;
        }
        on[k] = 1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(
        f, "Usage: misuse-fuzz [--seed S] [--steps N] [--threads T] [--rounds R] [--seconds SECS]\n"
           "                   [--only I] [--kinds K,...] [--blocks B,...] [--purge-wait MS]\n"
           "                   [--allocator thpalloc|glibc] [--report-only] [--known PAIRS]\n"
           "                   [--verbose]\n");
}

int main(int argc, char **argv)
{
    int threads = 4, rounds = 1;
    double seconds = 0;
    char kinds_on[NKINDS], blocks_on[NBLOCKS];
    memset(kinds_on, 1, sizeof kinds_on);
    memset(blocks_on, 1, sizeof blocks_on);
    int have_seed = 0;
    const char *alloc_name = NULL;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "--verbose")) {
            opt_verbose = 1;
            continue;
        }
        if (!strcmp(o, "--report-only")) {
            opt_report_only = 1;
            continue;
        }
        if (!strcmp(o, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v || strncmp(o, "--", 2)) {
            fprintf(stderr, "misuse-fuzz: %s '%s'\n",
                    v ? "unrecognized option" : "option needs a value", o);
            usage(stderr);
            return 2;
        }
        a++;
        if (!strcmp(o, "--seed")) {
            opt_seed = strtoull(v, NULL, 0);
            have_seed = 1;
        } else if (!strcmp(o, "--steps"))
            opt_steps = strtoull(v, NULL, 0);
        else if (!strcmp(o, "--threads"))
            threads = atoi(v);
        else if (!strcmp(o, "--rounds"))
            rounds = atoi(v);
        else if (!strcmp(o, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(o, "--only"))
            opt_only = atoi(v);
        else if (!strcmp(o, "--purge-wait"))
            opt_purge_wait = atoi(v);
        else if (!strcmp(o, "--allocator"))
            alloc_name = v;
        else if (!strcmp(o, "--known"))
            opt_known = v;
        else if (!strcmp(o, "--kinds")) {
            if (set_filter(v, kind_name, NKINDS, kinds_on))
                return 2;
        } else if (!strcmp(o, "--blocks")) {
            if (set_filter(v, block_name, NBLOCKS, blocks_on))
                return 2;
        } else {
            fprintf(stderr, "misuse-fuzz: unrecognized option '%s'\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (threads < 0 || threads > MAXWORKERS || rounds < 1) {
        usage(stderr);
        return 2;
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        opt_seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) %
                   1000000000;
    }
    if (alloc_name)
        glibc_mode = !strcmp(alloc_name, "glibc");
    else
        glibc_mode = !dlsym(RTLD_DEFAULT, "thpalloc_active");
    if (glibc_mode)
        opt_report_only = 1;
    for (int k = 0; k < NKINDS; k++)
        for (int b = 0; b < NBLOCKS; b++) {
            int foreign_kind = k == K_FREE_FOREIGN || k == K_REALLOC_FOREIGN;
            int foreign_block = b >= B_STACK;
            if (kinds_on[k] && blocks_on[b] && foreign_kind == foreign_block)
                combos[ncombos++] = (combo_t){k, b};
        }
    if (!ncombos) {
        fprintf(stderr, "misuse-fuzz: no kind of misuse left to inject\n");
        return 2;
    }

    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        return 99;
    }
    memfd = memfd_create("misuse-fuzz-stderr", 0);
    if (memfd < 0) {
        perror("memfd_create");
        return 99;
    }
    recs = oracle_map(MAXREC * sizeof *recs);
    rec_free = oracle_map(MAXREC * sizeof *rec_free);
    ivs = oracle_map((MAXREC + 1) * sizeof *ivs);
    for (uint32_t i = 0; i < MAXREC; i++)
        rec_free[nrec_free++] = MAXREC - 1 - i;
    /* no core file for each child that aborts */
    setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
    free(malloc(1)); /* the allocator's fork handlers first: ours run before them */
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);

    inject_total = opt_only >= 0 ? 1 : (uint64_t)rounds * (uint64_t)ncombos;
    if (seconds > 0) {
        deadline = now_s() + seconds;
        inject_spacing = 200;
    } else {
        inject_spacing = opt_steps / (inject_total + 1);
        if (!inject_spacing)
            inject_spacing = 1;
    }
    atomic_store(&next_inject_at, inject_spacing);
    char secs_opt[40] = "";
    if (seconds > 0)
        snprintf(secs_opt, sizeof secs_opt, " --seconds %g", seconds);
    printf("# misuse-fuzz --seed %llu --steps %llu --threads %d --rounds %d%s (%s; %d kinds x "
           "blocks)\n",
           (unsigned long long)opt_seed, (unsigned long long)opt_steps, threads, rounds, secs_opt,
           glibc_mode ? "glibc's malloc" : "thpalloc", ncombos);
    fflush(stdout);

    double t0 = now_s();
    ws_t *ws = oracle_map(MAXWORKERS * sizeof *ws);
    pthread_t tid[MAXWORKERS];
    int alive[MAXWORKERS] = {0};
    uint64_t spawned = 0;
    for (;;) {
        int running = 0;
        for (int i = 0; i < threads; i++) {
            if (alive[i]) {
                /* joined below when done; a finished thread is replaced */
                running++;
                continue;
            }
            if (workload_done())
                continue;
            ws_init(&ws[i], mix64(opt_seed ^ (++spawned * 0x632be59bd9b4e019ULL)));
            if (pthread_create(&tid[i], NULL, worker_main, &ws[i]))
                oracle_fail("pthread_create failed");
            alive[i] = 1;
            running++;
        }
        if (!running)
            break;
        for (int i = 0; i < threads; i++)
            if (alive[i] && pthread_tryjoin_np(tid[i], NULL) == 0) {
                ws_release(&ws[i]);
                alive[i] = 0;
            }
        usleep(2000);
    }
    /* injections the workers had no steps left for: from this thread, without traffic */
    while (want_more_injections() && (deadline == 0 || now_s() < deadline)) {
        uint64_t i = atomic_fetch_add(&inject_next, 1);
        inject(opt_only >= 0 ? (uint64_t)opt_only : i);
    }
    /* the exchange's blocks: checked and freed */
    for (uint32_t i = 0; i < nexch; i++)
        t_free(NULL, exch[i]);
    nexch = 0;
    double secs = now_s() - t0;

    printf("# %llu steps, %llu worker threads, %llu injections in %.1f s\n",
           (unsigned long long)atomic_load(&global_steps), (unsigned long long)spawned,
           (unsigned long long)(opt_only >= 0 ? 1 : atomic_load(&inject_next)), secs);
    printf("# %-36s %5s %7s %5s %8s %6s %4s  %s\n", "misuse/block", "inj", "at-call", "later",
           "harmless", "BROKEN", "n/a", "first message");
    unsigned sum[NRES] = {0}, suminj = 0;
    for (int c = 0; c < ncombos; c++) {
        int ci = combos[c].kind * NBLOCKS + combos[c].block;
        tally_t *t = &tally[ci];
        char name[64];
        snprintf(name, sizeof name, "%s/%s", kind_name[combos[c].kind],
                 block_name[combos[c].block]);
        printf("# %-36s %5u %7u %5u %8u %6u %4u  %s\n", name, t->injected, t->n[R_AT],
               t->n[R_LATER], t->n[R_HARMLESS], t->n[R_BROKEN], t->n[R_NA], t->msg);
        for (int r = 0; r < NRES; r++)
            sum[r] += t->n[r];
        suminj += t->injected;
    }
    printf("# %-36s %5u %7u %5u %8u %6u %4u\n", "total", suminj, sum[R_AT], sum[R_LATER],
           sum[R_HARMLESS], sum[R_BROKEN], sum[R_NA]);
    fflush(stdout);
    for (int c = 0; c < ncombos; c++) {
        int ci = combos[c].kind * NBLOCKS + combos[c].block;
        tally_t *t = &tally[ci];
        int k = combos[c].kind;
        unsigned tried = t->injected + t->n[R_NA];
        if (!tried)
            continue;
        if (k == K_NONE) {
            report(t->n[R_HARMLESS] == t->injected,
                   "control %s/%s: %u children without misuse, all harmless%s%s", kind_name[k],
                   block_name[combos[c].block], t->injected, t->broken[0] ? " -- " : "", t->broken);
        } else if (opt_report_only) {
            if (t->n[R_BROKEN])
                printf("# %s BROKEN %s/%s: %s\n", glibc_mode ? "glibc" : "report only",
                       kind_name[k], block_name[combos[c].block], t->broken);
        } else if (t->n[R_BROKEN] && known(k, combos[c].block)) {
            for (char *h = strchr(t->broken, '#'); h; h = strchr(h, '#'))
                *h = ' '; /* no TAP directive but ours */
            printf("ok - %s/%s: %u injected, %u BROKEN # SKIP known (--known), not fixed yet: %s\n",
                   kind_name[k], block_name[combos[c].block], t->injected, t->n[R_BROKEN],
                   t->broken);
        } else {
            report(
                !t->n[R_BROKEN],
                "%s/%s: %u injected, %u broken (%u caught at the call, %u later, %u harmless)%s%s",
                kind_name[k], block_name[combos[c].block], t->injected, t->n[R_BROKEN], t->n[R_AT],
                t->n[R_LATER], t->n[R_HARMLESS], t->broken[0] ? " -- first: " : "", t->broken);
        }
    }
    report(1, "parent oracle: %llu steps in %llu threads, every block intact, no overlap",
           (unsigned long long)atomic_load(&global_steps), (unsigned long long)spawned);
    puts("end");
    return report_failures ? 1 : 0;
}
