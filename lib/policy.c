/* policy: loads the administrator's policy once, on the first chunk-level event (a process
 * that never allocates a chunk never reads a file), into policy_in_force, which the arena and
 * the THP decision read, and publishes it: thpalloc_policy(), the introspection block
 * thp-status reads (introspect.c), and THPALLOC_VERBOSE. The statistics printed at exit
 * (stats = exit) are stats.c's. */
#include "config.h"
#include "policy.h"
#include "problem-log.h"
#include "thpalloc.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

extern char **environ;

/* The policy in force, read by every layer; written once, here, when it is resolved. */
struct policy policy_in_force = {
    .values = CFG_DEFAULT_VALUES,
    .trim_threshold = TRIM_THRESHOLD_DEFAULT,
    .trim_burst = TRIM_BURST_DEFAULT,
};

/* The resolved policy with each key's origin, for thpalloc_policy(): copied here only when
 * something but the defaults was read (a file, a variable), and in a section after .bss
 * (layout.ld), so that a process on the defaults never writes its 3 KiB: they pushed the
 * variables every process writes onto a second page (tests/footprint-idle.sh). */
static struct cfg_settings settings __attribute__((section(".bss.thp_rare")));
static bool settings_kept;
static _Atomic int load_state; /* 0 not loaded, 1 loading, 2 loaded */
static bool verbose;
static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER; /* policy_text's allocation */

TEXT_COLD
static void verbose_report(void *ctx, const char *file, int line, const char *msg)
{
    (void)ctx;
    char num[21];
    os_write_stderr("thpalloc: ");
    os_write_stderr(file);
    if (line > 0) {
        os_write_stderr(":");
        os_write_stderr(os_format_u64(num, (uint64_t)line));
    }
    os_write_stderr(": ");
    os_write_stderr(msg);
    os_write_stderr("\n");
}

/* Every problem goes to the system log's line (log_problems = syslog), and to stderr
 * under THPALLOC_VERBOSE. */
TEXT_COLD
static void policy_report(void *ctx, const char *file, int line, const char *msg)
{
    problem_log_note(ctx, file, line, msg);
    if (verbose)
        verbose_report(NULL, file, line, msg);
}

static bool env_is_one(const char *name)
{
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return strcmp(*e + n + 1, "1") == 0 || strcmp(*e + n + 1, "yes") == 0;
    return false;
}

static void say_policy(void)
{
    struct thpalloc_setting set[CFG_NKEYS];
    int n = thpalloc_policy(set, CFG_NKEYS);
    for (int k = 0; k < n; k++) {
        os_write_stderr("thpalloc: policy ");
        os_write_stderr(set[k].key);
        os_write_stderr(" = ");
        os_write_stderr(set[k].value);
        os_write_stderr(" (");
        os_write_stderr(set[k].origin);
        os_write_stderr(")\n");
    }
}

TEXT_COLD
void policy_say_passthrough(size_t pagesize)
{
    if (getauxval(AT_SECURE) != 0 || !env_is_one("THPALLOC_VERBOSE"))
        return;
    char num[21];
    os_write_stderr("thpalloc: the kernel's page size is ");
    os_write_stderr(os_format_u64(num, pagesize));
    os_write_stderr(" bytes, not 4096: every allocation goes to glibc's malloc\n");
}

/* Resolves the policy on the first chunk-level event (never at process start). */
void policy_ensure_loaded(void)
{
    if (likely(atomic_load_explicit(&load_state, memory_order_acquire) == 2))
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&load_state, &expected, 1)) {
        /* Another thread is reading the files (no allocation there, so never this one). */
        while (atomic_load_explicit(&load_state, memory_order_acquire) != 2)
            sched_yield();
        return;
    }
    int saved_errno = errno; /* a successful malloc leaves errno alone (files may be missing) */
    bool secure = getauxval(AT_SECURE) != 0;
    verbose = !secure && env_is_one("THPALLOC_VERBOSE");
    struct cfg_inputs in;
    memset(&in, 0, sizeof in);
    in.envp = environ;
    in.secure = secure;
    in.ruid = getuid();
    struct problem_log problems = {0};
    struct cfg_settings s;
    cfg_resolve(&s, &in, policy_report, &problems);
    if (s.log_problems && problems.n)
        problem_log_send(&problems);
    for (int k = 0; k < CFG_NKEYS; k++) {
        if (s.where[k].origin != CFG_FROM_DEFAULT) {
            settings = s;
            settings_kept = true;
            break;
        }
    }
    /* memcpy: the readers see these bytes under struct policy's own names (types.h) */
    memcpy(&policy_in_force.values, &s.values, sizeof s.values);
    introspect_set_policy(&s.values);
    atomic_store_explicit(&load_state, 2, memory_order_release);
    if (verbose)
        say_policy();
    errno = saved_errno;
}

TEXT_BUSY
void policy_fork(enum fork_phase phase)
{
    /* init.c's table names this hook for both: the two locks never nest */
    if (phase == FORK_PREPARE) {
        fork_mutex(&text_lock, phase);
        introspect_fork(phase);
    } else {
        introspect_fork(phase);
        fork_mutex(&text_lock, phase);
    }
}

/* ---- thpalloc_policy() ------------------------------------------------------------------ */

/* The strings thpalloc_policy() hands out, from the meta pool on its first call: static,
 * their 2.6 KiB sat among the globals every process writes and cost one of them a page. */
struct policy_text {
    char values[CFG_NKEYS][32];
    char origins[CFG_NKEYS][400];
};
static struct policy_text *policy_text;

/* "default", "environment THPALLOC_THP", or "FILE:LINE [SECTION]". */
static void format_origin(const struct cfg_where *w, char *o, size_t cap)
{
    o[0] = '\0';
    if (w->origin == CFG_FROM_DEFAULT) {
        strncat(o, "default", cap - 1);
        return;
    }
    if (w->origin == CFG_FROM_ENV) {
        strncat(o, "environment ", cap - 1);
        strncat(o, w->file, cap - strlen(o) - 1);
        return;
    }
    char num[21];
    os_format_u64(num, (uint64_t)w->line);
    strncat(o, w->file, cap - 1);
    strncat(o, ":", cap - strlen(o) - 1);
    strncat(o, num, cap - strlen(o) - 1);
    strncat(o, " [", cap - strlen(o) - 1);
    strncat(o, w->section, cap - strlen(o) - 1);
    strncat(o, "]", cap - strlen(o) - 1);
}

TEXT_COLD
API int thpalloc_policy(struct thpalloc_setting *out, size_t n)
{
    policy_ensure_loaded();
    pthread_mutex_lock(&text_lock);
    if (!policy_text)
        policy_text = meta_alloc(sizeof *policy_text);
    pthread_mutex_unlock(&text_lock);
    if (!policy_text) {
        errno = ENOMEM;
        return -1;
    }
    struct cfg_settings defaults;
    const struct cfg_settings *s = &settings;
    /* on the defaults (nothing kept), or another thread is still reading the files */
    if (atomic_load_explicit(&load_state, memory_order_acquire) != 2 || !settings_kept) {
        cfg_defaults(&defaults);
        s = &defaults;
    }
    for (size_t k = 0; k < CFG_NKEYS && k < n; k++) {
        char *value = policy_text->values[k], *origin = policy_text->origins[k];
        cfg_format_value(s, (enum cfg_key)k, value, sizeof policy_text->values[k]);
        format_origin(&s->where[k], origin, sizeof policy_text->origins[k]);
        out[k].key = cfg_key_name((enum cfg_key)k);
        out[k].value = value;
        out[k].origin = origin;
    }
    return CFG_NKEYS;
}
