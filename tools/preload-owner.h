/* Which entry of ld.so.preload owns malloc (tools/preload-owner.c), for thpalloc-preload and
 * thp-status: ld.so binds a program's malloc to the first object of its lookup scope that
 * defines it (the program, then the preloaded libraries in order), so thpalloc, preloaded
 * after another allocator, stays dormant in every process. */
#ifndef THPALLOC_PRELOAD_OWNER_H
#define THPALLOC_PRELOAD_OWNER_H

#include <stddef.h>

/* 1 when the ELF object at `file` defines the function `name` (in its dynamic symbol
 * table), 0 when it does not, -1 when that cannot be told (unreadable, not ELF,
 * implausible). Bounded work: the headers, at most 4096 section headers, and the dynamic
 * symbol and string tables, each within the file and at most 4 MiB. */
int elf_defines(const char *file, const char *name);

/* The file ld.so loads for the entry tok[0..len) of ROOT/etc/ld.so.preload (root "" for
 * /): $LIB and ${LIB} are tried as lib/<multiarch>, lib64 and lib; a name without '/' is
 * looked for in the system's library directories. 1 with file[] set when one exists. */
int preload_resolve(const char *root, const char *tok, size_t len, char *file, size_t cap);

/* At most this many entries before ours are read (bounded work, whatever the file holds). */
#define PRELOAD_OWNER_MAX_ENTRIES 64

/* 1 when the entry tok[0..len) names a library that defines malloc, with file[] set to it;
 * 0 otherwise (not found, unreadable: nothing is claimed). */
int preload_owns_malloc(const char *root, const char *tok, size_t len, char *file, size_t cap);

#endif
