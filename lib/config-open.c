/* config-open: the secure walk (cfg_open_secure, config.h): a path opened one name at a
 * time from a trusted root, each directory on it owned by root (or the owner given) and not
 * writable by others, as a setuid program needs its configuration opened. Used by config.c
 * and thp-status. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's own walk */

/* A directory a setuid program may read its configuration through. */
static bool trusted_dir(int fd, uid_t owner)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (st.st_uid == 0 || st.st_uid == owner) &&
           !(st.st_mode & (S_IWGRP | S_IWOTH));
}

static int open_root(int rootfd)
{
    return rootfd >= 0 ? openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                       : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

TEXT_WARM
static bool same_inode(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int walk_fail(int fd, int e, const char **why, const char *text)
{
    if (fd >= 0)
        close(fd);
    *why = text;
    errno = e;
    return -1;
}

TEXT_WARM
int cfg_open_secure(int rootfd, const char *path, bool dir, uid_t owner, char (*buf)[PATH_MAX],
                    const char **why)
{
    static const char untrusted[] =
        "a directory on its path is not owned by root or is writable by group or others";
    char *rest = buf[0], *link = buf[1];
    size_t n = strlen(path), pos = 0;
    int hops = 0;
    *why = NULL;
    if (n >= PATH_MAX)
        return walk_fail(-1, ENAMETOOLONG, why, "path too long");
    memcpy(rest, path, n + 1);
    int fd = open_root(rootfd);
    for (;;) {
        if (fd < 0)
            return walk_fail(-1, errno, why, NULL);
        if (!trusted_dir(fd, owner))
            return walk_fail(fd, EPERM, why, untrusted);
        while (rest[pos] == '/')
            pos++;
        if (!rest[pos]) { /* the path names this directory */
            if (!dir)
                return walk_fail(fd, EISDIR, why, "is a directory, not a file");
            int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            int e = errno;
            close(fd);
            errno = e;
            return d;
        }
        /* the next name, NUL-terminated in place while it is opened */
        char *name = rest + pos;
        size_t len = strcspn(name, "/");
        char save = name[len];
        name[len] = '\0';
        int next;
        if (!strcmp(name, "..") && rootfd >= 0) { /* stays in the root, as RESOLVE_IN_ROOT */
            int r = open_root(rootfd);
            next = r >= 0 && same_inode(fd, r) ? r : openat(fd, name, O_PATH | O_CLOEXEC);
            if (r >= 0 && r != next)
                close(r);
        } else {
            next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        name[len] = save;
        pos += len;
        bool last = !rest[pos + strspn(rest + pos, "/")];
        struct stat st;
        if (next < 0 || fstat(next, &st) != 0) {
            int e = errno;
            if (next >= 0)
                close(next);
            return walk_fail(fd, e, why, NULL);
        }
        if (S_ISLNK(st.st_mode)) { /* its target, then what followed it */
            ssize_t ln = ++hops > MAX_LINKS ? -1 : readlinkat(next, "", link, PATH_MAX);
            close(next);
            size_t tail = strlen(rest + pos);
            if (ln <= 0 || (size_t)ln + tail + 1 > PATH_MAX)
                return walk_fail(fd, ELOOP, why, NULL);
            memmove(rest + ln, rest + pos, tail + 1);
            memcpy(rest, link, (size_t)ln);
            pos = 0;
            if (link[0] == '/') {
                close(fd);
                fd = open_root(rootfd);
            }
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            close(fd);
            fd = next;
            continue;
        }
        if (!last || dir || !S_ISREG(st.st_mode)) {
            close(next);
            return walk_fail(fd, ENOTDIR, why,
                             last && !dir ? "not a regular file" : "not a directory");
        }
        /* the file, named in a directory only root may change: opened for reading (never
         * a FIFO or a device: checked above), and still the inode looked at */
        name[len] = '\0';
        int f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        int e = errno;
        name[len] = save;
        if (f >= 0 && !same_inode(f, next)) {
            close(f);
            f = -1;
            e = ESTALE;
        }
        close(next);
        close(fd);
        errno = e;
        return f;
    }
}
