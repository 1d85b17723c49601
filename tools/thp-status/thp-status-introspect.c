/* thp-status: thpalloc's arena table in another process.
 *
 * The library exports `thpalloc_introspect` (lib/thpalloc.h). We find the library in
 * /proc/PID/maps, the symbol's offset in the .dynsym of the mapped file (opened only if it
 * is still the file the process mapped), and read the table with process_vm_readv. The
 * table is the process's own memory, which any code in it can write: what is read is
 * checked (fields within their ranges, a count the table can hold, ranges that are page
 * aligned, inside the process's mappings and apart from each other) before a figure of it
 * is believed; otherwise "implausible introspection data" and why. What passes is still the
 * process's word: ranges unlike thpalloc's arenas are flagged (check_arenas), and the view
 * labels it all as reported by the process. Both layouts are read:
 * version 2's (a few ranges in the block, the rest in a table it points to) and version
 * 1's (thpalloc 0.1.0: every slot in the block), for processes started before an upgrade. */
#include "thp-status-proc.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* ---- ELF: the offset of thpalloc_introspect in the library file ---------------------- */

static bool pread_all(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* The library's tables are small (thpalloc's .dynsym: a few hundred symbols); a file that
 * claims more is not read at all, so that a user's file cannot make root's thp-status
 * read or allocate without bound. Every offset and size is checked against the file. */
#define ELF_TABLE_MAX ((uint64_t)1 << 20)
#define SYMS_PER_READ 256

/* Whether [off, off + size) lies in a file of fsize bytes. */
static bool in_file(uint64_t off, uint64_t size, uint64_t fsize)
{
    return off <= fsize && size <= fsize - off;
}

/* Looks for name among the n symbols at symoff, whose names are in str[0..strsize). */
static uint64_t find_symbol(int fd, uint64_t symoff, uint64_t n, const char *str, uint64_t strsize,
                            const char *name, bool *found)
{
    Elf64_Sym syms[SYMS_PER_READ];
    for (uint64_t k = 0; k < n; k += SYMS_PER_READ) {
        uint64_t m = n - k < SYMS_PER_READ ? n - k : SYMS_PER_READ;
        if (!pread_all(fd, syms, m * sizeof *syms, (off_t)(symoff + k * sizeof *syms)))
            return 0;
        for (uint64_t i = 0; i < m; i++) {
            if (syms[i].st_name >= strsize || syms[i].st_shndx == SHN_UNDEF ||
                ELF64_ST_TYPE(syms[i].st_info) != STT_OBJECT)
                continue;
            if (strcmp(str + syms[i].st_name, name) == 0) {
                *found = true;
                return syms[i].st_value;
            }
        }
    }
    return 0;
}

/* Returns the symbol's value minus the first PT_LOAD's page-aligned vaddr (the offset
 * from the load base), or 0 with msg set. */
static uint64_t elf_symbol_offset(int fd, const char *name, char *msg, size_t cap)
{
    Elf64_Ehdr eh;
    struct stat st;
    if (fstat(fd, &st) != 0 || !pread_all(fd, &eh, sizeof eh, 0) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        snprintf(msg, cap, "not an ELF file");
        return 0;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_phentsize != sizeof(Elf64_Phdr)) {
        snprintf(msg, cap, "not a 64-bit ELF library (32-bit processes are not supported)");
        return 0;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    if (!in_file(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), fsize) ||
        !in_file(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), fsize)) {
        snprintf(msg, cap, "implausible ELF: its headers lie beyond its %" PRIu64 " bytes", fsize);
        return 0;
    }
    uint64_t first_load = UINT64_MAX;
    for (unsigned i = 0; i < eh.e_phnum && i < 64; i++) {
        Elf64_Phdr ph;
        if (!pread_all(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)))
            break;
        if (ph.p_type == PT_LOAD) {
            first_load = ph.p_vaddr & ~(uint64_t)4095;
            break;
        }
    }
    if (first_load == UINT64_MAX || eh.e_shnum == 0) {
        snprintf(msg, cap, "no section headers or program headers to find the symbol in");
        return 0;
    }
    /* at most 65535 headers of 64 bytes, all inside the file (checked above) */
    Elf64_Shdr *sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || !pread_all(fd, sh, eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff)) {
        free(sh);
        snprintf(msg, cap, "cannot read the section headers");
        return 0;
    }
    /* An ELF file has one .dynsym at most (the System V ABI): more is a made-up file. */
    const Elf64_Shdr *sym = NULL, *ss = NULL;
    const char *bad = NULL;
    for (unsigned i = 0; i < eh.e_shnum && !bad; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        if (sym)
            bad = "more than one dynamic symbol table";
        else if (sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            bad = "a dynamic symbol table without its string table";
        sym = &sh[i];
        ss = bad ? NULL : &sh[sh[i].sh_link];
    }
    if (!bad && sym &&
        (sym->sh_size > ELF_TABLE_MAX || ss->sh_size > ELF_TABLE_MAX ||
         !in_file(sym->sh_offset, sym->sh_size, fsize) ||
         !in_file(ss->sh_offset, ss->sh_size, fsize)))
        bad = "a dynamic symbol table larger than 1 MiB or beyond the file";
    if (bad) {
        snprintf(msg, cap, "implausible ELF: %s", bad);
        free(sh);
        return 0;
    }
    snprintf(msg, cap, "the library has no symbol %s (an older thpalloc?)", name);
    uint64_t result = 0;
    char *str = sym ? malloc(ss->sh_size + 1) : NULL;
    if (str && pread_all(fd, str, ss->sh_size, (off_t)ss->sh_offset)) {
        str[ss->sh_size] = '\0';
        bool found = false;
        uint64_t value = find_symbol(fd, sym->sh_offset, sym->sh_size / sizeof(Elf64_Sym), str,
                                     ss->sh_size, name, &found);
        if (found) {
            result = value - first_load;
            if (!result)
                snprintf(msg, cap, "symbol %s at offset 0", name);
        }
    }
    free(str);
    free(sh);
    return result;
}

/* The same file as the one in maps: the inode, and the device unless the file system shows
 * another one to stat than to maps (btrfs subvolumes, overlayfs). */
static bool same_file(const struct proc *p, int fd, const struct stat *st)
{
    if (st->st_ino != p->lib_ino)
        return false;
    struct statfs sf;
    return st->st_dev == p->lib_dev ||
           (fstatfs(fd, &sf) == 0 &&
            (sf.f_type == BTRFS_SUPER_MAGIC || sf.f_type == OVERLAYFS_SUPER_MAGIC));
}

/* After an upgrade the path names the new file, but the process still maps the old one:
 * /proc/PID/map_files opens that (the kernel lets only CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE follow those links), and fstat says whether it is the file maps
 * names (st_dev, st_ino). Sets lib_via_map_files, or lib_replaced (when replaced). */
static int open_mapped_library(struct proc *p, bool replaced)
{
    char name[64];
    snprintf(name, sizeof name, "map_files/%" PRIx64 "-%" PRIx64, p->lib_start, p->lib_end_first);
    int fd = openat(p->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !same_file(p, fd, &st))) {
        close(fd);
        fd = -1;
    }
    p->lib_via_map_files = fd >= 0;
    p->lib_replaced = replaced && fd < 0;
    return fd;
}

/* Whether a path looked up in our own root says anything of the process's: only when it
 * has our mount namespace and our root (a process in another namespace or a chroot of the
 * same tree sees other files, or none, at the same path). Unknown: not. */
static bool our_view_is_its(const struct proc *p, int its_root)
{
    struct stat a, b, c, d;
    return fstat(its_root, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino && fstatat(p->dirfd, "ns/mnt", &c, 0) == 0 &&
           stat("/proc/self/ns/mnt", &d) == 0 && c.st_dev == d.st_dev && c.st_ino == d.st_ino;
}

/* The file the process mapped, found by its path in maps (through the process's root, for
 * another mount namespace, then through ours) and opened only if it is still that file:
 * its owner may have put a FIFO, a link to a device or another file there since. The
 * library is said to be replaced only on evidence: maps marks it deleted, or the path in
 * the process's own view (its root; ours only where it is the same) names something else.
 * A path that names nothing from here, for a file maps does not mark deleted, is one that
 * another mount namespace or root shows (maps writes paths as the reader's root and
 * namespace allow): not a replacement. */
static int open_library(struct proc *p)
{
    char clean[PATH_MAX];
    snprintf(clean, sizeof clean, "%s", p->lib_path);
    char *del = strstr(clean, " (deleted)");
    if (del)
        *del = '\0';
    int roots[2] = {openat(p->dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC),
                    open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
    /* our root is evidence when it is the process's, or when its own cannot be opened */
    bool ours_counts = roots[0] < 0 || our_view_is_its(p, roots[0]);
    const char *why = NULL; /* what is at the path instead, or why it cannot be opened */
    bool replaced = false, missing = false;
    int fd = -1;
    for (int i = 0; i < 2 && fd < 0; i++) {
        struct stat st;
        const char *w;
        if (roots[i] < 0)
            continue;
        bool counts = i == 0 || ours_counts;
        fd = ts_open_in_root(roots[i], clean, false, &st, &w);
        if (fd >= 0 && !same_file(p, fd, &st)) {
            close(fd);
            fd = -1;
            if (counts || !why) {
                why = "is another file now: not read";
                replaced = replaced || counts || del;
            }
        } else if (fd < 0 && !strcmp(w, "not a regular file")) {
            if (counts || !why) {
                why = "is not a regular file now: not opened";
                replaced = replaced || counts || del;
            }
        } else if (fd < 0 && !strcmp(w, "no such file")) {
            missing = true;
            if (!why)
                why = del ? "is gone"
                          : "is not in the process's root as seen from here (another "
                            "mount namespace or root)";
            replaced = replaced || del;
        } else if (fd < 0 && !replaced && !why) {
            why = w;
        }
    }
    for (int i = 0; i < 2; i++)
        if (roots[i] >= 0)
            close(roots[i]);
    /* unreachable, not replaced: the file the process maps, identified by fstat */
    bool elsewhere = fd < 0 && !replaced && missing;
    if (fd < 0 && (replaced || elsewhere))
        fd = open_mapped_library(p, replaced);
    p->lib_elsewhere = elsewhere;
    if (fd < 0 && (replaced || elsewhere))
        snprintf(p->intro_msg, sizeof p->intro_msg,
                 "%.120s %s, and /proc/%d/map_files cannot be read (CAP_SYS_ADMIN or "
                 "CAP_CHECKPOINT_RESTORE)",
                 clean, why, (int)p->pid);
    else if (fd < 0)
        snprintf(p->intro_msg, sizeof p->intro_msg, "cannot open %.160s: %.80s", clean,
                 why ? why : "no root to open it in");
    return fd;
}

/* Above any user address space (57-bit with 5-level page tables). */
#define ADDR_LIMIT ((uint64_t)1 << 57)

/* Whether [b, e) lies in the process's mappings, with no hole (anon: in anonymous ones
 * only, where thpalloc's arenas are). */
static bool mapped(const struct proc *p, uint64_t b, uint64_t e, bool anon)
{
    size_t lo = 0, hi = p->nmaps;
    while (lo < hi) { /* the first mapping that ends after b */
        size_t mid = (lo + hi) / 2;
        if (p->maps[mid].end <= b)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->nmaps || p->maps[lo].start > b || (anon && !p->maps[lo].anon))
        return false;
    uint64_t covered = p->maps[lo].end;
    for (size_t i = lo + 1;
         covered < e && i < p->nmaps && p->maps[i].start == covered && (!anon || p->maps[i].anon);
         i++)
        covered = p->maps[i].end;
    return covered >= e;
}

/* Whether [b, e) reaches past the end of a maps that was cut (PROC_MAPS_CAP): what is
 * there was not seen, so it is neither mapped nor unmapped as far as we know. */
static bool past_cut(const struct proc *p, uint64_t b, uint64_t e)
{
    (void)b;
    return p->maps_cut && (!p->nmaps || e > p->maps[p->nmaps - 1].end);
}

/* Whether the kernel names anonymous mappings (CONFIG_ANON_VMA_NAME), as thpalloc names its
 * arenas "[anon:thpalloc]": tried on a page of our own. */
static bool kernel_names_anon(void)
{
    static int known = -1;
    if (known < 0) {
        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        known = m != MAP_FAILED && prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)m, 4096UL,
                                         (unsigned long)"thp-status") == 0;
        if (m != MAP_FAILED)
            munmap(m, 4096);
    }
    return known;
}

/* Why [b, b + s) does not look like one of thpalloc's arenas, or NULL: an arena starts and
 * ends on 2 MiB chunk boundaries (lib/arena.c) and, where the kernel names anonymous
 * memory, every mapping of it is named [anon:thpalloc]. The table is the process's own
 * word: a range that passes the checks of implausible_ranges (anonymous memory of the
 * process) may still be any of its mappings. */
static const char *unlike_arena(const struct proc *p, uint64_t b, uint64_t s, bool names, char *buf,
                                size_t cap)
{
    const uint64_t chunk = (uint64_t)2 << 20;
    bool unnamed = false;
    if (names) {
        size_t lo = 0, hi = p->nmaps;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (p->maps[mid].end <= b)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t i = lo; i < p->nmaps && p->maps[i].start < b + s && !unnamed; i++)
            unnamed = !p->maps[i].named;
    }
    bool unaligned = b % chunk || s % chunk;
    if (!unnamed && !unaligned)
        return NULL;
    snprintf(buf, cap, "%s%s%s", unaligned ? "not on 2 MiB chunk boundaries" : "",
             unaligned && unnamed ? ", " : "", unnamed ? "not named [anon:thpalloc]" : "");
    return buf;
}

/* Records the ranges of the table that do not look like arenas (p->unlike), and those
 * past a cut maps (p->nunchecked). */
static void check_arenas(struct proc *p, const struct intro_table *tab)
{
    bool names = kernel_names_anon();
    for (size_t i = 0; i < p->nmaps && !names; i++)
        names = p->maps[i].named;
    p->nunlike = p->nunchecked = 0;
    for (uint64_t i = 0; i < tab->head.ranges_used; i++) {
        uint64_t b = tab->range[i].base, s = tab->range[i].size;
        char why[96];
        if (!s)
            continue;
        if (past_cut(p, b, b + s)) {
            p->nunchecked++;
            continue;
        }
        if (!unlike_arena(p, b, s, names, why, sizeof why))
            continue;
        if (p->nunlike < PROC_UNLIKE_MAX) {
            struct unlike *u = &p->unlike[p->nunlike];
            u->index = i;
            u->base = b;
            u->size = s;
            snprintf(u->why, sizeof u->why, "%s", why);
        }
        p->nunlike++;
    }
}

/* The head both versions share: everything before version 2's `more` (version 1's range[]). */
#define HEAD_BYTES offsetof(struct thpalloc_introspect, more)
#define V1_BYTES (HEAD_BYTES + THPALLOC_RANGES_MAX * sizeof(struct thpalloc_range))
#define RANGE_BYTES sizeof(struct thpalloc_range)

/* The block's value of key k (purge and stats: checked apart, or not in the block). */
static int64_t block_value(const struct thpalloc_introspect *t, enum cfg_key k)
{
    switch (k) {
    case CFG_THP:
        return t->thp_mode;
    case CFG_THP_THRESHOLD:
        return t->thp_threshold > INT64_MAX ? -1 : (int64_t)t->thp_threshold;
    case CFG_ARENA_SIZE:
        return t->arena_size > INT64_MAX ? -1 : (int64_t)t->arena_size;
    case CFG_PURGE_DELAY:
        return t->purge_delay_ms;
    default:
        return cfg_keys[k].dflt;
    }
}

/* The first key whose value in the block is not one the library can hold (the key table's
 * own grammar says which: config-keys.c), or -1. */
static int bad_value(const struct thpalloc_introspect *t)
{
    for (int k = 0; k < CFG_NKEYS; k++)
        if (!cfg_value_ok((enum cfg_key)k, block_value(t, (enum cfg_key)k)))
            return k;
    return -1;
}

/* The value as the block has it, in bytes or milliseconds. */
static const char *value(const struct thpalloc_introspect *t, int k)
{
    static char buf[32];
    if (k == CFG_THP_THRESHOLD || k == CFG_ARENA_SIZE)
        snprintf(buf, sizeof buf, "%" PRIu64,
                 k == CFG_ARENA_SIZE ? t->arena_size : t->thp_threshold);
    else if (k == CFG_PURGE_DELAY)
        snprintf(buf, sizeof buf, "%" PRId64 " ms", t->purge_delay_ms);
    else
        snprintf(buf, sizeof buf, "%" PRId64, block_value(t, (enum cfg_key)k));
    return buf;
}

/* What is wrong with the head read (have: the slots read with it), or NULL. */
static const char *implausible_head(const struct thpalloc_introspect *t, uint64_t have, char *buf,
                                    size_t cap)
{
    int k;
    if (t->size > (1u << 24))
        snprintf(buf, cap, "block size %" PRIu32, t->size);
    else if (t->active > 2)
        snprintf(buf, cap, "state %" PRIu32 " (0, 1 or 2)", t->active);
    else if (t->thp_mode < 0 || t->thp_mode > 3)
        snprintf(buf, cap, "thp mode %" PRId32 " (0 to 3)", t->thp_mode);
    else if (t->purge > 1 || t->policy_loaded > 1)
        snprintf(buf, cap, "purge %" PRIu32 ", policy_loaded %" PRIu32 " (0 or 1)", t->purge,
                 t->policy_loaded);
    else if ((k = bad_value(t)) >= 0)
        snprintf(buf, cap, "%s %s, which thpalloc cannot hold (%s)", cfg_keys[k].name, value(t, k),
                 cfg_keys[k].expect);
    else if (t->ranges_used > THPALLOC_RANGES_MAX)
        snprintf(buf, cap, "%" PRIu64 " ranges (the table has %d)", t->ranges_used,
                 THPALLOC_RANGES_MAX);
    else if (t->ranges_used > have &&
             (t->magic == THPALLOC_INTROSPECT_MAGIC_V1 || have < THPALLOC_RANGES_INLINE))
        snprintf(buf, cap, "%" PRIu64 " ranges in a block of %" PRIu32 " bytes", t->ranges_used,
                 t->size);
    else if (t->magic == THPALLOC_INTROSPECT_MAGIC && t->ranges_used > have && !t->more)
        snprintf(buf, cap, "%" PRIu64 " ranges, %" PRIu64 " in the block and no table for the rest",
                 t->ranges_used, have);
    else
        return NULL;
    return buf;
}

/* What is wrong with the ranges read, or NULL. Sets *unmapped when it is only a range
 * outside the mappings (they may just have changed). */
static const char *implausible_ranges(const struct proc *p, const struct intro_table *tab,
                                      bool *unmapped, char *buf, size_t cap)
{
    for (uint64_t i = 0; i < tab->head.ranges_used; i++) {
        uint64_t b = tab->range[i].base, s = tab->range[i].size;
        if (!s)
            continue;
        if (b % 4096 || s % 4096 || s >= ADDR_LIMIT || b >= ADDR_LIMIT - s) {
            snprintf(buf, cap, "range %" PRIu64 " is not an address range of a process", i);
            return buf;
        }
        for (uint64_t j = 0; j < i; j++) {
            uint64_t b2 = tab->range[j].base, s2 = tab->range[j].size;
            if (s2 && b < b2 + s2 && b2 < b + s) {
                snprintf(buf, cap, "ranges %" PRIu64 " and %" PRIu64 " overlap", j, i);
                return buf;
            }
        }
        if (!mapped(p, b, b + s, true) && !past_cut(p, b, b + s)) {
            /* a range where nothing is mapped may be an arena made since; one over a
             * file, the stack or the heap is a lie */
            *unmapped = !mapped(p, b, b + s, false);
            snprintf(buf, cap, "range %" PRIu64 " is not %s", i,
                     *unmapped ? "mapped in the process"
                               : "anonymous memory of the process, as an arena is");
            return buf;
        }
    }
    return NULL;
}

/* process_vm_readv of n bytes at addr into the local pieces; false with p->intro_msg set
 * (first: the first read of the process, which says what privilege it lacks). */
static bool read_remote(struct proc *p, uint64_t addr, const struct iovec *local, int nlocal,
                        size_t n, bool first)
{
    struct iovec remote = {(void *)(uintptr_t)addr, n};
    ssize_t got = process_vm_readv(p->pid, local, (unsigned long)nlocal, &remote, 1, 0);
    if (got == (ssize_t)n)
        return true;
    int e = got < 0 ? errno : EIO;
    if (first) {
        char why[300];
        ts_caps_advice(e, p->ruid, why, sizeof why);
        snprintf(p->intro_msg, sizeof p->intro_msg, "process_vm_readv: %.220s", why);
        if (e == ESRCH)
            p->vanished = true;
    } else {
        snprintf(p->intro_msg, sizeof p->intro_msg, "process_vm_readv: %s", strerror(e));
    }
    return false;
}

/* Reads the block at addr into tab: the head, and the slots the block itself holds (all of
 * version 1's, version 2's inline ones). *have: how many. False with p->intro_msg set. */
static bool read_block(struct proc *p, uint64_t addr, struct intro_table *tab, uint64_t *have)
{
    memset(tab, 0, sizeof *tab);
    struct thpalloc_introspect *t = &tab->head;
    struct iovec local[2] = {{t, HEAD_BYTES}};
    if (!read_remote(p, addr, local, 1, HEAD_BYTES, true))
        return false;
    bool v1 = t->magic == THPALLOC_INTROSPECT_MAGIC_V1;
    if ((!v1 && t->magic != THPALLOC_INTROSPECT_MAGIC) || t->version < 1 || t->size < HEAD_BYTES) {
        snprintf(p->intro_msg, sizeof p->intro_msg,
                 "no valid introspection block at the symbol's address (magic %#" PRIx64 ")",
                 t->magic);
        return false;
    }
    size_t want;
    if (v1) { /* the head, then the slots straight into the table */
        want = t->size < V1_BYTES ? t->size : V1_BYTES;
        local[1] = (struct iovec){tab->range, (want - HEAD_BYTES) / RANGE_BYTES * RANGE_BYTES};
        want = HEAD_BYTES + local[1].iov_len;
        t->more = 0;
    } else {
        want = t->size < sizeof *t ? t->size : sizeof *t;
        local[0].iov_len = want;
    }
    uint64_t magic = t->magic;
    uint32_t size = t->size;
    if (!read_remote(p, addr, local, v1 ? 2 : 1, want, false))
        return false;
    if (t->magic != magic || t->size != size) { /* read again: what was checked still holds */
        snprintf(p->intro_msg, sizeof p->intro_msg,
                 "the introspection block changed while it was read (magic %#" PRIx64 ")",
                 t->magic);
        return false;
    }
    if (v1) {
        *have = local[1].iov_len / RANGE_BYTES;
    } else {
        size_t in = offsetof(struct thpalloc_introspect, range);
        *have = want > in ? (want - in) / RANGE_BYTES : 0;
        if (*have > THPALLOC_RANGES_INLINE) /* what follows the slots is not a slot */
            *have = THPALLOC_RANGES_INLINE;
        memcpy(tab->range, t->range, *have * RANGE_BYTES);
    }
    return true;
}

/* Version 2's slots beyond the block, from its table at head.more. False with *bad set
 * (*unmapped when the table is only outside the mappings read) or p->intro_msg set. */
static bool read_more(struct proc *p, struct intro_table *tab, uint64_t have, const char **bad,
                      bool *unmapped, char *buf, size_t cap)
{
    const struct thpalloc_introspect *t = &tab->head;
    if (t->magic != THPALLOC_INTROSPECT_MAGIC || t->ranges_used <= have)
        return true;
    /* have == THPALLOC_RANGES_INLINE here (implausible_head): more[0] is that slot */
    uint64_t n = t->ranges_used - have, at = t->more;
    bool sane = at % 8 == 0 && at < ADDR_LIMIT - n * RANGE_BYTES;
    if (!sane ||
        (!mapped(p, at, at + n * RANGE_BYTES, false) && !past_cut(p, at, at + n * RANGE_BYTES))) {
        snprintf(buf, cap,
                 "ranges %" PRIu64 " to %" PRIu64 " are said to be at %#" PRIx64 ", which is %s",
                 have, t->ranges_used - 1, at,
                 sane ? "not mapped in the process" : "not an address of a table");
        *bad = buf;
        *unmapped = sane;
        return false;
    }
    struct iovec local = {tab->range + have, n * RANGE_BYTES};
    return read_remote(p, at, &local, 1, n * RANGE_BYTES, false);
}

void proc_read_introspect(struct proc *p)
{
    int fd = open_library(p);
    if (fd < 0)
        return;
    char msg[200];
    uint64_t off = elf_symbol_offset(fd, "thpalloc_introspect", msg, sizeof msg);
    close(fd);
    if (!off) {
        snprintf(p->intro_msg, sizeof p->intro_msg, "%s", msg);
        return;
    }
    struct intro_table *tab = malloc(sizeof *tab);
    if (!tab) {
        snprintf(p->intro_msg, sizeof p->intro_msg, "out of memory");
        return;
    }
    ts_test_pause("introspect");
    const char *bad = NULL;
    char why[160];
    /* A range outside the mappings read before may be an arena made since: once more. */
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t have;
        bool unmapped = false;
        if (attempt)
            proc_read_maps(p);
        if (!read_block(p, p->lib_start + off, tab, &have)) {
            free(tab);
            return;
        }
        bad = implausible_head(&tab->head, have, why, sizeof why);
        if (!bad && !read_more(p, tab, have, &bad, &unmapped, why, sizeof why) && !bad) {
            free(tab);
            return;
        }
        if (!bad)
            bad = implausible_ranges(p, tab, &unmapped, why, sizeof why);
        /* a range unlike an arena may be one named just after it was recorded: once more */
        if (!bad)
            check_arenas(p, tab);
        if (!bad && !p->nunlike)
            break;
        if (bad && !unmapped)
            break;
    }
    if (bad) {
        snprintf(p->intro_msg, sizeof p->intro_msg, "implausible introspection data: %s", bad);
        free(tab);
        return;
    }
    for (uint64_t i = 0; i < tab->head.ranges_used; i++)
        if (tab->range[i].size) {
            p->reserved_bytes += tab->range[i].size;
            p->nranges++;
        }
    p->intro = tab;
    p->intro_ok = true;
}
