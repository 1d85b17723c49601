/* thpalloc benchmarks: helpers shared by the workload programs (see common.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"
#include "../read-whole.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t bench_sink;

static long sample_rss_kib = -1;
static long sample_huge_kib = -1;

size_t bench_small_size(bench_rng *r, size_t lo, size_t hi)
{
    uint64_t x = bench_rng_next(r);
    size_t span = hi - lo + 1;
    size_t s;
    unsigned pick = (unsigned)(x & 0xff);
    x >>= 8;
    if (pick < 154) {
        /* ~60 %: 16..64 bytes (small structs, short strings, list nodes) */
        size_t a = lo > 16 ? lo : 16, b = hi < 64 ? hi : 64;
        s = b >= a ? a + (size_t)(x % (b - a + 1)) : lo;
    } else if (pick < 230) {
        /* ~30 %: log-uniform over the whole range: a random power-of-two band, then
         * uniform inside it */
        unsigned bands = 0;
        while (((size_t)lo << (bands + 1)) <= hi)
            bands++;
        size_t base = (size_t)lo << (x % (bands + 1));
        x >>= 8;
        s = base + (size_t)(x % base);
    } else {
        /* ~10 %: uniform over the whole range (buffers) */
        s = lo + (size_t)(x % span);
    }
    if (s < lo)
        s = lo;
    if (s > hi)
        s = hi;
    return s;
}

void bench_size_table(size_t *table, size_t n, size_t lo, size_t hi, uint64_t seed)
{
    bench_rng r;
    bench_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        table[i] = bench_small_size(&r, lo, hi);
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

double bench_arg(int argc, char **argv, int i, double dflt, const char *usage)
{
    if (i >= argc)
        return dflt;
    char *end;
    errno = 0;
    double v = strtod(argv[i], &end);
    if (errno || end == argv[i] || *end || !(v > 0)) {
        fprintf(stderr, "%s: bad argument '%s'\nusage: %s %s\n", argv[0], argv[i], argv[0], usage);
        exit(2);
    }
    return v;
}

uint64_t bench_count(int argc, char **argv, int i, uint64_t dflt, const char *usage)
{
    double v = bench_arg(argc, argv, i, (double)dflt, usage);
    if (v < 1) {
        fprintf(stderr, "%s: bad argument '%s': a count of at least 1\nusage: %s %s\n", argv[0],
                argv[i], argv[0], usage);
        exit(2);
    }
    return (uint64_t)v;
}

long bench_proc_kib(const char *path, const char *key)
{
    char buf[8192];
    if (!read_whole(path, buf, sizeof buf))
        return -1;
    size_t klen = strlen(key);
    for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':')
            return strtol(p + klen + 1, NULL, 10);
    }
    return -1;
}

/* The runner's scan pass (BENCH_PEAK_STOP=MIN_KIB): at a new largest sample of at least
 * MIN_KIB and 10 % above the last stop, the process stops itself (SIGSTOP stops every
 * thread) so that the runner can read its huge pages with thp-status --scan at the peak,
 * frozen, then continues it.  Unset (every timed run): a pthread_once, nothing more. */
static pthread_mutex_t peak_stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t peak_stop_once = PTHREAD_ONCE_INIT;
static long peak_stop_min = -1; /* -1: not armed */

static void peak_stop_init(void)
{
    const char *v = getenv("BENCH_PEAK_STOP");
    if (v && *v)
        peak_stop_min = strtol(v, NULL, 10);
}

static void peak_stop(long rss)
{
    static long last_kib;
    pthread_once(&peak_stop_once, peak_stop_init);
    if (peak_stop_min < 0)
        return;
    pthread_mutex_lock(&peak_stop_mu);
    if (rss >= peak_stop_min && rss > last_kib + last_kib / 10) {
        last_kib = rss;
        raise(SIGSTOP);
    }
    pthread_mutex_unlock(&peak_stop_mu);
}

void bench_sample(void)
{
    long rss = bench_proc_kib("/proc/self/status", "VmRSS");
    if (rss > sample_rss_kib) {
        sample_rss_kib = rss;
        sample_huge_kib = bench_proc_kib("/proc/self/smaps_rollup", "AnonHugePages");
        peak_stop(rss);
    }
}

void *bench_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench: malloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

void bench_block_fill(unsigned char *p, size_t n, unsigned char tag)
{
    /* a tag of 0 would leave the pages past the first all zeros: written, resident, and
     * counted as unused by thp-status --scan (the scan pass) */
    if (!tag)
        tag = 0xa5;
    memcpy(p, &n, sizeof n);
    p[8] = tag;
    for (size_t off = 4096; off < n; off += 4096)
        p[off] = tag;
    p[n - 1] = tag;
}

size_t bench_block_read(const unsigned char *p, uint64_t *sum)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    if (n < 16 || p[n - 1] != p[8]) {
        fprintf(stderr, "bench: corrupt block %p (size %zu)\n", (const void *)p, n);
        exit(1);
    }
    *sum += p[8] + n;
    return n;
}

pthread_t bench_thread(void *(*fn)(void *), void *arg, int detached)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (detached)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc) {
        fprintf(stderr, "bench: pthread_create: %s\n", strerror(rc));
        exit(1);
    }
    return t;
}

static pthread_mutex_t running_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t running_cv = PTHREAD_COND_INITIALIZER;
static unsigned running;

void bench_running_enter(unsigned limit)
{
    pthread_mutex_lock(&running_mu);
    while (running >= limit)
        pthread_cond_wait(&running_cv, &running_mu);
    running++;
    pthread_mutex_unlock(&running_mu);
}

void bench_running_leave(void)
{
    pthread_mutex_lock(&running_mu);
    running--;
    /* both the one waiting for a free place and the one waiting for none may wait */
    pthread_cond_broadcast(&running_cv);
    pthread_mutex_unlock(&running_mu);
}

void bench_running_wait(void)
{
    pthread_mutex_lock(&running_mu);
    while (running)
        pthread_cond_wait(&running_cv, &running_mu);
    pthread_mutex_unlock(&running_mu);
}

void *bench_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "bench: mmap(%zu) failed\n", bytes);
        exit(1);
    }
    return p;
}

void bench_unmap(void *p, size_t bytes)
{
    munmap(p, bytes);
}

void bench_report(const char *name, double elapsed, const char *extra)
{
    if (sample_rss_kib < 0)
        bench_sample();
    long hwm = bench_proc_kib("/proc/self/status", "VmHWM");
    /* Which library's malloc is in charge: a preload that lost the symbol shows here. */
    Dl_info info;
    void *(*fn)(size_t) = malloc;
    void *addr;
    memcpy(&addr, &fn, sizeof addr);
    const char *lib = "?";
    if (dladdr(addr, &info) && info.dli_fname)
        lib = info.dli_fname;
    printf("bench=%s elapsed_s=%.6f%s%s hwm_kib=%ld rss_kib=%ld anonhuge_kib=%ld "
           "malloc_lib=%s\n",
           name, elapsed, extra ? " " : "", extra ? extra : "", hwm, sample_rss_kib,
           sample_huge_kib, lib);
    fflush(stdout);
}
