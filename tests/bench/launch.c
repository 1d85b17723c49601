/* launch: runs one real program and reports its peak RSS and wall time.
 *
 * usage: launch REPORT_FILE PROGRAM [ARG...]
 *
 * The runner measures real programs (python3, sqlite3, gcc, xz) through this small,
 * allocator-free process: LD_PRELOAD for the program comes in as BENCH_CHILD_PRELOAD
 * (launch itself runs without a preload), the program is started with posix_spawnp,
 * reaped with wait4, and "wall_s=... maxrss_kib=... status=..." is written to REPORT_FILE.
 * Why not from python directly: a child started by vfork/fork inherits its parent's peak
 * RSS until exec, so a large parent would put a floor under every maxrss; this parent is
 * tiny.  maxrss_kib is the largest of the program and its waited-for descendants (gcc's
 * cc1 and as).  Exits with the program's status (128 + signal when it was killed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s REPORT_FILE PROGRAM [ARG...]\n", argv[0]);
        return 2;
    }
    const char *pre = getenv("BENCH_CHILD_PRELOAD");
    if (pre && *pre) {
        if (setenv("LD_PRELOAD", pre, 1)) {
            perror("launch: setenv");
            return 2;
        }
    } else {
        unsetenv("LD_PRELOAD");
    }
    unsetenv("BENCH_CHILD_PRELOAD");

    pid_t pid;
    double t0 = bench_now();
    int rc = posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ);
    if (rc) {
        fprintf(stderr, "launch: %s: %s\n", argv[2], strerror(rc));
        return 127;
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("launch: wait4");
            return 2;
        }
    }
    double t1 = bench_now();
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror("launch: report file");
        return 2;
    }
    fprintf(f, "wall_s=%.6f maxrss_kib=%ld status=%d\n", t1 - t0, ru.ru_maxrss, status);
    if (fclose(f)) {
        perror("launch: report file");
        return 2;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}
