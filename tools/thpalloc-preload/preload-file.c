/* thpalloc-preload: /etc/ld.so.preload as ld.so parses it, and its byte-exact, atomic
 * editing (tools/thpalloc-preload/preload-file.c); the commands are in
 * tools/thpalloc-preload/thpalloc-preload.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "preload-file.h"

char entry[PATH_MAX];
size_t entry_len;

/* Out of memory is not worth carrying back up: say so and stop (nothing written yet). */
void *xrealloc(void *p, size_t n)
{
    void *r = realloc(p, n ? n : 1);
    if (!r)
        err(1, "cannot allocate %zu bytes", n);
    return r;
}

void *xcalloc(size_t n, size_t size)
{
    void *r = calloc(n ? n : 1, size);
    if (!r)
        err(1, "cannot allocate %zu bytes", n * size);
    return r;
}

bool is_sep(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == ':';
}

/* --- the file's tokens, as glibc sees them --- */

/* A NUL ends a token too (ld.so's strings end there) but is kept as a byte of the file. */
static bool ends_token(unsigned char c)
{
    return is_sep(c) || c == '#' || c == '\0';
}

/* ld.so reads the file as a C string, so nothing after its first NUL (outside a comment,
 * which it blanks first); but when the file does not end in a separator, it reads the last
 * word on its own (elf/rtld.c: the "problematic case"), up to a NUL in it. Returns the
 * start of that last word, or len + 1 when there is none. */
static size_t ldso_last_word(const char *buf, size_t len)
{
    size_t ls = len;
    while (ls > 0 && buf[ls - 1] != '\n')
        ls--;
    if (len == 0 || is_sep((unsigned char)buf[len - 1]) || memchr(buf + ls, '#', len - ls))
        return len + 1;
    size_t q = len;
    while (q > 0 && !is_sep((unsigned char)buf[q - 1]))
        q--;
    return q;
}

void parse(const char *buf, size_t len, struct parsed *p)
{
    size_t cap = 16;
    p->tok = xrealloc(NULL, cap * sizeof *p->tok);
    p->ntok = p->ours = p->live = 0;
    p->nul = len;
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '#') { /* comment to the end of the line; the '\n' stays a separator */
            while (i < len && buf[i] != '\n')
                i++;
            continue;
        }
        if (c == '\0' && p->nul == len)
            p->nul = i;
        if (ends_token(c)) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && !ends_token((unsigned char)buf[i]))
            i++;
        if (p->ntok == cap) {
            cap *= 2;
            p->tok = xrealloc(p->tok, cap * sizeof *p->tok);
        }
        bool ours = i - s >= entry_len && memcmp(buf + s, entry, entry_len) == 0;
        bool cr = ours && i - s == entry_len + 1 && buf[i - 1] == '\r';
        ours = ours && (i - s == entry_len || cr);
        p->tok[p->ntok++] = (struct token){s, i, ours, cr, false};
    }
    size_t last = ldso_last_word(buf, len);
    for (size_t k = 0; k < p->ntok; k++) {
        struct token *t = &p->tok[k];
        t->seen = t->start < p->nul || t->start == last;
        p->ours += t->ours;
        p->live += t->ours && !t->cr && t->seen;
    }
}

/* Marks in del[] the bytes to delete so that the tokens with drop[k] set disappear. A line
 * that holds nothing but dropped tokens and separators (no comment, no NUL) goes whole (with
 * its newline, or with the newline before it when it is the last line and has none);
 * elsewhere a dropped token takes one adjacent blank or ':' with it, the one after it if
 * there is one on the line, else the one before. */
static void mark(const char *buf, size_t len, const struct parsed *p, const bool *drop, bool *del)
{
    size_t k = 0;
    size_t ls = 0;
    while (ls < len) {
        size_t le = ls; /* end of line, exclusive of '\n' */
        while (le < len && buf[le] != '\n')
            le++;
        /* a comment stays, and so does a NUL: what follows it would start to count */
        bool keep_line = memchr(buf + ls, '#', le - ls) || memchr(buf + ls, '\0', le - ls);
        size_t first = k, n = 0, ndrop = 0;
        while (k < p->ntok && p->tok[k].start < le) {
            n++;
            ndrop += drop[k];
            k++;
        }
        if (ndrop > 0 && ndrop == n && !keep_line) {
            if (le < len) {
                memset(del + ls, 1, le + 1 - ls);
            } else {
                memset(del + ls, 1, le - ls);
                if (ls > 0)
                    del[ls - 1] = 1; /* last line without a newline: the '\n' before it */
            }
        } else if (ndrop > 0) {
            for (size_t j = first; j < first + n; j++) {
                if (!drop[j])
                    continue;
                size_t s = p->tok[j].start, e = p->tok[j].end;
                memset(del + s, 1, e - s);
                if (e < le && buf[e] != '#' && is_sep((unsigned char)buf[e]) && !del[e])
                    del[e] = 1;
                else if (s > ls && is_sep((unsigned char)buf[s - 1]) && !del[s - 1])
                    del[s - 1] = 1;
            }
        }
        ls = le + 1;
    }
}

/* --- file I/O --- */

char root[PATH_MAX] = "";
int etcfd = -1;
char dir[PATH_MAX + 8];   /* ROOT/etc */
char path[PATH_MAX + 32]; /* ROOT/etc/ld.so.preload */

/* Reads the file: 1 when it exists (buf/len/st filled), 0 when it does not, -1 on error. */
static int read_file(char **buf, size_t *len, struct stat *st)
{
    if (etcfd < 0) /* status without ROOT/etc: no file */
        return 0;
    int fd = openat(etcfd, PRELOAD_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno == ELOOP)
            warnx("%s is a symbolic link: edit it by hand", path);
        else
            warn("cannot open %s", path);
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        warnx("%s is not a regular file", path);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st->st_size + 1, n = 0;
    if (cap > MAX_FILE) {
        warnx("%s is larger than %d bytes: not touching it", path, MAX_FILE);
        close(fd);
        return -1;
    }
    char *b = xrealloc(NULL, cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_FILE) {
                warnx("%s grows while being read", path);
                free(b);
                close(fd);
                return -1;
            }
            cap *= 2;
            b = xrealloc(b, cap + 1);
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            warn("cannot read %s", path);
            free(b);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 1;
}

static int fsync_dir(void)
{
    return fsync(etcfd);
}

/* mkostemp in etcfd: a new file .ld.so.preload.thpalloc-XXXXXX, its name in name[]. */
static int make_temp(char *name, size_t cap)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int tries = 0; tries < 100; tries++) {
        unsigned char r[6];
        if (getentropy(r, sizeof r) != 0)
            return -1;
        char x[7];
        for (int i = 0; i < 6; i++)
            x[i] = chars[r[i] % (sizeof chars - 1)];
        x[6] = '\0';
        snprintf(name, cap, ".%s.thpalloc-%s", PRELOAD_NAME, x);
        int fd = openat(etcfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Replaces the file with buf[0..len) atomically, mode 0644. */
int write_file(const char *buf, size_t len)
{
    char tmp[64];
    int fd = make_temp(tmp, sizeof tmp);
    if (fd < 0) {
        warn("cannot create a file in %s", dir);
        return -1;
    }
    const char *what = "write";
    if (geteuid() == 0 && fchown(fd, 0, 0) != 0) {
        what = "chown";
        goto fail;
    }
    if (fchmod(fd, 0644) != 0) {
        what = "chmod";
        goto fail;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto fail;
        off += (size_t)w;
    }
    if (fsync(fd) != 0) {
        what = "fsync";
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        what = "close";
        goto fail;
    }
    fd = -1;
    if (renameat(etcfd, tmp, etcfd, PRELOAD_NAME) != 0) {
        what = "rename";
        goto fail;
    }
    if (fsync_dir() != 0)
        warn("warning: fsync of %s", dir);
    return 0;
fail:
    warn("cannot %s %s/%s", what, dir, tmp);
    if (fd >= 0)
        close(fd);
    unlinkat(etcfd, tmp, 0);
    return -1;
}

int remove_file(void)
{
    if (unlinkat(etcfd, PRELOAD_NAME, 0) != 0 && errno != ENOENT) {
        warn("cannot remove %s", path);
        return -1;
    }
    if (fsync_dir() != 0)
        warn("warning: fsync of %s", dir);
    return 0;
}

/* Copies the bytes not marked for deletion. */
static size_t squeeze(const char *buf, size_t len, const bool *del, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (!del[i])
            out[n++] = buf[i];
    return n;
}

bool only_separators(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!is_sep((unsigned char)buf[i]))
            return false;
    return true;
}

void unload(struct current *c)
{
    free(c->p.tok);
    free(c->buf);
}

/* 0 when read (c->exists: whether there is a file), -1 on an error (already said). */
int load(struct current *c)
{
    memset(c, 0, sizeof *c);
    int r = read_file(&c->buf, &c->len, &c->st);
    if (r < 0)
        return -1;
    c->exists = r > 0;
    if (c->exists)
        parse(c->buf, c->len, &c->p);
    return 0;
}

/* The file's bytes without our tokens but the one at index `keep` (NONE: all go), and
 * (uncr) without that one's '\r'. Returns a malloc'd buffer (its length in *n). */
char *without_ours(const struct current *c, size_t keep, bool uncr, size_t *n)
{
    bool *drop = xcalloc(c->p.ntok + 1, sizeof *drop);
    bool *del = xcalloc(c->len + 1, sizeof *del);
    char *out = xrealloc(NULL, c->len + 1);
    for (size_t k = 0; k < c->p.ntok; k++)
        drop[k] = c->p.tok[k].ours && k != keep;
    mark(c->buf, c->len, &c->p, drop, del);
    if (uncr)
        del[c->p.tok[keep].end - 1] = 1;
    *n = squeeze(c->buf, c->len, del, out);
    free(drop);
    free(del);
    return out;
}

/* The first of our tokens that ld.so reads, with a '\r' (cr) or without; NONE if none. */
size_t first_seen(const struct parsed *p, bool cr)
{
    for (size_t k = 0; k < p->ntok; k++)
        if (p->tok[k].ours && p->tok[k].seen && p->tok[k].cr == cr)
            return k;
    return NONE;
}
