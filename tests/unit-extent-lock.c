/* unit-extent-lock: a shard's lock (lib/extent-shard.h: a word taken by CAS, slept on by futex
 * once spinning did not get it): a request that finds it taken waits, asleep, and goes on once
 * it is let go; threads on several CPUs taking and freeing blocks at once never get the same
 * granules (every block keeps its own bytes) and leave every lock free; the fork hook holds
 * them across a fork, the child's are free and a request that waited in the parent goes on.
 * Built with THPALLOC_DEBUG: every operation checks its map's invariants under the lock. */
#include "extent-shard.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit-extent-env.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void free_it(void *p)
{
    extent_free(registry_lookup(p), p);
}

static _Atomic int took;

static void *take_one(void *arg)
{
    void **out = arg;
    *out = extent_alloc(64 * KIB, 0, false);
    atomic_store(&took, 1);
    return NULL;
}

/* A request while the lock is held: it sleeps (the word says so) until the unlock wakes it. */
static void test_wait(void)
{
    void *p = NULL;
    pthread_t th;
    atomic_store(&took, 0);
    shard_lock(&shard0);
    pthread_create(&th, NULL, take_one, &p);
    int word = 0;
    for (int i = 0; i < 2000 && word != 2; i++) { /* up to 10 s: a loaded machine */
        sleep_ms(5);
        word = atomic_load(shard_lock_word(&shard0));
    }
    tap_ok(word == 2 && !atomic_load(&took),
           "wait: a request finds the lock taken and sleeps on it (word %d)", word);
    shard_unlock(&shard0);
    pthread_join(th, NULL);
    tap_ok(p && atomic_load(shard_lock_word(&shard0)) == 0,
           "wait: the unlock woke it, it got its block (%p) and the lock is free", p);
    free_it(p);
}

#define THREADS 4
#define STEPS 4000
#define LIVE 32

static _Atomic int corrupt;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    struct {
        uint8_t *p;
        size_t n;
        uint8_t v;
    } live[LIVE] = {{0}};
    for (int i = 0; i < STEPS; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % LIVE;
        if (live[k].p) {
            if (live[k].p[0] != live[k].v || live[k].p[live[k].n - 1] != live[k].v)
                atomic_store(&corrupt, 1);
            free_it(live[k].p);
        }
        size_t n = (size_t)8 * KIB << ((seed >> 16) % 8); /* 8 KiB .. 1 MiB */
        n += (seed >> 20) % n;
        if (n > SC_MAX_SIZE)
            n = SC_MAX_SIZE;
        uint8_t *p = extent_alloc(n, 0, false);
        if (!p) {
            atomic_store(&corrupt, 1);
            live[k].p = NULL;
            continue;
        }
        live[k].v = (uint8_t)(i + 1);
        p[0] = p[n - 1] = live[k].v;
        live[k].p = p;
        live[k].n = n;
    }
    for (int k = 0; k < LIVE; k++) {
        if (live[k].p && (live[k].p[0] != live[k].v || live[k].p[live[k].n - 1] != live[k].v))
            atomic_store(&corrupt, 1);
        if (live[k].p)
            free_it(live[k].p);
    }
    return NULL;
}

static bool locks_free(void)
{
    for (unsigned i = 0; i < EXT_SHARDS; i++) {
        struct ext_shard *s = shard_at(i);
        if (s && atomic_load(shard_lock_word(s)) != 0)
            return false;
    }
    return true;
}

/* Threads take and free blocks at once, in their CPUs' shards and each other's. */
static void test_churn(void)
{
    pthread_t th[THREADS];
    atomic_store(&extent_heap_second_made, 1);
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, churn, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t used;
    int64_t uncounted;
    extent_stats(&used, &uncounted);
    tap_ok(!atomic_load(&corrupt) && used == 0,
           "churn: %d threads, %d requests each: every block kept its bytes, none in use after "
           "(%llu)",
           THREADS, STEPS, (unsigned long long)used);
    tap_ok(locks_free(), "churn: every shard's lock is free");
    atomic_store(&extent_heap_second_made, 0);
}

/* The fork hook: the locks held across fork(); a request that waits meanwhile goes on in the
 * parent; the child's locks are free, and it takes and frees a block. */
static void test_fork(void)
{
    void *p = NULL;
    pthread_t th;
    atomic_store(&took, 0);
    extent_fork(FORK_PREPARE);
    pthread_create(&th, NULL, take_one, &p);
    sleep_ms(50);
    pid_t pid = fork();
    if (pid == 0) {
        extent_fork(FORK_CHILD);
        void *q = extent_alloc(256 * KIB, 0, false);
        bool ok = q && locks_free();
        if (q)
            free_it(q);
        _exit(ok && locks_free() ? 0 : 1);
    }
    bool waited = !atomic_load(&took);
    extent_fork(FORK_PARENT);
    pthread_join(th, NULL);
    int st = -1;
    waitpid(pid, &st, 0);
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "fork: the child's locks are free, it takes and frees a block (status %d)", st);
    tap_ok(waited && p && locks_free(),
           "fork: a request that waited across the fork goes on in the parent (%p)", p);
    free_it(p);
}

int main(void)
{
    test_wait();
    test_churn();
    test_fork();
    return tap_done();
}
