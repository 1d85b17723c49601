/* thp-status: the policy of one process, as the library inside it would resolve it.
 *
 * The library reads SYSCONFDIR/thpalloc.conf and thpalloc.d/ *.conf (or the one file
 * THPALLOC_CONF names) in the process's own root, with the process's own credentials. So
 * does this: every file is opened inside the process's root (/proc/PID/root, or --root)
 * with ts_open_in_root, where an absolute link leads to the process's files, not to the
 * caller's, and a file the process could not read is left out, so that root never shows a
 * value from a file the process has no access to. The resolver (lib/config.c, the
 * library's own code) then reads what was opened, through /proc/self/fd/N; the names
 * shown are the real ones. */
#include "thp-status-proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 66 /* thpalloc.conf and the library's 64 drop-ins, NULL */

struct pfiles {
    int rootfd;
    char prefix[PATH_MAX]; /* how the root is named in output: "", "/proc/PID/root", DIR */
    const char *path[MAX_FILES];
    char fdpath[MAX_FILES][32];
    char shown[MAX_FILES][PATH_MAX + 64];
    int fd[MAX_FILES];
    int n;
    int problems; /* files left out that the library would report too */
};

/* Whether the process's file-system identity may read (and for a directory, search) a
 * file of these owner and mode. Capabilities count only in our own user namespace: a
 * namespace's root has none over files it does not map. */
static bool may_read(const struct proc *p, const struct stat *st)
{
    if (p->dac_caps)
        return true;
    unsigned need = S_ISDIR(st->st_mode) ? 5 : 4, bits = st->st_mode & 7;
    bool group = st->st_gid == p->fsgid;
    for (int i = 0; i < p->ngroups && !group; i++)
        group = st->st_gid == p->groups[i];
    if (st->st_uid == p->fsuid)
        bits = (st->st_mode >> 6) & 7;
    else if (group)
        bits = (st->st_mode >> 3) & 7;
    return (bits & need) == need;
}

/* Opens a file for the resolver; a missing optional one is left out silently, as the
 * library does, anything else left out is a problem. */
static void pf_add(struct pfiles *f, const struct proc *p, const char *path, bool must_exist)
{
    if (f->n >= MAX_FILES - 1) {
        f->problems++;
        return;
    }
    struct stat st;
    const char *why;
    int fd = ts_open_in_root(f->rootfd, path, false, &st, &why);
    if (fd >= 0 && !may_read(p, &st)) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        if (must_exist || strcmp(why ? why : "", "no such file") != 0)
            f->problems++;
        return;
    }
    int i = f->n++;
    f->fd[i] = fd;
    snprintf(f->fdpath[i], sizeof f->fdpath[i], "/proc/self/fd/%d", fd);
    snprintf(f->shown[i], sizeof f->shown[i], "%s%s", f->prefix, path);
    f->path[i] = f->fdpath[i];
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b); /* bytewise, as the library */
}

/* The drop-ins: *.conf names not starting with a dot, in bytewise order, 64 at most. */
static void pf_dropins(struct pfiles *f, const struct proc *p, const char *dir)
{
    struct stat st;
    const char *why;
    int fd = ts_open_in_root(f->rootfd, dir, true, &st, &why);
    if (fd < 0 || !may_read(p, &st)) {
        if (fd >= 0)
            close(fd);
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".conf") != 0)
            continue;
        if (n == 64 || !(names[n] = strdup(e->d_name)))
            f->problems++;
        else
            n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        pf_add(f, p, path, false);
        free(names[i]);
    }
}

static const char *env_value(const struct proc *p, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < p->nenv; i++)
        if (!strncmp(p->env[i], name, n) && p->env[i][n] == '=')
            return p->env[i] + n + 1;
    return NULL;
}

/* The root the process's files are read in, and how it is named in the output. */
static int open_root(const struct proc *p, char *prefix, size_t cap)
{
    prefix[0] = '\0';
    if (ts_opt.root[0]) {
        ts_rooted(prefix, cap, "");
        return open(ts_opt.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    int fd = openat(p->dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat a, b;
    if (fd >= 0 && fstat(fd, &a) == 0 && stat("/", &b) == 0 &&
        (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
        snprintf(prefix, cap, "/proc/%d/root", (int)p->pid);
    /* unreadable: our own root, as before this process could be looked into */
    return fd >= 0 ? fd : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

void proc_resolve_policy(struct proc *p)
{
    struct pfiles *f = calloc(1, sizeof *f);
    if (!f)
        return;
    f->rootfd = open_root(p, f->prefix, sizeof f->prefix);
    bool secure = p->secure == 1;
    const char *conf_env = secure ? NULL : env_value(p, "THPALLOC_CONF");
    if (f->rootfd < 0) {
        f->problems++;
    } else if (conf_env && *conf_env) {
        pf_add(f, p, conf_env, true);
    } else {
        pf_add(f, p, SYSCONFDIR "/thpalloc.conf", false);
        pf_dropins(f, p, SYSCONFDIR "/thpalloc.d");
    }
    f->path[f->n] = NULL;

    const char *prog = p->exe[0]    ? (strrchr(p->exe, '/') ? strrchr(p->exe, '/') + 1 : p->exe)
                       : p->cmd0[0] ? p->cmd0
                                    : p->name;
    char exe[PATH_MAX];
    snprintf(exe, sizeof exe, "%s", p->exe);
    char *del = strstr(exe, " (deleted)");
    if (del)
        *del = '\0';
    struct cfg_inputs in = {
        .files = f->path,
        .exe = exe,
        .program = prog,
        .unit = p->unit,
        .envp = p->env_read ? p->env : NULL,
        .secure = secure,
        .ruid = p->ruid,
    };
    struct ts_problems probs = {0};
    cfg_resolve(&p->pol, &in, ts_problems_add, &probs);
    p->pol_problems = probs.n + (size_t)f->problems;
    ts_problems_free(&probs);
    for (int k = 0; k < CFG_NKEYS; k++)
        for (int i = 0; i < f->n; i++)
            if (p->pol.where[k].origin == CFG_FROM_FILE &&
                !strcmp(p->pol.where[k].file, f->path[i]))
                snprintf(p->pol.where[k].file, sizeof p->pol.where[k].file, "%s", f->shown[i]);
    for (int i = 0; i < f->n; i++)
        close(f->fd[i]);
    if (f->rootfd >= 0)
        close(f->rootfd);
    free(f);
    p->pol_ok = true;
}
