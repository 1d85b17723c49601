/* thp-status: what the system view reads (struct sysview), what its views derive alike from
 * it (struct sys_model), both in thp-status-system.c, and the renderers that lay the two
 * out: text and JSON there, Prometheus in thp-status-sysprom.c. */
#ifndef THP_STATUS_SYSTEM_H
#define THP_STATUS_SYSTEM_H

#include <limits.h>
#include <string.h>
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
    bool choice; /* a list of words with the selected one in brackets ("always [madvise]") */
};

struct mthp {
    unsigned long size_kb;
    char label[16]; /* "2M" for hugepages-2048kB */
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

/* HugePages_Total counts pages; every other meminfo figure is in kB. */
static inline bool meminfo_in_kb(size_t i)
{
    return strcmp(meminfo_keys[i], "HugePages_Total") != 0;
}

/* Where /etc/ld.so.preload leaves thpalloc, in the order the text view tells it. */
enum preload_state {
    PRELOAD_DORMANT,    /* our entry, after one that owns malloc */
    PRELOAD_ACTIVE,     /* our entry (which may name a missing file: preload_entry_exists) */
    PRELOAD_CRLF,       /* our only entry ends in '\r': ld.so loads nothing */
    PRELOAD_NO_FILE,    /* no such file */
    PRELOAD_UNREADABLE, /* the file could not be read (preload_err) */
    PRELOAD_NO_ENTRY,   /* a file without a thpalloc entry */
};

/* One problem of the health verdict: a warning, or a problem of the configuration. */
struct sys_problem {
    const char *kind;          /* a word, for monitoring ("config" for the configuration's) */
    const char *msg;           /* what is wrong */
    char where[PATH_MAX + 32]; /* the file or setting; "FILE:LINE" for the configuration's */
    bool config;
};

/* What the text, JSON and Prometheus views derive alike from struct sysview: the renderers
 * only lay it out. */
struct sys_model {
    enum preload_state preload;
    bool preload_dormant; /* our entry, after one that owns malloc */
    bool preload_broken;  /* our entry names a file that does not exist */
    /* vm.overcommit_memory's name and what it means; NULL name: unknown (unreadable) */
    const char *overcommit_name, *overcommit_what;
    /* the verdict: the warnings (v->warn, in order), then the configuration's problems */
    size_t nproblem;
    struct sys_problem *problem;
    /* the line that stands for the configuration's problems among the warnings ("": none),
     * and the count of warning lines with it */
    char conf_summary[256];
    size_t nwarning_lines;
};

void sys_prom(const struct sysview *v, const struct sys_model *m);

#endif
