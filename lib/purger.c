/* purger: the background thread that gives memory back while the process is idle, and
 * "purge everything now" (thpalloc_purge, malloc_trim). It sits above the layers it drives:
 * the arena's free chunks and idle arenas (arena.c), the dirty page slots of live chunks
 * (page.c), the free runs of extent chunks (extent.c) and the free memory inside idle threads'
 * heaps (reclaim.c). It is started lazily, only once 16 MiB or more wait (the arena asks through
 * purger_wanted), and only at a safe point (alloc.c: the top of a malloc, the end of a free), never
 * from inside a heap operation: pthread_create allocates. */
#include "internal.h"

#include <errno.h>

#include <signal.h>

/* Each pass purges what is due, then sleeps until the next thing is due, or on the
 * arena's condition variable when nothing waits. */
static void *purger_main(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t now = now_ms();
        uint32_t due = arena_purge_due(now);
        uint32_t pages_next = 0, ext_next = 0;
        if (atomic_load_explicit(&stat_pages_dirty, memory_order_relaxed)) {
            pages_purge(now, false, &pages_next);
            extents_purge(now, false, &ext_next);
            if (ext_next && (pages_next == 0 || (int32_t)(ext_next - pages_next) < 0))
                pages_next = ext_next;
        }
        uint32_t wakes = arena_wakes();
        uint32_t heaps_next = 0, abandoned_next = 0;
        reclaim_idle_heaps(now, false, &heaps_next);
        reclaim_abandoned(now, false, &abandoned_next);
        if (abandoned_next && (heaps_next == 0 || (int32_t)(abandoned_next - heaps_next) < 0))
            heaps_next = abandoned_next;
        if (pages_next && (due == 0 || (int32_t)(pages_next - due) < 0))
            due = pages_next;
        if (heaps_next && (due == 0 || (int32_t)(heaps_next - due) < 0))
            due = heaps_next;
        arena_wait_for_work(due, wakes);
    }
    return NULL;
}

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
    if (rc == 0)
        pthread_setname_np(t, "thpalloc-purge");
    else
        arena_purger_not_started();
}

void purger_start_if_wanted(void)
{
    /* Not from a thread past its heap's exit destructor: pthread_create's allocation there
     * would give it a heap that outlives it. Another thread starts the purger at its next
     * safe point. */
    if (tl_heap == &heap_exited)
        return;
    if (atomic_exchange(&purger_wanted, 0))
        purger_start();
}

size_t purge_all(bool force)
{
    uint32_t next;
    size_t bytes = pages_purge(now_ms(), force, &next);
    /* heaps first: their cached extents go back to the runs that extents_purge gives back */
    bytes += reclaim_idle_heaps(now_ms(), force, &next);
    bytes += reclaim_abandoned(now_ms(), force, &next);
    bytes += extents_purge(now_ms(), force, &next);
    return bytes + arena_purge_chunks(force);
}
