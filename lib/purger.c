/* purger: the background thread that gives memory back while the process is idle, the
 * same purge done inline by a process that has no such thread, and "purge everything now"
 * (thpalloc_purge, malloc_trim). It sits above the layers it drives: the arena's free chunks
 * and idle arenas (arena.c), the dirty page slots of live chunks (page.c), the free runs of
 * extent chunks (extent.c) and the free memory inside idle and exited threads' heaps
 * (reclaim.c). The thread is started lazily, only once 16 MiB or more wait (the arena asks
 * through purger_wanted), and only at a safe point (alloc.c: the top of a malloc, the end of a
 * free), never from inside a heap operation: pthread_create allocates. Below that, what is
 * due is purged by the process's own slow paths (purge_inline): a small process gets back
 * what it freed once purge_delay has passed, within 16 of its calls that go beyond the
 * memory it holds, without a second thread. */
#include "purger.h"

#include <errno.h>

#include <signal.h>

/* Held by every pass: the thread's, an inline one, purge_all's; fork waits for it. */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

/* The earlier of two due times (0: none). */
static uint32_t due_min(uint32_t a, uint32_t b)
{
    return a == 0 || (b != 0 && (int32_t)(b - a) < 0) ? b : a;
}

/* ---- the longer wait of a refaulting process ends when it sleeps ----------------------
 * While the process takes back what the delayed purge gave back (arena.c,
 * purge_delay_now), free chunks and extent runs wait longer; a pass then adds up the
 * heaps' slow-path calls (at most every half purge_delay, and only then: nothing for a
 * process that does not refault) and ends the wait when none was made in two looks in a
 * row (after a single look, a busy process that other processes kept off a loaded
 * machine's CPUs looked asleep, tests/policy-storm `refault`). Passes come at least every half
 * purge_delay meanwhile, so an idle process gets its memory back within about two
 * purge_delays of its frees. Its CPU time (getrusage) read a process kept off the CPU the
 * same way: a loaded machine hides the refaults. */
#define REFAULT_SAMPLE_MIN_MS 50u

static uint32_t sample_ops;  /* the heaps' slow_ops added up at the last look */
static uint32_t sample_at;   /* ms clock of the last look (pass lock held) */
static unsigned quiet_looks; /* looks in a row that found no slow-path call */

static void add_ops(heap_t *h, void *arg)
{
    *(uint32_t *)arg += __atomic_load_n(&h->slow_ops, __ATOMIC_RELAXED);
}

static uint32_t refault_look_gap(void)
{
    uint32_t half = (uint32_t)purge_delay() / 2;
    return half > REFAULT_SAMPLE_MIN_MS ? half : REFAULT_SAMPLE_MIN_MS;
}

static void refault_sleeping(uint32_t now)
{
    if (now - sample_at < refault_look_gap())
        return;
    uint32_t ops = 0;
    thread_foreach_heap(add_ops, &ops);
    bool quiet = ops == sample_ops && now - sample_at <= 60000u; /* a first look: no */
    sample_ops = ops;
    sample_at = now;
    quiet_looks = quiet ? quiet_looks + 1 : 0;
    purge_refault_asleep(quiet_looks >= 2);
}

/* stat_pages_dirty without the heaps' credits (chunk.c, dirty_credit): the bytes of dirty
 * page slots and of the extents' waiting runs, at least what showed dirty when it was called
 * (the counter first, acquire, then the credits, which its folds store before they
 * subtract). For the sleep and the statistics, not a fast path: the heaps lock. */
static void add_credit(heap_t *h, void *arg)
{
    *(uint64_t *)arg += __atomic_load_n(&h->dirty_credit, __ATOMIC_RELAXED);
}

uint64_t purger_dirty_now(void)
{
    uint64_t dirty = atomic_load_explicit(&stat_pages_dirty, memory_order_acquire);
    if (!dirty)
        return 0;
    uint64_t credit = 0;
    thread_foreach_heap(add_credit, &credit);
    return dirty > credit ? dirty - credit : 0;
}

/* What both the thread and the inline pass purge: free chunks, dirty page slots, free extent
 * runs and exited threads' chunks whose purge_delay has passed; and the nearly full
 * small-object chunks they collapse into huge pages (dense.c: up to collapses of them, one
 * for the inline pass, which runs on an application thread). Returns when the next is due
 * (0: nothing waits). */
static uint32_t purge_due(uint32_t now, unsigned collapses)
{
    bool longer = purge_refaulting();
    if (longer)
        refault_sleeping(now);
    uint32_t due = arena_purge_due(now);
    if (atomic_load_explicit(&stat_pages_dirty, memory_order_relaxed)) {
        uint32_t pages_next = 0, ext_next = 0;
        pages_purge(now, false, &pages_next);
        extents_purge(now, false, &ext_next);
        due = due_min(due, due_min(pages_next, ext_next));
    }
    /* parked heaps first: what they abandon waits with the other abandoned chunks */
    due = due_min(due, thread_unpark_due(now, false));
    uint32_t abandoned_next = 0;
    reclaim_abandoned(now, false, &abandoned_next);
    due = due_min(due, abandoned_next);
    due = due_min(due, dense_pass(now, collapses));
    if (due && longer && purge_refaulting()) { /* look again soon: the process may sleep */
        due = due_min(due, now + refault_look_gap());
    }
    return due;
}

/* Each pass purges what is due and the insides of idle heaps, then sleeps until the next
 * thing is due, or on purge-signal's condition variable when nothing waits. */
TEXT_WARM
static void *purger_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&pass_lock);
        uint32_t now = now_ms();
        uint32_t wakes = purge_wakes_seen();
        uint32_t due = purge_due(now, UINT32_MAX);
        uint32_t heaps_next = 0;
        reclaim_idle_heaps(now, false, &heaps_next);
        pthread_mutex_unlock(&pass_lock);
        purge_wait_for_work(due_min(due, heaps_next), wakes, purger_dirty_now);
    }
    return NULL;
}

/* ---- inline, in a process without the thread ------------------------------------------ */

/* A look (purge-signal.c's purge_inline_count asks for one) reads the clock. Passes are at least
 * PURGE_INLINE_GAP_MS apart, so that pages retiring one by one do not make every look walk
 * the descriptors. */
#define PURGE_INLINE_GAP_MS 50u

static uint32_t inline_last_ms;         /* the last pass (pass lock held) */
static _Atomic uint32_t inline_next_ms; /* no pass before this */

static void purge_inline(void)
{
    /* A look asked for before the last pass disarmed, or before the thread was asked for */
    if (!atomic_load(&purge_inline_armed))
        return;
    if (purger_thread_started()) {
        atomic_store(&purge_inline_armed, 0);
        return;
    }
    long delay = purge_delay();
    uint32_t gap =
        delay < (long)PURGE_INLINE_GAP_MS ? (uint32_t)(delay > 0 ? delay : 1) : PURGE_INLINE_GAP_MS;
    uint32_t now = now_ms();
    /* Unsigned ages: a process idle for weeks must not read an old due time as one in the
     * future. Every due time is within purge_delay of the pass that noted it. */
    uint32_t since = now - __atomic_load_n(&inline_last_ms, __ATOMIC_RELAXED);
    uint32_t next = atomic_load_explicit(&inline_next_ms, memory_order_relaxed);
    if (since < gap || (since <= (uint32_t)delay + gap && !clock_reached(now, next))) {
        /* when this test would first pass: no request before (purge_inline_count) */
        uint32_t last = now - since, cap = last + (uint32_t)delay + gap + 1;
        uint32_t at = since < gap ? last + gap : (int32_t)(next - cap) < 0 ? next : cap;
        atomic_store_explicit(&purge_inline_look_at, at ? at : 1, memory_order_relaxed);
        return;
    }
    /* One pass at a time, and none while another thread purges: the others go on. */
    if (pthread_mutex_trylock(&pass_lock) != 0)
        return;
    __atomic_store_n(&inline_last_ms, now, __ATOMIC_RELAXED);
    /* Disarmed before the pass, the other side of the notes' Dekker pair (they count,
     * fence, then look at purge_inline_armed): what comes in meanwhile arms it again. */
    atomic_store(&purge_inline_armed, 0);
    atomic_thread_fence(memory_order_seq_cst);
    next = purge_due(now, 1);
    if (next != 0) {
        atomic_store_explicit(&inline_next_ms, next, memory_order_relaxed);
        purge_inline_arm();
    } else if (atomic_load(&stat_purge_pending) || purger_dirty_now()) {
        /* waiting, but not on a clock (a purge the kernel refused): look again later */
        atomic_store_explicit(&inline_next_ms, now + gap, memory_order_relaxed);
        purge_inline_arm();
    }
    pthread_mutex_unlock(&pass_lock);
}

TEXT_WARM
static void purger_start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* The purger must never take a signal meant for the application. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)64 << 10);
    pthread_t t;
    int rc = pthread_create(&t, &attr, purger_main, NULL);
    if (rc == EINVAL) {
        /* glibc puts the static TLS of every thread on its stack: a program with more than
         * 64 KiB of it (a large __thread array) needs a bigger one, the default. */
        pthread_attr_destroy(&attr);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &attr, purger_main, NULL);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* on the stack (immediate stores): as a literal, 15 bytes of the .rodata page every
     * process maps; in .rodata.thp_rare, .eh_frame's segment faulted in by every purger */
    char name[] = "thpalloc-purge";
    if (rc == 0)
        pthread_setname_np(t, name);
    else
        purger_thread_not_started();
}

/* Starts the background purger when one was asked for, or purges inline what is due. Only
 * at a safe point: the top of a malloc or the end of a free, where no heap list is being
 * walked and no lock is held (pthread_create allocates). caller: the return address of
 * the free that got here (NULL from a malloc): a free the dynamic loader makes leaves the
 * thread to the next call. */
void purger_start_if_wanted(const void *caller)
{
    int look = PURGER_WANT_INLINE;
    if (atomic_compare_exchange_strong(&purger_wanted, &look, PURGER_WANT_NONE)) {
        purge_inline();
        return;
    }
    /* Not from a thread past its heap's exit destructor: pthread_create's allocation there
     * would give it a heap that outlives it. Another thread starts the purger at its next
     * safe point. */
    if (tl_heap == &heap_exited)
        return;
    /* Nor from a free that ld.so makes: it frees a finished thread's TLS (pthread_join, a
     * detached thread's end) with glibc's stack-cache lock held, which pthread_create takes
     * too, so the thread would wait for itself forever with every signal blocked
     * (tests/stress-joinfree). The request stays for the next call from anywhere else. */
    if (caller &&
        atomic_load_explicit(&purger_wanted, memory_order_relaxed) == PURGER_WANT_THREAD &&
        os_in_loader(caller))
        return;
    int thread = PURGER_WANT_THREAD;
    if (atomic_compare_exchange_strong(&purger_wanted, &thread, PURGER_WANT_NONE))
        purger_start();
}

/* Gives back everything free now, whatever purge_delay says (thpalloc_purge,
 * malloc_trim): free chunks, dirty page slots, the inside of every heap. Returns bytes. */
TEXT_WARM
size_t purge_all(bool force)
{
    uint32_t next;
    pthread_mutex_lock(&pass_lock);
    thread_unpark_due(now_ms(), force); /* their chunks abandoned, reclaimed below */
    size_t bytes = pages_purge(now_ms(), force, &next);
    /* heaps first: their cached extents go back to the runs that extents_purge gives back */
    bytes += reclaim_idle_heaps(now_ms(), force, &next);
    bytes += reclaim_abandoned(now_ms(), force, &next);
    bytes += extents_purge(now_ms(), force, &next);
    bytes += arena_purge_chunks(force);
    pthread_mutex_unlock(&pass_lock);
    return bytes;
}

/* Every purge pass (the thread's, an inline one, purge_all) holds the pass lock, and
 * fork waits for it: a pass cut off by fork would leave the child pages marked PURGING and
 * abandoned chunks taken out, with no thread to finish them. */
TEXT_BUSY
void purger_fork(enum fork_phase phase)
{
    fork_mutex(&pass_lock, phase);
    if (phase == FORK_CHILD)
        sample_at = now_ms() - 60001u; /* the child's heaps: a first look */
}
