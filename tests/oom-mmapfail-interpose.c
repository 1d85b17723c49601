/* oom-mmapfail-interpose: an LD_PRELOAD library, listed before the allocator, that makes
 * memory-mapping calls fail from the Nth call on, for tests/oom-mmapfail.
 *
 *   MMAPFAIL_AFTER=N     anonymous mmap/mmap64/mremap/mprotect calls number N, N+1, ...
 *                        fail with ENOMEM (calls are counted from process start)
 *   MMAPFAIL_MADVISE=1   madvise calls are counted and fail (EAGAIN) the same way
 *
 * Exported controls (found by the program with dlsym): mmapfail_set(0) turns failing off
 * at run time, mmapfail_set(1) on again; mmapfail_calls() / mmapfail_failed() count.
 * The real calls are made with syscall(2): no dlsym, nothing that could allocate. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static long after = -1; /* -1: not read yet; 0: never fail */
static int madvise_too;
static int enabled = 1;
static long calls, failed;

EXPORT void mmapfail_set(int on);
EXPORT long mmapfail_calls(void);
EXPORT long mmapfail_failed(void);
EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off);
EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...);
EXPORT int mprotect(void *addr, size_t len, int prot);
EXPORT int madvise(void *addr, size_t len, int advice);

static long env_long(const char *name)
{
    const char *s = getenv(name); /* no allocation */
    long v = 0;
    if (!s)
        return 0;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (*s - '0');
    return v;
}

static long load(void)
{
    long a = __atomic_load_n(&after, __ATOMIC_ACQUIRE);
    if (a < 0) {
        a = env_long("MMAPFAIL_AFTER");
        __atomic_store_n(&madvise_too, env_long("MMAPFAIL_MADVISE") != 0, __ATOMIC_RELAXED);
        __atomic_store_n(&after, a, __ATOMIC_RELEASE);
    }
    return a;
}

/* 1 when this call is to fail. */
static int should_fail(void)
{
    long a = load();
    long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (a == 0 || !__atomic_load_n(&enabled, __ATOMIC_RELAXED) || n < a)
        return 0;
    __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
    return 1;
}

void mmapfail_set(int on)
{
    __atomic_store_n(&enabled, on, __ATOMIC_RELAXED);
}

long mmapfail_calls(void)
{
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

long mmapfail_failed(void)
{
    return __atomic_load_n(&failed, __ATOMIC_RELAXED);
}

static void *mmap_call(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    if ((flags & MAP_ANONYMOUS) && should_fail()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
#ifdef SYS_mmap2 /* 32-bit: SYS_mmap takes a struct; mmap2 an offset in 4 KiB units */
    return (void *)syscall(SYS_mmap2, addr, len, prot, flags, fd, (long)(off >> 12));
#else
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
#endif
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap_call(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap_call(addr, len, prot, flags, fd, off);
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    if (should_fail()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

int mprotect(void *addr, size_t len, int prot)
{
    if (should_fail()) {
        errno = ENOMEM;
        return -1;
    }
    return (int)syscall(SYS_mprotect, addr, len, prot);
}

int madvise(void *addr, size_t len, int advice)
{
    load();
    if (__atomic_load_n(&madvise_too, __ATOMIC_RELAXED) && should_fail()) {
        errno = EAGAIN;
        return -1;
    }
    return (int)syscall(SYS_madvise, addr, len, advice);
}
