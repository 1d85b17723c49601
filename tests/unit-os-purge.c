/* os.c's purge batches (os_purge_batch_*): what is queued goes back at the flush and nothing
 * else does, page by page (the contents read back, mincore), through one process_madvise a
 * batch where the kernel takes it on the caller itself, else one madvise a range (forced
 * here, as an older kernel or a seccomp filter leaves it); ranges that touch join, a full
 * batch flushes itself, and the byte count is what went back. Under a seccomp filter that
 * kills the process on process_madvise, the batch never makes the call. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os.h"
#include "seccomp-deny.h"
#include "tap.h"

#define PG 4096u
#define NPAGES 1024u /* 4 MiB: more holes than a batch holds */
#define FILL 0xab

static unsigned char *map_filled(void)
{
    unsigned char *p =
        mmap(NULL, (size_t)NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, (size_t)NPAGES * PG, MADV_NOHUGEPAGE); /* 4 KiB pages: one hole, one page */
    memset(p, FILL, (size_t)NPAGES * PG);
    return p;
}

static bool resident(const unsigned char *pg)
{
    unsigned char v = 0;
    return mincore((void *)pg, PG, &v) == 0 && (v & 1);
}

/* Every page i with hole(i) is gone (not resident, reads zero), every other one kept FILL. */
static int check_pages(const unsigned char *p, bool (*hole)(unsigned), unsigned *bad_out)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < NPAGES; i++) {
        const unsigned char *pg = p + (size_t)i * PG;
        if (hole(i)) {
            if (resident(pg) || pg[0] != 0 || pg[PG - 1] != 0)
                bad++;
        } else if (!resident(pg) || pg[0] != FILL || pg[PG - 1] != FILL) {
            bad++;
        }
    }
    *bad_out = bad;
    return bad == 0;
}

/* Pages 3k and 3k+1 of every three: pairs that touch (joined into one range), each pair
 * apart from the next. */
static bool pair_hole(unsigned i)
{
    return i % 3 != 2;
}

static size_t queue_pairs(struct os_purge_batch *b, unsigned char *p)
{
    size_t want = 0;
    for (unsigned i = 0; i < NPAGES; i++)
        if (pair_hole(i)) {
            os_purge_batch_add(b, p + (size_t)i * PG, PG);
            want += PG;
        }
    return want;
}

/* Only what is queued goes back at the flush, and nothing before the batch is full. */
static void test_batch(const char *how_name, bool single)
{
    os_purge_batch_force_single(single);
    uint64_t calls0 = atomic_load(&os_purge_vector_calls);
    unsigned char *p = map_filled();
    if (!tap_ok(p != NULL, "%s: 4 MiB mapped and written", how_name))
        return;
    struct os_purge_batch b;
    os_purge_batch_init(&b, OS_PURGE_DONTNEED);
    os_purge_batch_add(&b, p, PG);
    os_purge_batch_add(&b, p + PG, PG);
    tap_ok(b.n == 1 && b.r[0].iov_len == 2 * PG,
           "%s: two ranges that touch are one (%u, %zu bytes)", how_name, b.n, b.r[0].iov_len);
    tap_ok(resident(p) && p[0] == FILL, "%s: nothing goes back before the flush", how_name);
    os_purge_batch_init(&b, OS_PURGE_DONTNEED);
    size_t want = queue_pairs(&b, p);
    size_t got = os_purge_batch_flush(&b);
    tap_ok(got == want, "%s: the flush counts every byte queued (%zu of %zu)", how_name, got, want);
    unsigned bad = 0;
    tap_ok(check_pages(p, pair_hole, &bad),
           "%s: %u pairs of pages went back, the %u pages between kept their contents (%u wrong)",
           how_name, (NPAGES + 2) / 3, NPAGES / 3, bad);
    tap_ok(b.n == 0, "%s: the batch is empty after its flush", how_name);
    uint64_t calls = atomic_load(&os_purge_vector_calls) - calls0;
    if (single)
        tap_ok(calls == 0, "%s: no process_madvise (%llu)", how_name, (unsigned long long)calls);
    else
        printf("# %s: %llu process_madvise calls for %u ranges\n", how_name,
               (unsigned long long)calls, (NPAGES + 2) / 3);
    munmap(p, (size_t)NPAGES * PG);
    os_purge_batch_force_single(0);
}

/* The kernel takes process_madvise on the caller itself (PIDFD_SELF, Linux 6.15). */
static bool kernel_takes_vector(void)
{
#ifdef SYS_process_madvise
    unsigned char *p = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    p[0] = 1;
    struct iovec v = {p, PG};
    long r = syscall(SYS_process_madvise, -10000, &v, (size_t)1, MADV_DONTNEED, 0u);
    bool ok = r == (long)PG && p[0] == 0;
    munmap(p, PG);
    return ok;
#else
    return false;
#endif
}

/* This thread runs under a seccomp filter: the library then never tries the vector. */
static bool under_seccomp(void)
{
    char buf[4096];
    long n = os_read_small_file("/proc/thread-self/status", buf, sizeof buf);
    const char *f = n > 0 ? strstr(buf, "\nSeccomp:") : NULL;
    if (!f)
        return true;
    f += sizeof "\nSeccomp:" - 1;
    while (*f == ' ' || *f == '\t')
        f++;
    return *f != '0';
}

/* In a child: a filter that kills the process on process_madvise (as an allow-list that does
 * not know it would), then a batch of scattered holes. */
static void test_seccomp_kill(void)
{
#ifdef SYS_process_madvise
    pid_t pid = fork();
    if (pid == 0) {
        if (seccomp_deny(SYS_process_madvise, SECCOMP_RET_KILL_PROCESS) != 0)
            _exit(3);
        unsigned char *p = map_filled();
        if (!p)
            _exit(4);
        struct os_purge_batch b;
        os_purge_batch_init(&b, OS_PURGE_DONTNEED);
        size_t want = queue_pairs(&b, p);
        unsigned bad = 0;
        _exit(os_purge_batch_flush(&b) == want && check_pages(p, pair_hole, &bad) ? 0 : 5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        printf("ok %d - # SKIP seccomp filters cannot be installed here\n", ++tap_n);
        return;
    }
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "under a filter that kills on process_madvise the holes go back one madvise each, "
           "and the process lives (%s %d)",
           WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
#else
    printf("ok %d - # SKIP no process_madvise in these headers\n", ++tap_n);
#endif
}

int main(void)
{
    bool vector = kernel_takes_vector(), filtered = under_seccomp();
    printf("# the kernel %s process_madvise on the caller itself; %s seccomp filter\n",
           vector ? "takes" : "refuses", filtered ? "a" : "no");
    test_batch("one madvise a range", true);
    uint64_t calls0 = atomic_load(&os_purge_vector_calls);
    test_batch("as the process decides", false);
    uint64_t calls = atomic_load(&os_purge_vector_calls) - calls0;
    unsigned ranges = (NPAGES + 2) / 3;
    unsigned need = (ranges + OS_PURGE_BATCH - 1) / OS_PURGE_BATCH;
    if (vector && !filtered)
        tap_ok(calls == need,
               "the %u ranges went back in %llu process_madvise calls (batches of %u: %u)", ranges,
               (unsigned long long)calls, OS_PURGE_BATCH, need);
    else if (filtered)
        printf("ok %d - # SKIP this test runs under a seccomp filter, where the library makes "
               "no process_madvise: one madvise a range, checked above\n",
               ++tap_n);
    else
        printf("ok %d - # SKIP process_madvise on the caller itself needs Linux 6.15 (PIDFD_SELF); "
               "this kernel refuses it: one madvise a range, checked above\n",
               ++tap_n);
    test_seccomp_kill();
    return tap_done();
}
