/* spawn: process start.
 *
 * usage: spawn [COUNT [PROGRAM]]   (defaults 200, /bin/true)
 *
 * posix_spawn PROGRAM COUNT times, one after the other, waiting for each.  The child
 * inherits LD_PRELOAD, so this measures what loading and initialising the allocator adds
 * to every process on a system that preloads it (ld.so.preload): constructors, config
 * reading, the first mmap.  elapsed_s is the whole loop. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv)
{
    const char *usage = "[COUNT [PROGRAM]]";
    unsigned count = (unsigned)bench_arg(argc, argv, 1, 200, usage);
    char *prog = argc > 2 ? argv[2] : (char *)"/bin/true";
    char *child_argv[] = {prog, NULL};

    double t0 = bench_now();
    for (unsigned i = 0; i < count; i++) {
        pid_t pid;
        int rc = posix_spawn(&pid, prog, NULL, NULL, child_argv, environ);
        if (rc) {
            fprintf(stderr, "spawn: posix_spawn(%s): %s\n", prog, strerror(rc));
            return 1;
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "spawn: %s failed (status 0x%x)\n", prog, status);
            return 1;
        }
    }
    double t1 = bench_now();
    char extra[64];
    snprintf(extra, sizeof extra, "spawns=%u us_per_spawn=%.1f", count, (t1 - t0) * 1e6 / count);
    bench_report("spawn", t1 - t0, extra);
    return 0;
}
