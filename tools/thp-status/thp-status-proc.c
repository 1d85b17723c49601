/* thp-status: the process view (thp-status PID...) and --all.
 *
 * Every file is opened relative to a descriptor of /proc/PID taken first, so a PID that
 * is reused while we read cannot mix two processes: reads of an exited process fail with
 * ESRCH (or come back empty), and we say "exited while being read".
 *
 * Attribution to thpalloc: the library exports `thpalloc_introspect` (lib/thpalloc.h), a
 * table of its address-space reservations, which thp-status-introspect.c reads; we sum
 * the smaps figures of the VMAs inside the ranges versus the rest. Where that fails,
 * mappings named [anon:thpalloc ...] are used instead.
 * Among the figures: each VMA's size and whether it is charged to the commit limit ("ac"
 * in VmFlags), so that what thpalloc reserves and what it charges can be told apart.
 * The output (text, JSON, Prometheus) is in thp-status-procview.c. */
#include "thp-status.h"
#include "thpalloc.h"

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <poll.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "thp-status-proc.h"
#include "thp-status-scan.h"

static void add_err(struct proc *p, const char *what, int err)
{
    if (p->nerr < 8)
        p->errs[p->nerr++] = (struct perr){what, err};
}

static char *slurp_at(int dirfd, const char *name, size_t *len, int *err)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    char *t = ts_slurp_fd(fd, len, err);
    close(fd);
    return t;
}

static void read_status(struct proc *p)
{
    int err;
    char *t = slurp_at(p->dirfd, "status", NULL, &err);
    if (!t) {
        add_err(p, "status", err);
        return;
    }
    p->thp_enabled = -1;
    bool has_vm = false;
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
        if (!strncmp(l, "Name:", 5)) {
            char *v = l + 5;
            while (*v == '\t' || *v == ' ')
                v++;
            snprintf(p->name, sizeof p->name, "%s", v);
        } else if (!strncmp(l, "Uid:", 4)) {
            unsigned r, e, sv, fs;
            if (sscanf(l + 4, "%u %u %u %u", &r, &e, &sv, &fs) == 4) {
                p->ruid = r;
                p->euid = e;
                p->fsuid = fs;
            }
        } else if (!strncmp(l, "Gid:", 4)) {
            unsigned r, e, sv, fs;
            if (sscanf(l + 4, "%u %u %u %u", &r, &e, &sv, &fs) == 4)
                p->fsgid = fs;
        } else if (!strncmp(l, "Groups:", 7)) {
            char *q = l + 7, *end;
            for (unsigned long g; p->ngroups < 64 && (g = strtoul(q, &end, 10), end != q); q = end)
                p->groups[p->ngroups++] = (gid_t)g;
        } else if (!strncmp(l, "CapEff:", 7)) {
            /* CAP_DAC_OVERRIDE (1) or CAP_DAC_READ_SEARCH (2): reads any file */
            p->dac_caps = (strtoull(l + 7, NULL, 16) & 6) != 0;
        } else if (!strncmp(l, "State:", 6)) {
            char *v = l + 6;
            while (*v == '\t' || *v == ' ')
                v++;
            p->zombie = *v == 'Z' || *v == 'X';
        } else if (!strncmp(l, "THP_enabled:", 12)) {
            p->thp_enabled = atoi(l + 12);
        } else if (!strncmp(l, "Kthread:", 8)) {
            p->kthread = atoi(l + 8) == 1;
        } else if (!strncmp(l, "VmSize:", 7)) {
            has_vm = true;
        }
    }
    if (!has_vm && !p->zombie)
        p->kthread = true;
    free(t);
    /* The name as the process set it: status escapes \\ and newlines in it, comm does not. */
    char comm[64];
    int cfd = openat(p->dirfd, "comm", O_RDONLY | O_CLOEXEC);
    if (cfd >= 0) {
        ssize_t n = read(cfd, comm, sizeof comm - 1);
        if (n > 0) {
            n -= comm[n - 1] == '\n';
            comm[n] = '\0';
            snprintf(p->name, sizeof p->name, "%s", comm);
        }
        close(cfd);
    }
    /* Capabilities in another user namespace are no power over our files. */
    struct stat a, b;
    if (p->dac_caps &&
        (fstatat(p->dirfd, "ns/user", &a, 0) != 0 || stat("/proc/self/ns/user", &b) != 0 ||
         a.st_ino != b.st_ino || a.st_dev != b.st_dev))
        p->dac_caps = false;
}

static void read_starttime(int dirfd, char *out, size_t cap)
{
    int err;
    out[0] = '\0';
    char *t = slurp_at(dirfd, "stat", NULL, &err);
    if (!t)
        return;
    char *r = strrchr(t, ')');
    if (r) {
        /* fields after the comm: state is field 3; starttime is field 22 */
        int field = 2;
        for (char *q = r + 1; *q; q++) {
            if (*q == ' ') {
                field++;
                if (field == 22) {
                    size_t n = strcspn(q + 1, " ");
                    snprintf(out, cap, "%.*s", (int)n, q + 1);
                    break;
                }
            }
        }
    }
    free(t);
}

static void read_identity(struct proc *p)
{
    ssize_t n = readlinkat(p->dirfd, "exe", p->exe, sizeof p->exe - 1);
    if (n >= 0)
        p->exe[n] = '\0';
    else {
        p->exe[0] = '\0';
        if (!p->kthread && errno != ENOENT)
            add_err(p, "exe", errno);
    }
    int err;
    size_t len;
    char *t = slurp_at(p->dirfd, "cmdline", &len, &err);
    if (t) {
        const char *b = strrchr(t, '/') ? strrchr(t, '/') + 1 : t;
        snprintf(p->cmd0, sizeof p->cmd0, "%s", b);
        free(t);
    }
    t = slurp_at(p->dirfd, "cgroup", NULL, &err);
    if (t) {
        p->unit_read = true;
        if (!cfg_unit_from_cgroup(t, p->unit, sizeof p->unit))
            p->unit[0] = '\0';
        free(t);
    }
}

static void read_rollup(struct proc *p)
{
    int err;
    size_t len;
    ts_test_pause("smaps_rollup");
    char *t = slurp_at(p->dirfd, "smaps_rollup", &len, &err);
    if (!t) {
        add_err(p, "smaps_rollup", err);
        return;
    }
    if (len == 0) { /* no mm: a kernel thread, or the process has just exited */
        free(t);
        if (!p->kthread)
            add_err(p, "smaps_rollup", ESRCH);
        return;
    }
    p->rollup_ok = ts_kv_kb(t, "Rss", &p->rss_kb);
    ts_kv_kb(t, "Pss", &p->pss_kb);
    ts_kv_kb(t, "Anonymous", &p->anon_kb);
    ts_kv_kb(t, "AnonHugePages", &p->huge_kb);
    ts_kv_kb(t, "ShmemPmdMapped", &p->shmem_pmd_kb);
    ts_kv_kb(t, "FilePmdMapped", &p->file_pmd_kb);
    ts_kv_kb(t, "Swap", &p->swap_kb);
    free(t);
}

static bool is_thpalloc_path(const char *path)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    return strncmp(b, "libthpalloc.so", 14) == 0;
}

/* ---- bounded line reads ---------------------------------------------------------------- */

int lines_open(struct lines *l, int dirfd, const char *name, uint64_t cap)
{
    l->cap = cap;
    l->total = 0;
    l->cut = l->eof = false;
    l->err = 0;
    l->len = l->pos = 0;
    l->fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    return l->fd < 0 ? errno : 0;
}

void lines_close(struct lines *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

/* Whether the file goes on past the cap (one byte more, read and dropped). */
static bool lines_more(struct lines *l)
{
    char c;
    ssize_t n;
    while ((n = read(l->fd, &c, 1)) < 0 && errno == EINTR)
        ;
    return n > 0;
}

char *lines_next(struct lines *l)
{
    for (;;) {
        char *s = l->buf + l->pos, *nl = memchr(s, '\n', l->len - l->pos);
        if (nl) {
            *nl = '\0';
            l->pos = (size_t)(nl - l->buf) + 1;
            return s;
        }
        if (l->eof) { /* a last line without a newline; a cut one is dropped */
            if (l->pos == l->len || l->cut)
                return NULL;
            l->buf[l->len] = '\0';
            l->pos = l->len;
            return s;
        }
        memmove(l->buf, s, l->len - l->pos);
        l->len -= l->pos;
        l->pos = 0;
        if (l->len == sizeof l->buf - 1) { /* a line longer than the buffer: its start */
            l->buf[l->len] = '\0';
            l->len = l->pos = 0;
            char c = 0;
            ssize_t n;
            while (c != '\n' && (n = read(l->fd, &c, 1)) > 0)
                l->total++;
            return l->buf;
        }
        if (l->total >= l->cap) {
            l->eof = true;
            l->cut = lines_more(l);
            continue;
        }
        size_t room = sizeof l->buf - 1 - l->len;
        if (room > l->cap - l->total)
            room = (size_t)(l->cap - l->total);
        ssize_t n = read(l->fd, l->buf + l->len, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            l->err = n < 0 ? errno : 0;
            l->eof = true;
            continue;
        }
        l->len += (size_t)n;
        l->total += (uint64_t)n;
    }
}

/* p's file name for reading by lines, at most cap bytes, after the tests' pause of that
 * name; NULL (the error recorded in p) when it cannot be opened. */
static struct lines *proc_lines(struct proc *p, const char *name, uint64_t cap)
{
    ts_test_pause(name);
    struct lines *in = malloc(sizeof *in);
    int err = in ? lines_open(in, p->dirfd, name, cap) : ENOMEM;
    if (err) {
        add_err(p, name, err);
        free(in);
        return NULL;
    }
    return in;
}

void proc_read_maps(struct proc *p)
{
    struct lines *in = proc_lines(p, "maps", PROC_MAPS_CAP);
    if (!in)
        return;
    free(p->maps);
    p->maps = NULL;
    p->nmaps = 0;
    size_t cap = 0;
    for (char *l; (l = lines_next(in));) {
        unsigned long long start, end, off, ino;
        unsigned maj, mnr;
        char perms[8];
        int pos = 0;
        if (sscanf(l, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &mnr,
                   &ino, &pos) < 7 ||
            pos == 0)
            continue;
        if (p->nmaps == cap) {
            cap = cap ? cap * 2 : 64;
            struct span *nm = realloc(p->maps, cap * sizeof *nm);
            if (!nm)
                break;
            p->maps = nm;
        }
        const char *path = l + pos;
        /* no file: no name, or one given with PR_SET_VMA_ANON_NAME ([heap], [stack] and
         * the like are the kernel's own) */
        bool anon =
            ino == 0 && maj == 0 && mnr == 0 && (path[0] == '\0' || !strncmp(path, "[anon:", 6));
        p->maps[p->nmaps++] = (struct span){start, end, anon, !strcmp(path, "[anon:thpalloc]")};
        if (path[0] != '/' || !is_thpalloc_path(path))
            continue;
        if (!p->loaded || (off == 0 && start < p->lib_start)) {
            if (off != 0 && p->loaded)
                continue;
            p->loaded = true;
            /* maps writes a newline in a path as \012 */
            char *o = p->lib_path, *last = p->lib_path + sizeof p->lib_path - 1;
            for (const char *q = path; *q && o < last; q++) {
                *o++ = strncmp(q, "\\012", 4) ? *q : '\n';
                q += strncmp(q, "\\012", 4) ? 0 : 3;
            }
            *o = '\0';
            p->lib_start = start;
            p->lib_end_first = end;
            p->lib_dev = makedev(maj, mnr);
            p->lib_ino = (ino_t)ino;
        }
    }
    p->maps_cut = in->cut;
    if (in->err)
        add_err(p, "maps", in->err);
    else if (in->total == 0 && !p->kthread)
        add_err(p, "maps", ESRCH);
    else
        p->maps_ok = true;
    lines_close(in);
    free(in);
}

/* ---- smaps: per-VMA attribution -------------------------------------------------------- */

static uint64_t overlap(const struct proc *p, uint64_t s, uint64_t e)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < p->intro->head.ranges_used; i++) {
        const struct thpalloc_range *r = &p->intro->range[i];
        if (!r->size)
            continue;
        uint64_t a = r->base > s ? r->base : s, b = r->base + r->size < e ? r->base + r->size : e;
        if (b > a)
            total += b - a;
    }
    return total;
}

struct vma {
    uint64_t start, end;
    bool named_thpalloc, hg, ac;
    uint64_t rss, anon, huge;
    bool valid;
};

/* The address-space figures of `bytes` of v (all of it, or its part in or out of the
 * arenas): Size, and the part charged to the commit limit or advised for huge pages. */
static void mem_add_space(struct mem *m, const struct vma *v, uint64_t bytes)
{
    m->size_kb += bytes / 1024;
    if (v->ac)
        m->charged_kb += bytes / 1024;
    if (v->hg)
        m->advised_kb += bytes / 1024;
}

static void vma_account(struct proc *p, const struct vma *v)
{
    if (!v->valid)
        return;
    uint64_t len = v->end - v->start, in;
    p->size_kb += len / 1024;
    if (v->ac)
        p->charged_kb += len / 1024;
    if (!p->loaded)
        return;
    if (p->intro_ok)
        in = overlap(p, v->start, v->end);
    else
        in = v->named_thpalloc ? len : 0;
    if (in == 0 || in >= len) {
        struct mem *m = in ? &p->in : &p->out;
        m->rss_kb += v->rss;
        m->anon_kb += v->anon;
        m->huge_kb += v->huge;
        mem_add_space(m, v, len);
        return;
    }
    /* A VMA that is only partly ours (the kernel merged our reservation with a neighbour):
     * share its figures in proportion, huge pages in whole 2 MiB units. */
    p->partial_vmas++;
    double f = (double)in / (double)len;
    uint64_t rss = (uint64_t)((double)v->rss * f), anon = (uint64_t)((double)v->anon * f);
    uint64_t huge = ((uint64_t)((double)v->huge * f) / 2048) * 2048;
    p->in.rss_kb += rss;
    p->in.anon_kb += anon;
    p->in.huge_kb += huge;
    p->out.rss_kb += v->rss - rss;
    p->out.anon_kb += v->anon - anon;
    p->out.huge_kb += v->huge - huge;
    mem_add_space(&p->in, v, in);
    mem_add_space(&p->out, v, len - in);
}

static void read_smaps(struct proc *p)
{
    struct lines *in = proc_lines(p, "smaps", PROC_SMAPS_CAP);
    if (!in)
        return;
    struct vma v = {0};
    for (char *l; (l = lines_next(in));) {
        unsigned long long s, e;
        int pos = 0;
        if (isxdigit((unsigned char)l[0]) && sscanf(l, "%llx-%llx %n", &s, &e, &pos) == 2 && pos) {
            vma_account(p, &v);
            memset(&v, 0, sizeof v);
            v.valid = true;
            v.start = s;
            v.end = e;
            v.named_thpalloc = strstr(l, "[anon:thpalloc") != NULL;
            p->named_vmas += v.named_thpalloc;
            continue;
        }
        uint64_t kb;
        if (!strncmp(l, "Rss:", 4) && ts_kv_kb(l, "Rss", &kb))
            v.rss = kb;
        else if (!strncmp(l, "Anonymous:", 10) && ts_kv_kb(l, "Anonymous", &kb))
            v.anon = kb;
        else if (!strncmp(l, "AnonHugePages:", 14) && ts_kv_kb(l, "AnonHugePages", &kb))
            v.huge = kb;
        else if (!strncmp(l, "VmFlags:", 8)) {
            v.hg = ts_vmflag(l, "hg");
            v.ac = ts_vmflag(l, "ac"); /* VM_ACCOUNT: counted in Committed_AS */
        }
    }
    /* a cut file ends inside a mapping's lines: that mapping is left out */
    if (!in->cut)
        vma_account(p, &v);
    p->smaps_cut = in->cut;
    uint64_t total = in->total;
    int err = in->err;
    lines_close(in);
    free(in);
    if (err || total == 0) {
        add_err(p, "smaps", err ? err : ESRCH);
        return;
    }
    p->space_ok = true;
    /* Without the table, only names tell the arenas apart; with none (no table, a kernel
     * without CONFIG_ANON_VMA_NAME) the arenas' figures are unknown, not zero. */
    p->attr_ok = p->loaded && (p->intro_ok || p->named_vmas > 0);
    p->attr_method = p->intro_ok ? "introspect" : "names";
}

/* ---- policy ---------------------------------------------------------------------------- */

static void read_env_aux(struct proc *p)
{
    int err;
    size_t len;
    char *t = slurp_at(p->dirfd, "environ", &len, &err);
    if (t) {
        p->env_read = true;
        int n = 0;
        for (size_t i = 0; i < len; i += strlen(t + i) + 1)
            if (!strncmp(t + i, "THPALLOC_", 9))
                n++;
        p->env = calloc((size_t)n + 1, sizeof *p->env);
        if (p->env)
            for (size_t i = 0; i < len; i += strlen(t + i) + 1)
                if (!strncmp(t + i, "THPALLOC_", 9))
                    p->env[p->nenv++] = strdup(t + i);
        free(t);
    } else if (err != ENOENT && err != ESRCH) {
        add_err(p, "environ", err);
    }
    p->secure = -1;
    t = slurp_at(p->dirfd, "auxv", &len, &err);
    if (t) {
        const Elf64_auxv_t *a = (const Elf64_auxv_t *)(const void *)t;
        for (size_t i = 0; i + 1 <= len / sizeof *a; i++) {
            if (a[i].a_type == AT_NULL)
                break;
            if (a[i].a_type == AT_SECURE)
                p->secure = a[i].a_un.a_val != 0;
        }
        free(t);
    }
}

/* ---- collection ----------------------------------------------------------------------- */

void proc_free(struct proc *p)
{
    if (p->dirfd >= 0)
        close(p->dirfd);
    p->dirfd = -1;
    free(p->intro);
    p->intro = NULL;
    free(p->maps);
    p->maps = NULL;
    free(p->scan);
    p->scan = NULL;
    for (int i = 0; i < p->nenv; i++)
        free(p->env[i]);
    free(p->env);
    p->env = NULL;
}

/* p for pid with nothing read yet: unknown (-1) where 0 would be a value. */
static void proc_init(struct proc *p, pid_t pid)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->thp_enabled = -1;
    p->secure = -1;
}

void proc_collect(struct proc *p, pid_t pid, bool full)
{
    proc_init(p, pid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    p->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dirfd < 0)
        return;
    p->exists = true;
    read_starttime(p->dirfd, p->starttime, sizeof p->starttime);
    read_status(p);
    if (p->nerr) { /* cannot even read status: gone */
        p->vanished = true;
        return;
    }
    read_identity(p);
    if (!p->kthread) {
        read_rollup(p);
        proc_read_maps(p);
        if (p->loaded)
            proc_read_introspect(p);
        free(p->maps); /* only the arena table is checked against them */
        p->maps = NULL;
        p->nmaps = 0;
        /* smaps is long: --all reads it only where there is something to attribute */
        if (p->maps_ok && (p->loaded || full))
            read_smaps(p);
        /* --all --prometheus: the policy of each process with thpalloc loaded, so that a
         * process whose configuration it cannot read (on defaults) is counted */
        if (full || (p->loaded && ts_opt.format == TS_PROM)) {
            read_env_aux(p);
            proc_resolve_policy(p);
        }
    }
    /* Did it exit while we read? */
    char again[32];
    read_starttime(p->dirfd, again, sizeof again);
    int err;
    char *st = slurp_at(p->dirfd, "status", NULL, &err);
    if (!st || !again[0] || strcmp(again, p->starttime) != 0 || strstr(st, "State:\tZ") ||
        strstr(st, "State:\tX"))
        p->vanished = true;
    free(st);
    for (int i = 0; i < p->nerr; i++)
        if (p->errs[i].err == ESRCH || p->errs[i].err == ENOENT)
            p->vanished = true;
}

bool proc_permission_denied(const struct proc *p)
{
    for (int i = 0; i < p->nerr; i++)
        if (p->errs[i].err == EACCES || p->errs[i].err == EPERM)
            return true;
    return false;
}

/* ---- reading in a child, with a deadline ------------------------------------------------ */

/* Reading another process's memory (process_vm_readv, /proc/PID/pagemap) waits for it to
 * fault pages in: one whose range is registered with userfaultfd and never served makes
 * the reader wait forever, and only a fatal signal ends that wait. So a child reads each
 * process and sends what it read over a pipe, as records; the parent kills it at the
 * deadline. Pointers in struct proc are the child's: replaced on arrival (static strings
 * stay valid, fork keeps the address space). */
enum { R_PROC = 1, R_INTRO, R_SCAN, R_ENV, R_EXTEND, R_SCANDATA, R_END };

struct rec {
    uint32_t type, len;
};

static int child_fd = -1;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put(uint32_t type, const void *data, size_t len)
{
    struct rec r = {type, (uint32_t)len};
    struct iovec iov[2] = {{&r, sizeof r}, {(void *)(uintptr_t)data, len}};
    size_t left = sizeof r + len;
    int i = 0;
    while (left) {
        ssize_t n = writev(child_fd, iov + i, 2 - i);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(1); /* the parent gave up on us */
        left -= (size_t)n;
        while (i < 2 && (size_t)n >= iov[i].iov_len)
            n -= (ssize_t)iov[i++].iov_len;
        if (i < 2) {
            iov[i].iov_base = (char *)iov[i].iov_base + n;
            iov[i].iov_len -= (size_t)n;
        }
    }
}

void proc_read_extend(double seconds)
{
    if (child_fd >= 0)
        put(R_EXTEND, &seconds, sizeof seconds);
}

static bool want_scan(const struct proc *p, int scan)
{
    return scan && p->exists && !p->kthread && (scan == 1 || !p->vanished);
}

static void child(struct proc *p, pid_t pid, bool full, int scan)
{
    proc_collect(p, pid, full);
    put(R_PROC, p, sizeof *p);
    if (p->intro)
        put(R_INTRO, p->intro, sizeof *p->intro);
    for (int i = 0; i < p->nenv; i++)
        put(R_ENV, p->env[i], strlen(p->env[i]) + 1);
    if (want_scan(p, scan)) {
        scan_proc(p);
        put(R_PROC, p, sizeof *p); /* the scan adds to the process's errors */
        if (p->scan)
            put(R_SCAN, p->scan, sizeof *p->scan);
        size_t n;
        const void *d = scan_child_data(&n);
        put(R_SCANDATA, d, n);
    }
    put(R_END, NULL, 0);
}

/* n bytes before the deadline: 1, 0 at the end of the pipe, -1 past the deadline. */
static int get(int fd, void *buf, size_t n, const double *deadline)
{
    size_t got = 0;
    while (got < n) {
        double left = *deadline - mono();
        if (left <= 0)
            return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, left > 3600 ? 3600000 : (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        ssize_t m = read(fd, (char *)buf + got, n - got);
        if (m < 0 && errno == EINTR)
            continue;
        if (m <= 0)
            return 0;
        got += (size_t)m;
    }
    return 1;
}

/* What the parent knows of a process it could not read: that it exists, its name. */
static void not_read(struct proc *p, pid_t pid, const char *why)
{
    bool had = p->exists && p->pid == pid; /* its first part arrived */
    if (!had) {
        proc_init(p, pid);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        p->exists = fd >= 0;
        if (fd >= 0) {
            ssize_t n = read(fd, p->name, sizeof p->name - 1);
            if (n > 0)
                p->name[n - (p->name[n - 1] == '\n')] = '\0';
            close(fd);
        }
        p->not_read = why;
    }
}

void proc_read(struct proc *p, pid_t pid, bool full, int scan)
{
    int fds[2];
    pid_t c = -1;
    if (ts_opt.timeout > 0 && pipe2(fds, O_CLOEXEC) == 0) {
        fflush(NULL);
        c = fork();
        if (c < 0) {
            close(fds[0]);
            close(fds[1]);
        }
    }
    if (c < 0) { /* no deadline, or no child to give it to: read here */
        proc_collect(p, pid, full);
        if (want_scan(p, scan))
            scan_proc(p);
        return;
    }
    if (c == 0) {
        close(fds[0]);
        signal(SIGPIPE, SIG_IGN);
        child_fd = fds[1];
        child(p, pid, full, scan);
        _exit(0);
    }
    close(fds[1]);
    memset(p, 0, sizeof *p);
    p->dirfd = -1;
    double deadline = mono() + ts_opt.timeout;
    const char *why = "failed";
    void *data = NULL;
    for (;;) {
        struct rec r;
        int got = get(fds[0], &r, sizeof r, &deadline);
        void *nd = got > 0 ? realloc(data, r.len + 1) : NULL;
        if (nd)
            data = nd;
        if (got > 0 && nd)
            got = get(fds[0], data, r.len, &deadline);
        if (got < 0)
            why = "time-out";
        if (got <= 0 || !nd)
            break;
        if (r.type == R_END) {
            why = NULL;
            break;
        }
        if (r.type == R_PROC && r.len == sizeof *p) {
            struct intro_table *intro = p->intro;
            char **env = p->env;
            int nenv = p->nenv;
            memcpy(p, data, sizeof *p);
            p->dirfd = -1;
            p->intro = intro;
            p->env = env;
            p->nenv = env ? nenv : 0;
            p->maps = NULL;
            p->nmaps = 0;
            p->scan = NULL;
        } else if (r.type == R_INTRO && r.len == sizeof *p->intro && !p->intro) {
            p->intro = malloc(sizeof *p->intro);
            if (p->intro)
                memcpy(p->intro, data, sizeof *p->intro);
            p->intro_ok = p->intro != NULL;
        } else if (r.type == R_ENV) {
            char **ne = realloc(p->env, ((size_t)p->nenv + 2) * sizeof *ne);
            ((char *)data)[r.len] = '\0';
            if (ne) {
                p->env = ne;
                p->env[p->nenv] = strdup(data);
                p->nenv += p->env[p->nenv] != NULL;
                p->env[p->nenv] = NULL;
            }
        } else if (r.type == R_SCAN && r.len == sizeof *p->scan) {
            p->scan = malloc(sizeof *p->scan);
            if (p->scan)
                memcpy(p->scan, data, sizeof *p->scan);
        } else if (r.type == R_SCANDATA) {
            scan_parent_data(data, r.len);
        } else if (r.type == R_EXTEND && r.len == sizeof(double)) {
            double more;
            memcpy(&more, data, sizeof more);
            if (more > 0 && more < 1e6)
                deadline += more;
        }
    }
    free(data);
    close(fds[0]);
    kill(c, SIGKILL); /* gone already, or given up: never waited for */
    while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
        ;
    if (!why)
        return;
    not_read(p, pid, why);
    if (want_scan(p, scan)) {
        /* the process read, its scan not (or neither): the scan says why */
        free(p->scan);
        p->scan = calloc(1, sizeof *p->scan);
        if (p->scan)
            p->scan->not_read = why;
    }
}

const char *proc_not_read_text(const struct proc *p)
{
    static char buf[160];
    const char *why = p->not_read ? p->not_read : p->scan ? p->scan->not_read : NULL;
    if (why && !strcmp(why, "time-out"))
        snprintf(buf, sizeof buf,
                 "no answer within %g s (--timeout): its memory blocks readers (userfaultfd?)",
                 ts_opt.timeout);
    else
        snprintf(buf, sizeof buf, "the reading process failed");
    return buf;
}
