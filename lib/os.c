/* os: every system call about memory goes through here. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MEMBARRIER_CMD_PRIVATE_EXPEDITED
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#endif
#ifndef MADV_FREE
#define MADV_FREE 8
#endif

void *os_reserve_aligned(size_t size, size_t align, enum os_reserve how)
{
    /* Over-reserve by align, then trim both ends: the kernel has no aligned mmap. */
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    size_t span = size + align;
    int prot = how == OS_RESERVE_UNCOMMITTED ? PROT_NONE : PROT_READ | PROT_WRITE;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (how == OS_RESERVE_NORESERVE ? MAP_NORESERVE : 0);
    uint8_t *p = mmap(NULL, span, prot, flags, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - size;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((uint8_t *)start + size, tail);
    return (void *)start;
}

TEXT_WARM
void os_release(void *addr, size_t size)
{
    munmap(addr, size);
}

TEXT_WARM
bool os_remap_in_place(void *addr, size_t old, size_t new)
{
    int saved = errno;
    bool ok = mremap(addr, old, new, 0) != MAP_FAILED;
    errno = saved;
    return ok;
}

TEXT_WARM
bool os_remap_to(void *addr, size_t old, size_t new, void *dst)
{
    if (mremap(addr, old, new, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED)
        return true;
    errno = ENOMEM;
    return false;
}

TEXT_COLD
bool os_commit(void *addr, size_t size)
{
    if (mprotect(addr, size, PROT_READ | PROT_WRITE) == 0)
        return true;
    errno = ENOMEM;
    return false;
}

TEXT_COLD
bool os_decommit(void *addr, size_t size, const char *name)
{
    int saved = errno;
    void *p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    errno = saved;
    if (p == MAP_FAILED)
        return false;
    os_name(addr, size, name);
    return true;
}

#define OVERCOMMIT_PATH "/proc/sys/vm/overcommit_memory"
static int overcommit_mode = -1; /* unread */

int os_overcommit_mode(void)
{
    int m = __atomic_load_n(&overcommit_mode, __ATOMIC_RELAXED);
    if (m >= 0)
        return m;
    char buf[16];
    m = 0; /* unreadable (no /proc): the kernel's default */
    if (os_read_small_file(OVERCOMMIT_PATH, buf, sizeof buf) > 0 && buf[0] >= '0' && buf[0] <= '2')
        m = buf[0] - '0';
    /* Racing first readers read the same file: same value. */
    __atomic_store_n(&overcommit_mode, m, __ATOMIC_RELAXED);
    return m;
}

TEXT_COLD
void os_overcommit_override(int mode)
{
    __atomic_store_n(&overcommit_mode, mode, __ATOMIC_RELAXED);
}

bool os_purge(void *addr, size_t size, enum os_purge how)
{
    if (how == OS_PURGE_FREE && madvise(addr, size, MADV_FREE) == 0)
        return true;
    /* MADV_FREE is missing before Linux 4.5: fall back to what always works. */
    return madvise(addr, size, MADV_DONTNEED) == 0;
}

/* The calling thread, for process_madvise (linux/pidfd.h's PIDFD_SELF_THREAD, Linux 6.15):
 * no descriptor to open, keep or have closed under us by a program that closes them all. */
#define OS_PIDFD_SELF_THREAD (-10000)
/* 0: not tried yet, 1: the kernel takes it, -1: it refused (older kernel, a seccomp filter
 * that answers with an error): never again. */
static _Atomic int vector_state;
static _Atomic int vector_forced_off;
_Atomic uint64_t os_purge_vector_calls, os_purge_vector_ranges;

TEXT_WARM
void os_purge_batch_init(struct os_purge_batch *b, enum os_purge how)
{
    b->how = how;
    b->n = 0;
    b->vector_ok = -1;
    b->bytes = 0;
}

TEXT_COLD
void os_purge_batch_force_single(int on)
{
    atomic_store(&vector_forced_off, on);
}

/* No seccomp filter on this thread: /proc/thread-self/status's "Seccomp:" is 0 (a thread's
 * own filters are what a call of it meets). Unreadable, or the line beyond the buffer (a
 * long Groups line): assume one. */
TEXT_WARM
static bool no_seccomp_filter(void)
{
    char buf[2048];
    if (os_read_small_file("/proc/thread-self/status", buf, sizeof buf) <= 0)
        return false;
    const char *f = strstr(buf, "\nSeccomp:");
    if (!f)
        return false;
    f += sizeof "\nSeccomp:" - 1;
    while (*f == ' ' || *f == '\t')
        f++;
    return f[0] == '0' && (f[1] == '\n' || f[1] == '\0');
}

/* One process_madvise for the batch's ranges: the bytes it gave back, or -1 when it gave
 * back none (errno set). */
TEXT_WARM
static long purge_vector(const struct os_purge_batch *b, int advice)
{
#ifdef SYS_process_madvise
    return syscall(SYS_process_madvise, OS_PIDFD_SELF_THREAD, b->r, (size_t)b->n, advice, 0u);
#else
    (void)b, (void)advice;
    errno = ENOSYS;
    return -1;
#endif
}

TEXT_WARM
size_t os_purge_batch_flush(struct os_purge_batch *b)
{
    unsigned i = 0;
    int saved = errno;
    int advice = b->how == OS_PURGE_FREE ? MADV_FREE : MADV_DONTNEED;
    /* One range: a madvise is the same call. Else the vector, where it may be used. */
    if (b->n > 1 && atomic_load_explicit(&vector_state, memory_order_relaxed) >= 0 &&
        !atomic_load_explicit(&vector_forced_off, memory_order_relaxed)) {
        if (b->vector_ok < 0)
            b->vector_ok = no_seccomp_filter();
        if (b->vector_ok) {
            long done = purge_vector(b, advice);
            if (done < 0 && advice == MADV_FREE)
                done = purge_vector(b, MADV_DONTNEED); /* as os_purge falls back */
            if (done < 0) {
                /* the kernel's or a filter's no, for good; anything else only this time */
                if (errno == EINVAL || errno == EBADF || errno == ENOSYS || errno == EPERM ||
                    errno == ESRCH || errno == EACCES)
                    atomic_store_explicit(&vector_state, -1, memory_order_relaxed);
            } else {
                atomic_store_explicit(&vector_state, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&os_purge_vector_calls, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&os_purge_vector_ranges, b->n, memory_order_relaxed);
                /* the ranges it took whole; one it stopped inside is done again below */
                while (i < b->n && (size_t)done >= b->r[i].iov_len) {
                    done -= (long)b->r[i].iov_len;
                    b->bytes += b->r[i].iov_len;
                    i++;
                }
            }
        }
    }
    for (; i < b->n; i++)
        if (os_purge(b->r[i].iov_base, b->r[i].iov_len, b->how))
            b->bytes += b->r[i].iov_len;
    b->n = 0;
    errno = saved;
    return b->bytes;
}

TEXT_WARM
void os_purge_batch_add(struct os_purge_batch *b, void *addr, size_t len)
{
    if (b->n && (char *)b->r[b->n - 1].iov_base + b->r[b->n - 1].iov_len == (char *)addr) {
        b->r[b->n - 1].iov_len += len;
        return;
    }
    if (b->n == OS_PURGE_BATCH)
        os_purge_batch_flush(b);
    b->r[b->n].iov_base = addr;
    b->r[b->n].iov_len = len;
    b->n++;
}

TEXT_BUSY
bool os_advise(void *addr, size_t size, enum os_advice advice)
{
    int a;
    switch (advice) {
    case OS_ADVICE_HUGE:
        a = MADV_HUGEPAGE;
        break;
    case OS_ADVICE_NOHUGE:
        a = MADV_NOHUGEPAGE;
        break;
    default:
        return true;
    }
    return madvise(addr, size, a) == 0;
}

void os_name(void *addr, size_t size, const char *name)
{
    int saved = errno;
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, size, (unsigned long)name);
    errno = saved;
}

long os_read_small_file(const char *path, char *buf, size_t cap)
{
    int saved = errno;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errno = saved;
        return -1;
    }
    size_t len = os_read_fd(fd, buf, cap);
    close(fd);
    errno = saved;
    return (long)len;
}

size_t os_read_fd(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

TEXT_COLD
void os_write_stderr(const char *s)
{
    size_t len = strlen(s);
    while (len) {
        ssize_t n = write(2, s, len);
        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

TEXT_COLD
bool os_send_datagram(const char *path, const void *buf, size_t len)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof a.sun_path)
        return false;
    memcpy(a.sun_path, path, n + 1);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    ssize_t sent = sendto(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&a,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1));
    close(fd);
    return sent == (ssize_t)len;
}

TEXT_COLD
char *os_format_u64(char *buf, uint64_t v)
{
    char tmp[21];
    int i = (int)sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t n = sizeof tmp - (size_t)i;
    memcpy(buf, tmp + i, n);
    buf[n] = '\0';
    return buf;
}

static bool membarrier_cmd(int cmd)
{
#ifdef SYS_membarrier
    int saved = errno;
    long rc = syscall(SYS_membarrier, cmd, 0, 0);
    errno = saved;
    return rc == 0;
#else
    (void)cmd;
    return false;
#endif
}

bool os_barrier_register(void)
{
    return membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

bool os_barrier(void)
{
    return membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

void os_wait_while(_Atomic int *addr, int val)
{
    int saved = errno;
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
    errno = saved;
}

void os_wake_all(_Atomic int *addr)
{
    int saved = errno;
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, __INT_MAX__, NULL, NULL, 0);
    errno = saved;
}

void os_wake_one(_Atomic int *addr)
{
    int saved = errno;
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

void os_startup_random(uint64_t out[2])
{
    const void *r = (const void *)getauxval(AT_RANDOM);
    if (r) {
        memcpy(out, r, 2 * sizeof(uint64_t));
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)(uintptr_t)&ts ^ ((uint64_t)(uintptr_t)out << 17) ^
                 (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull;
    out[0] = x;
    out[1] = (x ^ (uint64_t)ts.tv_sec) * 0xbf58476d1ce4e5b9ull;
}

uint32_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

size_t os_page_size(void)
{
    unsigned long v = getauxval(AT_PAGESZ);
    if (v == 0) {
        long s = sysconf(_SC_PAGESIZE);
        v = s > 0 ? (unsigned long)s : 4096;
    }
    return (size_t)v;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

TEXT_WARM
int os_collapse(void *addr, size_t size)
{
    int saved = errno;
    int rc = madvise(addr, size, MADV_COLLAPSE) == 0 ? 0 : errno;
    errno = saved;
    return rc;
}

TEXT_WARM
bool os_page_mapped(const void *addr)
{
    unsigned char v;
    int saved = errno; /* free and realloc leave errno alone */
    bool mapped = mincore((void *)addr, 1, &v) == 0 || errno != ENOMEM;
    errno = saved;
    return mapped;
}

TEXT_WARM
bool os_in_loader(const void *addr)
{
    /* [lo, hi) of ld.so's executable segments, worked out on the first call (racing
     * callers write the same values); lo 1 when there is no loader. */
    static uintptr_t lo, hi;
    uintptr_t l = __atomic_load_n(&lo, __ATOMIC_ACQUIRE);
    if (l == 0) {
        uintptr_t base = (uintptr_t)getauxval(AT_BASE), low = UINTPTR_MAX, high = 0;
        const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
        if (base && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0) {
            const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
            for (unsigned i = 0; i < eh->e_phnum; i++) {
                if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
                    continue;
                if (base + ph[i].p_vaddr < low)
                    low = base + ph[i].p_vaddr;
                if (base + ph[i].p_vaddr + ph[i].p_memsz > high)
                    high = base + ph[i].p_vaddr + ph[i].p_memsz;
            }
        }
        if (high == 0)
            low = high = 1;
        __atomic_store_n(&hi, high, __ATOMIC_RELAXED);
        __atomic_store_n(&lo, low, __ATOMIC_RELEASE);
        l = low;
    }
    return (uintptr_t)addr >= l && (uintptr_t)addr < __atomic_load_n(&hi, __ATOMIC_RELAXED);
}
