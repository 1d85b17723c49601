/* misuse-cases: one heap misuse per run, for tests/misuse-cases.sh.
 *
 *   misuse-cases CASE
 *
 * CASE is one of
 *   small-double     free(p) twice, p = malloc(48), same thread
 *   extent-double    free(p) twice, p = malloc(100 KiB) (an extent: boundary tags)
 *   extent-cached-double  free(p) twice, p = malloc(20 KiB), after a second thread has
 *                    allocated (the first free keeps it in the thread's extent cache, which
 *                    a process that has only ever had one thread does without)
 *   extent-interior  free(p + 4096), p = malloc(100 KiB)
 *   extent-realloc-interior  realloc(p + 16, 200 KiB), p = malloc(100 KiB)
 *   large-double     free(p) twice, p = malloc(4 MiB) (a block with chunks of its own)
 *   huge-double      free(p) twice, p = malloc(40 MiB) (a mapping of its own, unmapped by the
 *                    first free: the second finds no chunk of ours and must not hand p to
 *                    glibc, which read its header there and died of SIGSEGV)
 *   small-interior   free(p + 16), p = malloc(256)
 *   large-interior   free(p + 4096), p = malloc(4 MiB)
 *   large-realloc    free(p), then realloc(p, 8 MiB), p = malloc(4 MiB)
 *   small-realloc-interior   realloc(p + 16, 256), p = malloc(256)
 *   large-realloc-interior   realloc(p + 4096, 8 MiB), p = malloc(4 MiB)
 *   usable-interior  malloc_usable_size(p + 16), p = malloc(256)
 *   extent-xthread-double  thread A frees p = malloc(16 KiB) (into its extent cache), then
 *                    the main thread frees p too while A lives; A and main then each
 *                    malloc(16 KiB)
 *   extent-xthread-double-exit  the same, then A exits (its cache goes back to the shared
 *                    runs) and main mallocs 16 KiB twice
 *   extent-race-double  two threads with heaps of their own free p = malloc(16 KiB) at the
 *                    same moment (a barrier), then, once both have, each mallocs 16 KiB
 *   extent-scribble-flush  in a thread: free(p), p = malloc(20 KiB), its first 64 bytes
 *                    overwritten (the key with them), free(p) again, then the thread exits
 *                    (its extent cache is flushed)
 *   small-realloc-freed  p = malloc(4000), malloc(16), free(p), realloc(p, 3992)
 *   extent-realloc-freed  the same at 20000 bytes (realloc(p, 19992)) after a second thread
 *                    has allocated (the free keeps p in the thread's extent cache)
 *   aligned-interior  memalign(64, 48) 8 times, p = malloc(100) (the same page), free(p + 40)
 *   aligned-realloc-interior  the same with realloc(p + 40, 500)
 *   aligned-usable-interior  the same with malloc_usable_size(p + 40)
 *   uaf-link         write after free: the first word of a freed 48-byte block is set to
 *                    the address of a global (its key left as it was), then malloc(48)
 *                    until the global comes back or 2000 calls
 *   overflow-link    the same through a 16-byte overflow of the block before it
 *   remote-link      the same for a block another thread freed (waiting on the page's list
 *                    of other threads' frees until the owner collects it)
 *   remote-link-mid  the owner frees one of its blocks of 48 bytes, another thread frees
 *                    the three carved after it (a, b, c: the page's list of remote frees
 *                    c -> b -> a), b's link is redirected as in
 *                    remote-link; then malloc(48) as there, printing "c handed out" and
 *                    "b handed out" when those come back: the owner takes the list as it
 *                    is when its free list is dry (no walk to its tail), so c and b are
 *                    handed out and the pop that follows b's link aborts
 *   partial-link     write after free of one byte: bit 4 of a freed 48-byte block's link
 *                    flipped (what an attacker can do without the secret), so that it leads
 *                    16 bytes off the start of the block freed before it; then malloc(48)
 *                    until that address comes back or 2000 calls
 *   full-remote-double  p = the 2049th of 4096 malloc(48) (its page full), freed by another
 *                    thread (on the page's list of remote frees), then free(p) by the owner
 *                    (the owner's free into its full page, heap_free_full)
 *   full-tail        p = 48 bytes past the last 48-byte block of a full 16 KiB page (in the
 *                    16 bytes past its 341 blocks), free(p): the owner's free into its full
 *                    page checks that p is a carved block's start (heap_free_full)
 *   remote-double    the same p freed twice by the other thread; then the owner mallocs 48
 *                    bytes until it collects the page's remote frees (up to 20000 calls)
 *   remote-race-double  two threads that do not own p = malloc(48) free it at the same
 *                    moment (misuse-race.sh: also with each stopped after its look at
 *                    the block, under gdb)
 *   large-race-double  the same with p = malloc(4 MiB)
 *   extent-big-race-double  the same with p = malloc(256 KiB) between two blocks in use
 *   mid-double       p, q = malloc(2000); free(p), free(q), free(p); then malloc(2000)
 *                    three times (a class above 1 KiB: the fast path pops by the class table)
 *   purge-cycle      a thread frees b, x, then b again (its free list b -> x -> b: a cycle,
 *                    which the fast free's look at the last free does not see), keeps its
 *                    other blocks and waits; the main thread calls thpalloc_purge(), which
 *                    reclaims the idle heap and walks the page's lists
 *   owner-double SIZE LIVE  free(p); free(x); free(p) in the owning thread, p and x two blocks
 *                    of SIZE bytes carved one after the other (one page), with the LIVE blocks
 *                    carved after them still in use and filled; then malloc(SIZE) until one
 *                    returns a live block or its contents changed (up to 4 pages' worth)
 *   remote-owner-double [trim|purger]  another thread frees p = malloc(48) (a block of the
 *                    main thread's page, 63 others live), then, directly, after malloc_trim(0)
 *                    or after the main thread idled 1 s (the purger reclaims its heap: run with
 *                    a short purge_delay), the owner frees p too; then as owner-double
 *   owner-remote-race  the owner and another thread free p = malloc(48) at the same moment
 *                    (misuse-race.sh: also with each stopped after its access to the key)
 *   ok               no misuse at all (the control: must exit 0)
 *
 * Before the misuse the program prints "ptr=0x%016lx" (the pointer handed to free/realloc,
 * in the format thpalloc's fatal message uses: 8 digits in a 32-bit process) on stdout and
 * flushes. A correct allocator stops the process in the misuse call. When the call
 * returns, the program looks for the silent corruption that undetected misuse causes (the
 * same block handed out twice) and says what it found on stdout, then exits 3. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

void race_armed(volatile uint64_t *key_word);

/* Hides a pointer's provenance from the compiler, so that it neither warns about nor
 * removes the deliberate misuse. */
static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void announce(const void *p)
{
    printf("ptr=0x%0*lx\n", (int)(2 * sizeof p), (unsigned long)(uintptr_t)p);
    fflush(stdout);
}

/* malloc(n) written whole, so that the misuse meets a block in use: NULL when out of
 * memory. */
static char *filled(size_t n)
{
    char *p = malloc(n);
    if (p)
        memset(p, 0x5a, n);
    return p;
}

/* filled(n), then the pointer the misuse will be handed, p + off, announced: that pointer;
 * NULL when out of memory. */
static char *announced(size_t n, size_t off)
{
    char *p = filled(n);
    if (!p)
        return NULL;
    announce(p + off);
    return p + off;
}

/* The misuse returned: says what its aftermath showed (a silent corruption, or nothing),
 * flushed before anything else can stop the process; 3, the exit status of that outcome. */
__attribute__((format(printf, 1, 2))) static int undetected(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
    return 3;
}

/* After an undetected double free of a block of size n: do two allocations of that size
 * return the same address? 3. */
static int look_for_duplicates(size_t n)
{
    void *a = malloc(n), *b = malloc(n);
    if (a && a == b)
        return undetected("silent corruption: malloc(%zu) returned %p twice\n", n, a);
    return undetected("misuse went undetected (no duplicate seen at once)\n");
}

static void *alloc_once(void *arg)
{
    free(malloc(48));
    return arg;
}

/* A second thread allocates (and so has a heap of its own), then exits. */
static int second_heap(void)
{
    pthread_t t;
    return pthread_create(&t, NULL, alloc_once, NULL) || pthread_join(t, NULL);
}

/* The double free with another free between (p's list link then leads to x, and x's back
 * to p: a cycle that a look at the last free alone does not see), p announced. */
static void free_around(char *p, char *x)
{
    announce(p);
    free(p);
    free(x);
    free(launder(p));
}

static int double_free(size_t n)
{
    char *p = announced(n, 0);
    if (!p)
        return 2;
    free(p);
    free(launder(p));
    return look_for_duplicates(n);
}

static int interior(size_t n, size_t off)
{
    char *p = announced(n, off);
    if (!p)
        return 2;
    free(launder(p));
    return undetected("misuse went undetected\n");
}

static int realloc_freed(size_t n)
{
    char *p = announced(n, 0);
    if (!p)
        return 2;
    free(p);
    void *q = realloc(launder(p), 2 * n);
    return undetected("misuse went undetected (realloc returned %p)\n", q);
}

static int realloc_interior(size_t n, size_t off, size_t to)
{
    char *p = announced(n, off);
    if (!p)
        return 2;
    void *q = realloc(launder(p), to);
    return undetected("misuse went undetected (realloc returned %p)\n", q);
}

static int usable_interior(void)
{
    char *p = malloc(256);
    if (!p)
        return 2;
    announce(p + 16);
    size_t u = malloc_usable_size(launder(p + 16));
    return undetected("misuse went undetected (malloc_usable_size said %zu)\n", u);
}

/* Thread A of the cross-thread double free: frees its block, and mallocs the same length
 * again once main has freed it too (unless told to exit at once). */
static pthread_barrier_t xt_barrier;
static int xt_exit;
static void *xt_a(void *arg)
{
    free(launder(malloc(48))); /* a heap of its own: medium blocks alone make none */
    char *p = filled(16 * KiB);
    free(p);
    *(void **)arg = p;
    pthread_barrier_wait(&xt_barrier); /* main frees p */
    pthread_barrier_wait(&xt_barrier);
    return xt_exit ? NULL : malloc(16 * KiB);
}

static int xthread_double(int exit_first)
{
    void *p = NULL, *a_got = NULL;
    pthread_t t;
    xt_exit = exit_first;
    free(launder(malloc(48))); /* main has a heap: A's is the second, with an extent cache */
    if (pthread_barrier_init(&xt_barrier, NULL, 2) || pthread_create(&t, NULL, xt_a, &p))
        return 2;
    pthread_barrier_wait(&xt_barrier);
    if (!p)
        return 2;
    announce(p);
    free(launder(p));
    pthread_barrier_wait(&xt_barrier);
    if (pthread_join(t, &a_got))
        return 2;
    void *m1 = malloc(16 * KiB), *m2 = exit_first ? malloc(16 * KiB) : a_got;
    if (m1 && (m1 == m2 || m1 == a_got))
        return undetected("silent corruption: malloc(16384) returned %p twice\n", m1);
    return undetected("misuse went undetected (no duplicate seen at once)\n");
}

/* Two threads free one block at once: one of the frees must fail, however they interleave
 * (the cache's mark is taken by CAS). */
static void *race_free(void *p)
{
    free(launder(malloc(48))); /* a heap, and so an extent cache */
    pthread_barrier_wait(&xt_barrier);
    free(launder(p));
    pthread_barrier_wait(&xt_barrier); /* both frees made before either malloc */
    return malloc(16 * KiB);
}

static int race_double(void)
{
    pthread_t t[2];
    void *got[2];
    char *p = filled(16 * KiB);
    if (!p || pthread_barrier_init(&xt_barrier, NULL, 2))
        return 2;
    announce(p);
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, race_free, p))
            return 2;
    for (int i = 0; i < 2; i++)
        if (pthread_join(t[i], &got[i]))
            return 2;
    if (got[0] && got[0] == got[1])
        return undetected("silent corruption: malloc(16384) returned %p in both threads\n", got[0]);
    return undetected("misuse went undetected (no duplicate seen at once)\n");
}

/* A write after free that wipes a cached extent's key, a second free, and the thread's exit
 * flushing its cache: the second free must still be caught (it once made the flush read
 * far outside the extent map: SIGSEGV). */
static void *scribble_flush(void *arg)
{
    free(launder(malloc(48))); /* a heap, and so an extent cache */
    char *p = filled(20 * KiB);
    if (!p)
        return arg;
    announce(p);
    free(p);
    memset(launder(p), 0x41, 64);
    free(launder(p));
    return NULL;
}

static int scribble_double(void)
{
    pthread_t t;
    void *r;
    if (second_heap() || pthread_create(&t, NULL, scribble_flush, NULL) || pthread_join(t, &r))
        return 2;
    return look_for_duplicates(20 * KiB);
}

/* realloc of a freed block to a size it holds (glibc aborts): accepted, it handed out a
 * block that malloc gives again. */
static int realloc_freed_fits(size_t n)
{
    char *p = filled(n), *g = malloc(16);
    if (!p || !g)
        return 2;
    announce(p);
    free(p);
    void *q = realloc(launder(p), n - 8);
    void *r = malloc(n);
    if (q && q == r)
        return undetected("silent corruption: realloc returned %p, and malloc(%zu) too\n", q, n);
    return undetected("misuse went undetected (realloc returned %p)\n", q);
}

/* An interior pointer of a block in a page that also holds memalign'd blocks. */
static int aligned_interior(int how)
{
    for (int i = 0; i < 8; i++)
        if (!memalign(64, 48))
            return 2;
    char *p = filled(100);
    if (!p)
        return 2;
    announce(p + 40);
    if (how == 0) {
        free(launder(p + 40));
        void *q = malloc(100);
        if (q == p)
            return undetected("silent corruption: malloc(100) returned the live block %p\n", q);
        return undetected("misuse went undetected\n");
    }
    if (how == 1) {
        void *q = realloc(launder(p + 40), 500);
        return undetected("misuse went undetected (realloc returned %p)\n", q);
    }
    size_t u = malloc_usable_size(launder(p + 40));
    return undetected("misuse went undetected (malloc_usable_size said %zu)\n", u);
}

/* Where an attacker wants malloc to hand out memory. */
static uintptr_t target[8] __attribute__((aligned(64)));

/* Allocates blocks of 48 bytes until target comes back (3) or 2000 calls (3 too: the
 * misuse went undetected); a correct allocator stops the process first. Prints "b handed
 * out" or "c handed out" when abc (NULL: none) names a block that comes back. */
static int allocate_until_target_seen(char *const *abc)
{
    for (int i = 0; i < 2000; i++) {
        /* laundered: the compiler may assume malloc never returns target's address */
        void *p = launder(malloc(48));
        if (p == (void *)target)
            return undetected("silent corruption: malloc returned the attacker's address %p\n", p);
        if (abc && (p == abc[1] || p == abc[2])) {
            printf("%c handed out\n", p == abc[2] ? 'c' : 'b');
            fflush(stdout);
        }
    }
    return undetected("misuse went undetected (no abort, target never returned)\n");
}

static int allocate_until_target(void)
{
    return allocate_until_target_seen(NULL);
}

/* Redirects a freed block's list link to target, keeping its key (the attacker can read
 * it: it sits in the block), through a write after free or an overflow of its neighbour;
 * then allocates until target comes back. */
static int redirect(int overflow)
{
    char *a = malloc(48), *b = malloc(48);
    if (!a || !b)
        return 2;
    announce(b);
    free(b);
    uintptr_t words[2];
    memcpy(words, launder(b), sizeof words);
    words[0] = (uintptr_t)target;
    target[1] = words[1]; /* the key, where the block's key sits */
    if (overflow && b == a + 48)
        memcpy(launder(a) + 48, words, sizeof words); /* 16 bytes past a's end */
    else
        memcpy(launder(b), words, sizeof words);
    return allocate_until_target();
}

/* A partial overwrite of a freed block's link: without the secret, flipping its low bits
 * moves where it leads by as much, into the middle of a neighbour (which glibc's 16-byte
 * alignment check lets through). The pop must refuse an address that is not a block's
 * start. */
static int partial_link(void)
{
    char *a = malloc(48), *b = malloc(48);
    if (!a || !b)
        return 2;
    announce(b);
    free(a);
    free(b); /* b's link leads to a */
    void *off = (void *)((uintptr_t)a ^ 16);
    ((volatile unsigned char *)launder(b))[0] ^= 16;
    for (int i = 0; i < 2000; i++) {
        void *p = launder(malloc(48));
        if (p == off)
            return undetected("silent corruption: malloc returned %p, 16 bytes off block %p\n", p,
                              (void *)a);
    }
    return undetected("misuse went undetected (no abort, %p never returned)\n", off);
}

static void *free_it(void *p)
{
    free(p);
    return NULL;
}

/* Redirects freed block b's list link to target, keeping its key, as redirect does. */
static void link_to_target(char *b)
{
    uintptr_t words[2];
    memcpy(words, launder(b), sizeof words);
    words[0] = (uintptr_t)target;
    target[1] = words[1];
    memcpy(launder(b), words, sizeof words);
}

/* The remote cases' blocks: 64 of 48 bytes (0, or 2 when out of memory). */
enum { REMOTE_N = 64 };
static int malloc_remote_blocks(char **blk)
{
    for (int i = 0; i < REMOTE_N; i++)
        if (!(blk[i] = malloc(48)))
            return 2;
    return 0;
}

/* The last of the runs of n blocks of blk[0 .. nblk) carved one after the other, so one
 * page's (48 divides no page size, so the next page's first block is never 48 bytes past a
 * page's last one): its first; -1 when there is none. */
static int carved_run(char *const *blk, int nblk, int n)
{
    for (int k = nblk - n; k >= 0; k--) {
        int i = 1;
        while (i < n && (uintptr_t)blk[k + i] == (uintptr_t)blk[k] + (uintptr_t)i * 48)
            i++;
        if (i == n)
            return k;
    }
    return -1;
}

/* redirect, for a block that another thread freed: it waits on its page's list of remote
 * frees until the owner collects that list (when it runs out of blocks there). */
static int remote_redirect(void)
{
    char *blk[REMOTE_N];
    if (malloc_remote_blocks(blk))
        return 2;
    char *b = blk[REMOTE_N / 2];
    announce(b);
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, b) || pthread_join(t, NULL))
        return 2;
    link_to_target(b);
    return allocate_until_target();
}

static void *free_three(void *arg)
{
    char **p = arg;
    for (int i = 0; i < 3; i++)
        free(p[i]);
    return NULL;
}

/* remote-link with the owner's own free waiting beside the list (its local list), and the
 * redirected link in the middle of the list, not at its head. */
static int remote_link_mid(void)
{
    char *blk[REMOTE_N];
    if (malloc_remote_blocks(blk))
        return 2;
    int k = carved_run(blk, REMOTE_N, 4);
    if (k < 0)
        return 2;
    char *three[3] = {blk[k + 1], blk[k + 2], blk[k + 3]}; /* a, b, c */
    announce(three[1]);
    free(blk[k]); /* the owner's own free */
    pthread_t t;
    if (pthread_create(&t, NULL, free_three, three) || pthread_join(t, NULL))
        return 2;
    link_to_target(three[1]);
    return allocate_until_target_seen(three);
}

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_ready;

/* purge-cycle's thread: the double free, then idle (no allocator call) for good. */
static void *cycle_then_idle(void *arg)
{
    (void)arg;
    /* past the first pages, which are parts of a split slot (their frees take the slow
     * path, which finds the double free at once): a page of its own, freed into by the
     * fast path */
    enum { CYCLE_N = 1024 };
    static char *blk[CYCLE_N];
    for (int i = 0; i < CYCLE_N; i++)
        if (!(blk[i] = malloc(48)))
            return NULL;
    int k = carved_run(blk, CYCLE_N, 2);
    if (k < 0)
        return NULL;
    free_around(blk[k], blk[k + 1]);
    pthread_mutex_lock(&idle_mu);
    idle_ready = 1;
    pthread_cond_signal(&idle_cv);
    for (;;)
        pthread_cond_wait(&idle_cv, &idle_mu);
    return NULL;
}

static int purge_cycle(void)
{
    size_t (*purge)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "thpalloc_purge");
    if (!purge) {
        printf("no thpalloc_purge\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, cycle_then_idle, NULL))
        return 2;
    pthread_mutex_lock(&idle_mu);
    while (!idle_ready)
        pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    purge();
    return undetected("misuse went undetected (thpalloc_purge returned)\n");
}

/* After an undetected double free: the live blocks keep their contents (fill) and no
 * malloc(size) returns one of them, over four pages' worth of allocations; 3 when nothing
 * stopped the process. */
static int watch_live(char *const *live, int nlive, size_t size, unsigned char fill)
{
    size_t calls = 4 * 65536 / size + 64;
    for (size_t i = 0; i < calls; i++) {
        char *q = malloc(size);
        if (!q)
            return 2;
        for (int k = 0; k < nlive; k++) {
            if (q == live[k])
                return undetected("silent corruption: malloc(%zu) returned the live block %p\n",
                                  size, q);
        }
    }
    for (int k = 0; k < nlive; k++) {
        for (size_t j = 0; j < size; j++) {
            if ((unsigned char)live[k][j] != fill)
                return undetected("silent corruption: the live block %p lost its contents\n",
                                  live[k]);
        }
    }
    return undetected("misuse went undetected\n");
}

/* A run of blocks of size bytes carved one after the other at one step (what a fresh
 * page's blocks are, past a class's first sub-pages; glibc's too, with its headers between),
 * so that they share a page: the last run of *n among OWNER_MAX allocations, or the longest
 * there is when none is that long (a page of a large class holds fewer), filled with 0x6c.
 * Every other block is freed, so that the run's page holds only the run. NULL when there is
 * no run of 3. */
enum { OWNER_MAX = 4096 };
static char *owner_blk[OWNER_MAX];
static char **carved_blocks(size_t size, int *n)
{
    for (int i = 0; i < OWNER_MAX; i++)
        if (!(owner_blk[i] = malloc(size)))
            return NULL;
    int best = -1, best_len = 0;
    for (int s = OWNER_MAX - 2; s >= 0 && best_len < *n; s--) {
        ptrdiff_t step = owner_blk[s + 1] - owner_blk[s];
        if (step < (ptrdiff_t)size || step > (ptrdiff_t)(size + size / 4 + 16))
            continue;
        int i = 1;
        while (s + i < OWNER_MAX && i < *n && owner_blk[s + i] == owner_blk[s] + i * step)
            i++;
        if (i > best_len) {
            best = s;
            best_len = i;
        }
    }
    if (best_len < 3) {
        printf("no run of 3 blocks of %zu bytes\n", size);
        return NULL;
    }
    *n = best_len;
    for (int i = 0; i < OWNER_MAX; i++)
        if (i < best || i >= best + best_len)
            free(owner_blk[i]);
    for (int i = 0; i < best_len; i++)
        memset(owner_blk[best + i], 0x6c, size);
    return &owner_blk[best];
}

/* owner-double: p, x, then the live blocks, in one page. */
static int owner_double(size_t size, int nlive)
{
    int n = nlive + 2;
    char **run = carved_blocks(size, &n);
    if (!run)
        return 2;
    char *p = run[0], *x = run[1];
    printf("live=%d\n", n - 2);
    free_around(p, x);
    return watch_live(run + 2, n - 2, size, 0x6c);
}

/* The cases where the owner and another thread free p: p, the first of 64 blocks of 48
 * bytes carved in one page of the main thread's, announced (NULL when there is no such
 * page); watch_owner_page then watches the 63 others, live. */
static char **owner_page;
static int owner_page_n;
static char *owner_page_first(void)
{
    owner_page_n = 64;
    if (!(owner_page = carved_blocks(48, &owner_page_n)))
        return NULL;
    announce(owner_page[0]);
    return owner_page[0];
}

static int watch_owner_page(void)
{
    return watch_live(owner_page + 1, owner_page_n - 1, 48, 0x6c);
}

static void *free_it_now(void *p)
{
    free(launder(p));
    return NULL;
}

/* remote-owner-double: the first of 64 blocks of 48 bytes in one page of the main thread's,
 * freed by another thread, then by the owner. */
static int remote_owner_double(const char *after)
{
    char *p = owner_page_first();
    pthread_t t;
    if (!p || pthread_create(&t, NULL, free_it_now, p) || pthread_join(t, NULL))
        return 2;
    if (!strcmp(after, "trim"))
        malloc_trim(0);
    else if (!strcmp(after, "purger"))
        sleep(1); /* no allocator call: the purger thread reclaims the idle heap */
    free(launder(p));
    return watch_owner_page();
}

/* owner-remote-race: the owner (main) and another thread free p at once. */
static void *race_other_free(void *p)
{
    pthread_barrier_wait(&xt_barrier);
    free(launder(p));
    return NULL;
}

static int owner_remote_race(void)
{
    char *p = owner_page_first();
    pthread_t t;
    if (!p || pthread_barrier_init(&xt_barrier, NULL, 2) ||
        pthread_create(&t, NULL, race_other_free, p))
        return 2;
    race_armed((volatile uint64_t *)p + 1); /* the other thread exists: a watchpoint can name it */
    pthread_barrier_wait(&xt_barrier);
    free(launder(p));
    if (pthread_join(t, NULL))
        return 2;
    /* both frees returned: p is on the owner's list and on the page's list of remote frees */
    return watch_owner_page();
}

/* Blocks of 48 bytes that fill pages: the middle one's page is on the full list. */
enum { FULL_N = 4096 };
static char *full_blk[FULL_N];
static char *fill_pages(void)
{
    for (int i = 0; i < FULL_N; i++)
        if (!(full_blk[i] = malloc(48)))
            return NULL;
    return full_blk[FULL_N / 2];
}

static void *free_twice(void *p)
{
    free(p);
    free(launder(p));
    return NULL;
}

/* After a double free among a page's remote frees: malloc(48) until the owner collects
 * them (up to 20000 calls); 3 when nothing stopped the process. */
static int malloc_until_collected(void)
{
    for (int i = 0; i < 20000; i++)
        if (!malloc(48))
            return 2;
    return undetected("misuse went undetected\n");
}

static int full_remote_double(int owner_frees)
{
    char *b = fill_pages();
    if (!b)
        return 2;
    announce(b);
    pthread_t t;
    if (pthread_create(&t, NULL, owner_frees ? free_it : free_twice, b) || pthread_join(t, NULL))
        return 2;
    if (owner_frees) {
        free(launder(b));
        return look_for_duplicates(48);
    }
    return malloc_until_collected();
}

/* full-tail: the page's tail past its last block, at a block boundary as counted from the
 * page's start: a block a free must not take. The blocks from the 1000th on lie in 16 KiB
 * pages (a class's first blocks are in sub-pages of 1 KiB); the last 400 may be in the
 * page still allocated from, not full. */
static int full_tail(void)
{
    if (!fill_pages())
        return 2;
    for (int i = 1000; i < FULL_N - 400; i++) {
        uintptr_t a = (uintptr_t)full_blk[i];
        if ((a & (16 * KiB - 1)) == 340 * 48) {
            char *p = full_blk[i] + 48;
            announce(p);
            free(launder(p));
            return look_for_duplicates(48);
        }
    }
    return 2;
}

/* remote-race-double: two threads, neither the block's owner, free p = malloc(48) at the
 * same moment. race_armed names the 8 bytes a free block keeps its key in (offset 8,
 * block_t in lib/types.h) so that misuse-race.sh can stop each thread in gdb right
 * after its access to it: with a load and a store both loads came before either store. */
void race_armed(volatile uint64_t *key_word);
__attribute__((noinline)) void race_armed(volatile uint64_t *key_word)
{
    __asm__ volatile("" : : "r"(key_word) : "memory");
}

static void *race_remote_free(void *p)
{
    free(launder(malloc(48))); /* a heap of its own */
    pthread_barrier_wait(&xt_barrier);
    free(launder(p));
    return NULL;
}

/* Two threads free p at the same moment (a barrier); false when they could not run. */
static bool race_two_frees(void *p)
{
    pthread_t t[2];
    if (pthread_barrier_init(&xt_barrier, NULL, 3))
        return false;
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, race_remote_free, p))
            return false;
    pthread_barrier_wait(&xt_barrier);
    for (int i = 0; i < 2; i++)
        if (pthread_join(t[i], NULL))
            return false;
    return true;
}

static int remote_race_double(void)
{
    char *p = announced(48, 0);
    if (!p)
        return 2;
    race_armed((volatile uint64_t *)p + 1);
    if (!race_two_frees(p))
        return 2;
    /* both frees returned: p is listed twice (a cycle) among the page's remote frees */
    return malloc_until_collected();
}

/* Two threads free p, a block of size bytes (written whole), at once; both frees returned
 * when this gets past them, so the block went back twice: two mallocs of its size may then
 * return it both (two owners). */
static int race_double_sized(char *p, size_t size, const char *what)
{
    memset(p, 0x5a, size);
    announce(p);
    if (!race_two_frees(p))
        return 2;
    void *a = malloc(size), *b = malloc(size);
    if (a && a == b)
        return undetected("silent corruption: malloc(%s) returned %p twice\n", what, a);
    return undetected("misuse went undetected (a=%p b=%p)\n", a, b);
}

/* extent-big-race-double: two threads free p = malloc(256 KiB) at once, an extent above what a
 * thread's cache holds, between two blocks in use: its head is taken under its shard's lock with a
 * plain store (lib/extent.c, head_claim), and the second free finds it free. */
static int extent_big_race_double(void)
{
    char *before = malloc(256 * KiB), *p = malloc(256 * KiB), *after = malloc(256 * KiB);
    if (!before || !p || !after)
        return 2;
    return race_double_sized(p, 256 * KiB, "256 KiB");
}

/* large-race-double: two threads free p = malloc(4 MiB) (chunks of its own) at once;
 * misuse-race.sh stops each thread in gdb as it enters the library's large-block free. */
static int large_race_double(void)
{
    char *p = malloc(4 * MiB);
    if (!p)
        return 2;
    return race_double_sized(p, 4 * MiB, "4 MiB");
}

static int mid_double(void)
{
    char *p = malloc(2000), *q = malloc(2000);
    if (!p || !q)
        return 2;
    free_around(p, q);
    void *a = malloc(2000), *b = malloc(2000), *c = malloc(2000);
    if (a && a == c)
        return undetected("silent corruption: malloc(2000) returned %p twice (%p between)\n", a, b);
    return undetected("misuse went undetected\n");
}

/* ok: no misuse at all, the control. */
static int no_misuse(void)
{
    char *p = malloc(48), *q = malloc(4 * MiB);
    if (!p || !q)
        return 2;
    announce(p);
    free(launder(p));
    free(launder(q));
    return 0;
}

/* Control: plain blocks beside memalign'd ones hold whatever their callers write, and every
 * free, malloc_usable_size and realloc takes them as blocks. Their page marks the blocks
 * whose pointer memalign moved (a 7 KiB class here, near the largest of small blocks): with
 * that mark in one word, a plain block whose first word held random data read as moved
 * once in block_size / 2^32 on 32 bits, about once in 590,000 calls here, and stopped as an
 * invalid pointer (m32's stress-threads soak, 3 in about 620 runs). 2^23 calls of random first
 * words: on 32 bits the one-word mark fails this about 14 times; on 64 bits the chance is
 * 2^-51 a call either way. */
static int aligned_neighbours(void)
{
    /* 7,255 bytes: the 7,280-byte class, not a multiple of 256, so memalign moves the
     * pointer and marks the block */
    enum { SIZE = 7000, ALIGN = 256, CALLS = 1 << 23 };
    char *q = NULL, *a = NULL, *held[128];
    int nheld = 0;
    /* a block whose pointer memalign moved: one at a page's start is aligned already */
    char *plain = malloc(SIZE + ALIGN - 1);
    if (!plain)
        return 2;
    size_t whole = malloc_usable_size(plain);
    free(plain);
    while (nheld < 64 && (a = memalign(ALIGN, SIZE)) && malloc_usable_size(a) == whole)
        held[nheld++] = a;
    if (!a || malloc_usable_size(a) == whole) {
        printf("memalign never moved a pointer\n");
        return 2;
    }
    /* a plain block of the same class (memalign took SIZE + ALIGN - 1) in a's 16 KiB: a
     * page-mate held so far is freed and its place taken again (a page of two blocks) */
    for (int i = 0; i < nheld; i++)
        if ((uintptr_t)held[i] >> 14 == (uintptr_t)a >> 14) {
            free(held[i]);
            held[i] = held[--nheld];
            break;
        }
    for (int tries = 0; tries < 64; tries++) {
        char *c = malloc(SIZE + ALIGN - 1);
        if (!c)
            return 2;
        if ((uintptr_t)c >> 14 == (uintptr_t)a >> 14) {
            q = c;
            break;
        }
        held[nheld++] = c;
    }
    if (!q) {
        printf("no plain block of the class in the memalign'd block's page\n");
        return 2;
    }
    announce(q);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (long i = 0; i < CALLS; i++) {
        for (int w = 0; w < 2; w++) { /* the first 16 bytes: 4 words on 32 bits */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(q + 8 * w, &x, 8);
        }
        size_t u = malloc_usable_size(launder(q));
        if (u < SIZE + ALIGN - 1)
            return undetected("malloc_usable_size(%p) = %zu with random data in it\n", (void *)q,
                              u);
        if (i % 64 == 0) { /* the same block back, for the free's look at it */
            free(launder(q));
            char *r = malloc(SIZE + ALIGN - 1);
            if (r != q)
                return undetected("malloc after free gave %p, not %p\n", (void *)r, (void *)q);
        }
    }
    char *r = realloc(launder(q), SIZE + ALIGN - 1);
    if (r != q)
        return undetected("realloc to the same size moved the block\n");
    free(r);
    free(a);
    while (nheld > 0)
        free(held[--nheld]);
    return 0;
}

/* Control: a free block's key is 64 bits at offset 8, on 32-bit systems too, and only all
 * of it marks a block free. A live block whose data holds half of it (learnt here from a
 * freed neighbour's key: a read after free, for the test's sake), at offset 4 or 8, is freed,
 * reallocated and sized as a live block. With a one-word key at offset 4 on 32 bits, a live
 * block's second word read as free once in 2^32 frees of random data: here, every time. */
static int key_halves(void)
{
    char *p = malloc(48), *q = malloc(48);
    if (!p || !q)
        return 2;
    free(q);
    uint64_t k;
    uint32_t w4;
    memcpy(&k, (char *)launder(q) + 8, 8);
    memcpy(&w4, (char *)launder(q) + 4, 4);
    /* what each would read for p: the key is the secret ^ the block's address */
    uint64_t kp = k ^ (uintptr_t)q ^ (uintptr_t)p;
    uint32_t w4p = w4 ^ (uint32_t)(uintptr_t)q ^ (uint32_t)(uintptr_t)p;
    uint32_t lo = (uint32_t)kp, hi = ~(uint32_t)(kp >> 32);
    memcpy(p + 4, &w4p, 4);
    memcpy(p + 8, &lo, 4);
    memcpy(p + 12, &hi, 4);
    announce(p);
    if (malloc_usable_size(launder(p)) < 48)
        return undetected("malloc_usable_size of the live block is below 48\n");
    char *r = realloc(launder(p), 48);
    if (r != p)
        return undetected("realloc to its size moved the live block (%p -> %p)\n", (void *)p,
                          (void *)r);
    free(launder(p));
    return 0;
}

/* The cases that take no argument, by name: the function that runs one (the one of its
 * signature that is set) and what it is handed. */
static const struct misuse_case {
    const char *name;
    int (*run)(void);
    int (*variant)(int v);
    int (*sized)(size_t n);
    int (*at)(size_t n, size_t off);
    int (*at_to)(size_t n, size_t off, size_t to);
    int v;
    size_t n, off, to;
    bool second_heap; /* a second thread allocates first */
} cases[] = {
    {"owner-remote-race", .run = owner_remote_race},
    {"small-double", .sized = double_free, .n = 48},
    {"extent-double", .sized = double_free, .n = 100 * KiB},
    {"extent-cached-double", .sized = double_free, .n = 20 * KiB, .second_heap = true},
    {"extent-interior", .at = interior, .n = 100 * KiB, .off = 4096},
    {"extent-realloc-interior", .at_to = realloc_interior, .n = 100 * KiB, .off = 16,
     .to = 200 * KiB},
    {"large-double", .sized = double_free, .n = 4 * MiB},
    {"huge-double", .sized = double_free, .n = 40 * MiB},
    {"small-interior", .at = interior, .n = 256, .off = 16},
    {"large-interior", .at = interior, .n = 4 * MiB, .off = 4096},
    {"large-realloc", .sized = realloc_freed, .n = 4 * MiB},
    {"small-realloc-interior", .at_to = realloc_interior, .n = 256, .off = 16, .to = 256},
    {"large-realloc-interior", .at_to = realloc_interior, .n = 4 * MiB, .off = 4096, .to = 8 * MiB},
    {"usable-interior", .run = usable_interior},
    {"extent-xthread-double", .variant = xthread_double, .v = 0},
    {"extent-xthread-double-exit", .variant = xthread_double, .v = 1},
    {"extent-race-double", .run = race_double},
    {"extent-scribble-flush", .run = scribble_double},
    {"small-realloc-freed", .sized = realloc_freed_fits, .n = 4000},
    {"extent-realloc-freed", .sized = realloc_freed_fits, .n = 20000, .second_heap = true},
    {"aligned-interior", .variant = aligned_interior, .v = 0},
    {"aligned-realloc-interior", .variant = aligned_interior, .v = 1},
    {"aligned-usable-interior", .variant = aligned_interior, .v = 2},
    {"uaf-link", .variant = redirect, .v = 0},
    {"overflow-link", .variant = redirect, .v = 1},
    {"remote-link", .run = remote_redirect},
    {"remote-link-mid", .run = remote_link_mid},
    {"partial-link", .run = partial_link},
    {"full-remote-double", .variant = full_remote_double, .v = 1},
    {"remote-double", .variant = full_remote_double, .v = 0},
    {"full-tail", .run = full_tail},
    {"remote-race-double", .run = remote_race_double},
    {"large-race-double", .run = large_race_double},
    {"extent-big-race-double", .run = extent_big_race_double},
    {"mid-double", .run = mid_double},
    {"purge-cycle", .run = purge_cycle},
    {"ok", .run = no_misuse},
    {"aligned-neighbours", .run = aligned_neighbours},
    {"key-halves", .run = key_halves},
};

static int run_case(const struct misuse_case *k)
{
    if (k->second_heap && second_heap())
        return 2;
    if (k->run)
        return k->run();
    if (k->variant)
        return k->variant(k->v);
    if (k->sized)
        return k->sized(k->n);
    if (k->at)
        return k->at(k->n, k->off);
    return k->at_to(k->n, k->off, k->to);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: misuse-cases CASE [ARG...]\n");
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "owner-double") && argc == 4)
        return owner_double(strtoul(argv[2], NULL, 0), atoi(argv[3]));
    if (!strcmp(c, "remote-owner-double"))
        return remote_owner_double(argc > 2 ? argv[2] : "");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!strcmp(c, cases[i].name))
            return run_case(&cases[i]);
    fprintf(stderr, "misuse-cases: unknown case %s\n", c);
    return 2;
}
