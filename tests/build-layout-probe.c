/* build-layout-probe: a small process for tests/build-layout.sh: a thread allocates and frees
 * small blocks of a few sizes (the bench's fixed-1t, shorter), exits, and the main thread,
 * after the join, writes its own /proc/self/smaps to stdout with read/write only. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *run(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        size_t n = 16 + (size_t)(i % 64) * 16; /* 16 .. 1024 bytes */
        volatile char *p = malloc(n);
        if (!p)
            abort();
        p[0] = 1;
        free((void *)p);
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) || pthread_join(t, NULL))
        return 1;
    char buf[4096];
    int fd = open("/proc/self/smaps", O_RDONLY);
    if (fd < 0)
        return 1;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (write(1, buf, (size_t)n) != n)
            return 1;
    return 0;
}
