/* A probe run under LD_PRELOAD=libthpalloc.so.1 by the policy tests. It prints with write()
 * only, so that the allocations it makes are the ones the test asks for.
 *   policy-probe policy            the policy in force: "KEY=VALUE ORIGIN" lines
 *   policy-probe share SIZE        huge-page share (%) of a block of SIZE bytes, filled
 *   policy-probe advise SIZE       malloc(64) and malloc(SIZE), then exit
 *   policy-probe purge MIB BLOCK   fill MIB MiB in BLOCK-byte blocks, free them all, then
 *                                  watch RSS with no further allocator call
 *   policy-probe small MIB BLOCK   the same below the purger thread's 16 MiB, watched first
 *                                  with no allocator call (PROBE_IDLE_MS), then with one
 *                                  20000-byte malloc and free every 10 ms (PROBE_FORK: in
 *                                  a child forked right after the frees)
 *   policy-probe calloc-reuse      24 blocks of 1 MiB written and freed, then four callocs of
 *                                  12 MiB (chunks the extents gave back): non-zero bytes
 *   policy-probe threads           how many threads the process has */

#include <dirent.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "thpalloc.h"

static void out(const char *s)
{
    if (write(1, s, strlen(s)) < 0)
        _exit(3);
}

static void out_u(const char *name, unsigned long v)
{
    char buf[64];
    char num[24];
    int i = (int)sizeof num - 1;
    num[i] = '\0';
    do {
        num[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf[0] = '\0';
    strcat(buf, name);
    strcat(buf, "=");
    strcat(buf, num + i);
    strcat(buf, "\n");
    out(buf);
}

/* Reads a whole /proc file into a static buffer (no malloc). */
static char procbuf[1 << 20];
static const char *read_proc(const char *path)
{
    int fd = open(path, O_RDONLY);
    size_t len = 0;
    if (fd >= 0) {
        ssize_t n;
        while (len < sizeof procbuf - 1 &&
               (n = read(fd, procbuf + len, sizeof procbuf - 1 - len)) > 0)
            len += (size_t)n;
        close(fd);
    }
    procbuf[len] = '\0';
    return procbuf;
}

static unsigned long field_kb(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p ? strtoul(p + strlen(name), NULL, 10) : 0;
}

/* AnonHugePages (kB) of the VMAs that overlap [lo, hi). */
static unsigned long huge_kb_in(uintptr_t lo, uintptr_t hi)
{
    const char *t = read_proc("/proc/self/smaps");
    unsigned long sum = 0;
    bool in = false;
    for (const char *line = t; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        unsigned long a, b;
        char *dash;
        a = strtoul(line, &dash, 16);
        if (*dash == '-' && dash > line) {
            b = strtoul(dash + 1, NULL, 16);
            in = a < hi && b > lo;
        } else if (in && strncmp(line, "AnonHugePages:", 14) == 0) {
            sum += strtoul(line + 14, NULL, 10);
        }
        line = end + 1;
    }
    return sum;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int threads(void)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    char buf[4096];
    int n = 0;
    long r;
    while ((r = getdents64(fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < r;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] != '.')
                n++;
        }
    close(fd);
    return n;
}

/* Makes the bytes written at p observable: gcc drops a memset into a malloc'd block that
 * nothing reads (the share probe then measured a block that was never touched: 0 %). */
static void escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Fills total bytes in blocks of block bytes, every byte written, reads the anonymous RSS
 * into *full_kb, and frees them all. Returns 0, or the probe's exit status. */
static int fill_and_free(size_t total, size_t block, unsigned long *full_kb)
{
    static void *ptrs[1 << 21];
    size_t n = block ? total / block : 0;
    if (n == 0 || n > sizeof ptrs / sizeof *ptrs)
        return 2;
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = malloc(block);
        if (!ptrs[i])
            return 1;
        memset(ptrs[i], 7, block);
        escape(ptrs[i]);
    }
    *full_kb = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "policy") == 0) {
        int (*pol)(struct thpalloc_setting *, size_t) =
            (int (*)(struct thpalloc_setting *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_policy");
        if (!pol) {
            out("thpalloc_policy not found\n");
            return 1;
        }
        struct thpalloc_setting set[8];
        int n = pol(set, 8);
        for (int i = 0; i < n && i < 8; i++) {
            out(set[i].key);
            out("=");
            out(set[i].value);
            out(" ");
            out(set[i].origin);
            out("\n");
        }
        out_u("secure", getauxval(AT_SECURE));
        return 0;
    }
    if (strcmp(argv[1], "share") == 0 && argc == 3) {
        size_t size = strtoull(argv[2], NULL, 0);
        char *p = malloc(size);
        if (!p)
            return 1;
        memset(p, 1, size);
        escape(p);
        unsigned long kb = huge_kb_in((uintptr_t)p, (uintptr_t)p + size);
        out_u("share", (unsigned long)(kb * 1024 * 100 / size));
        out_u("aligned", ((uintptr_t)p & ((2u << 20) - 1)) == 0);
        return 0;
    }
    if (strcmp(argv[1], "advise") == 0 && argc == 3) {
        volatile char *a = malloc(64);
        volatile char *b = malloc(strtoull(argv[2], NULL, 0));
        return a && b ? 0 : 1;
    }
    if (strcmp(argv[1], "calloc-reuse") == 0) {
        unsigned long full;
        int rc = fill_and_free((size_t)24 << 20, (size_t)1 << 20, &full);
        if (rc)
            return rc;
        unsigned long bad = 0;
        for (int k = 0; k < 4; k++) {
            size_t n = (size_t)12 << 20;
            unsigned char *q = calloc(1, n);
            if (!q)
                return 1;
            for (size_t j = 0; j < n; j += 64)
                bad += q[j] != 0;
            free(q);
        }
        out_u("nonzero", bad);
        return 0;
    }
    if (strcmp(argv[1], "slots") == 0 && argc == 3) {
        /* MiB of 1000-byte blocks, all freed but the first of each 2 MiB chunk, so that
         * the chunks stay and their emptied page slots wait; then malloc_trim gives the
         * slots back (policy-storm counts the madvise calls: one a range of slots). */
        size_t n = (strtoull(argv[2], NULL, 0) << 20) / 1000;
        char **b = calloc(n, sizeof *b);
        if (!b)
            return 1;
        for (size_t i = 0; i < n; i++) {
            if (!(b[i] = malloc(1000)))
                return 1;
            memset(b[i], 1, 1000);
        }
        uintptr_t chunk = 0;
        unsigned long kept = 0;
        for (size_t i = 0; i < n; i++) {
            if ((uintptr_t)b[i] >> 21 != chunk) {
                chunk = (uintptr_t)b[i] >> 21; /* its first block keeps the chunk */
                kept++;
                continue;
            }
            free(b[i]);
        }
        malloc_trim(0);
        out_u("kept", kept);
        return 0;
    }
    if (strcmp(argv[1], "threads") == 0) {
        void *p = malloc(100);
        free(p);
        out_u("threads", (unsigned long)threads());
        return 0;
    }
    if (strcmp(argv[1], "small") == 0 && argc == 4) {
        /* A process too small for the purger thread: what it freed goes back at its own
         * allocator calls once purge_delay has passed, and not before. */
        size_t total = strtoull(argv[2], NULL, 0) << 20;
        unsigned long base = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
        unsigned long full;
        int rc = fill_and_free(total, strtoull(argv[3], NULL, 0), &full);
        if (rc)
            return rc;
        if (getenv("PROBE_FORK")) {
            /* The child inherits what waits, and has no purger of its own: it is the one
             * watched; the parent only waits for it. */
            pid_t pid = fork();
            if (pid < 0)
                return 1;
            if (pid > 0) {
                int st;
                if (waitpid(pid, &st, 0) != pid)
                    return 1;
                return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
            }
        }
        long t0 = now_ms();
        long idle = strtol(getenv("PROBE_IDLE_MS") ? getenv("PROBE_IDLE_MS") : "0", NULL, 10);
        long watch = strtol(getenv("PROBE_WATCH_MS") ? getenv("PROBE_WATCH_MS") : "3000", NULL, 10);
        struct timespec ts = {0, 10 * 1000000L};
        while (now_ms() - t0 < idle)
            nanosleep(&ts, NULL);
        unsigned long idle_kb = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
        long drop = -1;
        unsigned long anon = idle_kb;
        for (;;) {
            /* volatile: a malloc and free of a block nobody uses would be folded away */
            char *volatile q = malloc(20000);
            if (!q)
                return 1;
            q[0] = 1;
            free(q);
            anon = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
            long el = now_ms() - t0;
            /* back: within a tenth of what was freed of where the process started */
            if (anon < base + (full - base) / 10) {
                drop = el;
                break;
            }
            if (el >= watch)
                break;
            nanosleep(&ts, NULL);
        }
        out_u("base_kb", base);
        out_u("full_kb", full);
        out_u("idle_kb", idle_kb);
        out_u("end_kb", anon);
        out_u("drop_ms", drop < 0 ? 999999UL : (unsigned long)drop);
        out_u("threads", (unsigned long)threads());
        return 0;
    }
    if (strcmp(argv[1], "refault") == 0) {
        /* 32 MiB of 1.5 MiB blocks (a chunk each) freed, purged after purge_delay and taken
         * back (a refault), freed again; then kept busy in small blocks (slow-path calls)
         * for 5 purge_delays, then asleep for 5 more. The anonymous RSS after each. */
        long delay = strtol(getenv("PROBE_DELAY_MS") ? getenv("PROBE_DELAY_MS") : "200", NULL, 10);
        enum { N = 21, SMALL = 4000 };
        static void *big[N], *small[SMALL];
        unsigned long kb[2] = {0, 0};
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < N; i++) {
                big[i] = malloc(3 << 19);
                if (!big[i])
                    return 1;
                memset(big[i], 7, 3 << 19);
                escape(big[i]);
            }
            for (int i = 0; i < N; i++)
                free(big[i]);
            if (round == 0) {
                struct timespec ts = {0, (delay * 3) * 1000000L};
                nanosleep(&ts, NULL); /* the purger gives them back */
            }
        }
        for (long t0 = now_ms(); now_ms() - t0 < 5 * delay;) {
            for (int i = 0; i < SMALL; i++) {
                small[i] = malloc(16 + (size_t)(i % 64) * 16);
                if (!small[i])
                    return 1;
                escape(small[i]);
            }
            for (int i = 0; i < SMALL; i++)
                free(small[i]);
        }
        kb[0] = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
        struct timespec ts = {(5 * delay) / 1000, ((5 * delay) % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* no allocator call from here on */
        kb[1] = field_kb(read_proc("/proc/self/smaps_rollup"), "Anonymous:");
        out_u("busy_kb", kb[0]);
        out_u("idle_kb", kb[1]);
        out_u("threads", (unsigned long)threads());
        return 0;
    }
    if (strcmp(argv[1], "purge") == 0 && argc == 4) {
        size_t total = strtoull(argv[2], NULL, 0) << 20;
        unsigned long full;
        int rc = fill_and_free(total, strtoull(argv[3], NULL, 0), &full);
        if (rc)
            return rc;
        /* From here on: no allocator call at all. */
        long t0 = now_ms(), drop = -1;
        unsigned long half_kb = 0, lazy_max = 0, anon = 0;
        bool half_done = false;
        long watch = strtol(getenv("PROBE_WATCH_MS") ? getenv("PROBE_WATCH_MS") : "3000", NULL, 10);
        long half_at = strtol(getenv("PROBE_HALF_MS") ? getenv("PROBE_HALF_MS") : "500", NULL, 10);
        for (;;) {
            const char *t = read_proc("/proc/self/smaps_rollup");
            anon = field_kb(t, "Anonymous:");
            unsigned long lazy = field_kb(t, "LazyFree:");
            if (lazy > lazy_max)
                lazy_max = lazy;
            long el = now_ms() - t0;
            if (!half_done && el >= half_at) {
                half_kb = anon;
                half_done = true;
            }
            if (drop < 0 && anon * 10 < total / 1024)
                drop = el;
            if (el >= watch || (drop >= 0 && half_done && el > drop + 50))
                break;
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        out_u("full_kb", full);
        out_u("half_kb", half_kb);
        out_u("end_kb", anon);
        out_u("lazyfree_max_kb", lazy_max);
        out_u("drop_ms", drop < 0 ? 999999UL : (unsigned long)drop);
        out_u("threads", (unsigned long)threads());
        return 0;
    }
    return 2;
}
