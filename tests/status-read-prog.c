/* status-read-prog: processes that are hard to read, for tests/status-read.sh.
 *
 *   status-read-prog uffd           4 MiB of MADV_HUGEPAGE memory, written (two huge pages
 *                                   where the kernel grants them), registered with a
 *                                   userfaultfd that handles kernel faults and that nobody
 *                                   serves; SIGUSR1 drops the second 2 MiB (MADV_DONTNEED),
 *                                   so that a reader who listed it waits forever. Exit 3
 *                                   with "no-uffd ERRNO" where such a userfaultfd cannot be
 *                                   had (vm.unprivileged_userfaultfd = 0 without privilege).
 *   status-read-prog maps N FILE    FILE (one page) mapped N times, apart: N mappings whose
 *                                   name is FILE's path.
 *   status-read-prog fork N MIB     MIB MiB of MADV_HUGEPAGE memory, one byte written every
 *                                   2 MiB, then N children forked that keep it (copy-on-write,
 *                                   never written again); "child PID" for each.
 *
 * Each prints "huge KB" (AnonHugePages of its memory, from its own smaps, where it has
 * some), then "ready PID", and waits to be killed (children die with their parent). */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "smaps-huge.h"

#define MIB ((size_t)1 << 20)

static unsigned char *block;

static void on_usr1(int sig)
{
    (void)sig;
    madvise(block + 2 * MIB, 2 * MIB, MADV_DONTNEED);
}

/* len bytes on a 2 MiB boundary, MADV_HUGEPAGE, one byte written every 2 MiB. */
static unsigned char *huge_block(size_t len)
{
    unsigned char *m =
        mmap(NULL, len + 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)m + 2 * MIB - 1) & ~(2 * MIB - 1));
    madvise(p, len, MADV_HUGEPAGE);
    for (size_t i = 0; i < len; i += 2 * MIB)
        p[i] = 1;
    return p;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "uffd")) {
        /* flags 0: kernel faults too (not UFFD_USER_MODE_ONLY), which readers of this
         * process's memory (process_vm_readv) take */
        int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
        if (uffd < 0) {
            printf("no-uffd %s\n", strerror(errno));
            return 3;
        }
        struct uffdio_api api = {.api = UFFD_API};
        if (ioctl(uffd, UFFDIO_API, &api) != 0) {
            printf("no-uffd UFFDIO_API %s\n", strerror(errno));
            return 3;
        }
        block = huge_block(4 * MIB);
        if (!block)
            return 1;
        struct uffdio_register reg = {.range = {(uintptr_t)block, 4 * MIB},
                                      .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
            printf("no-uffd UFFDIO_REGISTER %s\n", strerror(errno));
            return 3;
        }
        signal(SIGUSR1, on_usr1);
        printf("huge %lu\n", huge_kb((uintptr_t)block, 4 * MIB));
    } else if (argc == 4 && !strcmp(argv[1], "maps")) {
        long n = atol(argv[2]);
        int fd = open(argv[3], O_RDONLY);
        if (fd < 0) {
            perror(argv[3]);
            return 1;
        }
        /* one reservation, then a page of the file every other page: mappings that
         * neither merge nor touch */
        unsigned char *r = mmap(NULL, (size_t)n * 8192, PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED)
            return 1;
        for (long i = 0; i < n; i++)
            if (mmap(r + i * 8192, 4096, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
                perror("mmap");
                return 1;
            }
        munmap(r + (size_t)n * 8192 - 4096, 4096);
        for (long i = 0; i + 1 < n; i++) /* the PROT_NONE gaps go: the file pages stay apart */
            munmap(r + i * 8192 + 4096, 4096);
        printf("mappings %ld\n", n);
    } else if (argc == 4 && !strcmp(argv[1], "fork")) {
        int n = atoi(argv[2]);
        size_t len = (size_t)atol(argv[3]) * MIB;
        block = huge_block(len);
        if (!block)
            return 1;
        printf("huge %lu\n", huge_kb((uintptr_t)block, len));
        pid_t parent = getpid();
        for (int i = 0; i < n; i++) {
            pid_t c = fork();
            if (c == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                    _exit(0);
                for (;;)
                    pause();
            }
            if (c < 0)
                return 1;
            printf("child %d\n", (int)c);
        }
    } else {
        fprintf(stderr, "usage: status-read-prog uffd | maps N FILE | fork N MIB\n");
        return 2;
    }
    printf("ready %d\n", (int)getpid());
    for (;;)
        pause();
}
