/* status-scan-prog: memory with a known content for thp-status --scan (tests/status-scan.sh).
 *
 *   status-scan-prog sparse MIB   malloc(MIB MiB), one byte written every 2 MiB
 *   status-scan-prog full MIB     malloc(MIB MiB), every byte written
 *   status-scan-prog half MIB     an mmap of MIB MiB on a 2 MiB boundary with MADV_HUGEPAGE
 *                                 (glibc's, whatever the allocator), the first 1 MiB of
 *                                 every 2 MiB written
 *
 * It prints "block ADDRESS BYTES", "written PIECES" (the 4 KiB pieces of the block that hold
 * a non-zero byte), "huge KB" (AnonHugePages of the block's mapping(s), from its own smaps),
 * then "ready PID", and waits. SIGUSR1 unmaps the block ("unmapped" is not printed: the
 * signal handler stays async-signal-safe). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "smaps-huge.h"

#define MIB ((size_t)1 << 20)

static void *block;
static size_t block_len;

static void on_usr1(int sig)
{
    (void)sig;
    munmap(block, block_len);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    size_t len = (size_t)atol(argv[2]) * MIB, written = 0;
    unsigned char *p;
    if (!strcmp(argv[1], "half")) {
        /* 2 MiB-aligned: map 2 MiB more and trim */
        unsigned char *m =
            mmap(NULL, len + 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return 1;
        p = (unsigned char *)(((uintptr_t)m + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1));
        if (p > m)
            munmap(m, (size_t)(p - m));
        munmap(p + len, (size_t)(m + len + 2 * MIB - (p + len)));
        madvise(p, len, MADV_HUGEPAGE);
        for (size_t off = 0; off < len; off += 2 * MIB) {
            memset(p + off, 0x5a, MIB);
            written += MIB / 4096;
        }
    } else {
        p = malloc(len);
        if (!p)
            return 1;
        if (!strcmp(argv[1], "full")) {
            memset(p, 0x5a, len);
            written = len / 4096 + ((uintptr_t)p % 4096 != 0);
        } else {
            for (size_t off = 0; off < len; off += 2 * MIB) {
                p[off] = 1;
                written++;
            }
        }
    }
    block = p;
    block_len = len;
    signal(SIGUSR1, on_usr1);
    printf("block %p %zu\nwritten %zu\nhuge %lu\nready %d\n", (void *)p, len, written,
           huge_kb((uintptr_t)p, len), (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
