/* thp-status --prometheus: the system view in the exposition format, following its naming
 * conventions so that `promtool check metrics` accepts it: one type per family, counters
 * (what only grows: event counts) named *_total, gauges for settings and levels, base
 * units (seconds, bytes) named in the suffix. */
#include "thp-status-system.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* khugepaged's files: settings (dimensionless), intervals (milliseconds in sysfs) and the
 * two counters, each as its own kind of family. */
enum khp_kind { KHP_SETTING, KHP_MS, KHP_COUNTER };
static const struct {
    const char *knob, *family, *help;
    enum khp_kind kind;
} khp_prom[] = {
    {"scan_sleep_millisecs", "thp_khugepaged_scan_sleep_seconds",
     "khugepaged's sleep between scans (scan_sleep_millisecs).", KHP_MS},
    {"alloc_sleep_millisecs", "thp_khugepaged_alloc_sleep_seconds",
     "khugepaged's sleep after a failed huge-page allocation (alloc_sleep_millisecs).", KHP_MS},
    {"full_scans", "thp_khugepaged_full_scans_total", "Complete scans khugepaged has made.",
     KHP_COUNTER},
    {"pages_collapsed", "thp_khugepaged_pages_collapsed_total",
     "Huge pages khugepaged has collapsed.", KHP_COUNTER},
};

static enum khp_kind khp_kind_of(const char *knob, size_t *row)
{
    for (size_t r = 0; r < sizeof khp_prom / sizeof khp_prom[0]; r++)
        if (!strcmp(knob, khp_prom[r].knob)) {
            *row = r;
            return khp_prom[r].kind;
        }
    return KHP_SETTING;
}

/* /proc/vmstat's gauges (nr_*) whose unit is known: huge pages of hpage_pmd_size, or base
 * pages; in bytes. Other nr_* lines have no Prometheus series. */
static double vmstat_bytes(const char *name, uint64_t v, uint64_t pmd_size)
{
    static const char *const in_thps[] = {"nr_anon_transparent_hugepages", "nr_file_hugepages",
                                          "nr_shmem_hugepages"};
    for (size_t i = 0; i < sizeof in_thps / sizeof in_thps[0]; i++)
        if (!strcmp(name, in_thps[i]))
            return pmd_size ? (double)v * (double)pmd_size : -1;
    if (!strcmp(name, "nr_hugetlb"))
        return (double)v * (double)sysconf(_SC_PAGESIZE);
    return -1;
}

static void prom_settings(const struct sysview *v)
{
    for (size_t i = 0; i < N_TOP; i++)
        if (v->top[i].present && v->top[i].choice) {
            p_family("thp_setting_info", "gauge", "Selected value of a THP sysfs choice (1).");
            p_sample("thp_setting_info", 1, "knob", top_knobs[i], "value", v->top[i].val, NULL);
        }
    for (size_t i = 0; i < N_TOP; i++)
        if (v->top[i].present && !v->top[i].choice && strcmp(top_knobs[i], "hpage_pmd_size") != 0) {
            p_family("thp_setting", "gauge", "Numeric THP sysfs setting.");
            p_sample("thp_setting", strtod(v->top[i].val, NULL), "knob", top_knobs[i], NULL);
        }
    for (size_t i = 0; i < N_TOP; i++)
        if (v->top[i].present && !strcmp(top_knobs[i], "hpage_pmd_size")) {
            p_family("thp_hpage_pmd_size_bytes", "gauge", "Size of a PMD huge page.");
            p_sample("thp_hpage_pmd_size_bytes", strtod(v->top[i].val, NULL), NULL);
        }
    size_t row;
    for (size_t i = 0; i < N_KHP; i++)
        if (v->khp[i].present && khp_kind_of(khp_knobs[i], &row) == KHP_SETTING) {
            p_family("thp_khugepaged_setting", "gauge", "khugepaged setting from sysfs.");
            p_sample("thp_khugepaged_setting", strtod(v->khp[i].val, NULL), "knob", khp_knobs[i],
                     NULL);
        }
    for (size_t i = 0; i < N_KHP; i++) {
        enum khp_kind k = khp_kind_of(khp_knobs[i], &row);
        if (!v->khp[i].present || k == KHP_SETTING)
            continue;
        double x = strtod(v->khp[i].val, NULL);
        p_family(khp_prom[row].family, k == KHP_MS ? "gauge" : "counter", khp_prom[row].help);
        p_sample(khp_prom[row].family, k == KHP_MS ? x / 1000 : x, NULL);
    }
}

static void prom_mthp(const struct sysview *v)
{
    for (int i = 0; i < v->nm; i++)
        if (v->m[i].enabled.present) {
            p_family("thp_mthp_enabled_info", "gauge", "Per-size THP (mTHP) enabled setting (1).");
            p_sample("thp_mthp_enabled_info", 1, "size", v->m[i].label, "value",
                     v->m[i].enabled.val, NULL);
        }
    /* stats/: nr_* are levels (folios of the size now), the rest events since boot */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < v->nm; i++) {
            const char *lbl = v->m[i].label;
            for (int s = 0; s < v->m[i].nstat; s++) {
                const char *name = v->m[i].stat[s].name;
                bool level = !strncmp(name, "nr_", 3);
                if (level != (pass == 0))
                    continue;
                if (level) {
                    p_family("thp_mthp_folios", "gauge",
                             "Per-size THP folios now, from sysfs stats/nr_* (kind: anon, ...).");
                    p_sample("thp_mthp_folios", (double)v->m[i].stat[s].v, "size", lbl, "kind",
                             name + 3, NULL);
                } else {
                    p_family("thp_mthp_events_total", "counter",
                             "Per-size THP events since boot, from sysfs stats/.");
                    p_sample("thp_mthp_events_total", (double)v->m[i].stat[s].v, "size", lbl,
                             "event", name, NULL);
                }
            }
        }
}

static void prom_memory(const struct sysview *v)
{
    for (size_t i = 0; i < N_MEMINFO; i++)
        if (v->meminfo_has[i] && meminfo_in_kb(i)) {
            p_family("thp_meminfo_bytes", "gauge", "Huge-page figures from /proc/meminfo, bytes.");
            p_sample("thp_meminfo_bytes", (double)v->meminfo[i] * 1024, "field", meminfo_keys[i],
                     NULL);
        }
    if (v->overcommit >= 0) {
        p_family("thp_overcommit_mode", "gauge",
                 "vm.overcommit_memory: 0 heuristic, 1 always, 2 strict (CommitLimit enforced).");
        p_sample("thp_overcommit_mode", v->overcommit, NULL);
    }
    static const char *const commit_family[N_COMMIT][2] = {
        {"thp_commit_limit_bytes", "CommitLimit from /proc/meminfo, bytes."},
        {"thp_committed_as_bytes", "Committed_AS from /proc/meminfo: memory charged, bytes."}};
    for (size_t i = 0; i < N_COMMIT; i++)
        if (v->commit_has[i]) {
            p_family(commit_family[i][0], "gauge", commit_family[i][1]);
            p_sample(commit_family[i][0], (double)v->commit[i] * 1024, NULL);
        }
    for (int i = 0; i < v->nvm; i++)
        if (strncmp(v->vm[i].name, "nr_", 3) != 0) {
            p_family("thp_vmstat_events_total", "counter",
                     "Huge-page events since boot from /proc/vmstat (thp_* and others).");
            p_sample("thp_vmstat_events_total", (double)v->vm[i].v, "event", v->vm[i].name, NULL);
        }
    uint64_t pmd = 0;
    for (size_t i = 0; i < N_TOP; i++)
        if (v->top[i].present && !strcmp(top_knobs[i], "hpage_pmd_size"))
            pmd = strtoull(v->top[i].val, NULL, 10);
    for (int i = 0; i < v->nvm; i++) {
        double b =
            strncmp(v->vm[i].name, "nr_", 3) ? -1 : vmstat_bytes(v->vm[i].name, v->vm[i].v, pmd);
        if (b >= 0) {
            p_family("thp_vmstat_bytes", "gauge",
                     "Huge-page memory from the /proc/vmstat gauges (nr_*), bytes.");
            p_sample("thp_vmstat_bytes", b, "item", v->vm[i].name, NULL);
        }
    }
    if (v->fallback_rate >= 0) {
        p_family("thp_fault_fallback_ratio", "gauge",
                 "thp_fault_fallback / (thp_fault_alloc + thp_fault_fallback).");
        p_sample("thp_fault_fallback_ratio", v->fallback_rate, NULL);
    }
}

/* The one verdict (the system view's exit status): a single alert rule can watch
 * thp_health_status; thp_health_problem_info says what, one series per kind and place
 * (two problems of a line are one series: the textfile collector refuses duplicates). */
static void prom_health(const struct sys_model *m)
{
    size_t n = m->nproblem;
    p_family("thp_health_status", "gauge",
             "0: thp-status finds this machine healthy; 1: it finds problems "
             "(thp_health_problem_info).");
    p_sample("thp_health_status", n ? 1 : 0, NULL);
    p_family("thp_health_problems", "gauge",
             "Problems thp-status finds: its warnings and the configuration's problems.");
    p_sample("thp_health_problems", (double)n, NULL);
    for (size_t i = 0; i < n; i++) {
        const struct sys_problem *q = &m->problem[i];
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++)
            dup = !strcmp(m->problem[k].kind, q->kind) && !strcmp(m->problem[k].where, q->where);
        if (dup)
            continue;
        p_family("thp_health_problem_info", "gauge",
                 "A problem thp-status finds (1): its kind and the file or setting.");
        p_sample("thp_health_problem_info", 1, "kind", q->kind, "where", q->where, NULL);
    }
}

void sys_prom(const struct sysview *v, const struct sys_model *m)
{
    prom_settings(v);
    prom_mthp(v);
    prom_memory(v);
    p_family("thp_thpalloc_preload", "gauge",
             "1 when /etc/ld.so.preload has a thpalloc entry (not one that ends in a CR).");
    p_sample("thp_thpalloc_preload", v->preload_entry[0] ? 1 : 0, NULL);
    p_family("thp_thpalloc_preload_dormant", "gauge",
             "1 when an entry before thpalloc's in /etc/ld.so.preload owns malloc.");
    p_sample("thp_thpalloc_preload_dormant", m->preload_dormant, NULL);
    /* every program then prints ld.so's "cannot be preloaded" error (thp-status's warning) */
    p_family("thp_thpalloc_preload_broken", "gauge",
             "1 when thpalloc's entry in /etc/ld.so.preload names a file that does not exist.");
    p_sample("thp_thpalloc_preload_broken", m->preload_broken, NULL);
    for (int k = 0; k < CFG_NKEYS; k++) {
        char val[64], where[512];
        cfg_format_value(&v->pol, (enum cfg_key)k, val, sizeof val);
        ts_where_text(&v->pol.where[k], where, sizeof where);
        p_family("thp_thpalloc_policy_info", "gauge", "The global thpalloc policy (1).");
        p_sample("thp_thpalloc_policy_info", 1, "key", cfg_key_name((enum cfg_key)k), "value", val,
                 "origin", where, NULL);
    }
    p_family("thp_thpalloc_config_problems", "gauge",
             "Problems found in the thpalloc configuration (as thp-status --check).");
    p_sample("thp_thpalloc_config_problems", (double)v->conf.n, NULL);
    p_family("thp_warnings", "gauge", "Warnings thp-status prints for this system.");
    p_sample("thp_warnings", (double)m->nwarning_lines, NULL);
    prom_health(m);
}
