/* thp-status: what the resolver cannot see by itself. A process is named by what
 * /proc/PID/exe says (symbolic links resolved, a script's interpreter in its place), so
 * --explain resolves a name that way, and --check reports sections that can never match
 * and files that some processes cannot read (the library, running as them, would skip them
 * with "cannot open: permission denied" or never list them). */
#include "thp-status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* NAME as execvp would find it: a path as it is (there or not: a policy may be explained
 * for a program this machine lacks), else the first executable regular file of that name
 * in PATH. */
static bool find_in_path(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return true;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0 && n + strlen(name) + 2 <= cap) {
            snprintf(out, cap, "%.*s/%s", (int)n, p, name);
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
                return true;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    out[0] = '\0';
    return false;
}

/* The interpreter a "#!" script runs (with "env NAME", NAME found in PATH), into out. */
static bool script_interpreter(const char *file, char *out, size_t cap)
{
    /* Only a regular file is read: a FIFO named on the command line must not block us. */
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    struct stat st;
    char line[256];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, line, sizeof line - 1) : -1;
    close(fd);
    if (n < 2 || strncmp(line, "#!", 2) != 0)
        return false;
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0'; /* the #! line only */
    char *save = NULL, *interp = strtok_r(line + 2, " \t\r\n", &save);
    if (!interp)
        return false;
    if (!strcmp(base_of(interp), "env")) {
        char *arg = strtok_r(NULL, " \t\r\n", &save);
        if (arg && !strcmp(arg, "-S"))
            arg = strtok_r(NULL, " \t\r\n", &save);
        if (arg && arg[0] != '-' && !strchr(arg, '='))
            return find_in_path(arg, out, cap);
    }
    snprintf(out, cap, "%s", interp);
    return true;
}

void ts_resolve_program(const char *program, char *exe, size_t cap, char *how, size_t hcap)
{
    exe[0] = how[0] = '\0';
    char found[PATH_MAX], real[PATH_MAX];
    if (!find_in_path(program, found, sizeof found))
        return;
    /* The kernel follows up to 4 levels of interpreters that are scripts themselves. */
    for (int depth = 0;; depth++) {
        if (!realpath(found, real))
            snprintf(real, sizeof real, "%s", found);
        char interp[PATH_MAX];
        if (depth == 4 || !script_interpreter(real, interp, sizeof interp))
            break;
        if (!how[0])
            snprintf(how, hcap, "%s is a script run by %s", program, interp);
        snprintf(found, sizeof found, "%s", interp);
    }
    snprintf(exe, cap, "%s", real);
    struct stat st;
    if (!how[0] && strcmp(found, real) != 0)
        snprintf(how, hcap, "%s %s %s", found,
                 lstat(found, &st) == 0 && S_ISLNK(st.st_mode) ? "is a symbolic link to"
                                                               : "leads through symbolic links to",
                 real);
}

/* [unit NAME]: the library compares NAME with the .service or .scope it finds in
 * /proc/PID/cgroup, suffix and all. */
static void lint_unit(void *ctx, const char *file, int line, const char *name)
{
    static const char *const other[] = {".socket", ".device", ".mount", ".automount", ".swap",
                                        ".target", ".path",   ".timer", ".slice"};
    char msg[3 * PATH_MAX];
    const char *dot = strrchr(name, '.');
    if (dot && (!strcmp(dot, ".service") || !strcmp(dot, ".scope"))) {
        if (dot == name || dot[-1] != '@')
            return;
        snprintf(msg, sizeof msg,
                 "[unit %s] never matches: a template runs no process, its instances do: did "
                 "you mean [unit %.*sINSTANCE%s]?",
                 name, (int)(dot - name), name, dot);
    } else {
        bool runs_none = false;
        for (size_t i = 0; dot && i < sizeof other / sizeof *other; i++)
            runs_none |= !strcmp(dot, other[i]);
        if (runs_none)
            snprintf(msg, sizeof msg,
                     "[unit %s] never matches: processes run in .service and .scope units only",
                     name);
        else
            snprintf(msg, sizeof msg,
                     "[unit %s] never matches: a unit is named with its type, as in "
                     "/proc/PID/cgroup: did you mean [unit %s.service]?",
                     name, name);
    }
    ts_problems_add(ctx, file, line, msg);
}

/* [program NAME] is compared with the file name of /proc/PID/exe, [path /EXE] with the
 * whole of it: neither ever equals a symbolic link or a script. */
static void lint_program(void *ctx, const char *file, int line, const char *kind, const char *name)
{
    char msg[4 * PATH_MAX], exe[PATH_MAX], how[2 * PATH_MAX + 64];
    bool path = !strcmp(kind, "path");
    if (!path && strchr(name, '/')) {
        ts_resolve_program(name, exe, sizeof exe, how, sizeof how);
        snprintf(msg, sizeof msg,
                 "[program %s] never matches: a program section names the executable's file "
                 "name, not a path: did you mean [program %s] (or [path %s])?",
                 name, base_of(exe[0] ? exe : name), exe[0] ? exe : name);
        ts_problems_add(ctx, file, line, msg);
        return;
    }
    ts_resolve_program(name, exe, sizeof exe, how, sizeof how);
    /* "nginx.service" names a unit, not an executable (unless one is called that). */
    const char *dot = strrchr(name, '.');
    if (!path && !exe[0] && dot && dot != name &&
        (!strcmp(dot, ".service") || !strcmp(dot, ".scope"))) {
        snprintf(msg, sizeof msg,
                 "[program %s] never matches: %s is a systemd unit, and a program section "
                 "names an executable's file name: did you mean [unit %s]?",
                 name, name, name);
        ts_problems_add(ctx, file, line, msg);
        return;
    }
    if (!exe[0] || !how[0] || (path ? !strcmp(exe, name) : !strcmp(base_of(exe), name)))
        return;
    snprintf(msg, sizeof msg,
             "[%s %s] never matches here: %s, and a process is named by its executable "
             "(/proc/PID/exe): did you mean [%s %s]?",
             kind, name, how, kind, path ? exe : base_of(exe));
    ts_problems_add(ctx, file, line, msg);
}

void ts_lint_section(void *ctx, const char *file, int line, const char *kind, const char *name)
{
    if (!strcmp(kind, "unit"))
        lint_unit(ctx, file, line, name);
    else
        lint_program(ctx, file, line, kind, name);
}

/* ---- who can read the files ---------------------------------------------------------- */

/* name, or "uid 1000" (kind "uid") where the id has none. */
static const char *id_name(const char *name, const char *kind, unsigned id, char *buf, size_t cap)
{
    if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%s %u", kind, id);
    return buf;
}

static const char *user_name(uid_t uid, char *buf, size_t cap)
{
    struct passwd *pw = getpwuid(uid);
    return id_name(pw ? pw->pw_name : NULL, "uid", (unsigned)uid, buf, cap);
}

static const char *group_name(gid_t gid, char *buf, size_t cap)
{
    struct group *gr = getgrgid(gid);
    return id_name(gr ? gr->gr_name : NULL, "gid", (unsigned)gid, buf, cap);
}

/* The library runs as each process's user: one that is neither the owner of a file nor in
 * its group reads it through the "other" bits only, and reaches it only through
 * directories whose "other" bits let it search them. path is under the --root prefix, and
 * what lies above the root is not looked at. False when some process could not read it. */
static bool lint_reach(void *ctx, const char *path, bool dir)
{
    char msg[2 * PATH_MAX + 512], root[PATH_MAX], prefix[PATH_MAX], u[64], g[64];
    ts_rooted(root, sizeof root, "");
    size_t rl = strlen(root);
    struct stat st;
    int serr = stat(path, &st) == 0 ? 0 : errno;
    if (serr == ENOENT)
        return true; /* missing: the library skips it for everyone alike */
    for (size_t i = rl; path[i]; i++) {
        if (path[i] != '/' && i != rl)
            continue;
        snprintf(prefix, sizeof prefix, "%.*s", (int)(i ? i : 1), path);
        struct stat ds;
        if (stat(prefix, &ds) == 0 && S_ISDIR(ds.st_mode) && !(ds.st_mode & S_IXOTH)) {
            snprintf(msg, sizeof msg,
                     "directory %s (mode %04o, owner %s, group %s) is not searchable by other "
                     "users: their processes cannot %s and run without %s (chmod o+x %s)",
                     prefix, (unsigned)(ds.st_mode & 07777), user_name(ds.st_uid, u, sizeof u),
                     group_name(ds.st_gid, g, sizeof g),
                     dir ? "read this directory's drop-ins" : "open this file",
                     dir ? "them" : "its settings", prefix);
            ts_problems_add(ctx, path, 0, msg);
            return false;
        }
    }
    if (serr) { /* a --check run by a user who cannot reach it either */
        snprintf(msg, sizeof msg, "cannot be examined: %s", strerror(serr));
        ts_problems_add(ctx, path, 0, msg);
        return false;
    }
    unsigned need = dir ? (S_IROTH | S_IXOTH) : S_IROTH;
    if ((st.st_mode & need) != need) {
        snprintf(msg, sizeof msg,
                 "mode %04o (owner %s, group %s): processes of other users cannot %s "
                 "(\"cannot open: permission denied\") and run without %s (chmod %s)",
                 (unsigned)(st.st_mode & 07777), user_name(st.st_uid, u, sizeof u),
                 group_name(st.st_gid, g, sizeof g), dir ? "read its drop-ins" : "read it",
                 dir ? "them" : "its settings", dir ? "a+rx" : "a+r");
        ts_problems_add(ctx, path, 0, msg);
        return false;
    }
    /* Owned by another user than root or us, the resolver has said so already. */
    if (!dir && st.st_uid != 0 && st.st_uid == getuid()) {
        snprintf(msg, sizeof msg,
                 "owned by %s, not root: processes of other users ignore it (chown root)",
                 user_name(st.st_uid, u, sizeof u));
        ts_problems_add(ctx, path, 0, msg);
        return false;
    }
    return true;
}

static int cmp_bytes(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name); /* bytewise, as the library */
}

static int is_dropin(const struct dirent *e)
{
    size_t len = strlen(e->d_name);
    return e->d_name[0] != '.' && len >= 6 && !strcmp(e->d_name + len - 5, ".conf");
}

void ts_lint_files(void *ctx, const char *conf, const char *dir)
{
    lint_reach(ctx, conf, false);
    if (!lint_reach(ctx, dir, true))
        return; /* its drop-ins: the same for all of them */
    struct dirent **names;
    int n = scandir(dir, &names, is_dropin, cmp_bytes);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        lint_reach(ctx, path, false);
        free(names[i]);
    }
    if (n >= 0)
        free(names);
}
