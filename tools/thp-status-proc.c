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
#include <sys/sysmacros.h>
#include <unistd.h>

#include "thp-status-proc.h"

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

void proc_read_maps(struct proc *p)
{
    int err;
    size_t len;
    ts_test_pause("maps");
    char *t = slurp_at(p->dirfd, "maps", &len, &err);
    if (!t) {
        add_err(p, "maps", err);
        return;
    }
    if (len == 0 && !p->kthread) {
        free(t);
        add_err(p, "maps", ESRCH);
        return;
    }
    p->maps_ok = true;
    free(p->maps);
    p->maps = NULL;
    p->nmaps = 0;
    size_t cap = 0;
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
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
        p->maps[p->nmaps++] = (struct span){start, end, anon};
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
    free(t);
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
    int err;
    size_t len;
    ts_test_pause("smaps");
    char *t = slurp_at(p->dirfd, "smaps", &len, &err);
    if (!t) {
        add_err(p, "smaps", err);
        return;
    }
    if (len == 0) {
        free(t);
        add_err(p, "smaps", ESRCH);
        return;
    }
    struct vma v = {0};
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
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
    vma_account(p, &v);
    free(t);
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

void proc_collect(struct proc *p, pid_t pid, bool full)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->thp_enabled = -1;
    p->secure = -1;
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
