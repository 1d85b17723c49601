/* purge-signal: who purges, and when they are told. Memory that waits for purge_delay is
 * noted here by the layers that free it (the arena's free chunks and padded tails, page.c's
 * dirty page slots, extent runs, exited threads' chunks): in a process without the purger
 * thread the note arms the inline pass (purger.c runs it at a safe point, one heavier event
 * in PURGE_INLINE_EVERY); once PURGER_MIN_PENDING waits it asks for the thread; with the
 * thread running it wakes it when it sleeps for want of work. The thread sleeps here too.
 * Nothing here purges: the purge itself is the arena's, page.c's, extent.c's and
 * reclaim.c's, driven by purger.c.
 *
 * signal_lock guards the thread's state (asked for, waiting) and the condition variable it
 * waits on. The arena notes under its own lock, so the order is arena, then signal. */
#include "registry.h"

#include <time.h>

/* The background purger: an idle process gets its memory back too. Started lazily, only
 * once PURGER_MIN_PENDING waits for purging, so most processes never see it; until then the
 * process's own safe points purge what is due (purge_inline_arm, purger.c). */
#define PURGER_MIN_PENDING ((uint64_t)16 << 20)
/* Doubled each time the thread cannot be created (RLIMIT_NPROC, a pids cgroup, seccomp), so
 * that not every note tries again; past PURGER_MAX_PENDING it is never tried again. The
 * inline passes go on. */
#define PURGER_MAX_PENDING ((uint64_t)1 << 30)

static pthread_mutex_t signal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t purger_cond = PTHREAD_COND_INITIALIZER;
static uint64_t purger_min_pending = PURGER_MIN_PENDING;
/* C11 atomics, one kind for both: the notes read them without signal_lock (the purger's
 * start and its sleep are written under it). */
static _Atomic bool purger_started, purger_waiting;
/* New work the purger would otherwise sleep through: free chunks or padded tails noted by
 * the arena (counted under signal_lock), reclaimed heaps that became busy again
 * (purge_note_active). The purger reads the count before a pass and sleeps only if it has not
 * moved; dirty page slots are seen through their bytes instead (the same Dekker pair). */
static _Atomic uint32_t purge_wakes;
_Atomic int purger_wanted;      /* PURGER_WANT_*: for the next safe point */
_Atomic int purge_inline_armed; /* no purger thread, and something waits for purge_delay */
/* ms clock before which an inline look would find nothing to do (purger.c sets it; 0: none
 * yet, which a clock near its wrap would read as 25 h ahead) */
_Atomic uint32_t purge_inline_look_at;

/* What waits for purge_delay, all kinds together. stat_pages_dirty holds the heaps'
 * credits too (chunk.c): above what waits by at most DIRTY_CREDIT_MAX (256 KiB) for each
 * heap active within purge_delay, never below it; the thread may be asked for that much
 * early. */
static uint64_t pending_bytes(void)
{
    return atomic_load_explicit(&stat_purge_pending, memory_order_relaxed) +
           atomic_load_explicit(&stat_pages_dirty, memory_order_relaxed) +
           atomic_load_explicit(&stat_tail_padded, memory_order_relaxed);
}

/* Asks for a purger (signal_lock held) once enough waits; it is started at a safe point.
 * Below that, the process's own safe points look. */
static void want_purger_locked(void)
{
    if (!atomic_load_explicit(&purger_started, memory_order_relaxed) &&
        pending_bytes() >= purger_min_pending) {
        atomic_store(&purger_started, true);
        atomic_store(&purge_inline_armed, 0); /* the thread takes over */
        atomic_store(&purger_wanted, PURGER_WANT_THREAD);
    } else if (!atomic_load_explicit(&purger_started, memory_order_relaxed)) {
        atomic_thread_fence(memory_order_seq_cst); /* the caller counted what waits first */
        purge_inline_arm();
    }
}

/* A storm of frees (extent.c's trims, one after the other): ask for the purger thread now,
 * whatever waits, unless creating it has failed before. */
void purge_want_thread(void)
{
    pthread_mutex_lock(&signal_lock);
    /* past PURGER_MIN_PENDING: the thread could not be created, the pending rule decides */
    if (!atomic_load_explicit(&purger_started, memory_order_relaxed) &&
        purger_min_pending <= PURGER_MIN_PENDING && !purge_never()) {
        atomic_store(&purger_started, true);
        atomic_store(&purge_inline_armed, 0);
        atomic_store(&purger_wanted, PURGER_WANT_THREAD);
    }
    pthread_mutex_unlock(&signal_lock);
}

/* The arena has free chunks or a padded tail waiting (arena lock held: the arena's lock
 * comes before purge-signal's). */
void purge_note_chunks(void)
{
    pthread_mutex_lock(&signal_lock);
    atomic_fetch_add_explicit(&purge_wakes, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&purger_waiting, memory_order_relaxed))
        pthread_cond_signal(&purger_cond);
    else
        want_purger_locked();
    pthread_mutex_unlock(&signal_lock);
}

/* A heap the purger reclaimed is busy again: it has to be looked at after purge_delay. */
void purge_note_active(void)
{
    atomic_fetch_add_explicit(&purge_wakes, 1, memory_order_seq_cst);
    purge_note_dirty();
}

/* A page slot became dirty (or an extent run, an exited thread's page): wake the purger, or
 * ask for one (purger_start_if_wanted), or arm the inline pass. */
void purge_note_dirty(void)
{
    purge_note_dirty_by(NULL);
}

/* The same from heap's owner (or the purger under its claim): the inline pass's count is
 * the heap's, not the shared tick (a store to a line every thread reads, on every note). */
void purge_note_dirty_by(heap_t *heap)
{
    /* A running purger that is not waiting will see the page when it next looks (the new
     * page is due after everything it waits for): no lock on this path, which a loop
     * that empties and refills a page takes every time. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&purger_started, memory_order_relaxed)) {
        if (!atomic_load(&purger_waiting))
            return;
    } else if (pending_bytes() < __atomic_load_n(&purger_min_pending, __ATOMIC_RELAXED)) {
        /* no purger yet, and too little waits to start one: the safe points look */
        purge_inline_arm();
        purge_inline_tick(heap);
        return;
    }
    pthread_mutex_lock(&signal_lock);
    if (atomic_load_explicit(&purger_waiting, memory_order_relaxed)) {
        /* it may be between its look at the dirty bytes and its sleep */
        atomic_fetch_add_explicit(&purge_wakes, 1, memory_order_seq_cst);
        pthread_cond_signal(&purger_cond);
    } else {
        want_purger_locked();
    }
    pthread_mutex_unlock(&signal_lock);
}

/* One heavier event in PURGE_INLINE_EVERY asks the next safe point to look at the clock
 * while something waits: the misses of the fast paths do not read the clock, nor even call
 * here. The count is the heap's (owner-only: no line shared between threads is written on
 * an extent cache hit); a thread without a heap counts on a shared tick, its own line, by a
 * load and a store (racing threads may lose a count, which only moves the next look). */
#define PURGE_INLINE_EVERY 16u
static _Atomic unsigned inline_tick __attribute__((aligned(64)));

void purge_inline_count(heap_t *heap)
{
    unsigned tick;
    if (heap) {
        tick = ++heap->purge_tick;
    } else {
        tick = atomic_load_explicit(&inline_tick, memory_order_relaxed) + 1;
        atomic_store_explicit(&inline_tick, tick, memory_order_relaxed);
    }
    /* Not asked for before the look could do anything (the last pass was less than its gap
     * ago, or nothing is due yet): each request is a locked CAS on a line every malloc and
     * free reads, and its safe point's a second one, for a look that returns at once. */
    if (tick % PURGE_INLINE_EVERY ||
        atomic_load_explicit(&purger_wanted, memory_order_relaxed) != PURGER_WANT_NONE)
        return;
    uint32_t at = atomic_load_explicit(&purge_inline_look_at, memory_order_relaxed);
    if (at && !clock_reached(now_ms(), at))
        return;
    int none = PURGER_WANT_NONE;
    atomic_compare_exchange_strong(&purger_wanted, &none, PURGER_WANT_INLINE);
}

/* Something waits for purge_delay in a process without the purger: from now on the
 * allocator's heavier events count (purge_inline_tick), and one in 16 asks the next safe
 * point to look (purger.c). */
void purge_inline_arm(void)
{
    /* A plain load first: a loop that empties and refills a page comes here every time. The
     * caller has counted what waits and fenced (the Dekker pair with purge_inline's
     * disarm). */
    if (atomic_load_explicit(&purge_inline_armed, memory_order_relaxed) ||
        atomic_load(&purger_started) || purge_never())
        return;
    atomic_store(&purge_inline_armed, 1);
    /* The thread may have been asked for meanwhile: want_purger_locked says started, then
     * disarms; looking again after arming, one of the two sees the other. */
    if (atomic_load(&purger_started))
        atomic_store(&purge_inline_armed, 0);
}

/* Whether the purger thread runs or has been asked for: no inline pass then. */
bool purger_thread_started(void)
{
    return atomic_load(&purger_started);
}

/* dense.c noted a chunk to look at in a purge_delay: the thread, if the process has one, is
 * woken; with as much noted as starts it for memory that waits (want_thread: 16 MiB), it is
 * asked for; else the inline pass is armed, and the process collapses its few chunks at its
 * own calls, one a pass. */
TEXT_BUSY
void purge_note_dense(bool want_thread)
{
    pthread_mutex_lock(&signal_lock);
    atomic_fetch_add_explicit(&purge_wakes, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&purger_waiting, memory_order_relaxed)) {
        pthread_cond_signal(&purger_cond);
    } else if (!atomic_load_explicit(&purger_started, memory_order_relaxed)) {
        if (want_thread && purger_min_pending <= PURGER_MIN_PENDING) {
            atomic_store(&purger_started, true);
            atomic_store(&purge_inline_armed, 0);
            atomic_store(&purger_wanted, PURGER_WANT_THREAD);
        } else {
            purge_inline_arm();
        }
    }
    pthread_mutex_unlock(&signal_lock);
}

/* The thread could not be created: ask again once twice as much waits. */
TEXT_COLD
void purger_thread_not_started(void)
{
    pthread_mutex_lock(&signal_lock);
    atomic_store(&purger_started, false); /* try again later */
    __atomic_store_n(&purger_min_pending,
                     purger_min_pending < PURGER_MAX_PENDING ? purger_min_pending * 2 : UINT64_MAX,
                     __ATOMIC_RELAXED);
    pthread_mutex_unlock(&signal_lock);
    purge_inline_arm(); /* meanwhile the process's own calls purge */
}

/* The purger's sleep: the count of wake-ups (read before a pass), then a sleep until due,
 * or, with due 0, until a free chunk, a dirty page or a wake-up arrives after that count. */
TEXT_WARM
uint32_t purge_wakes_seen(void)
{
    return atomic_load_explicit(&purge_wakes, memory_order_seq_cst);
}

TEXT_WARM
void purge_wait_for_work(uint32_t due, uint32_t wakes, uint64_t (*dirty_now)(void))
{
    if (due == 0) {
        /* Nothing due: sleep until a free chunk, a dirty page or a wake-up arrives. Chunks
         * and wake-ups count under this lock; a dirty page counts itself, then looks at
         * purger_waiting without the lock (purge_note_dirty): so say "waiting" first, then
         * look at the counts (a Dekker pair, one of the two sees the other). The dirty
         * bytes are read without this lock (dirty_now takes the heaps lock, which fork
         * takes before this one): a note that sees "waiting" meanwhile counts a wake-up. */
        pthread_mutex_lock(&signal_lock);
        atomic_store(&purger_waiting, true);
        pthread_mutex_unlock(&signal_lock);
        atomic_thread_fence(memory_order_seq_cst);
        bool dirty = dirty_now() != 0;
        pthread_mutex_lock(&signal_lock);
        if (!dirty && atomic_load_explicit(&purge_wakes, memory_order_seq_cst) == wakes)
            pthread_cond_wait(&purger_cond, &signal_lock);
        atomic_store_explicit(&purger_waiting, false, memory_order_relaxed);
        pthread_mutex_unlock(&signal_lock);
        return;
    }
    uint32_t now = now_ms();
    if (clock_reached(now, due))
        return;
    uint32_t wait = due - now;
    /* + 5 ms: the coarse clock may lag the timer by a tick */
    struct timespec ts = {(time_t)(wait + 5) / 1000, (long)((wait + 5) % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

TEXT_BUSY
void purge_signal_fork(enum fork_phase phase)
{
    fork_mutex(&signal_lock, phase);
    if (phase != FORK_CHILD)
        return;
    /* The purger thread does not exist in the child: a later free starts a new one. */
    pthread_cond_init(&purger_cond, NULL);
    atomic_store_explicit(&purger_started, false, memory_order_relaxed);
    atomic_store_explicit(&purger_waiting, false, memory_order_relaxed);
    atomic_store(&purger_wanted, PURGER_WANT_NONE);
    atomic_store(&purge_inline_armed, 0);
    /* What the parent had waiting is the child's now: its safe points look at it. */
    if (pending_bytes())
        purge_inline_arm();
}
