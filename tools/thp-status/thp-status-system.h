/* thp-status: what the system view reads (thp-status-system.c) and prints there (text,
 * JSON) and in thp-status-sysprom.c (Prometheus). */
#ifndef THP_STATUS_SYSTEM_H
#define THP_STATUS_SYSTEM_H

#include <limits.h>
#include <sys/types.h>

#include "thp-status.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"

#define N_TOP 6
extern const char *const top_knobs[N_TOP];
#define N_KHP 9
extern const char *const khp_knobs[N_KHP];
#define N_MEMINFO 9
extern const char *const meminfo_keys[N_MEMINFO];
/* What the kernel charges to the commit limit, thpalloc's mappings included. */
#define N_COMMIT 2
extern const char *const commit_keys[N_COMMIT];

struct knob {
    char raw[256]; /* as read */
    char val[64];  /* selected word or the number */
    bool present;
};

struct mthp {
    unsigned long size_kb;
    struct knob enabled, shmem;
    struct {
        char name[40];
        uint64_t v;
    } stat[24];
    int nstat;
};

struct sysview {
    bool thp_present;
    struct knob top[N_TOP], khp[N_KHP];
    struct mthp *m;
    int nm;
    bool meminfo_ok;
    uint64_t meminfo[N_MEMINFO];
    bool meminfo_has[N_MEMINFO];
    int overcommit; /* vm.overcommit_memory, -1: unreadable (overcommit_err) */
    int overcommit_err;
    char overcommit_path[PATH_MAX];
    uint64_t commit[N_COMMIT];
    bool commit_has[N_COMMIT];
    struct {
        char name[64];
        uint64_t v;
    } * vm;
    int nvm;
    double fallback_rate, collapse_fail_rate; /* < 0: no events yet */
    /* preload */
    char preload_path[PATH_MAX];
    int preload_err; /* errno reading it; ENOENT: no file */
    mode_t preload_mode;
    char preload_entry[PATH_MAX]; /* the thpalloc token, "" if none */
    bool preload_entry_exists;
    /* ld.so separates entries at ' ', '\t', '\n' and ':' only: a CRLF line's entry is a name
     * that ends in '\r', which no file has, so ld.so loads nothing for it */
    bool preload_entry_cr;           /* the only thpalloc entry ends in '\r' (preload_entry "") */
    char preload_cr_entry[PATH_MAX]; /* that entry, without its '\r' */
    size_t preload_cr_others;        /* other entries that end in '\r' */
    char preload_cr_other[PATH_MAX]; /* the first of them, without its '\r' */
    char preload_owner[PATH_MAX];    /* an entry before ours that defines malloc, "" if none */
    /* policy */
    struct cfg_settings pol;
    struct ts_problems conf; /* what --check reports: the same problems in every view */
    /* What is wrong on this machine, besides conf: each with its kind (a word, for
     * thp_health_problem_info) and where (the file or setting) */
    struct {
        char kind[32], where[320], msg[400];
    } warn[16];
    int nwarn;
};

/* The health verdict: the warnings and the configuration's problems, one count. */
static inline size_t sys_health_problems(const struct sysview *v)
{
    return (size_t)v->nwarn + v->conf.n;
}

/* "2M" for a per-size THP directory of 2048 kB */
void mthp_label(unsigned long kb, char *buf, size_t cap);
/* vm.overcommit_memory's name, and what it means for an allocation; NULL when unknown. */
const char *overcommit_name(int mode, const char **what);
void sys_prom(const struct sysview *v);
/* "FILE:LINE" of a configuration problem ("FILE" when it has no line). */
void sys_problem_where(const struct ts_problem *p, char *buf, size_t cap);

#endif
