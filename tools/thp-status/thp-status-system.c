/* thp-status: the system view. Every THP knob in sysfs (top level, khugepaged, per-size
 * mTHP), huge pages in use (/proc/meminfo), fault and collapse counters (/proc/vmstat),
 * the system-wide preload, the global policy, and the warnings a person needs. What the
 * views share is worked out once (struct sys_model: the preload's state, the verdict's
 * problems with where each is); out_text and out_json only lay it out, as sys_prom does
 * (thp-status-sysprom.c). */
#include "thp-status-system.h"
#include "preload-owner.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const top_knobs[N_TOP] = {"enabled",       "defrag",         "shmem_enabled",
                                      "use_zero_page", "hpage_pmd_size", "shrink_underused"};
const char *const khp_knobs[N_KHP] = {
    "defrag",         "max_ptes_none",        "max_ptes_shared",       "max_ptes_swap",
    "pages_to_scan",  "scan_sleep_millisecs", "alloc_sleep_millisecs", "full_scans",
    "pages_collapsed"};
const char *const meminfo_keys[N_MEMINFO] = {"AnonHugePages", "ShmemHugePages", "ShmemPmdMapped",
                                             "FileHugePages", "FilePmdMapped",  "HugePages_Total",
                                             "Hugetlb",       "MemTotal",       "AnonPages"};
/* What the kernel charges to the commit limit, thpalloc's mappings included. */
const char *const commit_keys[N_COMMIT] = {"CommitLimit", "Committed_AS"};

static void knob_read(struct knob *k, const char *path)
{
    k->present = ts_read_small(path, k->raw, sizeof k->raw) == 0;
    if (k->present)
        ts_selected(k->raw, k->val, sizeof k->val);
    k->choice = k->present && strchr(k->raw, '[') != NULL;
}

static int cmp_mthp(const void *a, const void *b)
{
    const struct mthp *x = a, *y = b;
    return x->size_kb < y->size_kb ? -1 : x->size_kb > y->size_kb;
}

static void read_mthp(struct sysview *v)
{
    DIR *d = opendir(THP_DIR);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned long kb;
        char tail[8];
        if (sscanf(e->d_name, "hugepages-%lukB%7s", &kb, tail) != 1)
            continue;
        struct mthp *nm = realloc(v->m, (size_t)(v->nm + 1) * sizeof *nm);
        if (!nm)
            break;
        v->m = nm;
        struct mthp *m = &v->m[v->nm++];
        memset(m, 0, sizeof *m);
        m->size_kb = kb;
        ts_human_bytes((uint64_t)kb * 1024, m->label, sizeof m->label);
        char path[PATH_MAX];
        snprintf(path, sizeof path, THP_DIR "/%s/enabled", e->d_name);
        knob_read(&m->enabled, path);
        snprintf(path, sizeof path, THP_DIR "/%s/shmem_enabled", e->d_name);
        knob_read(&m->shmem, path);
        snprintf(path, sizeof path, THP_DIR "/%s/stats", e->d_name);
        DIR *sd = opendir(path);
        if (!sd)
            continue;
        struct dirent *s;
        while ((s = readdir(sd)) && m->nstat < 24) {
            if (s->d_name[0] == '.')
                continue;
            char sp[PATH_MAX + 300], buf[64];
            snprintf(sp, sizeof sp, "%s/%s", path, s->d_name);
            if (ts_read_small(sp, buf, sizeof buf) == 0) {
                snprintf(m->stat[m->nstat].name, sizeof m->stat[0].name, "%.39s", s->d_name);
                m->stat[m->nstat++].v = strtoull(buf, NULL, 10);
            }
        }
        closedir(sd);
        /* stable order for the output */
        for (int i = 1; i < m->nstat; i++)
            for (int j = i; j > 0 && strcmp(m->stat[j - 1].name, m->stat[j].name) > 0; j--) {
                __typeof__(m->stat[0]) t = m->stat[j];
                m->stat[j] = m->stat[j - 1];
                m->stat[j - 1] = t;
            }
    }
    closedir(d);
    if (v->nm > 1)
        qsort(v->m, (size_t)v->nm, sizeof *v->m, cmp_mthp);
}

static uint64_t vm_get(const struct sysview *v, const char *name, bool *found)
{
    for (int i = 0; i < v->nvm; i++)
        if (strcmp(v->vm[i].name, name) == 0) {
            if (found)
                *found = true;
            return v->vm[i].v;
        }
    if (found)
        *found = false;
    return 0;
}

static void read_vmstat(struct sysview *v)
{
    int err;
    char path[PATH_MAX];
    ts_proc_path(path, sizeof path, "vmstat");
    char *t = ts_slurp(path, NULL, &err);
    if (!t)
        return;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        unsigned long long val;
        if (sscanf(line, "%63s %llu", name, &val) != 2)
            continue;
        if (strncmp(name, "thp_", 4) && strstr(name, "huge") == NULL)
            continue;
        __typeof__(v->vm) nv = realloc(v->vm, (size_t)(v->nvm + 1) * sizeof *nv);
        if (!nv)
            break;
        v->vm = nv;
        snprintf(v->vm[v->nvm].name, sizeof v->vm[0].name, "%s", name);
        v->vm[v->nvm++].v = val;
    }
    free(t);
    uint64_t a = vm_get(v, "thp_fault_alloc", NULL), f = vm_get(v, "thp_fault_fallback", NULL);
    v->fallback_rate = a + f ? (double)f / (double)(a + f) : -1;
    uint64_t ca = vm_get(v, "thp_collapse_alloc", NULL),
             cf = vm_get(v, "thp_collapse_alloc_failed", NULL);
    v->collapse_fail_rate = ca + cf ? (double)cf / (double)(ca + cf) : -1;
}

/* An entry before ours whose library defines malloc owns every program's malloc, and
 * thpalloc stays dormant (tools/common/preload-owner.c): the first such entry goes in
 * preload_owner. */
static void preload_note_owner(struct sysview *v, const char *tok)
{
    char rootdir[PATH_MAX], file[2 * PATH_MAX];
    ts_rooted(rootdir, sizeof rootdir, "");
    if (!v->preload_owner[0] && preload_owns_malloc(rootdir, tok, strlen(tok), file, sizeof file))
        snprintf(v->preload_owner, sizeof v->preload_owner, "%s", tok);
}

/* /etc/ld.so.preload: tokens separated by white space or ':' (as ld.so reads it). */
static void read_preload(struct sysview *v)
{
    ts_rooted(v->preload_path, sizeof v->preload_path, "/etc/ld.so.preload");
    struct stat st;
    if (stat(v->preload_path, &st) == 0)
        v->preload_mode = st.st_mode & 07777;
    char *t = ts_slurp(v->preload_path, NULL, &v->preload_err);
    int others = 0;
    if (!t)
        return;
    /* ld.so blanks comments first: a path in one is no entry (nor an allocator before ours) */
    for (char *h = strchr(t, '#'); h; h = strchr(h, '#'))
        while (*h && *h != '\n')
            *h++ = ' ';
    for (char *tok = strtok(t, " \t\n:"); tok; tok = strtok(NULL, " \t\n:")) {
        if (tok[0] == '#') /* not ld.so syntax, but people write them: skip the word */
            continue;
        const char *b = strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok;
        size_t tl = strlen(tok);
        if (tl > 0 && tok[tl - 1] == '\r') {
            /* a CRLF line: ld.so looks for a name that ends in '\r' and loads nothing */
            bool ours = strncmp(b, "libthpalloc.so", 14) == 0;
            if (ours && !v->preload_entry_cr) {
                v->preload_entry_cr = true;
                snprintf(v->preload_cr_entry, sizeof v->preload_cr_entry, "%.*s", (int)(tl - 1),
                         tok);
            } else if (!ours && v->preload_cr_others++ == 0) {
                snprintf(v->preload_cr_other, sizeof v->preload_cr_other, "%.*s", (int)(tl - 1),
                         tok);
            }
            continue;
        }
        if (strncmp(b, "libthpalloc.so", 14) != 0) {
            if (others++ < PRELOAD_OWNER_MAX_ENTRIES)
                preload_note_owner(v, tok);
            continue;
        }
        v->preload_entry_cr = false; /* this copy is loaded */
        snprintf(v->preload_entry, sizeof v->preload_entry, "%s", tok);
        /* $LIB / ${LIB}: try the usual expansions */
        static const char *const libs[] = {"lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64",
                                           "lib", NULL};
        char *lp = strstr(tok, "$LIB"), *lb = strstr(tok, "${LIB}");
        for (int i = 0; libs[i]; i++) {
            char exp[PATH_MAX], full[PATH_MAX];
            if (lb)
                snprintf(exp, sizeof exp, "%.*s%s%s", (int)(lb - tok), tok, libs[i], lb + 6);
            else if (lp)
                snprintf(exp, sizeof exp, "%.*s%s%s", (int)(lp - tok), tok, libs[i], lp + 4);
            else
                snprintf(exp, sizeof exp, "%s", tok);
            ts_rooted(full, sizeof full, exp);
            if (access(full, R_OK) == 0) {
                v->preload_entry_exists = true;
                break;
            }
            if (!lp && !lb)
                break;
        }
        break;
    }
    free(t);
}

/* Not warn(): <err.h> has one. kind: a word for monitoring; where: the file or setting. */
static void add_warning(struct sysview *v, const char *kind, const char *where, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));
static void add_warning(struct sysview *v, const char *kind, const char *where, const char *fmt,
                        ...)
{
    if (v->nwarn >= 16)
        return;
    snprintf(v->warn[v->nwarn].kind, sizeof v->warn[0].kind, "%s", kind);
    snprintf(v->warn[v->nwarn].where, sizeof v->warn[0].where, "%s", where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->warn[v->nwarn++].msg, sizeof v->warn[0].msg, fmt, ap);
    va_end(ap);
}

static void warnings(struct sysview *v)
{
    const char *en = v->top[0].val, *df = v->top[1].val, *sh = v->top[2].val;
    if (!v->thp_present) {
        add_warning(v, "thp_unavailable", THP_DIR,
                    "this kernel has no transparent huge pages (%s missing): thpalloc's THP policy "
                    "has no effect",
                    THP_DIR);
        return;
    }
    if (strcmp(df, "always") == 0 && strcmp(en, "never") != 0)
        add_warning(v, "thp_defrag", THP_DIR "/defrag",
                    "defrag = always: every huge-page fault may stall in direct reclaim and "
                    "compaction (latency spikes); defer+madvise or madvise is the usual choice");
    uint64_t mpn = strtoull(v->khp[1].val, NULL, 10);
    if (strcmp(en, "always") == 0 && v->khp[1].present && mpn >= 511)
        add_warning(v, "khugepaged_max_ptes_none", THP_DIR "/khugepaged/max_ptes_none",
                    "max_ptes_none = %" PRIu64 " with enabled = always: khugepaged re-inflates "
                    "memory that allocators purged (a 2 MiB page from a single touched 4 KiB "
                    "page); lower it (e.g. 64) or use enabled = madvise",
                    mpn);
    if (strcmp(en, "never") == 0 && (v->pol.thp == THP_MODE_LARGE || v->pol.thp == THP_MODE_ALWAYS))
        add_warning(v, "thp_disabled", THP_DIR "/enabled",
                    "enabled = never: thpalloc's thp = %s gets no huge pages (MADV_HUGEPAGE is "
                    "ignored); set enabled to madvise to let it work",
                    thp_mode_name(v->pol.thp));
    if (strcmp(sh, "force") == 0)
        add_warning(v, "shmem_force", THP_DIR "/shmem_enabled",
                    "shmem_enabled = force: every shmem/tmpfs mapping uses huge pages (a testing "
                    "setting)");
    char vmstat[PATH_MAX];
    ts_proc_path(vmstat, sizeof vmstat, "vmstat");
    if (v->fallback_rate > 0.10)
        add_warning(v, "thp_fault_fallback", vmstat,
                    "%.1f %% of huge-page faults since boot fell back to 4 KiB pages: memory is "
                    "fragmented or a memory cgroup at its limit (now, or at some time since "
                    "boot: the kernel counts from boot)",
                    v->fallback_rate * 100);
    if (v->preload_entry[0] && !v->preload_entry_exists)
        add_warning(v, "preload_missing", v->preload_path,
                    "%s names %s, which does not exist: every program prints an error at start "
                    "(reinstall thpalloc-preload or remove the entry)",
                    v->preload_path, v->preload_entry);
    if (v->preload_entry_cr)
        add_warning(v, "preload_crlf", v->preload_path,
                    "%s: %s ends in a carriage return (a CRLF line): ld.so looks for a file whose "
                    "name ends in CR, loads nothing and prints an error in every program "
                    "(thpalloc-preload enable repairs it)",
                    v->preload_path, v->preload_cr_entry);
    if (v->preload_cr_others)
        add_warning(v, "preload_crlf_others", v->preload_path,
                    "%s: %zu other entr%s in a carriage return (a CRLF file), %s first: ld.so "
                    "cannot load %s and prints an error in every program (convert the file to "
                    "LF line ends)",
                    v->preload_path, v->preload_cr_others,
                    v->preload_cr_others == 1 ? "y ends" : "ies end", v->preload_cr_other,
                    v->preload_cr_others == 1 ? "it" : "them");
    if (v->preload_entry[0] && v->preload_owner[0])
        add_warning(v, "preload_dormant", v->preload_path,
                    "%s lists %s before %s, and it owns malloc: thpalloc is preloaded but dormant "
                    "in every process (thpalloc-preload enable --first puts it first)",
                    v->preload_path, v->preload_owner, v->preload_entry);
    if (v->preload_err == 0 && (v->preload_mode & 0044) != 0044)
        add_warning(v, "preload_unreadable", v->preload_path,
                    "%s has mode %04o: non-root programs cannot read it, so they run without "
                    "the preloaded libraries (chmod 0644)",
                    v->preload_path, (unsigned)v->preload_mode);
}

static void read_overcommit(struct sysview *v)
{
    char buf[32], *end;
    ts_proc_path(v->overcommit_path, sizeof v->overcommit_path, "sys/vm/overcommit_memory");
    v->overcommit = -1;
    v->overcommit_err = ts_read_small(v->overcommit_path, buf, sizeof buf);
    if (v->overcommit_err)
        return;
    long m = strtol(buf, &end, 10);
    if (end == buf || *end || m < 0 || m > 2)
        v->overcommit_err = EINVAL;
    else
        v->overcommit = (int)m;
}

static const char *overcommit_name(int mode, const char **what)
{
    static const char *const name[] = {"heuristic", "always", "strict"};
    static const char *const means[] = {"only obvious overcommits refused", "no commit check",
                                        "refused beyond CommitLimit"};
    if (mode < 0 || mode > 2) {
        *what = "unknown";
        return NULL;
    }
    *what = means[mode];
    return name[mode];
}

static void collect(struct sysview *v)
{
    struct stat st;
    v->thp_present = stat(THP_DIR, &st) == 0;
    char path[PATH_MAX];
    for (size_t i = 0; i < N_TOP; i++) {
        snprintf(path, sizeof path, THP_DIR "/%s", top_knobs[i]);
        knob_read(&v->top[i], path);
    }
    for (size_t i = 0; i < N_KHP; i++) {
        snprintf(path, sizeof path, THP_DIR "/khugepaged/%s", khp_knobs[i]);
        knob_read(&v->khp[i], path);
    }
    read_mthp(v);
    int err;
    ts_proc_path(path, sizeof path, "meminfo");
    ts_test_pause("meminfo"); /* tests/status-system: the tool's own charge, then the read */
    char *mi = ts_slurp(path, NULL, &err);
    if (mi) {
        v->meminfo_ok = true;
        for (size_t i = 0; i < N_MEMINFO; i++)
            v->meminfo_has[i] = ts_kv_kb(mi, meminfo_keys[i], &v->meminfo[i]);
        for (size_t i = 0; i < N_COMMIT; i++)
            v->commit_has[i] = ts_kv_kb(mi, commit_keys[i], &v->commit[i]);
        free(mi);
    }
    read_overcommit(v);
    read_vmstat(v);
    read_preload(v);
    char conf[PATH_MAX], dir[PATH_MAX];
    ts_conf_paths(conf, sizeof conf, dir, sizeof dir);
    struct cfg_inputs in = {
        .conf_file = conf, .conf_dir = dir, .exe = "", .program = "", .unit = "", .ruid = 0};
    struct ts_problems probs = {0};
    cfg_resolve(&v->pol, &in, ts_problems_add, &probs);
    ts_problems_free(&probs); /* among what --check finds: */
    ts_config_problems(&v->conf);
    warnings(v);
}

/* What the views derive alike from v: the preload's state, the overcommit mode's name, the
 * verdict's problems with where each is. m->problem is allocated (sys_model_free). */
static int sys_model(const struct sysview *v, struct sys_model *m)
{
    memset(m, 0, sizeof *m);
    m->preload_dormant = v->preload_entry[0] && v->preload_owner[0];
    m->preload_broken = v->preload_entry[0] && !v->preload_entry_exists;
    m->preload = m->preload_dormant         ? PRELOAD_DORMANT
                 : v->preload_entry[0]      ? PRELOAD_ACTIVE
                 : v->preload_entry_cr      ? PRELOAD_CRLF
                 : v->preload_err == ENOENT ? PRELOAD_NO_FILE
                 : v->preload_err           ? PRELOAD_UNREADABLE
                                            : PRELOAD_NO_ENTRY;
    m->overcommit_name = overcommit_name(v->overcommit, &m->overcommit_what);
    m->nproblem = (size_t)v->nwarn + v->conf.n;
    m->problem = m->nproblem ? calloc(m->nproblem, sizeof *m->problem) : NULL;
    if (m->nproblem && !m->problem) {
        fprintf(stderr, "thp-status: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < m->nproblem; i++) {
        struct sys_problem *q = &m->problem[i];
        if (i < (size_t)v->nwarn) {
            q->kind = v->warn[i].kind;
            q->msg = v->warn[i].msg;
            snprintf(q->where, sizeof q->where, "%s", v->warn[i].where);
            continue;
        }
        const struct ts_problem *c = &v->conf.v[i - (size_t)v->nwarn];
        q->kind = "config";
        q->msg = c->msg;
        q->config = true;
        if (c->line > 0)
            snprintf(q->where, sizeof q->where, "%s:%d", c->file, c->line);
        else
            snprintf(q->where, sizeof q->where, "%s", c->file);
    }
    if (v->conf.n)
        snprintf(m->conf_summary, sizeof m->conf_summary,
                 "the configuration has %zu problem%s (ignored settings or files some "
                 "processes cannot read): thp-status --check",
                 v->conf.n, v->conf.n == 1 ? "" : "s");
    m->nwarning_lines = (size_t)v->nwarn + (v->conf.n ? 1 : 0);
    return 0;
}

static void text_thp(const struct sysview *v)
{
    printf("Transparent huge pages (%s)\n", THP_DIR);
    if (!v->thp_present)
        printf("  not available in this kernel\n");
    for (size_t i = 0; i < N_TOP; i++) {
        if (!v->top[i].present)
            continue;
        if (v->top[i].choice)
            printf("  %-22s %-14s (%s)\n", top_knobs[i], ts_text(v->top[i].val),
                   ts_text(v->top[i].raw));
        else
            printf("  %-22s %s\n", top_knobs[i], ts_text(v->top[i].val));
    }
    printf("khugepaged\n");
    for (size_t i = 0; i < N_KHP; i++)
        if (v->khp[i].present)
            printf("  %-22s %s\n", khp_knobs[i], ts_text(v->khp[i].val));
    if (!v->nm)
        return;
    printf("Per-size THP (mTHP)\n");
    printf("  %-6s %-9s %-9s %12s %12s %10s\n", "size", "enabled", "shmem", "fault_alloc",
           "fallback", "nr_anon");
    static const char *const col[3] = {"anon_fault_alloc", "anon_fault_fallback", "nr_anon"};
    for (int i = 0; i < v->nm; i++) {
        const struct mthp *m = &v->m[i];
        uint64_t x[3] = {0, 0, 0};
        for (int s = 0; s < m->nstat; s++)
            for (int c = 0; c < 3; c++)
                if (!strcmp(m->stat[s].name, col[c]))
                    x[c] = m->stat[s].v;
        printf("  %-6s %-9s %-9s %12" PRIu64 " %12" PRIu64 " %10" PRIu64 "\n", m->label,
               m->enabled.present ? m->enabled.val : "-", m->shmem.present ? m->shmem.val : "-",
               x[0], x[1], x[2]);
    }
}

static void text_memory(const struct sysview *v, const struct sys_model *m)
{
    printf("Huge pages in use (/proc/meminfo)\n");
    for (size_t i = 0; i < N_MEMINFO; i++)
        if (v->meminfo_has[i])
            printf(meminfo_in_kb(i) ? "  %-22s %" PRIu64 " kB\n" : "  %-22s %" PRIu64 "\n",
                   meminfo_keys[i], v->meminfo[i]);
    if (!v->meminfo_ok)
        printf("  /proc/meminfo unreadable\n");
    printf("Commit charge (vm.overcommit_memory, /proc/meminfo)\n");
    if (m->overcommit_name)
        printf("  %-22s %d (%s: %s)\n", "overcommit_memory", v->overcommit, m->overcommit_name,
               m->overcommit_what);
    else
        printf("  %-22s unknown (%s: %s)\n", "overcommit_memory", ts_text(v->overcommit_path),
               strerror(v->overcommit_err));
    for (size_t i = 0; i < N_COMMIT; i++)
        if (v->commit_has[i])
            printf("  %-22s %" PRIu64 " kB\n", commit_keys[i], v->commit[i]);
    printf("Counters (/proc/vmstat)\n");
    for (int i = 0; i < v->nvm; i++)
        if (!strncmp(v->vm[i].name, "thp_", 4) ||
            !strcmp(v->vm[i].name, "nr_anon_transparent_hugepages"))
            printf("  %-30s %" PRIu64 "\n", v->vm[i].name, v->vm[i].v);
    if (v->fallback_rate >= 0)
        printf("  %-30s %.2f %%\n", "fault fallback rate", v->fallback_rate * 100);
    else
        printf("  %-30s - (no huge-page faults yet)\n", "fault fallback rate");
    if (v->collapse_fail_rate >= 0)
        printf("  %-30s %.2f %%\n", "collapse failure rate", v->collapse_fail_rate * 100);
}

static void text_preload(const struct sysview *v, const struct sys_model *m)
{
    const char *entry = ts_text(v->preload_entry), *path = ts_text(v->preload_path);
    const char *exists = v->preload_entry_exists ? "present" : "MISSING";
    printf("  %-22s ", "system-wide preload");
    switch (m->preload) {
    case PRELOAD_DORMANT:
        printf("dormant: %s (%s), after %s, which owns malloc\n", entry, exists,
               ts_text(v->preload_owner));
        break;
    case PRELOAD_ACTIVE:
        printf("yes: %s (%s)\n", entry, exists);
        break;
    case PRELOAD_CRLF:
        printf("no: %s ends in a carriage return (a CRLF line): ld.so loads nothing\n",
               ts_text(v->preload_cr_entry));
        break;
    case PRELOAD_NO_FILE:
        printf("no (%s does not exist)\n", path);
        break;
    case PRELOAD_UNREADABLE:
        printf("unknown (%s: %s)\n", path, strerror(v->preload_err));
        break;
    case PRELOAD_NO_ENTRY:
        printf("no (no thpalloc entry in %s)\n", path);
        break;
    }
}

static void text_health(const struct sys_model *m)
{
    if (m->nproblem) {
        printf("Warnings\n");
        for (size_t i = 0; i < m->nproblem; i++)
            if (!m->problem[i].config)
                printf("  ! %s\n", ts_text(m->problem[i].msg));
        if (m->conf_summary[0])
            printf("  ! %s\n", m->conf_summary);
        for (size_t i = 0; i < m->nproblem; i++)
            if (m->problem[i].config)
                printf("    %s: %s\n", ts_text(m->problem[i].where), ts_text(m->problem[i].msg));
    }
    /* The verdict the exit status gives, and thp_health_status. */
    if (m->nproblem)
        printf("Health\n  %zu problem%s (the warnings above)\n", m->nproblem,
               m->nproblem == 1 ? "" : "s");
    else
        printf("Health\n  healthy\n");
}

static void out_text(const struct sysview *v, const struct sys_model *m)
{
    text_thp(v);
    text_memory(v, m);
    printf("thpalloc\n");
    text_preload(v, m);
    printf("  global policy (before [program], [path] and [unit] sections)\n");
    ts_policy_text(&v->pol, "    ");
    text_health(m);
}

static void json_knob(const char *key, const struct knob *k)
{
    if (!k->present) {
        j_null(key);
        return;
    }
    char *end;
    unsigned long long n = strtoull(k->val, &end, 10);
    if (k->val[0] && *end == '\0' && !k->choice)
        j_u64(key, n);
    else
        j_str(key, k->val);
}

static void json_thp(const struct sysview *v)
{
    j_obj("thp");
    j_bool("available", v->thp_present);
    for (size_t i = 0; i < N_TOP; i++)
        json_knob(top_knobs[i], &v->top[i]);
    j_obj("khugepaged");
    for (size_t i = 0; i < N_KHP; i++)
        json_knob(khp_knobs[i], &v->khp[i]);
    j_end();
    j_arr("sizes");
    for (int i = 0; i < v->nm; i++) {
        j_obj(NULL);
        j_u64("size_kb", v->m[i].size_kb);
        json_knob("enabled", &v->m[i].enabled);
        json_knob("shmem_enabled", &v->m[i].shmem);
        j_obj("stats");
        for (int s = 0; s < v->m[i].nstat; s++)
            j_u64(v->m[i].stat[s].name, v->m[i].stat[s].v);
        j_end();
        j_end();
    }
    j_end();
    j_end(); /* thp */
}

/* j_num(key, x), or null where x < 0 (no events yet) */
static void json_ratio(const char *key, double x)
{
    if (x >= 0)
        j_num(key, x);
    else
        j_null(key);
}

static void json_memory(const struct sysview *v, const struct sys_model *m)
{
    j_obj("meminfo_kb");
    for (size_t i = 0; i < N_MEMINFO; i++)
        if (v->meminfo_has[i])
            j_u64(meminfo_keys[i], v->meminfo[i]);
    j_end();
    j_obj("overcommit");
    if (m->overcommit_name)
        j_int("mode", v->overcommit);
    else
        j_null("mode");
    j_str("mode_name", m->overcommit_name);
    static const char *const key[N_COMMIT] = {"commit_limit_kb", "committed_as_kb"};
    for (size_t i = 0; i < N_COMMIT; i++)
        if (v->commit_has[i])
            j_u64(key[i], v->commit[i]);
        else
            j_null(key[i]);
    j_end();
    j_obj("vmstat");
    for (int i = 0; i < v->nvm; i++)
        j_u64(v->vm[i].name, v->vm[i].v);
    j_end();
    json_ratio("fault_fallback_ratio", v->fallback_rate);
    json_ratio("collapse_failure_ratio", v->collapse_fail_rate);
}

static void json_health(const struct sys_model *m)
{
    /* The verdict: what the exit status and thp_health_status say, with each problem. */
    j_obj("health");
    j_str("status", m->nproblem ? "problems" : "healthy");
    j_arr("problems");
    for (size_t i = 0; i < m->nproblem; i++) {
        j_obj(NULL);
        j_str("kind", m->problem[i].kind);
        j_str("where", m->problem[i].where);
        j_str("message", m->problem[i].msg);
        j_end();
    }
    j_end();
    j_end(); /* health */
}

static void out_json(const struct sysview *v, const struct sys_model *m)
{
    j_obj(NULL);
    j_str("schema", TS_SCHEMA);
    j_obj("system");
    json_thp(v);
    json_memory(v, m);
    j_obj("preload");
    j_str("file", v->preload_path);
    j_bool("file_exists", v->preload_err != ENOENT);
    j_bool("thpalloc", v->preload_entry[0] != 0);
    j_str("entry", v->preload_entry[0] ? v->preload_entry : NULL);
    j_bool("entry_exists", v->preload_entry_exists);
    j_bool("dormant", m->preload_dormant);
    j_str("malloc_owner", m->preload_dormant ? v->preload_owner : NULL);
    j_end();
    ts_policy_json("policy", &v->pol);
    j_int("policy_problems", (long long)v->conf.n);
    j_arr("warnings");
    for (size_t i = 0; i < m->nproblem; i++)
        if (!m->problem[i].config)
            j_str(NULL, m->problem[i].msg);
    if (m->conf_summary[0])
        j_str(NULL, m->conf_summary);
    j_end();
    j_end(); /* system */
    json_health(m);
    j_end();
    j_finish();
}

int ts_system(void)
{
    struct sysview *v = calloc(1, sizeof *v);
    if (!v) {
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    collect(v);
    struct sys_model m;
    int rc = 1;
    if (sys_model(v, &m) == 0) {
        if (ts_opt.format == TS_JSON)
            out_json(v, &m);
        else if (ts_opt.format == TS_PROM)
            sys_prom(v, &m);
        else
            out_text(v, &m);
        /* 0 healthy, 1 problems: the verdict, for monitoring. --prometheus carries it in
         * thp_health_status and exits 0 once written: a collector that fails leaves stale
         * metrics behind, the opposite of what a verdict is for. */
        rc = m.nproblem && ts_opt.format != TS_PROM ? 1 : 0;
    }
    free(m.problem);
    ts_problems_free(&v->conf);
    free(v->m);
    free(v->vm);
    free(v);
    return rc;
}
