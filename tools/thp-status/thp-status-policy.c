/* thp-status: the policy (--check, --explain, and the policy tables of the other views).
 * Everything goes through the library's own resolver (lib/config.c), so the tool and the
 * library cannot disagree. */
#include "thp-status.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

void ts_problems_add(void *ctx, const char *file, int line, const char *msg)
{
    struct ts_problems *p = ctx;
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 16;
        struct ts_problem *nv = realloc(p->v, nc * sizeof *nv);
        if (!nv)
            return;
        p->v = nv;
        p->cap = nc;
    }
    struct ts_problem *e = &p->v[p->n++];
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    e->line = line;
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
}

void ts_problems_free(struct ts_problems *p)
{
    free(p->v);
    p->v = NULL;
    p->n = p->cap = 0;
}

void ts_conf_paths(char *file, size_t fcap, char *dir, size_t dcap)
{
    ts_rooted(file, fcap, SYSCONFDIR "/thpalloc.conf");
    ts_rooted(dir, dcap, SYSCONFDIR "/thpalloc.d");
}

void ts_where_text(const struct cfg_where *w, char *buf, size_t cap)
{
    switch (w->origin) {
    case CFG_FROM_FILE:
        snprintf(buf, cap, "%s:%d [%s]", w->file, w->line, w->section);
        break;
    case CFG_FROM_ENV:
        snprintf(buf, cap, "environment %s", w->file);
        break;
    default:
        snprintf(buf, cap, "default");
    }
}

static const char *origin_name(enum cfg_origin o)
{
    return o == CFG_FROM_FILE ? "file" : o == CFG_FROM_ENV ? "environment" : "default";
}

void ts_policy_text(const struct cfg_settings *s, const char *indent)
{
    for (int k = 0; k < CFG_NKEYS; k++) {
        char val[64], where[512];
        cfg_format_value(s, (enum cfg_key)k, val, sizeof val);
        ts_where_text(&s->where[k], where, sizeof where);
        printf("%s%-14s %-9s %s\n", indent, cfg_key_name((enum cfg_key)k), val, ts_text(where));
    }
}

void ts_policy_json(const char *key, const struct cfg_settings *s)
{
    j_arr(key);
    for (int k = 0; k < CFG_NKEYS; k++) {
        const struct cfg_where *w = &s->where[k];
        char val[64];
        cfg_format_value(s, (enum cfg_key)k, val, sizeof val);
        j_obj(NULL);
        j_str("key", cfg_key_name((enum cfg_key)k));
        j_str("value", val);
        j_str("origin", origin_name(w->origin));
        if (w->origin == CFG_FROM_FILE) {
            j_str("file", w->file);
            j_int("line", w->line);
            j_str("section", w->section);
        } else if (w->origin == CFG_FROM_ENV) {
            j_str("variable", w->file);
        }
        j_end();
    }
    j_end();
}

/* What --check finds in files (list, NULL-terminated), or in the system's configuration
 * (list NULL): every section, whatever it applies to, and who can read the files. */
static void check_files(const char **list, struct ts_problems *probs)
{
    char conf[PATH_MAX], dir[PATH_MAX];
    ts_conf_paths(conf, sizeof conf, dir, sizeof dir);
    struct cfg_inputs in = {
        .conf_file = conf,
        .conf_dir = dir,
        .files = list,
        .exe = "",
        .program = "",
        .unit = "",
        .ruid = getuid(),
        .check_all = true,
        .on_section = ts_lint_section,
    };
    struct cfg_settings s;
    cfg_resolve(&s, &in, ts_problems_add, probs);
    if (!list)
        ts_lint_files(probs, conf, dir);
}

void ts_config_problems(struct ts_problems *probs)
{
    check_files(NULL, probs);
}

/* The array key of problems as JSON objects: file, the line (with_line), message. */
static void problems_json(const char *key, const struct ts_problems *p, bool with_line)
{
    j_arr(key);
    for (size_t i = 0; i < p->n; i++) {
        j_obj(NULL);
        j_str("file", p->v[i].file);
        if (with_line)
            j_int("line", p->v[i].line);
        j_str("message", p->v[i].msg);
        j_end();
    }
    j_end();
}

int ts_check(char **files, int nfiles)
{
    char conf[PATH_MAX], dir[PATH_MAX];
    ts_conf_paths(conf, sizeof conf, dir, sizeof dir);
    const char **list = NULL;
    if (nfiles > 0) {
        list = calloc((size_t)nfiles + 1, sizeof *list);
        if (!list) {
            fprintf(stderr, "thp-status: out of memory\n");
            return 1;
        }
        for (int i = 0; i < nfiles; i++)
            list[i] = files[i];
    }
    struct ts_problems probs = {0};
    check_files(list, &probs);
    int rc = probs.n ? 1 : 0;

    if (ts_opt.format == TS_JSON) {
        j_obj(NULL);
        j_str("schema", TS_SCHEMA);
        j_obj("check");
        j_arr("files");
        if (nfiles > 0) {
            for (int i = 0; i < nfiles; i++)
                j_str(NULL, files[i]);
        } else {
            j_str(NULL, conf);
            j_str(NULL, dir);
        }
        j_end();
        j_bool("ok", probs.n == 0);
        problems_json("problems", &probs, true);
        j_end();
        j_end();
        j_finish();
    } else {
        for (size_t i = 0; i < probs.n; i++) {
            if (probs.v[i].line > 0)
                printf("%s:%d: %s\n", ts_text(probs.v[i].file), probs.v[i].line,
                       ts_text(probs.v[i].msg));
            else
                printf("%s: %s\n", ts_text(probs.v[i].file), ts_text(probs.v[i].msg));
        }
        if (nfiles > 0)
            printf("%zu problem%s in %d file%s\n", probs.n, probs.n == 1 ? "" : "s", nfiles,
                   nfiles == 1 ? "" : "s");
        else
            printf("%zu problem%s in %s and %s/*.conf\n", probs.n, probs.n == 1 ? "" : "s",
                   ts_text(conf), ts_text(dir));
    }
    ts_problems_free(&probs);
    free(list);
    return rc;
}

int ts_explain(const char *program, const char *unit, bool with_env)
{
    char conf[PATH_MAX], dir[PATH_MAX], exe[PATH_MAX] = "", how[2 * PATH_MAX + 64] = "";
    ts_conf_paths(conf, sizeof conf, dir, sizeof dir);
    const char *name = ""; /* no program (--unit alone): no [program] or [path] applies */
    if (program) {
        /* The name /proc/PID/exe will give: python3 runs as python3.11. */
        ts_resolve_program(program, exe, sizeof exe, how, sizeof how);
        name = exe[0]                  ? strrchr(exe, '/') + 1
               : strrchr(program, '/') ? strrchr(program, '/') + 1
                                       : program;
    }
    struct cfg_inputs in = {
        .conf_file = conf,
        .conf_dir = dir,
        .exe = exe,
        .program = name,
        .unit = unit ? unit : "",
        .envp = with_env ? environ : NULL,
        .ruid = 0, /* the files a service started by root would trust */
    };
    struct cfg_settings s;
    struct ts_problems probs = {0}, warn = {0};
    cfg_resolve(&s, &in, ts_problems_add, &probs);
    /* What the table above cannot show: files that processes of other users cannot read. */
    ts_lint_files(&warn, conf, dir);

    if (ts_opt.format == TS_JSON) {
        j_obj(NULL);
        j_str("schema", TS_SCHEMA);
        j_obj("explain");
        j_str("program", program ? name : NULL);
        j_str("given", program);
        j_str("resolved", how[0] ? how : NULL);
        j_str("exe", exe[0] ? exe : NULL);
        j_str("unit", unit && *unit ? unit : NULL);
        j_bool("environment", with_env);
        ts_policy_json("policy", &s);
        j_int("problems", (long long)probs.n);
        problems_json("warnings", &warn, false);
        j_end();
        j_end();
        j_finish();
    } else {
        if (program) {
            if (how[0])
                printf("program      %s (%s)\n", ts_text(name), ts_text(how));
            else
                printf("program      %s\n", ts_text(name));
            printf("executable   %s\n", exe[0] ? ts_text(exe)
                                               : "(not found in PATH: [path ...] sections "
                                                 "cannot match)");
        } else {
            printf("program      (any: [program ...] and [path ...] sections not applied)\n");
        }
        printf("unit         %s\n", unit && *unit ? ts_text(unit) : "(none)");
        printf("environment  %s\n",
               with_env ? "THPALLOC_* of this shell"
                        : "not considered (--environment to add this shell's THPALLOC_*)");
        printf("policy\n");
        ts_policy_text(&s, "  ");
        if (probs.n)
            printf("note: the configuration has %zu problem%s (skipped above): run thp-status "
                   "--check\n",
                   probs.n, probs.n == 1 ? "" : "s");
        for (size_t i = 0; i < warn.n; i++)
            printf("warning: %s: %s\n", ts_text(warn.v[i].file), ts_text(warn.v[i].msg));
    }
    ts_problems_free(&probs);
    ts_problems_free(&warn);
    return 0;
}

/* --check-value KEY=VALUE: VALUE read as the library reads THPALLOC_<KEY>, by the resolver
 * itself, so that thpalloc-run's options follow the one grammar. Prints the assignment
 * (exit 0) or the problem (exit 1); a KEY that is no key is a usage error (exit 2). */
int ts_check_value(const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    char *name = strndup(assignment, eq ? (size_t)(eq - assignment) : strlen(assignment));
    int k = name ? cfg_key_lookup(name) : -1;
    free(name);
    if (!eq || k < 0) {
        char keys[128];
        cfg_key_list(keys, sizeof keys);
        fprintf(stderr,
                "thp-status: --check-value: expected KEY=VALUE, KEY one of %s: '%s'\n"
                "Try 'thp-status --help' for more information.\n",
                keys, assignment);
        return 2;
    }
    char *env = NULL;
    if (asprintf(&env, "%s=%s", cfg_keys[k].env, eq + 1) < 0) {
        fprintf(stderr, "thp-status: out of memory\n");
        return 1;
    }
    char *envp[] = {env, NULL};
    const char *no_files[] = {NULL};
    struct cfg_inputs in = {
        .files = no_files,
        .exe = "",
        .program = "",
        .unit = "",
        .envp = envp,
        .check_all = true,
    };
    struct cfg_settings s;
    struct ts_problems probs = {0};
    cfg_resolve(&s, &in, ts_problems_add, &probs);
    /* A rejected value is an error: on stderr with the program's name (util-linux), the
     * assignment alone on stdout when it is good (thpalloc-run exports it). */
    int rc = probs.n ? 1 : 0;
    for (size_t i = 0; i < probs.n; i++)
        fprintf(stderr, "thp-status: --check-value: %s\n", probs.v[i].msg);
    if (!probs.n)
        printf("%s\n", env);
    ts_problems_free(&probs);
    free(env);
    return rc;
}
