/* thpalloc benchmarks: helpers shared by the workload programs.
 *
 * Every workload prints exactly one result line on stdout, made of key=value tokens:
 *   bench=NAME elapsed_s=... hwm_kib=... rss_kib=... anonhuge_kib=... malloc_lib=... [more]
 * elapsed_s covers only the measured phase; rss_kib and anonhuge_kib are sampled at the
 * workload's peak point (bench_sample), hwm_kib is VmHWM at exit.  tests/bench/run-bench
 * parses that line.  Nothing here is linked with an allocator: the allocator under test
 * comes in through LD_PRELOAD. */
#ifndef THPALLOC_BENCH_COMMON_H
#define THPALLOC_BENCH_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Small, fast, deterministic PRNG (xorshift64*), one state per thread. */
typedef struct {
    uint64_t s;
} bench_rng;

static inline void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (r->s == 0)
        r->s = 1;
}

static inline uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n). */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

/* A skewed small-object size in [lo, hi]: most requests are small (log-uniform-ish, with
 * extra weight on the common 16..64 byte range, as in measured C/C++ heap profiles). */
size_t bench_small_size(bench_rng *r, size_t lo, size_t hi);

/* Fills a table of n sizes drawn by bench_small_size (cheap lookups on hot paths). */
void bench_size_table(size_t *table, size_t n, size_t lo, size_t hi, uint64_t seed);

/* Monotonic seconds. */
double bench_now(void);

/* Sleeps s seconds (resumed after a signal), with no allocator call. */
void bench_sleep(double s);

/* Parses a positive number (accepts 1e6, 2.5); exits with a usage message on error. */
double bench_arg(int argc, char **argv, int i, double dflt, const char *usage);

/* bench_arg for a count: the integer part, which must be at least 1 (else the usage
 * message and exit). */
uint64_t bench_count(int argc, char **argv, int i, uint64_t dflt, const char *usage);

/* Records rss_kib / anonhuge_kib now (keeps the sample with the largest RSS).  Call it at
 * the workload's peak: with BENCH_PEAK_STOP=MIN_KIB in the environment (run-bench's scan
 * pass) a new largest sample of MIN_KIB or more stops the process (SIGSTOP) for the runner
 * to scan its huge pages; see common.c. */
void bench_sample(void);

/* Reads one "Key:  N kB" field of a /proc file; -1 when missing. */
long bench_proc_kib(const char *path, const char *key);

/* malloc that exits with a message on NULL. */
void *bench_xmalloc(size_t n);

/* Writes a block of n >= 16 bytes as a program would use it: its size in the first 8
 * bytes, tag at byte 8 and at the end, and one byte in every 4 KiB page between, so that
 * every page is resident and non-zero (a tag of 0 is written as 0xa5).  bench_block_read
 * reads the size and tags back (exits when they disagree: a corrupt block) and returns the
 * size. */
void bench_block_fill(unsigned char *p, size_t n, unsigned char tag);
size_t bench_block_read(const unsigned char *p, uint64_t *sum);

/* pthread_create that exits with a message on failure; a detached thread when detached is
 * set (its id is then of no use). */
pthread_t bench_thread(void *(*fn)(void *), void *arg, int detached);

/* Running detached threads, for a main thread that keeps starting them and waits for
 * the last: bench_running_enter waits until fewer than limit run, then counts one more
 * (call it before starting one); a thread calls bench_running_leave as its last step;
 * bench_running_wait returns once none runs. */
void bench_running_enter(unsigned limit);
void bench_running_leave(void);
void bench_running_wait(void);

/* Bookkeeping arrays that must not be counted against the allocator: mmap'ed directly. */
void *bench_map(size_t bytes);
void bench_unmap(void *p, size_t bytes);

/* Prints the result line: "bench=NAME elapsed_s=E <extra> hwm_kib=.. rss_kib=..
 * anonhuge_kib=.. malloc_lib=.." and flushes.  extra may be NULL. */
void bench_report(const char *name, double elapsed, const char *extra);

/* Keeps the compiler from discarding work. */
extern volatile uint64_t bench_sink;

#endif
