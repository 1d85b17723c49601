/* thpalloc internals, layer 13: first use, dormancy, pass-through (base.h says how the
 * headers go). */
#ifndef THPALLOC_INIT_H
#define THPALLOC_INIT_H

#include "purger.h"

/* ---- glibc's own functions init.c calls (foreign pointers) ------------------------------ */
/* Weak: a static program linked with libthpalloc.a must not pull glibc's malloc.o out of
 * libc.a (its malloc would collide with ours); there they are null, and a static program has
 * no foreign pointer and cannot pass through (lib_init refuses to). In a shared object they
 * bind to libc.so's as before. */
extern void *__libc_malloc(size_t) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));

/* ---- init.c: first use, dormancy, pass-through, fork ------------------------------------ */
extern HIDDEN _Atomic int probe_active, probe_hit;
extern HIDDEN pthread_t probe_thread;
extern HIDDEN bool passthrough;
extern HIDDEN _Atomic bool lib_ready_native;
HIDDEN void lib_init(void);
HIDDEN bool lib_dormant(void);
HIDDEN bool lib_passthrough_init(void);
HIDDEN void *passthrough_alloc(size_t size, size_t align, bool zero);
HIDDEN void *passthrough_next(const char *name);

/* Whether the process runs on glibc's malloc (pass-through): one load once init is done. */
static inline bool lib_passthrough(void)
{
    return likely(atomic_load_explicit(&lib_ready_native, memory_order_acquire))
               ? false
               : lib_passthrough_init();
}

#endif
