/* api-pagesize-interpose: an LD_PRELOAD library, listed before the allocator, whose getauxval
 * reports another kernel page size, for tests/api-passthrough.sh: a machine with 16 or 64 KiB
 * pages (loong64, ppc64el, some arm64 kernels) on this one.
 *
 *   PAGESIZE_FAKE=N   getauxval(AT_PAGESZ) returns N (65536 when unset)
 *
 * Every other type is answered from /proc/self/auxv, read with open/read only: nothing
 * here allocates or calls dlsym, so it is safe inside malloc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT unsigned long getauxval(unsigned long type);

static unsigned long env_ulong(const char *name, unsigned long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    unsigned long v = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (unsigned long)(*s - '0');
    return v;
}

unsigned long getauxval(unsigned long type)
{
    if (type == AT_PAGESZ)
        return env_ulong("PAGESIZE_FAKE", 65536);
    int fd = open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned long pair[2], found = 0;
    int hit = 0;
    while (!hit && read(fd, pair, sizeof pair) == (ssize_t)sizeof pair && pair[0] != AT_NULL)
        if (pair[0] == type) {
            found = pair[1];
            hit = 1;
        }
    close(fd);
    if (!hit)
        errno = ENOENT;
    return found;
}
