/* thp-status: opening files that other users control (a library path taken from a
 * process's maps, the configuration under a process's root) without being steered by them.
 *
 * Root runs thp-status against every process, so a path that a process's owner can change
 * must not make it hang on a FIFO, open a device node, or follow a symbolic link out of
 * the process's root into files only root may read. So: the path is resolved inside a
 * directory that stands for / (openat2 RESOLVE_IN_ROOT: absolute links and ".." stay
 * inside; without openat2, no symbolic link and no ".." at all), first with O_PATH, which
 * opens nothing; only a regular file or a directory is then opened for reading. */
#include "thp-status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* No openat2 (Linux < 5.6, or a seccomp filter), or the test suite says to act so. */
static bool no_openat2(void)
{
    static int state = -1; /* -1 unknown, 0 available, 1 not */
    if (state < 0) {
        const char *t = getauxval(AT_SECURE) ? NULL : getenv("THP_STATUS_TEST_NO_OPENAT2");
        state = t && !strcmp(t, "1");
    }
    return state == 1;
}

static int path_openat2(int rootfd, const char *path)
{
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);
}

/* Component by component, refusing symbolic links and "..": what is safe without openat2. */
static int path_walk(int rootfd, const char *path, const char **why)
{
    int fd = openat(rootfd, ".", O_PATH | O_CLOEXEC | O_DIRECTORY);
    char comp[NAME_MAX + 1];
    for (const char *p = path; fd >= 0 && *p;) {
        size_t n = strcspn(p, "/");
        if (n > NAME_MAX) {
            close(fd);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        p += n + strspn(p + n, "/");
        if (n == 0 || !strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            *why = "a \"..\" in the path (not followed: this kernel has no openat2)";
            close(fd);
            errno = EPERM;
            return -1;
        }
        int next = openat(fd, comp, O_PATH | O_CLOEXEC | O_NOFOLLOW);
        int e = errno;
        close(fd);
        if (next < 0) {
            errno = e;
            return -1;
        }
        struct stat st;
        if (fstat(next, &st) == 0 && S_ISLNK(st.st_mode)) {
            *why = "a symbolic link (not followed: this kernel has no openat2)";
            close(next);
            errno = ELOOP;
            return -1;
        }
        fd = next;
    }
    return fd;
}

int ts_open_in_root(int rootfd, const char *path, bool dir, struct stat *st, const char **why)
{
    static char errbuf[128];
    *why = NULL;
    int pfd = -1;
    if (!no_openat2()) {
        pfd = path_openat2(rootfd, path);
        if (pfd < 0 && errno == ENOSYS)
            pfd = -2;
    }
    if (no_openat2() || pfd == -2)
        pfd = path_walk(rootfd, path, why);
    if (pfd < 0) {
        if (!*why) {
            snprintf(errbuf, sizeof errbuf, "%s",
                     errno == ENOENT  ? "no such file"
                     : errno == ELOOP ? "too many symbolic links, or a link out of its root"
                     : errno == EXDEV ? "a link out of its root"
                                      : strerror(errno));
            *why = errbuf;
        }
        return -1;
    }
    if (fstat(pfd, st) != 0 || (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))) {
        *why = dir ? "not a directory" : "not a regular file";
        close(pfd);
        errno = EINVAL;
        return -1;
    }
    /* Reopened through the descriptor: the same inode, whatever the path became since. */
    int fd;
    if (dir) {
        fd = openat(pfd, ".", O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    } else {
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
        fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    }
    int e = errno;
    close(pfd);
    if (fd < 0) {
        snprintf(errbuf, sizeof errbuf, "%s", strerror(e));
        *why = errbuf;
        errno = e;
    }
    return fd;
}
