/* build-tsan-signal: purge-signal.c's handshake driven from several threads at once, for
 * ThreadSanitizer (tests/build-tsan.sh builds it with -fsanitize=thread): a purger that counts
 * the wake-ups and sleeps on them (purge_wait_for_work), threads that note dirty pages, free
 * chunks and busy heaps, tick the inline pass, ask for the thread and report it not created,
 * all without a lock of their own. Every note the purger sleeps through would hang it: the
 * run ends only if each sleep is woken. Linked with the layers below purge-signal (as
 * unit-arena); the policy is stood in for, the layers above it as standins.h has them. */
#include "registry.h"
#include "standins.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct policy policy_in_force = {
    .thp = {.mode = THP_MODE_LARGE, .threshold = (size_t)2 << 20},
    .arena_size = (size_t)8 << 20,
    .purge_delay_ms = 50,
    .purge = OS_PURGE_DONTNEED,
};

#define NOTERS 3
#define ROUNDS 20000

static _Atomic bool stop;
static _Atomic unsigned long sleeps;
static _Atomic uint64_t dirty; /* the purger's look at the dirty pages (pages_dirty_now's) */

static uint64_t dirty_now(void)
{
    return atomic_load(&dirty);
}

static void *purger(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        uint32_t wakes = purge_wakes_seen();
        atomic_store(&dirty, 0); /* the pass purged it */
        purge_wait_for_work(0, wakes, dirty_now);
        atomic_fetch_add(&sleeps, 1);
    }
    return NULL;
}

static void *noter(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        switch ((i + k) % 6) {
        case 0:
            atomic_fetch_add(&dirty, 4096);
            purge_note_dirty();
            break;
        case 1:
            purge_note_chunks();
            break;
        case 2:
            purge_note_active();
            break;
        case 3:
            purge_inline_count(NULL);
            break;
        case 4:
            purge_note_dense(i % 2);
            break;
        default:
            /* not created: the pending rule doubles, and no later request starts it */
            if (i == ROUNDS - 100 && k == 0)
                purger_thread_not_started();
            else
                purge_want_thread();
        }
        (void)purger_thread_started();
    }
    return NULL;
}

int main(void)
{
    pthread_t p, n[NOTERS];
    pthread_create(&p, NULL, purger, NULL);
    for (uintptr_t k = 0; k < NOTERS; k++)
        pthread_create(&n[k], NULL, noter, (void *)k);
    for (int k = 0; k < NOTERS; k++)
        pthread_join(n[k], NULL);
    atomic_store(&stop, true);
    purge_note_chunks(); /* wakes it, or it sees the count moved */
    pthread_join(p, NULL);
    tap_ok(atomic_load(&sleeps) > 0,
           "%d threads noted %d times each; the purger slept %lu times, each woken", NOTERS, ROUNDS,
           atomic_load(&sleeps));
    return tap_done();
}
