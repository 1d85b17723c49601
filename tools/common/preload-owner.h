/* Which entry of ld.so.preload owns malloc (tools/common/preload-owner.c), for thpalloc-preload and
 * thp-status: ld.so binds a program's malloc to the first object of its lookup scope that
 * defines it (the program, then the preloaded libraries in order), so thpalloc, preloaded
 * after another allocator, stays dormant in every process. */
#ifndef THPALLOC_PRELOAD_OWNER_H
#define THPALLOC_PRELOAD_OWNER_H

#include <stddef.h>
#include <sys/types.h>

/* -1, or a directory (O_PATH) inside which every path under the root is resolved, as a
 * chroot of it would resolve it: thpalloc-preload --root sets it (an absolute symbolic
 * link, or "..", never leads out of DIR). */
extern int preload_rootfd;

/* Opens rel (relative to rootfd) as a chroot of rootfd would: openat2 with RESOLVE_IN_ROOT,
 * or, where the kernel has no openat2, a walk one component at a time that keeps to it. */
int open_beneath(int rootfd, const char *rel, int flags, mode_t mode);

/* What the ELF header says (elf_inspect). */
struct elf_facts {
    unsigned elfclass, data, type, machine; /* EI_CLASS, EI_DATA, e_type, e_machine */
};

/* Reads the ELF object open on fd without running it: the header into *f, and for each
 * name want[i] whether its dynamic symbol table defines that function (found[i] 1 or 0).
 * 0, or -1 when it is not ELF or implausible (the bounds of elf_defines). */
int elf_inspect(int fd, struct elf_facts *f, const char *const *want, size_t nwant, int *found);

/* 1 when the ELF object at `file` defines the function `name` (in its dynamic symbol
 * table), 0 when it does not, -1 when that cannot be told (unreadable, not ELF,
 * implausible). Bounded work: the headers, at most 4096 section headers, and the dynamic
 * symbol and string tables, each within the file and at most 4 MiB. */
int elf_defines(const char *file, const char *name);

/* The file ld.so loads for the entry tok[0..len) of ROOT/etc/ld.so.preload (root "" for
 * /): $LIB and ${LIB} are tried as lib/<multiarch>, lib64 and lib; a name without '/' is
 * looked for in the system's library directories. 1 with file[] set when one exists. */
int preload_resolve(const char *root, const char *tok, size_t len, char *file, size_t cap);

/* preload_resolve, then the file opened (O_RDONLY), inside preload_rootfd when it is set;
 * -1 when there is none. */
int preload_open(const char *root, const char *tok, size_t len, char *file, size_t cap);

/* At most this many entries before ours are read (bounded work, whatever the file holds). */
#define PRELOAD_OWNER_MAX_ENTRIES 64

/* 1 when the entry tok[0..len) names a library that defines malloc, with file[] set to it;
 * 0 otherwise (not found, unreadable: nothing is claimed). */
int preload_owns_malloc(const char *root, const char *tok, size_t len, char *file, size_t cap);

#endif
