/* thp-status: the process view: text and JSON output of what thp-status-proc.c read (the
 * JSON object of one process serves --all too). What both say is worked out once
 * (struct proc_model: the figures' names, what the process reports against its policy, the
 * errors and their advice); proc_text and proc_json only lay it out. */
#include "thp-status-proc.h"
#include "thp-status-scan.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- output: one process ------------------------------------------------------------- */

static const char *mode_name(int32_t m)
{
    return m >= 0 && m <= 3 ? thp_mode_name((enum thp_mode)m) : "?";
}

static const char *active_name(uint32_t a)
{
    return a == 1   ? "in charge"
           : a == 0 ? "dormant (another allocator owns malloc)"
                    : "not initialised yet";
}

/* The settings the process's block reports. */
static void block_settings(const struct thpalloc_introspect *t, struct cfg_settings *f)
{
    cfg_defaults(f);
    f->thp = (enum thp_mode)t->thp_mode;
    f->thp_threshold = t->thp_threshold;
    f->arena_size = t->arena_size;
    f->purge_delay_ms = t->purge_delay_ms;
    f->purge = t->purge ? OS_PURGE_FREE : OS_PURGE_DONTNEED;
}

/* smaps_rollup's figures: the text view's name and the JSON key of each, in the order both
 * show them. */
static const struct {
    const char *text, *json;
    size_t off; /* of the uint64_t in struct proc */
} rollup_rows[] = {
    {"Rss", "rss", offsetof(struct proc, rss_kb)},
    {"Pss", "pss", offsetof(struct proc, pss_kb)},
    {"Anonymous", "anonymous", offsetof(struct proc, anon_kb)},
    {"AnonHugePages", "anon_huge", offsetof(struct proc, huge_kb)},
    {"ShmemPmdMapped", "shmem_pmd", offsetof(struct proc, shmem_pmd_kb)},
    {"FilePmdMapped", "file_pmd", offsetof(struct proc, file_pmd_kb)},
    {"Swap", "swap", offsetof(struct proc, swap_kb)},
};

static uint64_t rollup_value(const struct proc *p, size_t i)
{
    return *(const uint64_t *)((const char *)p + rollup_rows[i].off);
}

/* struct proc keeps at most this many errors (proc_err in thp-status-proc.c). */
#define PROC_ERR_MAX (sizeof((struct proc *)0)->errs / sizeof((struct proc *)0)->errs[0])

/* What the two views derive alike from one process. */
struct proc_model {
    /* the settings the process's block reports (reported_ok: it has resolved its policy) */
    bool reported_ok;
    struct cfg_settings reported;
    /* keys whose reported value is not what the process's configuration gives (both as the
     * configuration writes them); checked only when both are known (differs_known) */
    bool differs_known;
    int ndiffer;
    struct {
        enum cfg_key key;
        char got[64], want[64];
    } differ[CFG_STATS];
    /* the files that could not be read, each with what would allow reading it */
    struct {
        char why[400];
    } err[PROC_ERR_MAX];
};

static void proc_model(const struct proc *p, struct proc_model *m)
{
    memset(m, 0, sizeof *m);
    if (p->intro_ok && p->intro->head.policy_loaded) {
        m->reported_ok = true;
        block_settings(&p->intro->head, &m->reported);
    }
    m->differs_known = m->reported_ok && p->pol_ok;
    for (int k = 0; k < CFG_STATS && m->differs_known; k++) {
        char *got = m->differ[m->ndiffer].got, *want = m->differ[m->ndiffer].want;
        cfg_format_value(&m->reported, (enum cfg_key)k, got, sizeof m->differ[0].got);
        cfg_format_value(&p->pol, (enum cfg_key)k, want, sizeof m->differ[0].want);
        if (strcmp(got, want) != 0)
            m->differ[m->ndiffer++].key = (enum cfg_key)k;
    }
    for (int i = 0; i < p->nerr && i < (int)PROC_ERR_MAX; i++)
        ts_caps_advice(p->errs[i].err, p->ruid, m->err[i].why, sizeof m->err[i].why);
}

static void text_errors(const struct proc *p, const struct proc_model *m)
{
    for (int i = 0; i < p->nerr && i < (int)PROC_ERR_MAX; i++) {
        if (p->vanished && (p->errs[i].err == ESRCH || p->errs[i].err == ENOENT))
            continue;
        printf("  ! cannot read /proc/%d/%s: %s\n", (int)p->pid, p->errs[i].what, m->err[i].why);
    }
}

static void proc_text(const struct proc *p, const struct proc_model *m)
{
    printf("PID %d  %s\n", (int)p->pid, p->name[0] ? ts_text(p->name) : "?");
    if (p->not_read) {
        printf("  ! not read: %s\n", proc_not_read_text(p));
        scan_text(p);
        return;
    }
    if (p->vanished)
        printf("  ! the process exited while being read: the figures below are incomplete\n");
    /* reads are bounded (PROC_MAPS_CAP, PROC_SMAPS_CAP): what was left is said */
    if (p->maps_cut)
        printf("  ! maps cut at %d MiB (the read is bounded): mappings past it not seen\n",
               (int)(PROC_MAPS_CAP >> 20));
    if (p->smaps_cut)
        printf("  ! smaps cut at %d MiB (the read is bounded): figures by mapping cover "
               "those read only\n",
               (int)(PROC_SMAPS_CAP >> 20));
    if (p->kthread) {
        printf("  kernel thread (no user memory)\n");
        return;
    }
    printf("  %-16s %s\n", "executable", p->exe[0] ? ts_text(p->exe) : "(unreadable)");
    printf("  %-16s %u\n", "uid", (unsigned)p->ruid);
    printf("  %-16s %s\n", "unit",
           p->unit[0]     ? ts_text(p->unit)
           : p->unit_read ? "(none)"
                          : "(unknown)");
    printf("  %-16s %s\n", "THP_enabled",
           p->thp_enabled < 0 ? "(unknown: kernel without THP_enabled)"
           : p->thp_enabled   ? "1 (huge pages allowed)"
                              : "0 (disabled by prctl PR_SET_THP_DISABLE)");
    if (p->rollup_ok) {
        printf("  memory (smaps_rollup)\n");
        for (size_t i = 0; i < sizeof rollup_rows / sizeof rollup_rows[0]; i++)
            printf("    %-14s %" PRIu64 " kB\n", rollup_rows[i].text, rollup_value(p, i));
    }
    if (!p->maps_ok)
        printf("  %-16s unknown (maps unreadable)\n", "thpalloc");
    else if (!p->loaded)
        printf("  %-16s not loaded\n", "thpalloc");
    else {
        printf("  %-16s loaded: %s\n", "thpalloc", ts_text(p->lib_path));
        if (p->lib_via_map_files && p->lib_elsewhere)
            printf("    %-14s its path is not in the process's root as seen from here (another "
                   "mount namespace or root): the table read through /proc/%d/map_files\n",
                   "library", (int)p->pid);
        else if (p->lib_via_map_files)
            printf("    %-14s replaced since the process loaded it: the table read through "
                   "/proc/%d/map_files (restart it to run the new one)\n",
                   "library", (int)p->pid);
        if (p->intro_ok) {
            const struct thpalloc_introspect *t = &p->intro->head;
            printf("    %-14s %s\n", "state", active_name(t->active));
            printf("    %-14s %u range%s, %" PRIu64 " MiB reserved%s\n", "arenas", p->nranges,
                   p->nranges == 1 ? "" : "s", p->reserved_bytes >> 20,
                   t->ranges_overflow ? " (table full: some not recorded)" : "");
            if (intro_has_dense(t)) {
                char ahead[48] = "";
                if (intro_has_ahead(t))
                    snprintf(ahead, sizeof ahead, ", %" PRIu64 " taken ahead", t->dense_ahead);
                printf("    %-14s %" PRIu64
                       " MiB of small objects in huge pages (thp_dense: %" PRIu64
                       " collapsed%s, %" PRIu64 " split back; their zeros: --scan)\n",
                       "dense", t->dense_huge >> 20, t->dense_collapses, ahead, t->dense_splits);
            }
            if (m->reported_ok) {
                printf("    %-14s", "in force");
                for (int k = 0; k < CFG_STATS; k++) {
                    char val[64];
                    cfg_format_value(&m->reported, (enum cfg_key)k, val, sizeof val);
                    printf(" %s=%s", cfg_key_name((enum cfg_key)k), val);
                }
                printf("\n");
            } else
                printf("    %-14s not resolved yet (no chunk allocated)\n", "in force");
            /* the block is the process's own memory: its word, checked where it can be */
            printf("    (state, arenas and in force: as the process reports them, from its own "
                   "memory, which any code in it can write)\n");
            for (unsigned i = 0; i < p->nunlike && i < PROC_UNLIKE_MAX; i++)
                printf("    ! range %" PRIu64 " (%#" PRIx64 ", %" PRIu64
                       " KiB) does not look like a thpalloc arena: %s\n",
                       p->unlike[i].index, p->unlike[i].base, p->unlike[i].size >> 10,
                       p->unlike[i].why);
            if (p->nunlike > PROC_UNLIKE_MAX)
                printf("    ! and %u more ranges unlike thpalloc arenas\n",
                       p->nunlike - PROC_UNLIKE_MAX);
            if (p->nunchecked)
                printf("    (%u range%s past the cut of maps: not checked against the mappings)\n",
                       p->nunchecked, p->nunchecked == 1 ? "" : "s");
            for (int i = 0; i < m->ndiffer; i++)
                printf("    ! the process reports %s=%s where its configuration gives %s\n",
                       cfg_key_name(m->differ[i].key), m->differ[i].got, m->differ[i].want);
            if (m->ndiffer)
                printf("    (the configuration changed since it started, it was started with "
                       "other settings, or its report is false)\n");
        } else if (p->lib_replaced)
            printf("    %-14s unknown (library replaced: restart PID %d to refresh): %s\n",
                   "arena table", (int)p->pid, ts_text(p->intro_msg));
        else
            printf("    %-14s unavailable: %s\n", "arena table", ts_text(p->intro_msg));
    }
    char unknown[96]; /* the arenas' figures without a table or names: not zeros */
    if (p->lib_replaced)
        snprintf(unknown, sizeof unknown, "unknown (library replaced: restart PID %d to refresh)",
                 (int)p->pid);
    else
        snprintf(unknown, sizeof unknown, "unknown (no arena table, no [anon:thpalloc] names)");
    if (!p->attr_ok && p->loaded && p->space_ok)
        printf("  memory by owner\n    %-16s %s\n", "thpalloc arenas", unknown);
    if (p->attr_ok) {
        printf("  memory by owner (smaps, %s)\n", !strcmp(p->attr_method, "introspect")
                                                      ? "thpalloc's arena table"
                                                      : "[anon:thpalloc] mapping names");
        printf("    %-16s %12s %12s %14s %12s\n", "", "Rss", "Anonymous", "AnonHugePages",
               "hg-advised");
        printf("    %-16s %9" PRIu64 " kB %9" PRIu64 " kB %11" PRIu64 " kB %9" PRIu64 " kB\n",
               "thpalloc arenas", p->in.rss_kb, p->in.anon_kb, p->in.huge_kb, p->in.advised_kb);
        printf("    %-16s %9" PRIu64 " kB %9" PRIu64 " kB %11" PRIu64 " kB %9" PRIu64 " kB\n",
               "rest", p->out.rss_kb, p->out.anon_kb, p->out.huge_kb, p->out.advised_kb);
        if (p->partial_vmas)
            printf("    (%u mapping%s only partly inside the arenas: shared in proportion)\n",
                   p->partial_vmas, p->partial_vmas == 1 ? "" : "s");
    }
    if (p->space_ok) {
        /* What the process costs against CommitLimit, and thpalloc's part of it. */
        printf("  address space (smaps: Size reserved, charged = VmFlags ac, in Committed_AS)\n");
        printf("    %-16s %12s %12s\n", "", "Size", "charged");
        if (p->attr_ok)
            printf("    %-16s %9" PRIu64 " kB %9" PRIu64 " kB\n", "thpalloc arenas", p->in.size_kb,
                   p->in.charged_kb);
        else if (p->loaded)
            printf("    %-16s %s\n", "thpalloc arenas", unknown);
        printf("    %-16s %9" PRIu64 " kB %9" PRIu64 " kB\n", "whole process", p->size_kb,
               p->charged_kb);
    }
    if (p->pol_ok) {
        printf("  policy (what the configuration says for this process, and why)\n");
        ts_policy_text(&p->pol, "    ");
        if (!p->env_read)
            printf("    (environment unreadable: THPALLOC_* overrides not known)\n");
        else if (p->secure == 1)
            printf("    (secure execution: THPALLOC_* variables are ignored)\n");
        if (p->pol_problems)
            printf("    (the configuration has %zu problem%s: run thp-status --check)\n",
                   p->pol_problems, p->pol_problems == 1 ? "" : "s");
    }
    scan_text(p);
    text_errors(p, m);
}

static void json_mem(const char *key, const struct mem *m)
{
    j_obj(key);
    j_u64("rss_kb", m->rss_kb);
    j_u64("anonymous_kb", m->anon_kb);
    j_u64("anon_huge_kb", m->huge_kb);
    j_u64("huge_advised_kb", m->advised_kb);
    j_u64("size_kb", m->size_kb);
    j_u64("charged_kb", m->charged_kb);
    j_end();
}

static void proc_json_model(const struct proc *p, const struct proc_model *m, bool full)
{
    j_obj(NULL);
    j_int("pid", p->pid);
    j_bool("exists", p->exists);
    if (!p->exists) {
        j_end();
        return;
    }
    j_bool("exited_during_read", p->vanished);
    j_str("not_read", p->not_read);
    j_bool("maps_cut", p->maps_cut);
    j_bool("smaps_cut", p->smaps_cut);
    j_str("name", p->name);
    j_int("uid", (long long)p->ruid);
    j_bool("kernel_thread", p->kthread);
    j_str("exe", p->exe[0] ? p->exe : NULL);
    j_str("unit", p->unit[0] ? p->unit : NULL);
    if (p->thp_enabled >= 0)
        j_bool("thp_enabled", p->thp_enabled);
    else
        j_null("thp_enabled");
    j_bool("readable", p->rollup_ok && !proc_permission_denied(p) && !p->not_read);
    if (p->rollup_ok) {
        j_obj("memory_kb");
        for (size_t i = 0; i < sizeof rollup_rows / sizeof rollup_rows[0]; i++)
            j_u64(rollup_rows[i].json, rollup_value(p, i));
        j_end();
    } else
        j_null("memory_kb");
    if (p->space_ok) {
        j_obj("address_space_kb");
        j_u64("size", p->size_kb);
        j_u64("charged", p->charged_kb);
        j_end();
    } else
        j_null("address_space_kb");
    j_obj("thpalloc");
    if (p->maps_ok)
        j_bool("loaded", p->loaded);
    else
        j_null("loaded");
    j_str("library", p->loaded ? p->lib_path : NULL);
    if (p->loaded)
        j_bool("library_replaced", p->lib_replaced || (p->lib_via_map_files && !p->lib_elsewhere));
    else
        j_null("library_replaced");
    if (p->intro_ok) {
        const struct thpalloc_introspect *t = &p->intro->head;
        j_obj("introspect");
        j_str("state", t->active == 1 ? "active" : t->active == 0 ? "dormant" : "uninitialised");
        j_bool("policy_loaded", t->policy_loaded);
        j_str("thp", mode_name(t->thp_mode));
        j_u64("thp_threshold", t->thp_threshold);
        j_u64("arena_size", t->arena_size);
        j_int("purge_delay_ms", t->purge_delay_ms);
        j_str("purge", t->purge ? "free" : "dontneed");
        j_int("ranges", p->nranges);
        j_u64("reserved_bytes", p->reserved_bytes);
        j_u64("ranges_overflow", t->ranges_overflow);
        if (intro_has_dense(t)) {
            j_u64("dense_huge_bytes", t->dense_huge);
            j_u64("dense_collapses", t->dense_collapses);
            j_u64("dense_splits", t->dense_splits);
        } else {
            j_null("dense_huge_bytes");
            j_null("dense_collapses");
            j_null("dense_splits");
        }
        if (intro_has_ahead(t))
            j_u64("dense_ahead", t->dense_ahead);
        else
            j_null("dense_ahead");
        /* all of the above is the process's word (its own memory) */
        j_bool("self_reported", true);
        j_arr("ranges_unlike_arenas");
        for (unsigned i = 0; i < p->nunlike && i < PROC_UNLIKE_MAX; i++) {
            j_obj(NULL);
            j_u64("index", p->unlike[i].index);
            j_u64("base", p->unlike[i].base);
            j_u64("size", p->unlike[i].size);
            j_str("why", p->unlike[i].why);
            j_end();
        }
        j_end();
        j_int("ranges_unlike_arenas_count", p->nunlike);
        j_int("ranges_unchecked", p->nunchecked);
        if (m->differs_known) {
            j_arr("differs_from_policy");
            for (int i = 0; i < m->ndiffer; i++) {
                j_obj(NULL);
                j_str("key", cfg_key_name(m->differ[i].key));
                j_str("reported", m->differ[i].got);
                j_str("policy", m->differ[i].want);
                j_end();
            }
            j_end();
        } else
            j_null("differs_from_policy");
        j_end();
    } else
        j_null("introspect");
    j_str("introspect_error", !p->intro_ok && p->loaded ? p->intro_msg : NULL);
    if (p->attr_ok) {
        j_obj("attribution");
        j_str("method", p->attr_method);
        json_mem("arenas", &p->in);
        json_mem("rest", &p->out);
        j_int("partial_mappings", p->partial_vmas);
        j_end();
    } else
        j_null("attribution");
    j_end();
    if (full && p->pol_ok) {
        j_obj("policy");
        ts_policy_json("settings", &p->pol);
        j_bool("environment_read", p->env_read);
        if (p->secure >= 0)
            j_bool("secure", p->secure);
        else
            j_null("secure");
        j_int("problems", (long long)p->pol_problems);
        j_end();
    }
    scan_json(p);
    j_arr("errors");
    for (int i = 0; i < p->nerr && i < (int)PROC_ERR_MAX; i++) {
        j_obj(NULL);
        j_str("file", p->errs[i].what);
        j_str("errno", ts_errname(p->errs[i].err));
        j_str("message", m->err[i].why);
        j_end();
    }
    j_end();
    j_end();
}

void proc_json(const struct proc *p, bool full)
{
    static struct proc_model m; /* 4 KiB: not on the stack of every caller */
    proc_model(p, &m);
    proc_json_model(p, &m, full);
}

int ts_procs(char **pids, int npids)
{
    int rc = 0, shown = 0;
    if (ts_opt.format == TS_PROM)
        return scan_procs_prom(pids, npids); /* --scan only (see main) */
    if (ts_opt.format == TS_JSON) {
        j_obj(NULL);
        j_str("schema", TS_SCHEMA);
        j_arr("processes");
    }
    struct proc *p = malloc(sizeof *p);
    if (!p) {
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    for (int i = 0; i < npids; i++) {
        char *end;
        long v = strtol(pids[i], &end, 10);
        proc_read(p, (pid_t)v, true, ts_opt.scan ? 2 : 0);
        if (!p->exists) {
            fprintf(stderr, "thp-status: %ld: no such process\n", v);
            rc = 1;
        } else if (p->not_read) {
            fprintf(stderr, "thp-status: %ld: not read: %s\n", v, proc_not_read_text(p));
            rc = 1;
        } else if (p->vanished) {
            fprintf(stderr, "thp-status: %ld: the process exited while being read\n", v);
            rc = 1;
        } else if (p->nerr ||
                   (p->scan && p->scan->not_read && !strcmp(p->scan->not_read, "time-out"))) {
            fprintf(
                stderr,
                "thp-status: %ld: parts of the process could not be read (said in the output)\n",
                v);
            rc = 1;
        }
        if (ts_opt.format == TS_JSON) {
            proc_json(p, true);
        } else if (p->exists) { /* a missing one is said once, on stderr */
            if (shown++)
                putchar('\n');
            static struct proc_model m;
            proc_model(p, &m);
            proc_text(p, &m);
        }
        fflush(stdout);
        proc_free(p);
    }
    free(p);
    if (ts_opt.format == TS_JSON) {
        j_end();
        j_end();
        j_finish();
    }
    return rc;
}
