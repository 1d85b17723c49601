/* api-foreign-deepbind: a module that tests/api-foreign-free dlopen()s with RTLD_DEEPBIND. With
 * DEEPBIND the module's own dependencies (libc) come before the global scope, so the
 * malloc it calls is glibc's even when thpalloc is preloaded: its blocks are foreign to
 * thpalloc, and the main program frees and reallocs them with the interposed functions. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void *foreign_db_malloc(size_t n);
void *foreign_db_calloc(size_t n, size_t m);
void *foreign_db_realloc(void *p, size_t n);
int foreign_db_posix_memalign(void **p, size_t a, size_t n);
const char *foreign_db_malloc_dso(void);

__attribute__((visibility("default"))) void *foreign_db_malloc(size_t n)
{
    return malloc(n);
}

__attribute__((visibility("default"))) void *foreign_db_calloc(size_t n, size_t m)
{
    return calloc(n, m);
}

__attribute__((visibility("default"))) void *foreign_db_realloc(void *p, size_t n)
{
    return realloc(p, n);
}

__attribute__((visibility("default"))) int foreign_db_posix_memalign(void **p, size_t a, size_t n)
{
    return posix_memalign(p, a, n);
}

/* The object that defines the malloc this module is bound to (through its GOT). */
__attribute__((visibility("default"))) const char *foreign_db_malloc_dso(void)
{
    void *(*volatile m)(size_t) = malloc;
    Dl_info info;
    if (!dladdr((void *)m, &info) || !info.dli_fname)
        return "unknown";
    const char *base = strrchr(info.dli_fname, '/');
    return base ? base + 1 : info.dli_fname;
}
