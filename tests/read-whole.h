/* A file read whole into a buffer with read(2), for programs that read /proc while an
 * allocator is under test (policy-hugepage-probe, tests/bench/common.c): no stdio, so no
 * allocation of its own. */
#ifndef THPALLOC_TESTS_READ_WHOLE_H
#define THPALLOC_TESTS_READ_WHOLE_H
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

/* path's first size - 1 bytes in buf, NUL-terminated: their count; 0 when it cannot be
 * opened. */
static inline size_t read_whole(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    if (fd < 0)
        return 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == size - 1)
            break;
    }
    close(fd);
    buf[n] = 0;
    return n;
}
#endif
