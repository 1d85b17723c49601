/* thpalloc: the extension API. The standard allocation functions (malloc, free, ...)
 * are declared by <stdlib.h> and <malloc.h>; this header adds what only thpalloc has.
 * See thpalloc(3). */
#ifndef THPALLOC_H
#define THPALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define THPALLOC_VERSION_STRING "0.1.0"

/* Process-wide figures, in bytes. Filled by thpalloc_get_stats(); the struct only ever
 * grows at its end, and callers pass sizeof, so old binaries keep working. */
struct thpalloc_stats {
    uint64_t reserved;       /* address space reserved from the OS */
    uint64_t committed;      /* chunks handed out or waiting for purge (may be resident) */
    uint64_t huge_advised;   /* bytes currently under MADV_HUGEPAGE */
    uint64_t in_use;         /* bytes in live allocations (block sizes) */
    uint64_t purge_pending;  /* free chunks not yet given back to the OS */
    uint64_t purged;         /* total bytes given back to the OS so far */
    uint64_t large_count;    /* live blocks that have chunks of their own */
    uint64_t heaps;          /* thread heaps in use */
};

/* 1 when this library's malloc is the process's malloc, 0 when it is loaded but dormant
 * (another allocator won the malloc symbol). */
int thpalloc_active(void);

/* Copies min(size, sizeof(struct thpalloc_stats)) bytes of the current figures into *out.
 * Returns 0, or -1 with errno = EINVAL for a NULL out. */
int thpalloc_get_stats(struct thpalloc_stats *out, size_t size);

/* Gives every free chunk back to the OS now, whatever purge_delay says. Returns the bytes
 * purged. */
size_t thpalloc_purge(void);

/* 1 when ptr was handed out by thpalloc and is the start of a live block, else 0. */
int thpalloc_owns(const void *ptr);

/* The library's version, "0.1.0". */
const char *thpalloc_version(void);

#ifdef __cplusplus
}
#endif
#endif
