/* neighbour-churn [SECONDS [MIB [PERIOD_MS]]]: another process on the machine, changing
 * machine-wide memory figures under the test suite (.ci/run runs it beside make check).
 * Every PERIOD_MS (default 100) it maps MIB (default 64) anonymous, asks for huge pages
 * (MADV_HUGEPAGE), writes one byte per 4 KiB page, and unmaps it half a period later:
 * Committed_AS, AnonHugePages, the THP fault counters and free memory move by MIB and back.
 * It stops after SECONDS (default 3600), or when its parent exits, and prints how many
 * cycles it made and how many of them got huge pages. No allocator involved: plain mmap. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* AnonHugePages of this process, kB: did the cycle get huge pages? */
static long own_anon_huge(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    char *end;
    double seconds = argc > 1 ? strtod(argv[1], &end) : 3600;
    long mib = argc > 2 ? strtol(argv[2], &end, 10) : 64;
    long period_ms = argc > 3 ? strtol(argv[3], &end, 10) : 100;
    if (argc > 4 || seconds <= 0 || mib <= 0 || mib > 4096 || period_ms <= 0) {
        fprintf(stderr, "usage: neighbour-churn [SECONDS [MIB [PERIOD_MS]]]\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    size_t len = (size_t)mib << 20;
    double t0 = now(), half = period_ms / 2000.0;
    long cycles = 0, huge = 0;
    while (!stop && now() - t0 < seconds) {
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            nap(2 * half);
            continue;
        }
        madvise(p, len, MADV_HUGEPAGE);
        for (size_t off = 0; off < len; off += 4096)
            p[off] = 1;
        huge += own_anon_huge() > 0;
        nap(half);
        munmap(p, len);
        cycles++;
        nap(half);
    }
    printf("neighbour-churn: %ld cycles of %ld MiB every %ld ms in %.0f s, %ld with huge pages\n",
           cycles, mib, period_ms, now() - t0, huge);
    return 0;
}
