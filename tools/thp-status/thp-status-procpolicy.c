/* thp-status: the policy of one process, as the library inside it would resolve it.
 *
 * The library reads SYSCONFDIR/thpalloc.conf and thpalloc.d/ *.conf (or the one file
 * THPALLOC_CONF names) in the process's own root, with the process's own credentials. So
 * does this: every file is opened inside the process's root (/proc/PID/root, or --root)
 * with ts_open_in_root, where an absolute link leads to the process's files, not to the
 * caller's, and a file the process could not read is left out, so that root never shows a
 * value from a file the process has no access to. The resolver is the library's own code
 * (lib/config.c), which lists the drop-ins and reads them through open_for_process; the
 * names shown are the real ones, inside the process's root. */
#include "thp-status-proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How the library's resolver opens the process's files (cfg_inputs.open_input). */
struct popen {
    const struct proc *p;
    int rootfd;
    bool secure;
    char walk[2][PATH_MAX];
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

/* A file (or the drop-in directory) of the process, opened inside its root: the library
 * itself (lib/config.c) lists the drop-ins, all of them, and reads each, as it does in the
 * process. In secure execution, through the same walk as the library's (root-owned
 * directories only); a file the process could not read is left out, as it would be, so that
 * root never shows a value from a file the process has no access to. */
static int open_for_process(void *ctx, const char *path, bool dir, const char **why)
{
    struct popen *o = ctx;
    struct stat st;
    int fd;
    if (o->secure) {
        fd = cfg_open_secure(o->rootfd, path, dir, 0, o->walk, why);
        if (fd >= 0 && fstat(fd, &st) != 0) {
            close(fd);
            fd = -1;
        }
    } else {
        fd = ts_open_in_root(o->rootfd, path, dir, &st, why);
        if (fd < 0)
            errno = *why && !strcmp(*why, "no such file") ? ENOENT : EINVAL;
    }
    if (fd >= 0 && !may_read(o->p, &st)) {
        close(fd);
        *why = NULL;
        errno = EACCES;
        return -1;
    }
    return fd;
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
    struct popen *o = calloc(1, sizeof *o);
    if (!o)
        return;
    char prefix[PATH_MAX];
    o->p = p;
    o->rootfd = open_root(p, prefix, sizeof prefix);
    o->secure = p->secure == 1;

    const char *prog = p->exe[0]    ? (strrchr(p->exe, '/') ? strrchr(p->exe, '/') + 1 : p->exe)
                       : p->cmd0[0] ? p->cmd0
                                    : p->name;
    char exe[PATH_MAX];
    snprintf(exe, sizeof exe, "%s", p->exe);
    char *del = strstr(exe, " (deleted)");
    if (del)
        *del = '\0';
    /* THPALLOC_CONF and secure execution: the resolver decides, from the environment */
    struct cfg_inputs in = {
        .exe = exe,
        .program = prog,
        .unit = p->unit,
        .envp = p->env_read ? p->env : NULL,
        .secure = o->secure,
        .ruid = p->ruid,
        .open_input = open_for_process,
        .open_ctx = o,
    };
    struct ts_problems probs = {0};
    if (o->rootfd >= 0)
        cfg_resolve(&p->pol, &in, ts_problems_add, &probs);
    else
        cfg_defaults(&p->pol);
    p->pol_problems = probs.n + (o->rootfd < 0);
    ts_problems_free(&probs);
    /* the names as the process has them, shown inside its root */
    for (int k = 0; k < CFG_NKEYS && prefix[0]; k++)
        if (p->pol.where[k].origin == CFG_FROM_FILE) {
            char shown[sizeof p->pol.where[k].file + PATH_MAX];
            snprintf(shown, sizeof shown, "%s%s", prefix, p->pol.where[k].file);
            cfg_str_copy(p->pol.where[k].file, sizeof p->pol.where[k].file, shown);
        }
    if (o->rootfd >= 0)
        close(o->rootfd);
    free(o);
    p->pol_ok = true;
}
