/* Which entry of ld.so.preload owns malloc (see preload-owner.h). The ELF file is read with
 * pread and every size it claims is checked against the file's size and a fixed limit: the
 * preloaded files are root's, but thp-status runs on a machine where they may be anything. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload-owner.h"

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

int elf_defines(const char *file, const char *want)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    char *str = NULL;
    struct stat st;
    unsigned char id[EI_NIDENT];
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
    } else {
        Elf32_Ehdr e;
        if (!rd(fd, &e, sizeof e, 0))
            goto out;
        shoff = e.e_shoff, shnum = e.e_shnum, shentsize = e.e_shentsize;
    }
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
        rc = scan_symbols(fd, is64, &s, str, t.size, want);
        goto out;
    }
    rc = 0; /* no dynamic symbols: defines nothing for ld.so */
out:
    free(str);
    close(fd);
    return rc;
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
            if (access(file, R_OK) == 0)
                return 1;
        }
        if (slash && !memmem(tok, len, "LIB", 3))
            break; /* a plain path: one try */
    }
    return 0;
}

int preload_owns_malloc(const char *root, const char *tok, size_t len, char *file, size_t cap)
{
    return preload_resolve(root, tok, len, file, cap) && elf_defines(file, "malloc") == 1;
}
