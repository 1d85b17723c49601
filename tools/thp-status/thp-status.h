/* thp-status: shared declarations of the tool's parts (see thp-status(8)).
 *
 *   thp-status.c         main: dispatch to the view asked for, exit status
 *   thp-status-args.c    the command line: options, their combinations, --help
 *   thp-status-util.c    reading /proc and /sys, JSON and Prometheus writers, formatting
 *   thp-status-open.c    opening files other users control, inside a process's root
 *   thp-status-esc.c     text other users chose, made safe for a terminal (and strict UTF-8)
 *   thp-status-system.c  the system view (sysfs, meminfo, vmstat, ld.so.preload, policy)
 *   thp-status-sysprom.c the system view in Prometheus's format
 *   thp-status-proc.c    reading one process (status, maps, smaps, environment)
 *   thp-status-introspect.c  thpalloc's arena table in it (ELF .dynsym, process_vm_readv)
 *   thp-status-procpolicy.c  one process's policy, from the files of its root it may read
 *   thp-status-procview.c  the process view: text, JSON
 *   thp-status-all.c     --all: collection, then text, JSON, Prometheus
 *   thp-status-policy.c  --check, --explain and the policy tables shared by the views
 *   thp-status-lint.c    what --check adds: sections that never match, unreadable files
 *   thp-status-caps.c    libcap: keep only what reading other processes needs
 *   thp-status-scan.c    --scan: the zero-filled part of each process's huge pages
 */
#ifndef THP_STATUS_H
#define THP_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"

#define TS_SCHEMA "thp-status/1"

enum ts_format { TS_TEXT = 0, TS_JSON, TS_PROM };

struct ts_options {
    enum ts_format format;
    const char *root; /* "" or a directory that stands for / when reading etc/ files */
    bool verbose;
    bool per_process; /* --all --prometheus: series per process too */
    bool scan;        /* --scan: read huge pages for zero-filled pieces (thp-status-scan.c) */
    uint64_t scan_rate, scan_max; /* --scan-rate bytes a second (0: no limit), --scan-max */
    double timeout;               /* --timeout: seconds one process's read may take (0: no limit) */
};
extern struct ts_options ts_opt;

/* ---- command line (thp-status-args.c) ----------------------------------------------- */

enum ts_mode {
    TS_CMD_SYSTEM = 0,  /* no argument: the system view */
    TS_CMD_PROCS,       /* PID... */
    TS_CMD_ALL,         /* --all */
    TS_CMD_CHECK,       /* --check [FILE...] */
    TS_CMD_EXPLAIN,     /* --explain PROGRAM [--unit UNIT], or --unit UNIT alone */
    TS_CMD_CHECK_VALUE, /* --check-value KEY=VALUE */
};
struct ts_command {
    enum ts_mode mode;
    char **args; /* the PIDs, or --check's files */
    int nargs;
    const char *explain, *unit, *check_value;
    bool with_env; /* --environment */
};
/* Reads the command line into *cmd and ts_opt; --help and --version print and exit 0, a bad
 * command line prints usage on stderr and exits 2. */
void ts_parse_args(int argc, char **argv, struct ts_command *cmd);

/* ---- util ---------------------------------------------------------------------------- */

/* Reads a whole file (any size) into a NUL-terminated malloc'd buffer. NULL with *err set
 * to an errno value on failure. An empty file gives "" (len 0). */
char *ts_slurp(const char *path, size_t *len, int *err);
char *ts_slurp_fd(int fd, size_t *len, int *err);
/* Reads a small file into buf (NUL-terminated, trailing newline removed). Returns 0 or
 * an errno value. */
int ts_read_small(const char *path, char *buf, size_t cap);
/* A path under --root: "etc/ld.so.preload" -> ROOT "/etc/ld.so.preload". */
void ts_rooted(char *out, size_t cap, const char *abs_path);
/* The word in brackets of a sysfs choice file ("always [madvise] never" -> "madvise");
 * the whole text when there are no brackets. */
void ts_selected(const char *text, char *out, size_t cap);
/* A path of the kernel's files the system view reads, "meminfo" -> "/proc/meminfo": under
 * $THP_STATUS_TEST_PROC instead of /proc when the test suite sets it (ignored in
 * secure execution), so that tests can feed figures no real machine has. */
void ts_proc_path(char *out, size_t cap, const char *rel);
/* True when the smaps "VmFlags:" line holds the two-letter flag (a whole token). */
bool ts_vmflag(const char *line, const char *flag);
/* "Key:   123 kB" lines: the number after key (kB as written), false when absent. */
bool ts_kv_kb(const char *text, const char *key, uint64_t *out);
/* "key 123" lines (vmstat). */
bool ts_kv_space(const char *text, const char *key, uint64_t *out);
/* 2097152 -> "2M", 4096 -> "4K" */
void ts_human_bytes(uint64_t bytes, char *buf, size_t cap);
const char *ts_errname(int err);

/* Opens path inside the directory rootfd as if it were / (symbolic links and ".." stay
 * inside it; without openat2 they are refused), and only a directory (dir) or a regular
 * file: never a FIFO or a device. Returns a descriptor for reading and fills *st, or -1
 * with *why saying why (static text). */
struct stat;
int ts_open_in_root(int rootfd, const char *path, bool dir, struct stat *st, const char **why);

/* The valid UTF-8 sequence at s: its length (1 to 4) and code point; 0 when s starts an
 * invalid one, which covers *skip bytes (its longest valid start, at least 1: one U+FFFD). */
size_t ts_utf8(const char *s, uint32_t *cp, size_t *skip);
/* Whether code point cp is one no output may carry raw: a control character (C0, DEL, C1),
 * or one a reader cannot see: a format character (general category Cf: bidirectional
 * marks, embeddings, overrides and isolates, which reorder what a terminal, browser or
 * dashboard shows after them, zero-width spaces and joiners, tags), a line or paragraph
 * separator, or a default-ignorable code point (U+034F, variation selectors, fillers). */
bool ts_unsafe(uint32_t cp);
/* s for a terminal: control characters (C0, DEL, C1), invisible characters (ts_unsafe) and
 * bytes that are not UTF-8 as \xHH, a backslash as \\. In one of 8 buffers used in turn (so that a
 * printf can take several); ts_text_max at most max bytes, cut between characters. */
const char *ts_text(const char *s);
const char *ts_text_max(const char *s, size_t max);

/* JSON writer to stdout: key is NULL inside arrays. */
void j_obj(const char *key);
void j_end(void); /* closes the innermost object or array */
void j_arr(const char *key);
void j_str(const char *key, const char *val); /* NULL: null */
void j_int(const char *key, long long v);
void j_u64(const char *key, uint64_t v);
void j_bool(const char *key, bool v);
void j_null(const char *key);
void j_num(const char *key, double v); /* finite only; use j_null otherwise */
void j_finish(void);                   /* newline after the top-level value */

/* Prometheus text format: prints # HELP / # TYPE the first time a family is seen. */
void p_family(const char *name, const char *type, const char *help);
/* labels: "k1", "v1", "k2", "v2", ..., NULL */
void p_sample(const char *name, double value, ...);
void p_reset(void);

/* ---- policy -------------------------------------------------------------------------- */

struct ts_problem {
    char file[256];
    int line;
    char msg[1024];
};
struct ts_problems {
    struct ts_problem *v;
    size_t n, cap;
};
void ts_problems_add(void *ctx, const char *file, int line, const char *msg);
void ts_problems_free(struct ts_problems *p);

/* The system configuration files under --root. */
void ts_conf_paths(char *file, size_t fcap, char *dir, size_t dcap);
/* Policy rows: text table or JSON array "policy". */
void ts_policy_text(const struct cfg_settings *s, const char *indent);
void ts_policy_json(const char *key, const struct cfg_settings *s);
void ts_where_text(const struct cfg_where *w, char *buf, size_t cap);

int ts_check(char **files, int nfiles);
/* The problems --check reports for the system's configuration (the health verdict's). */
void ts_config_problems(struct ts_problems *probs);
/* program NULL: --unit alone, any program of the unit. */
int ts_explain(const char *program, const char *unit, bool with_env);
int ts_check_value(const char *assignment);

/* ---- lint (thp-status-lint.c): what the resolver cannot see by itself ----------------- */

/* PROGRAM (a path, or a name found in PATH) as /proc/PID/exe will name it: symbolic links
 * resolved, a script's interpreter in its place. exe "" when not found; how says how it
 * was reached ("python3 is a symbolic link to ...", "" when PROGRAM is the executable). */
void ts_resolve_program(const char *program, char *exe, size_t cap, char *how, size_t hcap);
/* cfg_inputs.on_section: a section that can never match (ctx: struct ts_problems). */
void ts_lint_section(void *ctx, const char *file, int line, const char *kind, const char *name);
/* The system's file, drop-in directory and drop-ins: what some processes cannot read. */
void ts_lint_files(void *ctx, const char *conf, const char *dir);

/* ---- system view --------------------------------------------------------------------- */

int ts_system(void);

/* ---- process view -------------------------------------------------------------------- */

int ts_procs(char **pids, int npids);
int ts_all(void);

/* Test hook: THP_STATUS_TEST_PAUSE=STEP:MS sleeps MS milliseconds before STEP (e.g.
 * "smaps:2000"), after saying so on stderr, so that a test can kill the process then. */
void ts_test_pause(const char *step);

/* ---- capabilities -------------------------------------------------------------------- */

struct ts_caps {
    bool sys_ptrace, dac_read_search, perfmon; /* effective after the drop */
    bool perfmon_known;                        /* the kernel has CAP_PERFMON */
    bool bound_dropped;                        /* the bounding set was reduced */
    char note[256];                            /* what went wrong, if anything */
};
extern struct ts_caps ts_caps;
void ts_caps_drop(void);
/* /proc/PID/pagemap of the process whose /proc directory is dirfd, opened with CAP_SYS_ADMIN
 * where it is permitted (frame numbers shown), without it otherwise. */
int ts_open_pagemap(int dirfd);
/* What would allow reading a process that refused us with err (owner (uid_t)-1: processes
 * of other users in general, for --all). */
void ts_caps_advice(int err, uid_t owner, char *buf, size_t cap);

#endif
