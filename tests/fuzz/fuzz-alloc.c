/* fuzz-alloc: libFuzzer harness for the allocator API, driven by a byte stream.
 *
 * The allocator under test is thpalloc itself: tests/build-fuzz.sh builds the lib/ sources into a
 * private libthpalloc.so.1 with -fsanitize=fuzzer-no-link,undefined (coverage of the
 * allocator guides the fuzzer; UBSan checks it) and links this harness against it with
 * -fsanitize=fuzzer,undefined and no ASan (ASan would replace malloc). Every malloc of
 * the process, libFuzzer's own included, is thpalloc's; the harness insists on
 * thpalloc_active() == 1 before the first input.
 *
 * The input is a sequence of operations on 64 slots, each one byte of opcode, one byte
 * of slot, and three bytes that make a size (16 B .. 16 MiB, log-distributed) or an
 * alignment. Operations: malloc, calloc, realloc (grow, shrink, to 0), free,
 * posix_memalign (valid and invalid alignments), aligned_alloc, memalign, valloc,
 * pvalloc, reallocarray (also overflowing), malloc_usable_size, a free from another
 * thread (a helper thread, synchronous), thpalloc_purge / malloc_trim, absurd sizes.
 * Checked after every step (abort on failure): a block is non-NULL for a size the
 * machine can give, aligned as asked (16 at least), malloc_usable_size >= the size asked,
 * thpalloc_owns() says it is ours, it overlaps no other live block, its contents survive
 * until it is freed (pattern checked before free and across realloc), calloc memory is
 * zero; invalid requests give NULL/EINVAL or NULL/ENOMEM as glibc does; at the end of an
 * input without remote frees, after freeing everything, in_use is not above its value at
 * the start (a block freed by another thread stays counted in in_use until its owner
 * collects the page's remote free list: inputs with remote frees are not held to it, and
 * in_use may drop below the start when an earlier input's remote frees are collected).
 * Build the harness with -fno-builtin: clang otherwise folds malloc(SIZE_MAX - k) to NULL
 * without calling it (and without setting errno). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thpalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define NSLOTS 64
#define MAXLIVE ((size_t)512 << 20)

struct slot {
    unsigned char *p;
    size_t n; /* size asked */
    uint8_t seed;
};
static struct slot slots[NSLOTS];
static size_t live_bytes;

static void fail(const char *what, const void *p, size_t n)
{
    fprintf(stderr, "fuzz-alloc: %s (%p, %zu)\n", what, p, n);
    abort();
}

/* pattern: every byte of small blocks; of big ones the first 256 bytes, every 4093rd
 * byte and the last 256 bytes of the size they were filled at (nfill). intact() checks the
 * first len bytes of those positions, so a realloc'd block is checked over what it keeps. */
#define MARK(p, i, seed) ((p)[i] = (unsigned char)((seed) + (i)*7))
#define MARKED(p, i, seed) ((p)[i] == (unsigned char)((seed) + (i)*7))
static void fill(unsigned char *p, size_t n, uint8_t seed)
{
    size_t i;
    for (i = 0; i < n && i < 256; i++)
        MARK(p, i, seed);
    for (i = 4093; i < n; i += 4093)
        MARK(p, i, seed);
    for (i = n > 256 ? n - 256 : 0; i < n; i++)
        MARK(p, i, seed);
}
static int intact_part(const unsigned char *p, size_t len, size_t nfill, uint8_t seed)
{
    size_t i;
    for (i = 0; i < len && i < 256; i++)
        if (!MARKED(p, i, seed))
            return 0;
    for (i = 4093; i < len; i += 4093)
        if (!MARKED(p, i, seed))
            return 0;
    for (i = nfill > 256 ? nfill - 256 : 0; i < len; i++)
        if (!MARKED(p, i, seed))
            return 0;
    return 1;
}
static int intact(const unsigned char *p, size_t n, uint8_t seed)
{
    return intact_part(p, n, n, seed);
}
static int zeroed(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void check_new(int s, unsigned char *p, size_t n, size_t align)
{
    if ((uintptr_t)p % (align < 16 ? 16 : align))
        fail("misaligned block", p, align);
    size_t us = malloc_usable_size(p);
    if (us < n)
        fail("malloc_usable_size below the size asked", p, us);
    if (!thpalloc_owns(p))
        fail("thpalloc_owns() denies a block it handed out", p, n);
    for (int k = 0; k < NSLOTS; k++) {
        if (k == s || !slots[k].p)
            continue;
        unsigned char *q = slots[k].p;
        size_t qn = malloc_usable_size(q);
        if (p < q + qn && q < p + us)
            fail("blocks overlap", p, (size_t)k);
    }
}

static void drop(int s)
{
    if (!slots[s].p)
        return;
    if (!intact(slots[s].p, slots[s].n, slots[s].seed))
        fail("block contents changed while it was live", slots[s].p, slots[s].n);
    free(slots[s].p);
    live_bytes -= slots[s].n;
    slots[s].p = NULL;
}

static void put(int s, void *p, size_t n, size_t align, uint8_t seed, int is_zero)
{
    if (!p)
        fail("allocation failed for a reasonable size", NULL, n);
    check_new(s, p, n, align);
    if (is_zero && !zeroed(p, n))
        fail("calloc memory not zero", p, n);
    slots[s].p = p;
    slots[s].n = n;
    slots[s].seed = seed;
    live_bytes += n;
    fill(p, n, seed);
}

static size_t decode_size(const uint8_t *b)
{
    /* mostly up to 16 KiB; one in five up to 16 MiB */
    unsigned shift = b[0] >= 205 ? b[0] % 25 : b[0] % 15;
    size_t v = ((size_t)b[1] << 8 | b[2]);
    size_t n = ((size_t)1 << shift) + (v & (((size_t)1 << shift) - 1));
    return n;
}

/* ---- a helper thread that frees what it is given (remote frees) ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void *handoff;
static int pending;

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!pending)
            pthread_cond_wait(&cv, &mu);
        free(handoff);
        pending = 0;
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

static void remote_free(void *p)
{
    pthread_mutex_lock(&mu);
    handoff = p;
    pending = 1;
    pthread_cond_broadcast(&cv);
    while (pending)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (thpalloc_active() != 1) {
        fprintf(stderr, "fuzz-alloc: thpalloc is not the malloc in charge\n");
        abort();
    }
    pthread_t t;
    if (pthread_create(&t, NULL, helper, NULL) != 0)
        abort();
    pthread_detach(t);
    /* one round trip: whatever the new thread allocates as it starts (glibc's TLS) is
     * done before the first input measures in_use */
    remote_free(malloc(16));
    /* and the same for thpalloc's purger thread, started the first time 32 MiB or more
     * wait for purging: pthread_create allocates its TLS through malloc */
    void *big[6];
    for (int i = 0; i < 6; i++)
        big[i] = malloc((size_t)8 << 20);
    for (int i = 0; i < 6; i++)
        free(big[i]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct thpalloc_stats st0, st1;
    int remote = 0;
    thpalloc_get_stats(&st0, sizeof st0);
    for (size_t at = 0; at + 5 <= size; at += 5) {
        const uint8_t *b = data + at;
        int s = b[1] % NSLOTS;
        size_t n = decode_size(b + 2);
        uint8_t seed = (uint8_t)(b[1] ^ b[3] ^ at);
        void *p = NULL;
        int rc;
        if (live_bytes + n > MAXLIVE && b[0] % 16 != 3)
            continue;
        switch (b[0] % 16) {
        case 0:
            drop(s);
            put(s, malloc(n), n, 16, seed, 0);
            break;
        case 1: {
            size_t m = 1 + b[2] % 8;
            drop(s);
            put(s, calloc(m, n / m), (n / m) * m, 16, seed, 1);
            break;
        }
        case 2: /* realloc: contents kept up to the smaller size */
            if (!slots[s].p) {
                put(s, realloc(NULL, n), n, 16, seed, 0);
                break;
            }
            if (!intact(slots[s].p, slots[s].n, slots[s].seed))
                fail("block changed before realloc", slots[s].p, slots[s].n);
            p = realloc(slots[s].p, n);
            if (!p)
                fail("realloc failed for a reasonable size", slots[s].p, n);
            {
                size_t keep = n < slots[s].n ? n : slots[s].n;
                if (!intact_part(p, keep, slots[s].n, slots[s].seed))
                    fail("realloc lost contents", p, keep);
                live_bytes -= slots[s].n;
                slots[s].p = NULL;
                put(s, p, n, 16, slots[s].seed, 0);
            }
            break;
        case 3:
            drop(s);
            break;
        case 4: { /* posix_memalign, sometimes with an invalid alignment */
            size_t al = (size_t)1 << (b[4] % 24);
            int invalid = b[4] >= 0xf0;
            if (invalid)
                al = b[4] % 3 == 0 ? 0 : al + 8 * (b[4] % 3); /* 0, not a power of 2 */
            if (al && al < sizeof(void *) && !invalid)
                al = sizeof(void *);
            drop(s);
            p = (void *)0x1;
            rc = posix_memalign(&p, al, n);
            if (invalid) {
                if (rc != EINVAL || p != (void *)0x1)
                    fail("posix_memalign accepted an invalid alignment", p, al);
                break;
            }
            if (rc)
                fail("posix_memalign failed", NULL, n);
            put(s, p, n, al, seed, 0);
            break;
        }
        case 5: {
            size_t al = (size_t)1 << (b[4] % 23);
            drop(s);
            put(s, aligned_alloc(al, n), n, al, seed, 0);
            break;
        }
        case 6: {
            size_t al = (size_t)1 << (b[4] % 23);
            drop(s);
            put(s, memalign(al, n), n, al, seed, 0);
            break;
        }
        case 7:
            drop(s);
            put(s, valloc(n), n, (size_t)sysconf(_SC_PAGESIZE), seed, 0);
            break;
        case 8:
            drop(s);
            put(s, pvalloc(n), n, (size_t)sysconf(_SC_PAGESIZE), seed, 0);
            break;
        case 9: { /* reallocarray, sometimes overflowing */
            size_t m = b[4] >= 0xf0 ? SIZE_MAX / 2 : 1 + b[4] % 4;
            if (m > 4) {
                errno = 0;
                p = reallocarray(slots[s].p, m, n + 2);
                if (p || errno != ENOMEM)
                    fail("reallocarray overflow not refused with ENOMEM", p, m);
                break;
            }
            if (slots[s].p && !intact(slots[s].p, slots[s].n, slots[s].seed))
                fail("block changed before reallocarray", slots[s].p, slots[s].n);
            p = reallocarray(slots[s].p, m, n / m + 1);
            if (!p)
                fail("reallocarray failed", slots[s].p, n);
            {
                size_t nn = m * (n / m + 1),
                       keep = slots[s].p ? (nn < slots[s].n ? nn : slots[s].n) : 0;
                uint8_t sd = slots[s].p ? slots[s].seed : seed;
                if (keep && !intact_part(p, keep, slots[s].n, sd))
                    fail("reallocarray lost contents", p, keep);
                if (slots[s].p)
                    live_bytes -= slots[s].n;
                slots[s].p = NULL;
                put(s, p, nn, 16, sd, 0);
            }
            break;
        }
        case 10:
            if (slots[s].p && malloc_usable_size(slots[s].p) < slots[s].n)
                fail("malloc_usable_size shrank", slots[s].p, slots[s].n);
            break;
        case 11: /* free from another thread */
            if (slots[s].p) {
                if (!intact(slots[s].p, slots[s].n, slots[s].seed))
                    fail("block changed before a remote free", slots[s].p, slots[s].n);
                remote_free(slots[s].p);
                remote = 1;
                live_bytes -= slots[s].n;
                slots[s].p = NULL;
            }
            break;
        case 12:
            if (b[4] & 1)
                thpalloc_purge();
            else
                malloc_trim(0);
            break;
        case 13: { /* absurd sizes: NULL + ENOMEM, nothing else changes */
            size_t big = SIZE_MAX - (size_t)b[2] * 4096;
            errno = 0;
            p = b[4] & 1 ? malloc(big) : calloc(big / 2 + 1, 2 + b[3] % 4);
            if (p || errno != ENOMEM)
                fail("absurd size not refused with ENOMEM", p, big);
            break;
        }
        case 14: /* realloc to 0 frees (glibc: returns NULL) */
            if (slots[s].p) {
                if (!intact(slots[s].p, slots[s].n, slots[s].seed))
                    fail("block changed before realloc(p, 0)", slots[s].p, slots[s].n);
                p = realloc(slots[s].p, 0);
                if (p)
                    fail("realloc(p, 0) returned a block", p, 0);
                live_bytes -= slots[s].n;
                slots[s].p = NULL;
            }
            break;
        default: /* malloc(0) and tiny sizes */
            drop(s);
            put(s, malloc(b[4] % 17), b[4] % 17, 16, seed, 0);
            break;
        }
    }
    for (int s = 0; s < NSLOTS; s++)
        drop(s);
    thpalloc_get_stats(&st1, sizeof st1);
    if (!remote && st1.in_use > st0.in_use) {
        fprintf(stderr, "fuzz-alloc: in_use %llu at the start, %llu after freeing all\n",
                (unsigned long long)st0.in_use, (unsigned long long)st1.in_use);
        abort();
    }
    return 0;
}
