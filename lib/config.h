/* config: the administrator's policy. /etc/thpalloc.conf, then
 * /etc/thpalloc.d/ *.conf in lexical order (or the one file THPALLOC_CONF names), then the
 * THPALLOC_<KEY> environment variables; sections [global], [program NAME], [path /EXE],
 * [unit NAME.service]; global < program < path < unit < environment, later wins within a
 * rank. Parsed with inih over buffers read with open/read; no stdio, no malloc, so the
 * same code runs inside the allocator and inside thp-status. */
#ifndef THPALLOC_CONFIG_H
#define THPALLOC_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "os.h"
#include "thp.h"

enum cfg_key {
    CFG_THP = 0,
    CFG_THP_THRESHOLD,
    CFG_ARENA_SIZE,
    CFG_PURGE_DELAY,
    CFG_PURGE,
    CFG_STATS,
    CFG_LOG_PROBLEMS,
    CFG_THP_DENSE,
    CFG_NKEYS
};

/* The longest NAME of a [program NAME], [path /EXE] or [unit NAME] section: any path the
 * kernel can name an executable with. A longer one is reported and applies to nothing. */
#define CFG_SECTION_NAME_MAX (PATH_MAX - 1)

/* The built-in policy, written here only: the key table (config-keys.c) and the policy the
 * allocator has before the files are read (policy.c, introspect.c) take it from here. */
#define CFG_DEFAULT_THP THP_MODE_LARGE
#define CFG_DEFAULT_THP_THRESHOLD ((size_t)2 << 20)
#define CFG_DEFAULT_ARENA_SIZE ((size_t)64 << 20)
#define CFG_DEFAULT_PURGE_DELAY_MS 1000L
#define CFG_DEFAULT_PURGE OS_PURGE_DONTNEED
#define CFG_DEFAULT_STATS_AT_EXIT false
#define CFG_DEFAULT_LOG_PROBLEMS false
/* Percent of a small-object chunk's 4 KiB pages in use from which it becomes a huge page. */
#define CFG_DEFAULT_THP_DENSE ((size_t)90)
#define CFG_THP_DENSE_MIN ((size_t)50)
/* struct cfg_values at the defaults, for static storage (what cfg_defaults writes). */
#define CFG_DEFAULT_VALUES                                                                         \
    {                                                                                              \
        .thp = CFG_DEFAULT_THP, .thp_threshold = CFG_DEFAULT_THP_THRESHOLD,                        \
        .arena_size = CFG_DEFAULT_ARENA_SIZE, .purge_delay_ms = CFG_DEFAULT_PURGE_DELAY_MS,        \
        .purge = CFG_DEFAULT_PURGE, .stats_at_exit = CFG_DEFAULT_STATS_AT_EXIT,                    \
        .log_problems = CFG_DEFAULT_LOG_PROBLEMS, .thp_dense = CFG_DEFAULT_THP_DENSE,              \
    }

enum cfg_origin { CFG_FROM_DEFAULT = 0, CFG_FROM_FILE, CFG_FROM_ENV };

/* Where a key's value came from. */
struct cfg_where {
    enum cfg_origin origin;
    int rank;          /* 0 default, 1 global, 2 program, 3 path, 4 unit, 5 environment */
    int line;          /* file line, for CFG_FROM_FILE */
    char file[192];    /* file path, or the variable name for CFG_FROM_ENV */
    char section[160]; /* "global", "program NAME", "path /EXE", "unit NAME" */
    char value[64];    /* the text as written */
};

/* The values of the keys, one field each, named after its key: the key table (cfg_keys)
 * describes this struct by offset, and the library's policy in force embeds it whole
 * (types.h, struct policy). One list, so that both spellings below are the same layout. */
#define CFG_VALUE_FIELDS                                                                           \
    enum thp_mode thp;                                                                             \
    size_t thp_threshold;                                                                          \
    size_t arena_size;                                                                             \
    long purge_delay_ms; /* -1: never */                                                           \
    enum os_purge purge;                                                                           \
    bool stats_at_exit;                                                                            \
    bool log_problems; /* one line to the system log when the configuration has problems */        \
    size_t thp_dense;  /* percent of a small-object chunk in use to collapse it; 0: off */
struct cfg_values {
    CFG_VALUE_FIELDS
};

/* The resolved policy: the values (as s.values, or each field by its own name) and where
 * each came from. */
struct cfg_settings {
    union {
        struct cfg_values values;
        struct {
            CFG_VALUE_FIELDS
        };
    };
    struct cfg_where where[CFG_NKEYS];
};

/* The policy's keys, one row each (after mimalloc's options table): everything that knows
 * a key's name, variable, grammar or default reads it here: the resolver, thpalloc_policy(),
 * thp-status, and thpalloc-run (through thp-status --check-value). Values are int64_t
 * between the parser, the formatter and the field of struct cfg_values. */
enum cfg_field { CFG_FIELD_MODE, CFG_FIELD_SIZE, CFG_FIELD_MS, CFG_FIELD_PURGE, CFG_FIELD_FLAG };
struct cfg_key_info {
    const char *name;                                 /* in the files: "thp_threshold" */
    const char *env;                                  /* "THPALLOC_THP_THRESHOLD" */
    bool (*parse)(const char *text, int64_t *v);      /* false on a bad value */
    void (*format)(int64_t v, char *buf, size_t cap); /* the canonical text: "2M" */
    int64_t dflt;
    const char *expect; /* what a good value looks like, for reports */
    size_t offset;      /* of the field in struct cfg_values */
    enum cfg_field field;
    /* Its field in the introspection block thp-status reads (struct thpalloc_introspect):
     * offset and size; size 0: the block does not publish the key. */
    uint16_t block, block_size;
};
extern const struct cfg_key_info cfg_keys[CFG_NKEYS];

/* What the resolution looks at; every path can be injected (tests, thp-status). */
struct cfg_inputs {
    const char *conf_file;    /* default SYSCONFDIR "/thpalloc.conf" */
    const char *conf_dir;     /* default SYSCONFDIR "/thpalloc.d" */
    const char *const *files; /* instead of conf_file + conf_dir when non-NULL (NULL-ended) */
    const char *exe;          /* executable path; NULL: readlink /proc/self/exe when needed */
    const char *program;      /* basename; NULL: from exe */
    const char *unit;         /* systemd unit; NULL: from cgroup_file when needed */
    const char *cgroup_file;  /* default /proc/self/cgroup */
    char *const *envp;        /* THPALLOC_* source; NULL: no environment */
    bool secure;              /* AT_SECURE: environment ignored, root-owned files only */
    uid_t ruid;               /* the real uid whose own files are trusted */
    bool check_all;           /* validate every section, matching or not (thp-status --check) */
    /* With check_all: called with each good section header (kind "program", "path" or
     * "unit", its NAME) and the report's ctx, so that the tool can say which ones can never
     * match on this system (thp-status-lint.c). */
    void (*on_section)(void *ctx, const char *file, int line, const char *kind, const char *name);
    /* Opens path for reading (a directory when dir) instead of the library's own open:
     * thp-status opens another process's files inside its root, as that process may read
     * them. -1 with errno set, and *why when there is more to say (static text). */
    int (*open_input)(void *ctx, const char *path, bool dir, const char **why);
    void *open_ctx;
};

/* Opens path inside the directory rootfd (-1: "/"; an absolute symbolic link starts again
 * there, ".." stops there) for reading, a directory when dir, following symbolic links
 * (40 at most) one component at a time, and only through directories owned by root (or
 * by owner: 0 for root alone) and writable by nobody else: setuid programs read their
 * configuration so (as sudo and OpenSSH do theirs), for whoever may change a directory on
 * the path may put any file there, root's own included. buf: room for the walk. -1 with
 * errno set (EPERM: such a directory) and *why. */
int cfg_open_secure(int rootfd, const char *path, bool dir, uid_t owner, char (*buf)[PATH_MAX],
                    const char **why);

/* A problem: file (or variable) and line (0 when not about a line), what is wrong and
 * what would fix it. */
typedef void (*cfg_report_fn)(void *ctx, const char *file, int line, const char *msg);

void cfg_defaults(struct cfg_settings *s);
/* Resolves the policy. Never fails: what is bad is reported and skipped. Returns the
 * number of problems reported. */
int cfg_resolve(struct cfg_settings *s, const struct cfg_inputs *in, cfg_report_fn report,
                void *ctx);

/* The largest size: a process's whole address space with 5-level page tables (64 PiB);
 * more cannot be meant, and thp-status takes more in another process's block as a lie. */
#define CFG_SIZE_MAX ((uint64_t)1 << 56)

/* The grammars of sizes, times and modes (thpalloc.conf(5)); false on a bad value. */
bool cfg_parse_size(const char *text, size_t *out);
bool cfg_parse_time_ms(const char *text, long *out);
bool cfg_parse_mode(const char *text, enum thp_mode *out);

const char *cfg_key_name(enum cfg_key k);
/* The key named name (any case), or -1. */
int cfg_key_lookup(const char *name);
/* "thp, thp_threshold, ..., stats" into buf. */
void cfg_key_list(char *buf, size_t cap);
/* Whether v is a value key k can have: one that its own grammar gives back from v's
 * canonical form (thp-status checks what it reads from another process with it). */
bool cfg_value_ok(enum cfg_key k, int64_t v);
/* Formats the value of key k in canonical form ("2M", "1s", "never") into buf. */
void cfg_format_value(const struct cfg_settings *s, enum cfg_key k, char *buf, size_t cap);

/* Shared by config.c and config-keys.c: bounded copies and appends without stdio (the result
 * is cut to fit cap, always terminated), and key k's field of v set or read through its own
 * type. */
void cfg_str_copy(char *dst, size_t cap, const char *src);
void cfg_str_cat(char *dst, size_t cap, const char *src);
void cfg_str_cat_u64(char *dst, size_t cap, uint64_t v);
void cfg_field_set(struct cfg_values *v, enum cfg_key k, int64_t value);
int64_t cfg_field_get(const struct cfg_values *v, enum cfg_key k);

/* Systemd unit from the text of a /proc/PID/cgroup file: the first *.service or *.scope
 * path component after skipping *.slice ones. false when there is none. */
bool cfg_unit_from_cgroup(const char *cgroup_text, char *unit, size_t cap);

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

#endif
