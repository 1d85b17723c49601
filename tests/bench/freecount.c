/* freecount: an LD_PRELOAD module that counts the bytes a program frees, so that
 * run-bench can give every workload's madvise + process_madvise + munmap calls per MiB freed
 * (tests/bench/README.md, "System calls").  run-bench loads it in a run of its own, in
 * front of the program's default allocator (glibc's, or the one a program links itself, as
 * Debian's redis-server does with jemalloc): free and realloc go on to the next definitions
 * (dlsym RTLD_NEXT), never to glibc's by name, so blocks reach the allocator that made them.
 *
 * A block's freed bytes are that allocator's malloc_usable_size: one count per row, since
 * the row's program and input are the same under every allocator.  A realloc that moves
 * frees the old block's bytes; one that shrinks in place frees the difference.  At exit
 * each process appends "freed_bytes=N pid=P" to $BENCH_FREECOUNT_OUT (children too:
 * run-bench sums the lines); a forked child starts again from zero. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void (*next_free)(void *);
static void *(*next_realloc)(void *, size_t);
static size_t (*next_usable)(void *);
static _Atomic unsigned long long freed_bytes;

/* dlsym may free while it runs: those frees find next_free unset and leak their block
 * (a few bytes, once) rather than hand it to an allocator that did not make it. */
static int resolve(void)
{
    static __thread int busy;
    if (next_free && next_realloc && next_usable)
        return 1;
    if (busy)
        return 0;
    busy = 1;
    void *u = dlsym(RTLD_NEXT, "malloc_usable_size");
    void *r = dlsym(RTLD_NEXT, "realloc");
    void *f = dlsym(RTLD_NEXT, "free");
    busy = 0;
    if (!u || !r || !f)
        return 0;
    next_usable = (size_t(*)(void *))u;
    next_realloc = (void *(*)(void *, size_t))r;
    next_free = (void (*)(void *))f;
    return 1;
}

static void count(unsigned long long n)
{
    atomic_fetch_add_explicit(&freed_bytes, n, memory_order_relaxed);
}

void free(void *p)
{
    if (!resolve())
        return;
    if (p)
        count(next_usable(p));
    next_free(p);
}

void *realloc(void *p, size_t n)
{
    if (!resolve())
        return NULL; /* only dlsym's own callers see this, before the first lookup ends */
    size_t old = p ? next_usable(p) : 0;
    void *q = next_realloc(p, n);
    if (!p || (!q && n))
        return q; /* a malloc, or a failed realloc: nothing was freed */
    if (q != p)
        count(old);
    else {
        size_t now = next_usable(q);
        if (now < old)
            count(old - now);
    }
    return q;
}

static void child_starts_afresh(void)
{
    atomic_store_explicit(&freed_bytes, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void freecount_init(void)
{
    resolve();
    pthread_atfork(NULL, NULL, child_starts_afresh);
}

__attribute__((destructor)) static void freecount_report(void)
{
    const char *path = getenv("BENCH_FREECOUNT_OUT");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[96];
    int len = snprintf(line, sizeof line, "freed_bytes=%llu pid=%d\n",
                       (unsigned long long)atomic_load(&freed_bytes), (int)getpid());
    /* one write of one short line: appends from several processes never interleave */
    if (len > 0 && write(fd, line, (size_t)len) != len)
        len = -1;
    close(fd);
}
