/* purge-lazyfree: a server's lazy free. The main thread allocates BYTES of 1000-byte blocks;
 * a helper thread, started before them (a server's background thread), frees them all;
 * then the main thread waits for requests and makes no allocator call at all, reading its
 * RssAnon with read(2) into a stack buffer. The memory must go back within 10 s (redis's
 * FLUSHALL ASYNC kept 560 MB for good: the emptied pages were the idle owner's, and
 * nothing asked for the purger). Prints one relayed check. */
#include "purger-running.h"
#include "relay-report.h"
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 1000

static void **blk;
static long nblk;
static int go, done, quit;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *lazy_free(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!go && !quit)
            pthread_cond_wait(&cv, &mu);
        if (quit)
            break;
        pthread_mutex_unlock(&mu);
        for (long i = 0; i < nblk; i++)
            free(blk[i]);
        pthread_mutex_lock(&mu);
        go = 0;
        done = 1;
        pthread_cond_broadcast(&cv); /* and stays, idle, like the server's thread */
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* RssAnon in KiB, without the allocator. */
static long rss_anon(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strstr(buf, "RssAnon:");
    return p ? atol(p + 8) : -1;
}

/* nblk blocks of BLOCK bytes from the owner (this thread), written. */
static void fill(void)
{
    for (long i = 0; i < nblk; i++) {
        blk[i] = malloc(BLOCK);
        if (!blk[i])
            exit(2);
        memset(blk[i], 0x5a, BLOCK);
    }
}

/* The helper frees them all; the owner waits for it without an allocator call. */
static void free_in_helper(void)
{
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    while (!done)
        pthread_cond_wait(&cv, &mu);
    go = done = 0;
    pthread_mutex_unlock(&mu);
}

/* One cycle: fill, wait idle_ms (the purger may reclaim the idle heap meanwhile), hand the
 * blocks to the helper to free, wait idle for them to go back. */
static void cycle(long mib, int idle_ms, const char *what)
{
    nblk = mib * 1048576 / BLOCK;
    fill();
    long full = rss_anon();
    struct timespec idle = {idle_ms / 1000, (long)(idle_ms % 1000) * 1000000};
    nanosleep(&idle, NULL);
    free_in_helper();
    long now = rss_anon(), want = full - mib * 1024 * 3 / 4;
    int ms = 0;
    struct timespec tick = {0, 50 * 1000000};
    while (now > want && ms < 10000) {
        nanosleep(&tick, NULL);
        ms += 50;
        now = rss_anon();
    }
    fputs("thp-only - ", stdout); /* glibc keeps it (its arenas trim only their top) */
    report(now <= want,
           "%s: %ld MiB freed by another thread while the owner waits idle: RssAnon %ld -> %ld "
           "KiB after %d ms (want <= %ld)",
           what, mib, full, now, ms, want);
}

/* A busy owner: rounds of batches of BLOCK bytes that the helper frees, the owner allocating
 * the next batch at once (a producer and its consumer). Each batch's pages are collected by
 * the owner's next allocations, so nothing waits for a purger: none may start for it
 * (lib/heap.c, remote_emptied_collected; it did once 16 MiB had passed). */
static void busy(long batch_mib, int rounds)
{
    nblk = batch_mib * 1048576 / BLOCK;
    for (int r = 0; r < rounds; r++) {
        fill();
        free_in_helper();
    }
    fputs("thp-only - ", stdout);
    report(!purger_running(),
           "busy owner: %ld MiB freed by another thread in batches of %ld MiB while the owner "
           "allocates the next: no purger thread started",
           batch_mib * rounds, batch_mib);
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 64;
    int twice = argc > 2 && !strcmp(argv[2], "twice");
    pthread_t t;
    if (pthread_create(&t, NULL, lazy_free, NULL) != 0)
        return 2;
    blk = malloc((size_t)(mib * 1048576 / BLOCK) * sizeof *blk);
    if (!blk)
        return 2;
    if (argc > 2 && !strcmp(argv[2], "busy"))
        busy(mib, 48);
    else
        cycle(mib, 0, "first");
    /* the second time the purger runs, and has reclaimed the idle owner's heap (full pages,
     * nothing to give back) before the frees come */
    if (twice)
        cycle(mib, 1500, "after a reclaim");
    pthread_mutex_lock(&mu);
    quit = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    free(blk);
    printf("end\n");
    return report_failures ? 1 : 0;
}
