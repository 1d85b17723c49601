/* thp-status --all: every process, read by thp-status-proc.c (collection), what the views
 * share worked out once (struct all: the counts, each process's thpalloc state), then one
 * of three renderers that only lay it out: the text table, JSON, Prometheus. */
#include "thp-status-proc.h"
#include "thp-status-scan.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* thpalloc in a process: in charge, dormant (another allocator owns malloc), loaded in
 * another state or with its table unreadable, not loaded, or unknown (maps unreadable). The
 * first three are the Prometheus view's states. */
enum thpa { THPA_ACTIVE, THPA_DORMANT, THPA_LOADED, THPA_NO, THPA_UNKNOWN };
static const char *const thpa_column[] = {"yes", "dormant", "loaded", "no", "?"};
static const char *const thpa_prom[3] = {"active", "dormant", "unknown"};

/* What --all collected: the processes shown (sorted), each one's thpalloc state, and the
 * counts of the rest. */
struct all {
    struct proc *v;
    enum thpa *thpa; /* of v[i] */
    size_t n;
    unsigned unreadable, vanished, kthreads, total;
    unsigned timed_out, cut; /* not read within --timeout; maps or smaps cut at their caps */
    unsigned failed;         /* not read: the reader died */
    bool denied;             /* some of the unreadable were refused permission */
};

static enum thpa thpa_of(const struct proc *p)
{
    if (!p->maps_ok)
        return THPA_UNKNOWN;
    if (!p->loaded)
        return THPA_NO;
    if (p->intro_ok && p->intro->head.active <= 1)
        return p->intro->head.active == 1 ? THPA_ACTIVE : THPA_DORMANT;
    return THPA_LOADED;
}

static int cmp_huge(const void *a, const void *b)
{
    const struct proc *x = a, *y = b;
    if (x->huge_kb != y->huge_kb)
        return x->huge_kb > y->huge_kb ? -1 : 1;
    if (x->rss_kb != y->rss_kb)
        return x->rss_kb > y->rss_kb ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return x < y ? -1 : x > y;
}

/* The processes of /proc, all listed before any is read: the readers proc_read starts are
 * never among them, nor is thp-status itself (under a system-wide preload it would head
 * its own lists). */
static pid_t *list_pids(size_t *n)
{
    DIR *d = opendir("/proc");
    if (!d) {
        fprintf(stderr, "thp-status: /proc: %s\n", strerror(errno));
        return NULL;
    }
    pid_t *v = NULL, self = getpid();
    size_t cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self)
            continue;
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            pid_t *nv = realloc(v, nc * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        v[(*n)++] = (pid_t)pid;
    }
    closedir(d);
    if (*n > 1)
        qsort(v, *n, sizeof *v, cmp_pid);
    if (!v)
        v = malloc(sizeof *v);
    return v;
}

static int all_collect(struct all *a)
{
    memset(a, 0, sizeof *a);
    size_t np;
    pid_t *pids = list_pids(&np);
    if (!pids)
        return 1;
    a->v = np ? malloc(np * sizeof *a->v) : NULL;
    if (np && !a->v) {
        free(pids);
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < np; i++) {
        struct proc *p = &a->v[a->n];
        proc_read(p, pids[i], false, ts_opt.scan ? 1 : 0);
        if (p->dirfd >= 0) {
            close(p->dirfd);
            p->dirfd = -1;
        }
        if (!p->exists)
            continue;
        if (p->kthread) {
            a->kthreads++;
            proc_free(p);
            continue;
        }
        a->total++;
        if (p->vanished && !p->rollup_ok) {
            a->vanished++;
            proc_free(p);
            continue;
        }
        if (p->not_read) {
            a->timed_out += !strcmp(p->not_read, "time-out");
            a->failed += !strcmp(p->not_read, "failed");
        } else if (!p->rollup_ok || proc_permission_denied(p))
            a->unreadable++;
        a->cut += p->maps_cut || p->smaps_cut;
        a->denied |= proc_permission_denied(p);
        a->n++;
    }
    free(pids);
    if (a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, cmp_huge);
    a->thpa = a->n ? malloc(a->n * sizeof *a->thpa) : NULL;
    if (a->n && !a->thpa) {
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < a->n; i++)
        a->thpa[i] = thpa_of(&a->v[i]);
    return 0;
}

/* ---- text ------------------------------------------------------------------------------ */

static void user_name(uid_t uid, char *buf, size_t cap)
{
    struct passwd *pw = getpwuid(uid);
    if (pw && strlen(pw->pw_name) < 9)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "%u", (unsigned)uid);
}

static void mib(uint64_t kb, char *buf, size_t cap)
{
    if (kb >= 10 * 1024 * 1024)
        snprintf(buf, cap, "%.1fG", (double)kb / (1024.0 * 1024));
    else
        snprintf(buf, cap, "%.1fM", (double)kb / 1024.0);
}

/* text on lines of at most width columns (words longer than that stand alone) */
static void print_wrapped(const char *text, const char *indent, size_t width)
{
    size_t room = width - strlen(indent);
    while (*text) {
        size_t n = strlen(text), cut = n;
        if (n > room) {
            cut = room;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = strcspn(text, " ");
        }
        printf("%s%.*s\n", indent, (int)cut, text);
        text += cut;
        text += strspn(text, " ");
    }
}

static void all_text(const struct all *a)
{
    printf("%7s %-8s %-15s %9s %9s %9s %-7s %9s\n", "PID", "USER", "COMMAND", "RSS", "ANON", "HUGE",
           "THPA", "ARENAHUGE");
    unsigned shown = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct proc *p = &a->v[i];
        if (!p->rollup_ok)
            continue;
        char user[16], rss[16], anon[16], huge[16], ah[16];
        user_name(p->ruid, user, sizeof user);
        mib(p->rss_kb, rss, sizeof rss);
        mib(p->anon_kb, anon, sizeof anon);
        mib(p->huge_kb, huge, sizeof huge);
        if (p->attr_ok)
            mib(p->in.huge_kb, ah, sizeof ah);
        else
            snprintf(ah, sizeof ah, "-");
        printf("%7d %-8s %-15s %9s %9s %9s %-7s %9s\n", (int)p->pid, user, ts_text_max(p->name, 15),
               rss, anon, huge, thpa_column[a->thpa[i]], ah);
        shown++;
    }
    /* One fact a line, so that the table stays within a terminal's width. */
    printf("%u process%s shown\n", shown, shown == 1 ? "" : "es");
    if (a->unreadable) {
        /* the cause as the PID view gives it, for processes of other users in general */
        char why[400] = "see thp-status PID";
        if (a->denied)
            ts_caps_advice(EACCES, (uid_t)-1, why, sizeof why);
        printf("%u could not be read:\n", a->unreadable);
        print_wrapped(why, "  ", 90);
    }
    if (a->vanished)
        printf("%u exited while being read\n", a->vanished);
    if (a->timed_out)
        printf("%u not read: no answer within %g s (--timeout)\n", a->timed_out, ts_opt.timeout);
    if (a->cut)
        printf("%u read in part: maps or smaps longer than the bounded read\n", a->cut);
    if (ts_opt.scan)
        scan_all_text(a->v, a->n);
    if (ts_opt.verbose && a->unreadable) {
        printf("unreadable:");
        for (size_t i = 0; i < a->n; i++)
            if (!a->v[i].not_read && (!a->v[i].rollup_ok || proc_permission_denied(&a->v[i])))
                printf(" %d(%s)", (int)a->v[i].pid, ts_text(a->v[i].name));
        printf("\n");
    }
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void all_json(const struct all *a)
{
    j_obj(NULL);
    j_str("schema", TS_SCHEMA);
    j_arr("processes");
    for (size_t i = 0; i < a->n; i++)
        proc_json(&a->v[i], false);
    j_end();
    j_int("total", a->total);
    j_int("unreadable", a->unreadable);
    j_int("exited_during_read", a->vanished);
    j_int("timed_out", a->timed_out);
    j_int("read_cut", a->cut);
    j_int("kernel_threads", a->kthreads);
    if (ts_opt.scan)
        scan_all_json(a->v, a->n);
    j_end();
    j_finish();
}

/* ---- Prometheus ------------------------------------------------------------------------ */

/* The figures summed by the Prometheus view, in kB: false where p lacks figure f. */
enum {
    F_RSS,
    F_ANON,
    F_HUGE,
    F_ARENA_RSS,
    F_ARENA_HUGE,
    F_ARENA_RESERVED,
    F_ARENA_CHARGED,
    F_DENSE,
    F_CHARGED, /* per process only: a service's or the total charge is the kernel's figure */
    NF
};
static bool prom_field(const struct proc *p, int f, uint64_t *kb)
{
    if (!p->rollup_ok || (f >= F_ARENA_RSS && f <= F_ARENA_CHARGED && !p->attr_ok) ||
        (f == F_CHARGED && !p->space_ok) ||
        (f == F_DENSE && !(p->intro_ok && intro_has_dense(&p->intro->head))))
        return false;
    const uint64_t dense_kb = f == F_DENSE ? p->intro->head.dense_huge >> 10 : 0;
    const uint64_t v[NF] = {p->rss_kb,        p->anon_kb,    p->huge_kb,
                            p->in.rss_kb,     p->in.huge_kb, p->in.size_kb,
                            p->in.charged_kb, dense_kb,      p->charged_kb};
    *kb = v[f];
    return true;
}

static const char *const fnames[NF] = {"rss_bytes",
                                       "anon_bytes",
                                       "anon_huge_bytes",
                                       "thpalloc_arena_rss_bytes",
                                       "thpalloc_arena_huge_bytes",
                                       "thpalloc_arena_reserved_bytes",
                                       "thpalloc_arena_charged_bytes",
                                       "thpalloc_dense_huge_bytes",
                                       "charged_bytes"};
static const char *const fhelp[NF] = {
    "Resident memory (smaps_rollup Rss).",
    "Anonymous memory (smaps_rollup Anonymous).",
    "Anonymous huge pages (smaps_rollup AnonHugePages).",
    "Resident memory in thpalloc's arenas.",
    "Huge pages in thpalloc's arenas.",
    "Address space of thpalloc's arenas (smaps Size).",
    "Part of thpalloc's arenas charged to the commit limit (VmFlags ac).",
    "Small-object memory thpalloc made huge pages because it was nearly all in use (thp_dense), "
    "as the process reports it.",
    "Address space charged to the commit limit (VmFlags ac), where smaps was read."};

/* The systemd service a process belongs to: the aggregation's key, bounded by what root
 * configured (scopes, sessions and processes outside systemd are "(none)"). */
static const char *group_of(const struct proc *p)
{
    size_t n = strlen(p->unit);
    return n > 8 && !strcmp(p->unit + n - 8, ".service") ? p->unit : "(none)";
}

struct group {
    const char *unit;
    unsigned procs, thpa[3], pol_problems;
    bool has[NF];
    uint64_t kb[NF];
};

static int cmp_group(const void *a, const void *b)
{
    return strcmp(((const struct group *)a)->unit, ((const struct group *)b)->unit);
}

/* Per service, then the totals: series whose number the administrator's units bound. */
static void prom_groups(const struct all *a)
{
    struct group *g = NULL, total = {.unit = ""};
    size_t ng = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct proc *p = &a->v[i];
        const char *u = group_of(p);
        size_t k = 0;
        while (k < ng && strcmp(g[k].unit, u) != 0)
            k++;
        if (k == ng) {
            struct group *ngv = realloc(g, (ng + 1) * sizeof *ngv);
            if (!ngv)
                continue;
            g = ngv;
            g[ng++] = (struct group){.unit = u};
        }
        struct group *sums[2] = {&g[k], &total};
        enum thpa st = a->thpa[i];
        for (int s = 0; s < 2; s++) {
            sums[s]->procs++;
            if (st <= THPA_LOADED)
                sums[s]->thpa[st]++;
            if (p->loaded && p->pol_ok && p->pol_problems)
                sums[s]->pol_problems++;
            for (int f = 0; f < NF; f++) {
                uint64_t kb;
                if (prom_field(p, f, &kb)) {
                    sums[s]->kb[f] += kb;
                    sums[s]->has[f] = true;
                }
            }
        }
    }
    if (ng > 1)
        qsort(g, ng, sizeof *g, cmp_group);
    char name[96], help[160];
    snprintf(name, sizeof name, "thp_unit_processes");
    p_family(name, "gauge", "Processes of a systemd service (unit \"(none)\": of none).");
    for (size_t k = 0; k < ng; k++)
        p_sample(name, g[k].procs, "unit", g[k].unit, NULL);
    for (int f = 0; f < F_CHARGED; f++) {
        snprintf(name, sizeof name, "thp_unit_%s", fnames[f]);
        snprintf(help, sizeof help, "%s Sum over a systemd service's processes.", fhelp[f]);
        for (size_t k = 0; k < ng; k++)
            if (g[k].has[f]) {
                p_family(name, "gauge", help);
                p_sample(name, (double)g[k].kb[f] * 1024, "unit", g[k].unit, NULL);
            }
    }
    for (size_t k = 0; k < ng; k++)
        for (int st = 0; st < 3; st++)
            if (g[k].thpa[st]) {
                p_family("thp_unit_thpalloc_processes", "gauge",
                         "Processes of a systemd service with thpalloc loaded, by its state.");
                p_sample("thp_unit_thpalloc_processes", g[k].thpa[st], "unit", g[k].unit, "state",
                         thpa_prom[st], NULL);
            }
    p_family("thp_thpalloc_processes", "gauge", "Processes with thpalloc loaded, by its state.");
    for (int st = 0; st < 3; st++)
        p_sample("thp_thpalloc_processes", total.thpa[st], "state", thpa_prom[st], NULL);
    /* a process whose configuration has problems as it reads them (an unreadable drop-in:
     * that file's settings are not applied) runs on other values than configured */
    for (size_t k = 0; k < ng; k++)
        if (g[k].pol_problems) {
            p_family("thp_unit_thpalloc_config_problem_processes", "gauge",
                     "Processes of a systemd service with thpalloc loaded whose configuration, "
                     "as the process reads it, has problems (settings not applied).");
            p_sample("thp_unit_thpalloc_config_problem_processes", g[k].pol_problems, "unit",
                     g[k].unit, NULL);
        }
    p_family("thp_thpalloc_config_problem_processes", "gauge",
             "Processes with thpalloc loaded whose configuration, as the process reads it, has "
             "problems (settings not applied).");
    p_sample("thp_thpalloc_config_problem_processes", total.pol_problems, NULL);
    for (int f = F_ARENA_RSS; f <= F_DENSE; f++) {
        snprintf(name, sizeof name, "thp_%s", fnames[f]);
        snprintf(help, sizeof help, "%s Sum over every process.", fhelp[f]);
        p_family(name, "gauge", help);
        p_sample(name, (double)total.kb[f] * 1024, NULL);
    }
    free(g);
}

/* --per-process: one series a process and figure (a pid label: for a few hosts only). */
static void prom_processes(const struct all *a)
{
    char name[96], pid[16];
    for (int f = 0; f < NF; f++) {
        snprintf(name, sizeof name, "thp_process_%s", fnames[f]);
        for (size_t i = 0; i < a->n; i++) {
            const struct proc *p = &a->v[i];
            uint64_t kb;
            if (!prom_field(p, f, &kb))
                continue;
            snprintf(pid, sizeof pid, "%d", (int)p->pid);
            p_family(name, "gauge", fhelp[f]);
            p_sample(name, (double)kb * 1024, "pid", pid, "comm", p->name, "unit", group_of(p),
                     NULL);
        }
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct proc *p = &a->v[i];
        if (!p->maps_ok)
            continue;
        snprintf(pid, sizeof pid, "%d", (int)p->pid);
        p_family("thp_process_thpalloc_loaded", "gauge", "1 when libthpalloc is mapped.");
        p_sample("thp_process_thpalloc_loaded", p->loaded, "pid", pid, "comm", p->name, "unit",
                 group_of(p), NULL);
    }
}

static void all_prom(const struct all *a)
{
    p_family("thp_processes", "gauge", "Processes seen (not kernel threads).");
    p_sample("thp_processes", a->total, NULL);
    p_family("thp_processes_unreadable", "gauge",
             "Processes whose memory could not be read (permission).");
    p_sample("thp_processes_unreadable", a->unreadable, NULL);
    p_family("thp_processes_not_read", "gauge",
             "Processes not read, by reason (permission, time-out: no answer within --timeout, "
             "failed: the reader died).");
    p_sample("thp_processes_not_read", a->unreadable, "reason", "permission", NULL);
    p_sample("thp_processes_not_read", a->timed_out, "reason", "time-out", NULL);
    p_sample("thp_processes_not_read", a->failed, "reason", "failed", NULL);
    p_family("thp_processes_read_cut", "gauge",
             "Processes whose maps or smaps were longer than the bounded read (partial figures).");
    p_sample("thp_processes_read_cut", a->cut, NULL);
    prom_groups(a);
    if (ts_opt.scan)
        scan_all_prom(a->v, a->n, group_of);
    if (ts_opt.per_process)
        prom_processes(a);
}

int ts_all(void)
{
    struct all a;
    if (all_collect(&a) != 0)
        return 1;
    if (ts_opt.format == TS_JSON)
        all_json(&a);
    else if (ts_opt.format == TS_PROM)
        all_prom(&a);
    else
        all_text(&a);
    for (size_t i = 0; i < a.n; i++)
        proc_free(&a.v[i]);
    free(a.v);
    free(a.thpa);
    return 0;
}
