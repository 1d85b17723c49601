/* thpalloc internals, layer 14: the malloc family and the statistics (base.h says how the
 * headers go). */
#ifndef THPALLOC_ALLOC_H
#define THPALLOC_ALLOC_H

#include "init.h"

/* ---- glibc's own functions alloc.c passes foreign pointers to --------------------------- */
/* Weak, as init.c's are (init.h says why). */
extern void __libc_free(void *) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_valloc(size_t) __attribute__((weak));
extern void *__libc_pvalloc(size_t) __attribute__((weak));

/* ---- alloc.c: the malloc family --------------------------------------------------------- */
HIDDEN void *lib_malloc_self(size_t size);
HIDDEN void foreign_free(void *p) __attribute__((cold));
HIDDEN void *foreign_realloc(void *p, size_t size) __attribute__((cold));
HIDDEN size_t foreign_usable_size(void *p);

/* ---- stats.c ---------------------------------------------------------------------------- */
struct thpalloc_stats;
HIDDEN void stats_collect(struct thpalloc_stats *s);

#endif
