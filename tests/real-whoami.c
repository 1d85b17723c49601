/* Prints, for each allocation entry point, the basename of the object that defines the
 * definition this process uses, e.g. "malloc libc.so.6" or "malloc libthpalloc.so.1".
 * Used by tests/real-programs.sh to prove that the preloaded thpalloc is in charge.
 * Both dladdr() of the function's address (what the program itself calls) and
 * dlsym(RTLD_DEFAULT) (what the dynamic linker resolves for everybody) must agree. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : (path ? path : "?");
}

static int show(const char *name, void *addr)
{
    Dl_info a, b;
    void *sym = dlsym(RTLD_DEFAULT, name);
    if (!dladdr(addr, &a) || !a.dli_fname) {
        printf("%s ? (dladdr failed)\n", name);
        return 1;
    }
    if (!sym || !dladdr(sym, &b) || !b.dli_fname) {
        printf("%s %s (dlsym failed)\n", name, base(a.dli_fname));
        return 1;
    }
    if (strcmp(a.dli_fname, b.dli_fname) != 0) {
        printf("%s %s (but dlsym says %s)\n", name, base(a.dli_fname), base(b.dli_fname));
        return 1;
    }
    printf("%s %s\n", name, base(a.dli_fname));
    return 0;
}

#define SHOW(f) rc |= show(#f, (void *)(uintptr_t)(f))

int main(void)
{
    int rc = 0;
    SHOW(malloc);
    SHOW(free);
    SHOW(calloc);
    SHOW(realloc);
    SHOW(reallocarray);
    SHOW(posix_memalign);
    SHOW(aligned_alloc);
    SHOW(memalign);
    SHOW(valloc);
    SHOW(pvalloc);
    SHOW(malloc_usable_size);
    /* and a real allocation goes through it */
    void *p = malloc(100);
    if (!p)
        rc = 1;
    free(p);
    return rc;
}
