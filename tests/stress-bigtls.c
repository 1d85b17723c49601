/* stress-bigtls: the purger starts in a program whose threads carry 256 KiB of static TLS.
 * glibc puts the static TLS of every thread on that thread's stack, the purger's too: with
 * the purger's own 64 KiB stack pthread_create failed (EINVAL) and such a program never got
 * its memory back. 24 MiB freed (more than the 16 MiB that start the purger), then the
 * thread list is read from /proc/self/task until the purger shows, for up to 2 s.
 * Output: relay() lines (tests/relay-report.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "purger-running.h"
#include "relay-report.h"

static __thread unsigned char big_tls[256 << 10];

int main(void)
{
    memset(big_tls, 1, sizeof big_tls);
    size_t n = (size_t)24 << 20;
    unsigned char *volatile p = malloc(n);
    if (!p) {
        report(0, "bigtls: malloc(24 MiB) failed");
        puts("end");
        return 1;
    }
    memset(p, 2, n);
    free(p); /* waits for purging: the purger is asked for, started at the end of this free */
    int up = 0;
    for (int i = 0; i < 40 && !(up = purger_running()); i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    report(up, "bigtls: with 256 KiB of static TLS per thread, the purger thread started once "
               "24 MiB waited");
    puts("end");
    return 0;
}
