/* thp-status --scan: how much of a process's anonymous huge pages holds only zeros.
 *
 * A huge page faulted in by one write is resident in full and 511/512 zeros; smaps cannot
 * tell. Since Linux 6.12 the THP shrinker splits, under memory pressure, the huge pages
 * that have more than khugepaged/max_ptes_none zero-filled 4 KiB pieces (shrink_underused;
 * at max_ptes_none = 511 it splits none). We count those pieces the same way: read each
 * PMD-mapped huge page with process_vm_readv (the permission of ptrace-attach), compare
 * each 4 KiB piece to zero, keep nothing of the content.
 *
 * Finding the PMD-mapped huge pages, best first:
 *   pagemap-scan  the PAGEMAP_SCAN ioctl (Linux 6.7): regions with PAGE_IS_HUGE, exact;
 *   kpageflags    pagemap PFNs (visible with CAP_SYS_ADMIN only) and /proc/kpageflags:
 *                 512 consecutive frames from a compound head with KPF_THP, exact;
 *   aligned-runs  without either: 2 MiB-aligned runs of 512 present pages in a mapping
 *                 whose AnonHugePages covers them, at most that many (an estimate).
 * Multi-size THP folios (mTHP, smaller than 2 MiB) are not scanned.
 *
 * Bounded: at most --scan-rate bytes a second over the whole run, 256 KiB a read; a
 * process with more than --scan-max of huge pages is skipped. A process that exits or
 * unmaps during the scan gives what was read until then (a snapshot, never an error). */
#include "thp-status-scan.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define HUGE_SIZE ((uint64_t)2 << 20)
#define PIECE 4096u
#define PIECES (HUGE_SIZE / PIECE)
#define CHUNK ((size_t)256 << 10)

/* PAGEMAP_SCAN (linux/fs.h from 6.7), for headers that predate it. */
#ifndef PAGEMAP_SCAN
struct page_region {
    uint64_t start, end, categories;
};
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

#define KPF_COMPOUND_HEAD 15
#define KPF_THP 22
#define PM_PRESENT (1ULL << 63)
#define PM_PFN_MASK ((1ULL << 55) - 1)
#define PM_EXCLUSIVE (1ULL << 56) /* mapped by this process only */

/* ---- the machine's side: settings, rate ----------------------------------------------- */

static int max_ptes_none(void)
{
    static int v = -1;
    if (v >= 0)
        return v;
    /* THP_STATUS_TEST_MAX_PTES_NONE: the tests' way to a setting no machine-wide knob
     * needs to change for (ignored in secure execution). */
    const char *t = getauxval(AT_SECURE) ? NULL : getenv("THP_STATUS_TEST_MAX_PTES_NONE");
    char buf[32];
    if (t && *t)
        v = atoi(t);
    else if (ts_read_small("/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", buf,
                           sizeof buf) == 0)
        v = atoi(buf);
    else
        v = (int)PIECES - 1;
    if (v < 0 || v > (int)PIECES - 1)
        v = (int)PIECES - 1;
    return v;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The rate limit's account over the whole run (kept by the parent across the children
 * that read each process: scan_child_data). */
static double rate_t0;
static uint64_t rate_done;

/* Sleeps until reading `more` bytes keeps the whole run at or below --scan-rate. */
static void rate_wait(uint64_t more)
{
    if (!ts_opt.scan_rate)
        return;
    if (!rate_done)
        rate_t0 = now();
    rate_done += more;
    double due = rate_t0 + (double)rate_done / (double)ts_opt.scan_rate, wait = due - now();
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* ---- frames counted: each physical huge page once ------------------------------------- */

/* Frame number -> its zero-filled pieces, for every huge page read so far (open
 * addressing, key pfn + 1). A copy-on-write page shared by a forked family is read once
 * and counted once in the totals. */
static struct {
    uint64_t *key;
    uint16_t *zeros;
    size_t cap, n;
} seen;

/* What this child added to seen, for its parent: the rate account, then (pfn, zeros). */
struct fresh {
    uint64_t pfn, zeros;
};
static struct {
    double t0;
    uint64_t done;
    struct fresh v[];
} * sent;
static size_t nsent, capsent;

static size_t slot(uint64_t pfn)
{
    size_t i = (size_t)((pfn * 0x9E3779B97F4A7C15ull) >> 20) & (seen.cap - 1);
    while (seen.key[i] && seen.key[i] != pfn + 1)
        i = (i + 1) & (seen.cap - 1);
    return i;
}

static bool seen_get(uint64_t pfn, unsigned *zeros)
{
    if (!seen.cap)
        return false;
    size_t i = slot(pfn);
    if (!seen.key[i])
        return false;
    *zeros = seen.zeros[i];
    return true;
}

static void seen_put(uint64_t pfn, unsigned zeros)
{
    if ((seen.n + 1) * 2 > seen.cap) {
        size_t oc = seen.cap, nc = oc ? oc * 2 : 1024;
        uint64_t *ok = seen.key, *nk = calloc(nc, sizeof *nk);
        uint16_t *oz = seen.zeros, *nz = calloc(nc, sizeof *nz);
        if (!nk || !nz) {
            free(nk);
            free(nz);
            return; /* counted again, never wrongly */
        }
        seen.key = nk;
        seen.zeros = nz;
        seen.cap = nc;
        for (size_t i = 0; i < oc; i++)
            if (ok[i]) {
                size_t j = slot(ok[i] - 1);
                seen.key[j] = ok[i];
                seen.zeros[j] = oz[i];
            }
        free(ok);
        free(oz);
    }
    size_t i = slot(pfn);
    if (!seen.key[i]) {
        seen.key[i] = pfn + 1;
        seen.zeros[i] = (uint16_t)zeros;
        seen.n++;
    }
}

static void sent_add(uint64_t pfn, unsigned zeros)
{
    if (nsent == capsent) {
        size_t nc = capsent ? capsent * 2 : 256;
        void *n = realloc(sent, sizeof *sent + nc * sizeof sent->v[0]);
        if (!n)
            return;
        sent = n;
        capsent = nc;
    }
    sent->v[nsent++] = (struct fresh){pfn, zeros};
}

const void *scan_child_data(size_t *len)
{
    static struct {
        double t0;
        uint64_t done;
    } none;
    if (!sent) {
        none.t0 = rate_t0;
        none.done = rate_done;
        *len = sizeof none;
        return &none;
    }
    sent->t0 = rate_t0;
    sent->done = rate_done;
    *len = sizeof *sent + nsent * sizeof sent->v[0];
    return sent;
}

void scan_parent_data(const void *data, size_t len)
{
    double t0;
    uint64_t done;
    if (len < sizeof t0 + sizeof done)
        return;
    memcpy(&t0, data, sizeof t0);
    memcpy(&done, (const char *)data + sizeof t0, sizeof done);
    if (done > rate_done) {
        rate_t0 = rate_done ? rate_t0 : t0;
        rate_done = done;
    }
    const char *v = (const char *)data + sizeof t0 + sizeof done;
    for (size_t n = (len - sizeof t0 - sizeof done) / sizeof(struct fresh); n--;
         v += sizeof(struct fresh)) {
        struct fresh f;
        memcpy(&f, v, sizeof f);
        seen_put(f.pfn, (unsigned)f.zeros);
    }
}

/* ---- one huge page -------------------------------------------------------------------- */

static bool zero_piece(const unsigned char *b)
{
    const uint64_t *w = (const uint64_t *)(const void *)b;
    for (size_t i = 0; i < PIECE / 8; i += 8)
        if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7])
            return false;
    return true;
}

enum page_result { PAGE_READ, PAGE_CHANGED, PAGE_GONE, PAGE_DENIED };

/* Reads the huge page at addr of pid and counts its zero pieces in *zeros. */
static enum page_result read_page(pid_t pid, int mem, uint64_t addr, unsigned char *buf,
                                  unsigned *zeros, int *err)
{
    *zeros = 0;
    for (uint64_t off = 0; off < HUGE_SIZE; off += CHUNK) {
        rate_wait(CHUNK);
        struct iovec local = {buf, CHUNK}, remote = {(void *)(uintptr_t)(addr + off), CHUNK};
        ssize_t n = mem >= 0 ? pread(mem, buf, CHUNK, (off_t)(addr + off))
                             : process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (mem >= 0 && n == 0) /* the process has no memory any more: it exited */
            n = -1, errno = ESRCH;
        if (n != (ssize_t)CHUNK) {
            *err = n < 0 ? errno : EFAULT;
            if (*err == ESRCH)
                return PAGE_GONE;
            if (*err == EPERM || *err == EACCES)
                return PAGE_DENIED;
            return PAGE_CHANGED; /* unmapped or made unreadable since pagemap said so */
        }
        for (size_t i = 0; i < CHUNK; i += PIECE)
            *zeros += zero_piece(buf + i);
    }
    return PAGE_READ;
}

/* ---- finding the huge pages of one mapping --------------------------------------------- */

struct vma {
    uint64_t start, end, huge_kb;
    bool named_thpalloc;
};

struct ctx {
    struct proc *p;
    struct scan *s;
    int pagemap, kpageflags, mem;
    unsigned char *buf;
    bool stop, first_read, kpageflags_tried;
    const struct vma *v;
};

static bool in_arenas(const struct ctx *c, uint64_t addr)
{
    const struct proc *p = c->p;
    if (!p->loaded)
        return false;
    if (!p->intro_ok)
        return c->v->named_thpalloc;
    for (uint64_t i = 0; i < p->intro->head.ranges_used && i < THPALLOC_RANGES_MAX; i++) {
        const struct thpalloc_range *r = &p->intro->range[i];
        if (r->size && addr >= r->base && addr - r->base < r->size)
            return true;
    }
    return false;
}

static void count_page(struct ctx *c, uint64_t addr, unsigned zeros, bool dup)
{
    int k = in_arenas(c, addr) ? SCAN_ARENAS : SCAN_REST;
    /* the kernel (thp_underused) splits none at 511: it would find nothing to gain */
    bool split = max_ptes_none() < (int)PIECES - 1 && zeros > (unsigned)max_ptes_none();
    for (int d = 0; d <= (int)dup; d++) {
        struct scan_owner *o = d ? &c->s->dup[k] : &c->s->own[k];
        o->pages++;
        o->zero_bytes += (uint64_t)zeros * PIECE;
        o->splittable += split;
    }
}

static void scan_page(struct ctx *c, uint64_t addr)
{
    if (c->stop)
        return;
    /* The frame, where pagemap shows it: a page another process maps too (copy-on-write
     * after fork) and read for it already is counted from what was read then. */
    uint64_t e = 0, pfn = 0;
    bool shared = false;
    if (pread(c->pagemap, &e, sizeof e, (off_t)(addr / PIECE * 8)) == (ssize_t)sizeof e &&
        (e & PM_PRESENT)) {
        shared = !(e & PM_EXCLUSIVE);
        c->s->shared += shared;
        pfn = e & PM_PFN_MASK;
        c->s->pfns |= pfn != 0;
    }
    unsigned zeros;
    if (pfn && seen_get(pfn, &zeros)) {
        count_page(c, addr, zeros, true);
        return;
    }
    int err = 0;
    /* A shared page is read through /proc/PID/mem: process_vm_readv pins the pages it
     * reads, and pinning a copy-on-write page unshares it (the kernel copies it for the
     * process, in small pages): reading would split the huge page and add a copy. */
    if (shared && c->mem < 0)
        c->mem = openat(c->p->dirfd, "mem", O_RDONLY | O_CLOEXEC);
    enum page_result r = read_page(c->p->pid, shared ? c->mem : -1, addr, c->buf, &zeros, &err);
    if (!c->first_read) {
        c->first_read = true;
        ts_test_pause("scan"); /* the tests end or change the process here */
        char step[32];         /* or only this one's: "scan-PID" */
        snprintf(step, sizeof step, "scan-%d", (int)c->p->pid);
        ts_test_pause(step);
    }
    if (r == PAGE_GONE) {
        c->s->exited = true;
        c->stop = true;
    } else if (r == PAGE_DENIED) {
        c->s->err = err;
        c->s->err_what = "memory";
        c->stop = true;
    } else if (r == PAGE_CHANGED) {
        c->s->changed++;
    } else {
        count_page(c, addr, zeros, false);
        if (pfn) {
            seen_put(pfn, zeros);
            sent_add(pfn, zeros);
        }
    }
}

/* PAGEMAP_SCAN: every PMD-mapped, present, anonymous huge page of v. -1 when the kernel
 * lacks the ioctl. */
static int via_pagemap_scan(struct ctx *c, const struct vma *v)
{
    struct page_region vec[64];
    uint64_t start = v->start;
    while (start < v->end && !c->stop) {
        struct pm_scan_arg a = {.size = sizeof a,
                                .start = start,
                                .end = v->end,
                                .vec = (uintptr_t)vec,
                                .vec_len = 64,
                                .category_mask = PAGE_IS_HUGE | PAGE_IS_PRESENT,
                                .return_mask = PAGE_IS_HUGE | PAGE_IS_PRESENT | PAGE_IS_PFNZERO |
                                               PAGE_IS_FILE};
        int n = ioctl(c->pagemap, PAGEMAP_SCAN, &a);
        if (n < 0 && (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP))
            return -1;
        if (n < 0) { /* the process exited (ESRCH), or its mappings changed: stop here */
            c->s->exited |= errno == ESRCH;
            c->s->changed += errno != ESRCH;
            c->stop = true;
            return 0;
        }
        for (int i = 0; i < n && !c->stop; i++) {
            if (vec[i].categories & (PAGE_IS_PFNZERO | PAGE_IS_FILE))
                continue; /* the huge zero page, or file pages: no anonymous memory */
            uint64_t a0 = (vec[i].start + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
            for (uint64_t addr = a0; addr + HUGE_SIZE <= vec[i].end && !c->stop; addr += HUGE_SIZE)
                scan_page(c, addr);
        }
        if (a.walk_end <= start)
            break;
        start = a.walk_end;
    }
    return 0;
}

/* pagemap entries, with kpageflags where the PFNs are visible, else aligned runs. */
static void via_pagemap(struct ctx *c, const struct vma *v)
{
    static uint64_t e[PIECES];
    uint64_t budget = v->huge_kb * 1024 / HUGE_SIZE; /* aligned-runs: at most AnonHugePages */
    for (uint64_t addr = (v->start + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
         addr + HUGE_SIZE <= v->end && !c->stop; addr += HUGE_SIZE) {
        if (pread(c->pagemap, e, sizeof e, (off_t)(addr / PIECE * 8)) != (ssize_t)sizeof e) {
            c->s->exited |= errno == ESRCH;
            return;
        }
        bool present = true, consecutive = true;
        for (size_t i = 0; i < PIECES; i++) {
            present &= (e[i] & PM_PRESENT) != 0;
            consecutive &= (e[i] & PM_PFN_MASK) == (e[0] & PM_PFN_MASK) + i;
        }
        if (!present)
            continue;
        uint64_t pfn = e[0] & PM_PFN_MASK, flags = 0;
        if (pfn && c->kpageflags >= 0 &&
            pread(c->kpageflags, &flags, sizeof flags, (off_t)(pfn * 8)) == (ssize_t)sizeof flags) {
            c->s->method = "kpageflags";
            if (consecutive && (pfn & (PIECES - 1)) == 0 && (flags >> KPF_THP & 1) &&
                (flags >> KPF_COMPOUND_HEAD & 1))
                scan_page(c, addr);
        } else if (budget) {
            c->s->method = "aligned-runs";
            budget--;
            scan_page(c, addr);
        }
    }
}

/* ---- one process ----------------------------------------------------------------------- */

/* The anonymous mappings with huge pages, from smaps. */
static struct vma *huge_vmas(struct proc *p, size_t *nv, int *err, bool *cut)
{
    struct lines *in = malloc(sizeof *in);
    *err = in ? lines_open(in, p->dirfd, "smaps", PROC_SMAPS_CAP) : ENOMEM;
    if (*err) {
        free(in);
        return NULL;
    }
    struct vma *v = NULL, cur = {0};
    size_t n = 0, cap = 0;
    bool have = false;
    for (char *l = lines_next(in);; l = lines_next(in)) {
        unsigned long long s, e;
        int pos = 0;
        bool header = l && sscanf(l, "%llx-%llx %*s %n", &s, &e, &pos) == 2 && pos;
        /* a cut file ends inside a mapping's lines: that mapping is left out */
        if (!l && in->cut)
            break;
        if (!l || header) {
            if (have && cur.huge_kb) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    struct vma *nv2 = realloc(v, cap * sizeof *v);
                    if (!nv2)
                        break;
                    v = nv2;
                }
                v[n++] = cur;
            }
            if (!l)
                break;
            cur = (struct vma){.start = s, .end = e};
            cur.named_thpalloc = strstr(l, "[anon:thpalloc") != NULL;
            have = true;
        } else if (!strncmp(l, "AnonHugePages:", 14)) {
            ts_kv_kb(l, "AnonHugePages", &cur.huge_kb);
        }
    }
    *cut = in->cut;
    *err = in->err ? in->err : in->total ? 0 : ESRCH;
    lines_close(in);
    free(in);
    if (*err) {
        free(v);
        return NULL;
    }
    *nv = n;
    return v;
}

void scan_proc(struct proc *p)
{
    struct scan *s = calloc(1, sizeof *s);
    if (!s)
        return;
    free(p->scan);
    p->scan = s;
    if (p->kthread || !p->rollup_ok || p->dirfd < 0) {
        s->not_read = p->vanished ? "exited" : "unreadable";
        if (proc_permission_denied(p)) {
            s->err = EACCES;
            s->err_what = "smaps_rollup";
            s->not_read = "refused";
        }
        return;
    }
    if (p->huge_kb * 1024 > ts_opt.scan_max) {
        s->skipped = true;
        s->not_read = "skipped";
        return;
    }
    s->method = "pagemap-scan";
    /* thpalloc is there but neither its table nor its mapping names say where (a library
     * replaced since): its pages cannot be told from the rest's */
    s->owners_unknown = p->loaded && !p->attr_ok;
    if (!p->huge_kb)
        return;
    /* the deadline of this read (proc_read) grows by the time the rate limit gives it */
    if (ts_opt.scan_rate)
        proc_read_extend((double)p->huge_kb * 1024 / (double)ts_opt.scan_rate);
    double t0 = now();
    size_t nv = 0;
    int err;
    struct vma *v = huge_vmas(p, &nv, &err, &s->cut);
    if (!v && err) {
        s->err = err;
        s->err_what = "smaps";
        s->exited = err == ESRCH;
        s->method = NULL;
        s->not_read = err == ESRCH                    ? "exited"
                      : err == EACCES || err == EPERM ? "refused"
                                                      : "unreadable";
        return;
    }
    struct ctx c = {.p = p, .s = s, .kpageflags = -1, .mem = -1};
    c.pagemap = ts_open_pagemap(p->dirfd);
    c.buf = aligned_alloc(PIECE, CHUNK);
    if (c.pagemap < 0 || !c.buf) {
        s->err = c.pagemap < 0 ? errno : ENOMEM;
        s->err_what = "pagemap";
        s->method = NULL;
        s->not_read = s->err == EACCES || s->err == EPERM ? "refused" : "unreadable";
    }
    /* THP_STATUS_TEST_NO_PAGEMAP_SCAN=1: as on a kernel before 6.7 (tests; not in secure
     * execution) */
    const char *no = getauxval(AT_SECURE) ? NULL : getenv("THP_STATUS_TEST_NO_PAGEMAP_SCAN");
    bool ioctl_ok = !(no && !strcmp(no, "1"));
    for (size_t i = 0; i < nv && !s->err && !c.stop; i++) {
        c.v = &v[i];
        if (ioctl_ok && via_pagemap_scan(&c, &v[i]) == 0)
            continue;
        if (!c.kpageflags_tried) { /* an older kernel: once per process */
            c.kpageflags_tried = true;
            ioctl_ok = false;
            s->method = "aligned-runs";
            c.kpageflags = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
        }
        via_pagemap(&c, &v[i]);
    }
    /* Refused: one of the process's errors, said (and advised) as the others are, and
     * the PID view's exit status 1 ("could not be read in full"). Its figures are not
     * measurements: none are given. */
    if (s->err_what && !strcmp(s->err_what, "memory")) {
        if (p->nerr < 8)
            p->errs[p->nerr++] = (struct perr){"mem", s->err};
        s->not_read = "refused";
        s->method = NULL;
        memset(s->own, 0, sizeof s->own);
        memset(s->dup, 0, sizeof s->dup);
    }
    if (c.buf) { /* nothing of the content outlives the count */
        explicit_bzero(c.buf, CHUNK);
        free(c.buf);
    }
    if (c.pagemap >= 0)
        close(c.pagemap);
    if (c.kpageflags >= 0)
        close(c.kpageflags);
    if (c.mem >= 0)
        close(c.mem);
    free(v);
    s->seconds = now() - t0;
}

/* ---- output ---------------------------------------------------------------------------- */

static const char *const owner_name[2] = {"thpalloc arenas", "rest"};
static const char *const owner_key[2] = {"arenas", "rest"};

static void row_text(const char *indent, const char *label, const struct scan_owner *o)
{
    uint64_t bytes = o->pages * HUGE_SIZE;
    char pct[16] = "-";
    if (bytes)
        snprintf(pct, sizeof pct, "%.1f%%", 100.0 * (double)o->zero_bytes / (double)bytes);
    printf("%s%-16s %6" PRIu64 " %9" PRIu64 " kB %10" PRIu64 " kB %6s %6" PRIu64 "\n", indent,
           label, o->pages, bytes / 1024, o->zero_bytes / 1024, pct, o->splittable);
}

static void header_text(const char *indent)
{
    printf("%s%-16s %6s %12s %13s %6s %6s\n", indent, "", "pages", "scanned", "zero-filled",
           "zeros", "split");
}

static void note_split(const char *indent)
{
    int m = max_ptes_none();
    if (m == (int)PIECES - 1)
        printf("%s(split: none, as the shrinker splits none at max_ptes_none = 511)\n", indent);
    else
        printf("%s(split: more than max_ptes_none = %d zero-filled 4 KiB pieces)\n", indent, m);
}

void scan_text(const struct proc *p)
{
    const struct scan *s = p->scan;
    if (!s || p->kthread)
        return;
    if (s->skipped) {
        char max[32];
        ts_human_bytes(ts_opt.scan_max, max, sizeof max);
        printf("  huge pages not scanned: %" PRIu64 " kB, more than --scan-max %s\n", p->huge_kb,
               max);
        return;
    }
    if (s->not_read && !strcmp(s->not_read, "time-out")) {
        printf("  huge pages not scanned: %s\n", proc_not_read_text(p));
        return;
    }
    if (s->not_read && !strcmp(s->not_read, "failed")) {
        printf("  huge pages not scanned: %s\n", proc_not_read_text(p));
        return;
    }
    if (s->err && s->err_what && !strcmp(s->err_what, "memory")) {
        printf("  huge pages not scanned: reading its memory was refused (%s)\n",
               ts_errname(s->err));
        return;
    }
    if (!s->method) {
        printf("  huge pages not scanned: %s unreadable (%s)\n",
               s->err_what ? s->err_what : "smaps_rollup", ts_errname(s->err ? s->err : EACCES));
        return;
    }
    printf("  huge pages by content (--scan, %s: a snapshot, 2 MiB pages)\n", s->method);
    header_text("    ");
    for (int o = 0; o < 2; o++)
        row_text("    ", owner_name[o], &s->own[o]);
    note_split("    ");
    if (s->owners_unknown)
        printf("    (thpalloc's arenas unknown in this process: all its huge pages under rest)\n");
    if (s->exited)
        printf("    ! the process exited during the scan: the figures are partial\n");
    if (s->changed)
        printf("    (%" PRIu64 " huge page%s unmapped or changed while being read: not counted)\n",
               s->changed, s->changed == 1 ? "" : "s");
    if (s->cut)
        printf("    ! smaps cut at %d MiB (the read is bounded): huge pages past it not scanned\n",
               (int)(PROC_SMAPS_CAP >> 20));
    if (s->shared)
        printf("    (%" PRIu64 " of these huge pages shared with other processes, copy-on-write:"
               " %s)\n",
               s->shared,
               s->pfns ? "the totals of --all count each once"
                       : "page frames hidden (CAP_SYS_ADMIN), --all counts them in each");
}

static void owner_json(const char *key, const struct scan_owner *o)
{
    j_obj(key);
    j_u64("huge_pages", o->pages);
    j_u64("scanned_bytes", o->pages * HUGE_SIZE);
    j_u64("zero_bytes", o->zero_bytes);
    j_u64("splittable", o->splittable);
    j_end();
}

void scan_json(const struct proc *p)
{
    const struct scan *s = p->scan;
    if (!s || p->kthread)
        return;
    j_obj("scan");
    j_str("method", s->method);
    j_bool("read", !s->not_read);
    j_str("not_read", s->not_read);
    j_bool("skipped", s->skipped);
    j_bool("complete", s->method && !s->exited && !s->err && !s->changed && !s->cut);
    j_bool("cut", s->cut);
    j_bool("exited_during_scan", s->exited);
    j_u64("changed_during_scan", s->changed);
    j_str("error", s->err ? ts_errname(s->err) : NULL);
    j_str("error_in", s->err ? s->err_what : NULL);
    j_int("max_ptes_none", max_ptes_none());
    /* unknown is never zero: a process not read has no figures */
    if (s->not_read)
        j_null("owners_known");
    else
        j_bool("owners_known", !s->owners_unknown);
    for (int o = 0; o < 2; o++)
        if (s->not_read)
            j_null(owner_key[o]);
        else
            owner_json(owner_key[o], &s->own[o]);
    j_u64("shared_huge_pages", s->shared);
    j_bool("frames_visible", s->pfns);
    j_u64("counted_before", s->dup[0].pages + s->dup[1].pages);
    j_num("seconds", s->seconds);
    j_end();
}

/* ---- --all ----------------------------------------------------------------------------- */

/* Why processes were not scanned, as JSON, Prometheus and the text say it. */
static const char *const reasons[] = {"skipped", "refused",  "unreadable",
                                      "exited",  "time-out", "failed"};
#define NREASONS (sizeof reasons / sizeof *reasons)

struct totals {
    struct scan_owner own[2]; /* each physical page once: dup left out */
    unsigned scanned, skipped, exited, refused, cut;
    unsigned not_read[NREASONS];
    uint64_t shared, dup;
    bool pfns;
    double seconds;
};

/* What s adds to the totals: its pages, less those counted for a process before. */
static struct scan_owner own_once(const struct scan *s, int o)
{
    return (struct scan_owner){s->own[o].pages - s->dup[o].pages,
                               s->own[o].zero_bytes - s->dup[o].zero_bytes,
                               s->own[o].splittable - s->dup[o].splittable};
}

static void totals(const struct proc *v, size_t n, struct totals *t)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        const struct scan *s = v[i].scan;
        if (!s)
            continue;
        for (size_t r = 0; r < NREASONS; r++)
            t->not_read[r] += s->not_read && !strcmp(s->not_read, reasons[r]);
        t->skipped += s->skipped;
        t->exited += s->exited;
        t->refused += s->not_read && !strcmp(s->not_read, "refused");
        t->cut += s->cut;
        t->scanned += s->method && !s->not_read && (s->own[0].pages || s->own[1].pages);
        t->seconds += s->seconds;
        t->shared += s->shared;
        t->pfns |= s->pfns;
        for (int o = 0; o < 2; o++) {
            struct scan_owner w = own_once(s, o);
            t->own[o].pages += w.pages;
            t->own[o].zero_bytes += w.zero_bytes;
            t->own[o].splittable += w.splittable;
            t->dup += s->dup[o].pages;
        }
    }
}

static uint64_t zeros_of(const struct proc *p)
{
    return p->scan ? p->scan->own[0].zero_bytes + p->scan->own[1].zero_bytes : 0;
}

/* The indexes of the (up to) k processes with the most zero-filled huge-page memory. */
static size_t top(const struct proc *v, size_t n, size_t *idx, size_t k)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = zeros_of(&v[i]);
        if (!z || (m == k && z <= zeros_of(&v[idx[k - 1]])))
            continue;
        size_t j = m < k ? m++ : k - 1;
        while (j > 0 && zeros_of(&v[idx[j - 1]]) < z) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return m;
}

#define TOP 10

void scan_all_text(const struct proc *v, size_t n)
{
    struct totals t;
    totals(v, n, &t);
    struct scan_owner sum = {t.own[0].pages + t.own[1].pages,
                             t.own[0].zero_bytes + t.own[1].zero_bytes,
                             t.own[0].splittable + t.own[1].splittable};
    printf("\nHuge pages by content (--scan: %u process%s read in %.2f s; a snapshot)\n", t.scanned,
           t.scanned == 1 ? "" : "es", t.seconds);
    header_text("  ");
    for (int o = 0; o < 2; o++)
        row_text("  ", owner_name[o], &t.own[o]);
    row_text("  ", "total", &sum);
    note_split("  ");
    if (t.skipped) {
        char max[32];
        ts_human_bytes(ts_opt.scan_max, max, sizeof max);
        printf("  %u process%s not scanned: more huge pages than --scan-max %s\n", t.skipped,
               t.skipped == 1 ? "" : "es", max);
    }
    if (t.refused)
        printf("  %u process%s not scanned: reading their memory was refused\n", t.refused,
               t.refused == 1 ? "" : "es");
    if (t.not_read[2])
        printf("  %u process%s not scanned: unreadable\n", t.not_read[2],
               t.not_read[2] == 1 ? "" : "es");
    if (t.not_read[4])
        printf("  %u process%s not scanned: no answer within %g s (--timeout)\n", t.not_read[4],
               t.not_read[4] == 1 ? "" : "es", ts_opt.timeout);
    if (t.not_read[5])
        printf("  %u process%s not scanned: the reading process failed\n", t.not_read[5],
               t.not_read[5] == 1 ? "" : "es");
    if (t.cut)
        printf("  %u process%s scanned in part: smaps cut at %d MiB\n", t.cut,
               t.cut == 1 ? "" : "es", (int)(PROC_SMAPS_CAP >> 20));
    if (t.dup)
        printf("  %" PRIu64 " huge page%s shared between processes (copy-on-write): counted once\n",
               t.dup, t.dup == 1 ? "" : "s");
    else if (t.shared && !t.pfns)
        printf("  %" PRIu64 " huge page%s shared between processes counted in each (page frames "
               "hidden without CAP_SYS_ADMIN)\n",
               t.shared, t.shared == 1 ? "" : "s");
    if (t.exited)
        printf("  %u process%s exited during the scan (partial figures)\n", t.exited,
               t.exited == 1 ? "" : "es");
    size_t idx[TOP], m = top(v, n, idx, TOP);
    if (!m)
        return;
    printf("Top processes by zero-filled huge-page memory\n");
    printf("  %7s %-15s %10s %10s %7s %10s\n", "PID", "COMMAND", "HUGE", "ZEROS", "ZERO%",
           "SPLITTABLE");
    for (size_t i = 0; i < m; i++) {
        const struct proc *p = &v[idx[i]];
        const struct scan *s = p->scan;
        uint64_t pages = s->own[0].pages + s->own[1].pages, z = zeros_of(p);
        printf("  %7d %-15s %9.1fM %9.1fM %6.1f%% %10" PRIu64 "\n", (int)p->pid,
               ts_text_max(p->name, 15), (double)(pages * HUGE_SIZE) / 1048576.0,
               (double)z / 1048576.0, pages ? 100.0 * (double)z / (double)(pages * HUGE_SIZE) : 0.0,
               s->own[0].splittable + s->own[1].splittable);
    }
}

void scan_all_json(const struct proc *v, size_t n)
{
    struct totals t;
    totals(v, n, &t);
    j_obj("scan");
    j_int("processes_scanned", t.scanned);
    j_int("processes_skipped", t.skipped);
    j_int("processes_refused", t.refused);
    j_int("processes_exited", t.exited);
    j_obj("processes_not_read");
    for (size_t r = 0; r < NREASONS; r++)
        j_int(reasons[r], t.not_read[r]);
    j_end();
    j_int("processes_cut", t.cut);
    j_u64("shared_counted_once", t.dup);
    j_int("max_ptes_none", max_ptes_none());
    for (int o = 0; o < 2; o++)
        owner_json(owner_key[o], &t.own[o]);
    size_t idx[TOP], m = top(v, n, idx, TOP);
    j_arr("top");
    for (size_t i = 0; i < m; i++) {
        j_obj(NULL);
        j_int("pid", v[idx[i]].pid);
        j_str("name", v[idx[i]].name);
        j_u64("zero_bytes", zeros_of(&v[idx[i]]));
        j_end();
    }
    j_end();
    j_num("seconds", t.seconds);
    j_end();
}

/* The processes not scanned, by reason: unknown is never zero, and never missing. */
static void prom_not_read(const unsigned *counts)
{
    p_family("thp_scan_processes_not_read", "gauge",
             "Processes --scan could not read, by reason (their huge pages are in no total).");
    for (size_t r = 0; r < NREASONS; r++)
        p_sample("thp_scan_processes_not_read", counts[r], "reason", reasons[r], NULL);
}

/* The scan's three series per owner, in the thp_unit_, thp_ and thp_process_ families:
 * their names after the prefix, their help, and their figure (prom_figure). */
static const char *const prom_fam[3] = {"huge_scanned_bytes", "huge_zero_bytes",
                                        "huge_splittable_pages"};
static const char *const prom_help[3] = {
    "Anonymous PMD-mapped huge pages read by --scan.",
    "Zero-filled 4 KiB pieces inside them (--scan).",
    "Huge pages with more than max_ptes_none zero-filled pieces (--scan)."};
static const char *const prom_owner[2] = {"thpalloc", "rest"};

static uint64_t prom_figure(int f, const struct scan_owner *w)
{
    return f == 0 ? w->pages * HUGE_SIZE : f == 1 ? w->zero_bytes : w->splittable;
}

/* Per systemd service (as the other series) and owner, then the totals per owner. */
void scan_all_prom(const struct proc *v, size_t n, const char *(*group)(const struct proc *))
{
    char name[96], h[160];
    for (int f = 0; f < 3; f++) {
        snprintf(name, sizeof name, "thp_unit_%s", prom_fam[f]);
        snprintf(h, sizeof h, "%s Sum over a systemd service's processes.", prom_help[f]);
        /* units in order of first appearance after sorting by name: collect them */
        const char **units = NULL;
        size_t nu = 0;
        for (size_t i = 0; i < n; i++) {
            if (!v[i].scan || !v[i].scan->method)
                continue;
            const char *u = group(&v[i]);
            size_t k = 0;
            while (k < nu && strcmp(units[k], u))
                k++;
            if (k < nu)
                continue;
            const char **nu2 = realloc(units, (nu + 1) * sizeof *units);
            if (!nu2)
                break;
            units = nu2;
            units[nu++] = u;
        }
        for (size_t k = 0; k < nu; k++)
            for (int o = 0; o < 2; o++) {
                uint64_t sum = 0;
                for (size_t i = 0; i < n; i++) {
                    const struct scan *s = v[i].scan;
                    if (!s || !s->method || strcmp(group(&v[i]), units[k]))
                        continue;
                    struct scan_owner w = own_once(s, o);
                    sum += prom_figure(f, &w);
                }
                p_family(name, "gauge", h);
                p_sample(name, (double)sum, "unit", units[k], "owner", prom_owner[o], NULL);
            }
        free(units);
    }
    struct totals t;
    totals(v, n, &t);
    for (int f = 0; f < 3; f++) {
        snprintf(name, sizeof name, "thp_%s", prom_fam[f]);
        snprintf(h, sizeof h, "%s Sum over every process.", prom_help[f]);
        p_family(name, "gauge", h);
        for (int o = 0; o < 2; o++)
            p_sample(name, (double)prom_figure(f, &t.own[o]), "owner", prom_owner[o], NULL);
    }
    p_family("thp_scan_processes_skipped", "gauge",
             "Processes --scan skipped: more huge pages than --scan-max.");
    p_sample("thp_scan_processes_skipped", t.skipped, NULL);
    prom_not_read(t.not_read);
    p_family("thp_scan_max_ptes_none", "gauge",
             "khugepaged/max_ptes_none: the zero pieces above which a huge page is splittable.");
    p_sample("thp_scan_max_ptes_none", max_ptes_none(), NULL);
}

/* The PID view in Prometheus's format: the scan's series per process named (labels pid,
 * comm, unit, owner; the caller bounds them by the PIDs it gives). Each process is read,
 * scanned and freed before the families are printed, so that each family stays whole. */
int scan_procs_prom(char **pids, int npids)
{
    struct row {
        char pid[16], comm[64], unit[256];
        struct scan s;
    } *rows = calloc((size_t)npids + 1, sizeof *rows);
    struct proc *p = malloc(sizeof *p);
    if (!rows || !p) {
        free(rows);
        free(p);
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    int rc = 0, n = 0;
    unsigned not_read[NREASONS] = {0};
    for (int i = 0; i < npids; i++) {
        long v = strtol(pids[i], NULL, 10);
        proc_read(p, (pid_t)v, true, 2);
        if (!p->exists || p->vanished || p->nerr || p->not_read) {
            fprintf(stderr, "thp-status: %ld: %s\n", v,
                    !p->exists    ? "no such process"
                    : p->not_read ? proc_not_read_text(p)
                    : p->vanished ? "the process exited while being read"
                                  : "parts of the process could not be read");
            rc = 1;
        }
        if (p->exists && !p->kthread && p->scan) {
            struct row *r = &rows[n++];
            snprintf(r->pid, sizeof r->pid, "%ld", v);
            snprintf(r->comm, sizeof r->comm, "%s", p->name);
            snprintf(r->unit, sizeof r->unit, "%s", p->unit[0] ? p->unit : "(none)");
            r->s = *p->scan;
            for (size_t k = 0; k < NREASONS; k++)
                not_read[k] += r->s.not_read && !strcmp(r->s.not_read, reasons[k]);
            rc |= r->s.not_read && !strcmp(r->s.not_read, "time-out");
        }
        proc_free(p);
    }
    free(p);
    char name[96];
    for (int f = 0; f < 3; f++) {
        snprintf(name, sizeof name, "thp_process_%s", prom_fam[f]);
        for (int i = 0; i < n; i++)
            for (int o = 0; o < 2 && !rows[i].s.not_read; o++) {
                p_family(name, "gauge", prom_help[f]);
                p_sample(name, (double)prom_figure(f, &rows[i].s.own[o]), "pid", rows[i].pid,
                         "comm", rows[i].comm, "unit", rows[i].unit, "owner", prom_owner[o], NULL);
            }
    }
    if (n)
        p_family("thp_process_scan_complete", "gauge",
                 "1 when --scan read the process in full (0: not read, it exited, or pages "
                 "changed under it).");
    for (int i = 0; i < n; i++)
        p_sample("thp_process_scan_complete",
                 !rows[i].s.not_read && !rows[i].s.exited && !rows[i].s.err && !rows[i].s.changed &&
                     !rows[i].s.cut,
                 "pid", rows[i].pid, "comm", rows[i].comm, "unit", rows[i].unit, NULL);
    for (int i = 0; i < n; i++)
        if (rows[i].s.not_read) {
            p_family("thp_process_scan_not_read", "gauge",
                     "1 for a process --scan could not read, with the reason.");
            p_sample("thp_process_scan_not_read", 1, "pid", rows[i].pid, "comm", rows[i].comm,
                     "unit", rows[i].unit, "reason", rows[i].s.not_read, NULL);
        }
    prom_not_read(not_read);
    free(rows);
    return rc;
}
