/* A test interposer loaded before libthpalloc.so.1: it injects the system THP setting (the
 * sysfs file is replaced by the file POLICY_SHIM_ENABLED names) and the overcommit mode
 * (/proc/sys/vm/overcommit_memory by POLICY_SHIM_OVERCOMMIT's file), and counts the madvise
 * calls the allocator makes, written at exit to the file POLICY_SHIM_OUT names as
 * "huge=N nohuge=N other=N". Raw system calls only: this runs inside malloc. */

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned long n_huge, n_nohuge, n_other;

static int open_impl(const char *path, int flags, mode_t mode)
{
    const char *fake = getenv("POLICY_SHIM_ENABLED");
    if (fake && strcmp(path, "/sys/kernel/mm/transparent_hugepage/enabled") == 0)
        path = fake;
    fake = getenv("POLICY_SHIM_OVERCOMMIT");
    if (fake && strcmp(path, "/proc/sys/vm/overcommit_memory") == 0)
        path = fake;
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    return open_impl(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    return open_impl(path, flags, mode);
}

int madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_HUGEPAGE)
        __atomic_fetch_add(&n_huge, 1, __ATOMIC_RELAXED);
    else if (advice == MADV_NOHUGEPAGE)
        __atomic_fetch_add(&n_nohuge, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&n_other, 1, __ATOMIC_RELAXED);
    return (int)syscall(SYS_madvise, addr, len, advice);
}

static void put(int fd, const char *name, unsigned long v)
{
    char buf[48], num[24];
    int i = (int)sizeof num - 1;
    num[i] = '\0';
    do {
        num[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    strcpy(buf, name);
    strcat(buf, num + i);
    if (write(fd, buf, strlen(buf)) < 0)
        return;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("POLICY_SHIM_OUT");
    if (!path)
        return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    put(fd, "huge=", n_huge);
    put(fd, " nohuge=", n_nohuge);
    put(fd, " other=", n_other);
    if (write(fd, "\n", 1) < 0)
        return;
    close(fd);
}
