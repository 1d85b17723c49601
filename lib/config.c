/* config: resolves the policy from files, sections and the environment (see config.h): the
 * files read (trusted, drop-ins in order) and the environment applied over them; the text
 * of each is parsed by config-parse.c, opened securely by config-open.c, and the keys and
 * their grammars are config-keys.c. Runs inside every process that allocates,
 * possibly before libc is fully set up: only open/read/getdents64/readlink, fixed buffers,
 * and inih with its stack line buffer. */
#include "config-ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- files ---------------------------------------------------------------------------- */

static bool scratch_get(struct ctx *c)
{
    if (!c->scratch)
        c->scratch = os_reserve_aligned(sizeof(struct scratch), 4096, OS_RESERVE_NORESERVE);
    return c->scratch != NULL;
}

/* The file or directory path, opened as the inputs say: through thp-status's hook, by
 * the secure walk in secure execution, else plainly. */
static int open_input(struct ctx *c, const char *path, bool dir, const char **why)
{
    *why = NULL;
    if (c->in->open_input)
        return c->in->open_input(c->in->open_ctx, path, dir, why);
    if (c->in->secure) {
        if (!scratch_get(c)) {
            errno = ENOMEM;
            return -1;
        }
        return cfg_open_secure(-1, path, dir, 0, c->scratch->walk, why);
    }
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (dir ? O_DIRECTORY : 0));
}

/* thp-status --check of the system's files: would a setuid program read path? Said as a
 * problem when not, so that --check and the library decide alike. The tree's root is
 * what comes before SYSCONFDIR in conf_file (thp-status --root), else "/". */
static void check_secure(struct ctx *c, const char *path)
{
    static const char suffix[] = SYSCONFDIR "/thpalloc.conf";
    const char *conf = c->in->conf_file;
    if (!c->in->check_all || c->in->files || c->in->secure || c->in->open_input || !conf ||
        !scratch_get(c))
        return;
    size_t cl = strlen(conf), sl = sizeof suffix - 1, rl = cl >= sl ? cl - sl : 0;
    if (cl < sl || strcmp(conf + rl, suffix) != 0 || strncmp(path, conf, rl) != 0)
        return;
    int rootfd = -1;
    if (rl) {
        cfg_str_copy(c->scratch->walk[0], rl + 1, conf);
        rootfd = open(c->scratch->walk[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
            return;
    }
    const char *why;
    int fd = cfg_open_secure(rootfd, path + rl, false, c->in->ruid, c->scratch->walk, &why);
    int e = errno;
    if (rootfd >= 0)
        close(rootfd);
    if (fd >= 0)
        close(fd);
    else if (e != ENOENT)
        cfg_problem(c, path, 0,
                    e == EPERM   ? "a directory on its path is not owned by root (or you) or is "
                                   "writable by group or others"
                    : e == ELOOP ? "too many levels of symbolic links on its path"
                                 : "cannot be opened through its path",
                    ": setuid/setcap programs ignore it", NULL);
}

/* Reads a trusted regular file into the scratch buffer. */
static bool read_trusted(struct ctx *c, const char *path, bool must_exist)
{
    const char *why;
    int fd = open_input(c, path, false, &why);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !must_exist)
            return false;
        if (c->in->secure && e == EPERM && why)
            cfg_problem(c, path, 0, why, " (required in setuid/setcap programs): ignored", NULL);
        else
            cfg_problem(c, path, 0, "cannot open",
                        why           ? ": "
                        : e == ENOENT ? ": no such file"
                        : e == ELOOP  ? ": too many levels of symbolic links"
                        : e == EACCES ? ": permission denied"
                                      : NULL,
                        why);
        return false;
    }
    struct stat st;
    bool ok = fstat(fd, &st) == 0;
    if (ok && !S_ISREG(st.st_mode)) {
        cfg_problem(c, path, 0,
                    S_ISDIR(st.st_mode) ? "is a directory, not a file: ignored"
                                        : "not a regular file: ignored",
                    NULL, NULL);
        ok = false;
    } else if (ok && st.st_uid != 0 && (c->in->secure || st.st_uid != c->in->ruid)) {
        cfg_problem(c, path, 0,
                    c->in->secure
                        ? "not owned by root (required in setuid/setcap programs): ignored"
                        : "not owned by root or by the user running the program: ignored",
                    NULL, NULL);
        ok = false;
    } else if (ok && (st.st_mode & (S_IWGRP | S_IWOTH))) {
        cfg_problem(c, path, 0, "writable by group or others: not trusted, ignored (chmod go-w)",
                    NULL, NULL);
        ok = false;
    } else if (ok && (size_t)st.st_size >= MAX_FILE) {
        cfg_problem(c, path, 0, "larger than 64 KiB: ignored", NULL, NULL);
        ok = false;
    }
    if (!ok || !scratch_get(c)) {
        close(fd);
        return false;
    }
    check_secure(c, path);
    size_t len = os_read_fd(fd, c->scratch->file, MAX_FILE);
    close(fd);
    c->buf = c->scratch->file;
    c->len = len;
    return true;
}

static void parse_file(struct ctx *c, const char *path, bool must_exist)
{
    if (!read_trusted(c, path, must_exist))
        return;
    c->path = path;
    c->pos = 0;
    c->line = 0;
    cfg_section_enter(c, SECT_GLOBAL, "", 0); /* keys before the first header */
    ini_parse_stream(cfg_next_line, c, cfg_on_key, c);
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* The next batch of *.conf names of the directory open at fd, sorted bytewise (lexical, as
 * in systemd and sudo): the MAX_DROPINS smallest names after `after` ("" at first). One
 * pass over the directory per batch keeps any number of files in fixed memory. */
static int list_dropins(struct ctx *c, int fd, const char *after)
{
    char(*names)[NAME_CAP] = c->scratch->names;
    int count = 0;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, c->scratch->dents, sizeof c->scratch->dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(c->scratch->dents + off);
            off += d->d_reclen;
            size_t len = strlen(d->d_name); /* at most NAME_MAX (255) */
            if (d->d_name[0] == '.' || len < 6 || strcmp(d->d_name + len - 5, ".conf") != 0 ||
                strcmp(d->d_name, after) <= 0)
                continue;
            if (count == MAX_DROPINS && strcmp(names[count - 1], d->d_name) < 0)
                continue; /* for a later batch */
            int i = count < MAX_DROPINS ? count++ : MAX_DROPINS - 1;
            while (i > 0 && strcmp(names[i - 1], d->d_name) > 0) {
                memcpy(names[i], names[i - 1], NAME_CAP);
                i--;
            }
            cfg_str_copy(names[i], NAME_CAP, d->d_name);
        }
    }
    return count;
}

/* Every *.conf file of dir, in lexical order. */
static void parse_dropins(struct ctx *c, const char *dir)
{
    const char *why;
    int fd = open_input(c, dir, true, &why); /* each file is walked again on its own */
    if (fd < 0)
        return;
    char last[NAME_CAP] = "";
    int n = scratch_get(c) ? MAX_DROPINS : 0;
    while (n == MAX_DROPINS) {
        n = list_dropins(c, fd, last);
        for (int i = 0; i < n; i++) {
            char *path = c->scratch->path;
            path[0] = '\0';
            cfg_str_cat(path, sizeof c->scratch->path, dir);
            cfg_str_cat(path, sizeof c->scratch->path, "/");
            cfg_str_cat(path, sizeof c->scratch->path, c->scratch->names[i]);
            if (strlen(path) + 1 == sizeof c->scratch->path)
                cfg_problem(c, dir, 0, "a *.conf file's path is too long: ignored", NULL, NULL);
            else
                parse_file(c, path, false); /* reuses the file buffer, not the name list */
        }
        if (n)
            cfg_str_copy(last, sizeof last, c->scratch->names[n - 1]);
    }
    close(fd);
}

static const char *env_lookup(char *const *envp, const char *name)
{
    if (!envp)
        return NULL;
    size_t n = strlen(name);
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int cfg_resolve(struct cfg_settings *s, const struct cfg_inputs *in, cfg_report_fn report,
                void *rctx)
{
    struct ctx c;
    /* not memset, see struct ctx: exe and unit are written by resolve_exe/resolve_unit */
    c.s = s;
    c.in = in;
    c.report = report;
    c.rctx = rctx;
    c.problems = 0;
    c.path = c.buf = NULL;
    c.len = c.pos = 0;
    c.line = 0;
    c.exe_done = c.unit_done = false;
    c.program = NULL;
    c.sect_label[0] = '\0';
    c.sect_type = (enum sect_type)0; /* before any section */
    c.sect_applies = false;
    c.scratch = NULL;
    cfg_defaults(s);

    /* inih's knobs are globals of our private copy: set them for our syntax, each only
     * where it differs (in the preloaded library, a write to a page of inih's .bss would
     * cost every process a private page). */
#define INI_SET(var, value)                                                                        \
    do {                                                                                           \
        if ((var) != (value))                                                                      \
            (var) = (value);                                                                       \
    } while (0)
    INI_SET(ini_allow_multiline, false);
    INI_SET(ini_allow_inline_comments, true);
    INI_SET(ini_use_stack, true);
    INI_SET(ini_stop_on_first_error, false);
#undef INI_SET
    if (!ini_inline_comment_prefixes || strcmp(ini_inline_comment_prefixes, ";#") != 0)
        ini_inline_comment_prefixes = ";#";
    if (!ini_start_comment_prefixes || strcmp(ini_start_comment_prefixes, ";#") != 0)
        ini_start_comment_prefixes = ";#";

    char *const *envp = in->secure ? NULL : in->envp;
    const char *conf_env = env_lookup(envp, "THPALLOC_CONF");
    if (in->files) {
        for (const char *const *f = in->files; *f; f++)
            parse_file(&c, *f, true);
    } else if (conf_env && *conf_env) {
        parse_file(&c, conf_env, true);
    } else {
        parse_file(&c, in->conf_file ? in->conf_file : SYSCONFDIR "/thpalloc.conf", false);
        parse_dropins(&c, in->conf_dir ? in->conf_dir : SYSCONFDIR "/thpalloc.d");
    }
    for (int k = 0; k < CFG_NKEYS; k++) {
        const char *v = env_lookup(envp, cfg_keys[k].env);
        if (v)
            cfg_set_key(&c, (enum cfg_key)k, v, 5, CFG_FROM_ENV, cfg_keys[k].env, 0, "environment",
                        true);
    }
    if (c.scratch)
        os_release(c.scratch, sizeof(struct scratch));
    return c.problems;
}
