/* Which entry of ld.so.preload owns malloc (see preload-owner.h). The ELF file is read with
 * pread and every size it claims is checked against the file's size and a fixed limit: the
 * preloaded files are root's, but thp-status runs on a machine where they may be anything. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload-owner.h"

int preload_rootfd = -1;

#ifndef THPALLOC_MULTIARCH
#define THPALLOC_MULTIARCH ""
#endif

#define MAX_SECTIONS 4096
#define MAX_TABLE (4u << 20)

/* A section header, whatever the class. */
struct sect {
    uint32_t type, link;
    uint64_t off, size;
};

static bool rd(int fd, void *buf, size_t n, uint64_t off)
{
    return pread(fd, buf, n, (off_t)off) == (ssize_t)n;
}

/* Reads section i into *s; false when it cannot. */
static bool section(int fd, bool is64, uint64_t shoff, unsigned shentsize, unsigned i,
                    struct sect *s)
{
    uint64_t at = shoff + (uint64_t)i * shentsize;
    if (is64) {
        Elf64_Shdr h;
        if (!rd(fd, &h, sizeof h, at))
            return false;
        *s = (struct sect){h.sh_type, h.sh_link, h.sh_offset, h.sh_size};
    } else {
        Elf32_Shdr h;
        if (!rd(fd, &h, sizeof h, at))
            return false;
        *s = (struct sect){h.sh_type, h.sh_link, h.sh_offset, h.sh_size};
    }
    return true;
}

/* Whether the symbol table s (string table str) defines a function named `want`. */
static int scan_symbols(int fd, bool is64, const struct sect *s, const char *str, uint64_t strsz,
                        const char *want)
{
    size_t wl = strlen(want) + 1;
    size_t ent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    unsigned char buf[256 * sizeof(Elf64_Sym)];
    uint64_t n = s->size / ent;
    for (uint64_t i = 0; i < n;) {
        uint64_t chunk = n - i < 256 ? n - i : 256;
        if (!rd(fd, buf, chunk * ent, s->off + i * ent))
            return -1;
        for (uint64_t k = 0; k < chunk; k++) {
            uint32_t name;
            uint16_t shndx;
            unsigned char info;
            if (is64) {
                Elf64_Sym y;
                memcpy(&y, buf + k * ent, sizeof y);
                name = y.st_name, shndx = y.st_shndx, info = y.st_info;
            } else {
                Elf32_Sym y;
                memcpy(&y, buf + k * ent, sizeof y);
                name = y.st_name, shndx = y.st_shndx, info = y.st_info;
            }
            int type = ELF64_ST_TYPE(info), bind = ELF64_ST_BIND(info);
            if (shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
                (bind != STB_GLOBAL && bind != STB_WEAK) || name >= strsz)
                continue;
            if (strsz - name >= wl && memcmp(str + name, want, wl) == 0)
                return 1;
        }
        i += chunk;
    }
    return 0;
}

/* The ELF header's facts, and the dynamic symbol table searched for each of want[0..nwant)
 * (found[i] set to 1 or 0). -1 when the file cannot be told to be ELF, or is implausible. */
int elf_inspect(int fd, struct elf_facts *f, const char *const *want, size_t nwant, int *found)
{
    int rc = -1;
    char *str = NULL;
    struct stat st;
    unsigned char id[EI_NIDENT];
    for (size_t i = 0; i < nwant; i++)
        found[i] = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !rd(fd, id, sizeof id, 0) ||
        memcmp(id, ELFMAG, SELFMAG) != 0 ||
        (id[EI_CLASS] != ELFCLASS64 && id[EI_CLASS] != ELFCLASS32))
        goto out;
    bool is64 = id[EI_CLASS] == ELFCLASS64;
    uint64_t fsize = (uint64_t)st.st_size, shoff;
    unsigned shnum, shentsize;
    if (is64) {
        Elf64_Ehdr e;
        if (!rd(fd, &e, sizeof e, 0))
            goto out;
        shoff = e.e_shoff, shnum = e.e_shnum, shentsize = e.e_shentsize;
        f->type = e.e_type, f->machine = e.e_machine;
    } else {
        Elf32_Ehdr e;
        if (!rd(fd, &e, sizeof e, 0))
            goto out;
        shoff = e.e_shoff, shnum = e.e_shnum, shentsize = e.e_shentsize;
        f->type = e.e_type, f->machine = e.e_machine;
    }
    f->elfclass = id[EI_CLASS];
    f->data = id[EI_DATA];
    size_t need = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
    if (shnum == 0 || shnum > MAX_SECTIONS || shentsize < need || shoff > fsize ||
        (uint64_t)shnum * shentsize > fsize - shoff)
        goto out;
    for (unsigned i = 0; i < shnum; i++) {
        struct sect s, t;
        if (!section(fd, is64, shoff, shentsize, i, &s))
            goto out;
        if (s.type != SHT_DYNSYM)
            continue;
        if (s.link >= shnum || !section(fd, is64, shoff, shentsize, s.link, &t) ||
            t.type != SHT_STRTAB || s.size > MAX_TABLE || t.size > MAX_TABLE || s.off > fsize ||
            s.size > fsize - s.off || t.off > fsize || t.size > fsize - t.off)
            goto out;
        str = malloc(t.size + 1);
        if (!str || !rd(fd, str, t.size, t.off))
            goto out;
        str[t.size] = '\0';
        for (size_t w = 0; w < nwant; w++) {
            found[w] = scan_symbols(fd, is64, &s, str, t.size, want[w]);
            if (found[w] < 0)
                goto out;
        }
        rc = 0;
        goto out;
    }
    rc = 0; /* no dynamic symbols: defines nothing for ld.so */
out:
    free(str);
    return rc;
}

int elf_defines(const char *file, const char *want)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct elf_facts f;
    int found;
    int rc = elf_inspect(fd, &f, &want, 1, &found);
    close(fd);
    return rc < 0 ? -1 : found;
}

/* --- paths inside a root --- */

/* THPALLOC_TEST_NO_OPENAT2 makes the walk below do the work where openat2 exists, so that
 * the tests try it; it is no less strict than openat2. */
/* The walk for kernels without openat2 (before 5.6, or a seccomp filter that refuses it):
 * one component at a time with O_NOFOLLOW, a symbolic link's target spliced into what is
 * left (an absolute one from the root again), and ".." never above the root: what a chroot
 * of the root would resolve. */
#define WALK_MAX_DEPTH 64
#define WALK_MAX_LINKS 40
static int walk_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
    char *rest = malloc(2 * PATH_MAX), *tmp = malloc(2 * PATH_MAX);
    int stack[WALK_MAX_DEPTH]; /* the directories walked; stack[0] is the root, not ours */
    int depth = 0, links = 0, rc = -1, err = 0;
    if (!rest || !tmp) {
        err = ENOMEM;
        goto out;
    }
    stack[0] = rootfd;
    if (snprintf(rest, 2 * PATH_MAX, "%s", rel) >= 2 * PATH_MAX) {
        err = ENAMETOOLONG;
        goto out;
    }
    for (;;) {
        char *p = rest;
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0) { /* nothing left: the path named a directory walked to */
            rc = openat(stack[depth], ".", flags | O_CLOEXEC, mode);
            err = errno;
            goto out;
        }
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            err = ENAMETOOLONG;
            goto out;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        p += n;
        bool last = strspn(p, "/") == strlen(p);
        memmove(rest, p, strlen(p) + 1);
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            if (depth > 0)
                close(stack[depth--]);
            continue;
        }
        struct stat st;
        if (fstatat(stack[depth], comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT && last && (flags & O_CREAT)) {
                rc = openat(stack[depth], comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                err = errno;
                goto out;
            }
            err = errno;
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            if (++links > WALK_MAX_LINKS) {
                err = ELOOP;
                goto out;
            }
            ssize_t l = readlinkat(stack[depth], comp, tmp, PATH_MAX);
            if (l < 0 || l >= PATH_MAX) {
                err = l < 0 ? errno : ENAMETOOLONG;
                goto out;
            }
            tmp[l] = '\0';
            if (tmp[0] == '/')
                while (depth > 0)
                    close(stack[depth--]);
            size_t tl = (size_t)l, rl = strlen(rest);
            if (tl + 1 + rl + 1 > 2 * PATH_MAX) {
                err = ENAMETOOLONG;
                goto out;
            }
            memmove(rest + tl + 1, rest, rl + 1);
            memcpy(rest, tmp, tl);
            rest[tl] = '/';
            if (rl == 0)
                rest[tl] = '\0';
            continue;
        }
        if (last) {
            rc = openat(stack[depth], comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            err = errno;
            goto out;
        }
        if (!S_ISDIR(st.st_mode)) {
            err = ENOTDIR;
            goto out;
        }
        if (depth + 1 >= WALK_MAX_DEPTH) {
            err = ENAMETOOLONG;
            goto out;
        }
        int d = openat(stack[depth], comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0) {
            err = errno;
            goto out;
        }
        stack[++depth] = d;
    }
out:
    while (depth > 0)
        close(stack[depth--]);
    free(rest);
    free(tmp);
    errno = err;
    return rc;
}

int open_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
    static int no_openat2 = -1;
    if (no_openat2 < 0)
        no_openat2 = getenv("THPALLOC_TEST_NO_OPENAT2") != NULL;
    if (!no_openat2) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return (int)fd;
        no_openat2 = 1; /* this kernel (or its seccomp filter) has none: walk */
    }
    return walk_beneath(rootfd, rel, flags, mode);
}

/* Opens the file at root + path (path starts with root): inside preload_rootfd when it is
 * set, else as the path says. */
static int open_rooted(const char *root, const char *file, int flags)
{
    if (preload_rootfd < 0)
        return open(file, flags | O_CLOEXEC);
    size_t rl = strlen(root);
    return open_beneath(preload_rootfd, strncmp(file, root, rl) == 0 ? file + rl : file, flags, 0);
}

/* ROOT + s[0..n) with $LIB or ${LIB} replaced by lib; false when it does not fit. */
static bool expand(const char *root, const char *s, size_t n, const char *lib, char *out,
                   size_t cap)
{
    const char *d = memmem(s, n, "$LIB", 4), *b = memmem(s, n, "${LIB}", 6);
    size_t skip = b ? 6 : d ? 4 : 0;
    const char *at = b ? b : d;
    int w = at ? snprintf(out, cap, "%s%.*s%s%.*s", root, (int)(at - s), s, lib,
                          (int)(n - (size_t)(at - s) - skip), at + skip)
               : snprintf(out, cap, "%s%.*s", root, (int)n, s);
    return w > 0 && (size_t)w < cap;
}

int preload_resolve(const char *root, const char *tok, size_t len, char *file, size_t cap)
{
    static const char *const libs[] = {"lib/" THPALLOC_MULTIARCH, "lib/x86_64-linux-gnu",
                                       "lib/aarch64-linux-gnu", "lib64", "lib"};
    bool slash = memchr(tok, '/', len) != NULL;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
        if (strcmp(libs[i], "lib/") == 0)
            continue; /* no multiarch directory */
        char dir[PATH_MAX];
        for (int usr = 0; usr < (slash ? 1 : 2); usr++) {
            if (slash) {
                if (!expand(root, tok, len, libs[i], file, cap))
                    return 0;
            } else if (snprintf(dir, sizeof dir, "%s/%s", usr ? "/usr" : "", libs[i]) >=
                           (int)sizeof dir ||
                       snprintf(file, cap, "%s%s/%.*s", root, dir, (int)len, tok) >= (int)cap) {
                return 0;
            }
            int fd = open_rooted(root, file, O_RDONLY);
            if (fd >= 0) {
                close(fd);
                return 1;
            }
        }
        if (slash && !memmem(tok, len, "LIB", 3))
            break; /* a plain path: one try */
    }
    return 0;
}

int preload_open(const char *root, const char *tok, size_t len, char *file, size_t cap)
{
    if (!preload_resolve(root, tok, len, file, cap))
        return -1;
    return open_rooted(root, file, O_RDONLY);
}

int preload_owns_malloc(const char *root, const char *tok, size_t len, char *file, size_t cap)
{
    int fd = preload_open(root, tok, len, file, cap);
    if (fd < 0)
        return 0;
    struct elf_facts f;
    const char *want = "malloc";
    int found = 0;
    int rc = elf_inspect(fd, &f, &want, 1, &found);
    close(fd);
    return rc == 0 && found == 1;
}
