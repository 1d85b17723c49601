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
    uint64_t reserved;      /* address space reserved from the OS */
    uint64_t committed;     /* chunks handed out or waiting for purge (may be resident) */
    uint64_t huge_advised;  /* bytes currently under MADV_HUGEPAGE */
    uint64_t in_use;        /* bytes in live allocations (block sizes) */
    uint64_t purge_pending; /* free chunks not yet given back to the OS */
    uint64_t purged;        /* total bytes given back to the OS so far */
    uint64_t large_count;   /* live blocks that have chunks of their own */
    uint64_t heaps;         /* thread heaps in use */
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

/* A key of the policy in force, with where its value came from. */
struct thpalloc_setting {
    const char *key;    /* "thp", "thp_threshold", "arena_size", "purge_delay", "purge", "stats" */
    const char *value;  /* canonical text: "large", "2M", "1s", "never", ... */
    const char *origin; /* "default", "environment THPALLOC_THP", "/etc/thpalloc.conf:12 [program
                           redis-server]" */
};

/* Fills up to n settings (in the order above) and returns how many keys there are (6).
 * The strings belong to the library and stay valid for the life of the process. */
int thpalloc_policy(struct thpalloc_setting *out, size_t n);

/* Introspection for thp-status: another process reads this object with process_vm_readv at
 * the address of the symbol `thpalloc_introspect` (same permission as reading smaps), so
 * that memory can be attributed to thpalloc even where mappings cannot be named. The
 * layout only grows at its end; `size` says how much of it this library has. */
#define THPALLOC_INTROSPECT_MAGIC 0x314f525450485440ULL /* "@THPPRO1" little-endian */
#define THPALLOC_RANGES_MAX 1024
struct thpalloc_range {
    uint64_t base, size; /* size 0: slot unused */
};
struct thpalloc_introspect {
    uint64_t magic;
    uint32_t version; /* 1 */
    uint32_t size;    /* sizeof(struct thpalloc_introspect) */
    uint32_t active;  /* 1 in charge, 0 dormant, 2 not initialised yet */
    int32_t thp_mode; /* 0 system, 1 never, 2 large, 3 always */
    uint64_t thp_threshold;
    uint64_t arena_size;
    int64_t purge_delay_ms;   /* -1: never */
    uint32_t purge;           /* 0 dontneed, 1 free */
    uint32_t policy_loaded;   /* the policy was resolved (first chunk allocated) */
    uint64_t ranges_used;     /* slots of range[] ever used */
    uint64_t ranges_overflow; /* reservations not recorded: the table was full */
    struct thpalloc_range range[THPALLOC_RANGES_MAX];
};
extern struct thpalloc_introspect thpalloc_introspect;

#ifdef __cplusplus
}
#endif
#endif
