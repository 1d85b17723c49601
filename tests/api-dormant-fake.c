/* api-dormant-fake: a trivial bump allocator that defines the whole malloc API. Preloaded
 * before thpalloc (LD_PRELOAD="api-dormant-fake.so:libthpalloc.so.1") it wins the malloc
 * symbol, as a per-process LD_PRELOAD allocator does over /etc/ld.so.preload; thpalloc
 * must then stay dormant. Blocks come from a static 128 MiB area and are never reused. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define AREA_SIZE ((size_t)128 << 20)
#define HDR 16 /* size_t size at p - 8 */

static unsigned char area[AREA_SIZE] __attribute__((aligned(4096)));
static size_t used; /* bytes of area handed out, atomically bumped */

EXPORT int dormant_fake_marker(void);
EXPORT void *malloc(size_t n);
EXPORT void free(void *p);
EXPORT void cfree(void *p);
EXPORT void *calloc(size_t n, size_t m);
EXPORT void *realloc(void *p, size_t n);
EXPORT void *reallocarray(void *p, size_t n, size_t m);
EXPORT int posix_memalign(void **out, size_t align, size_t n);
EXPORT void *aligned_alloc(size_t align, size_t n);
EXPORT void *memalign(size_t align, size_t n);
EXPORT void *valloc(size_t n);
EXPORT void *pvalloc(size_t n);
EXPORT size_t malloc_usable_size(void *p);

int dormant_fake_marker(void)
{
    return 42;
}

static void *bump(size_t align, size_t n)
{
    if (align < 16)
        align = 16;
    while (align & (align - 1)) /* up to a power of two */
        align += align & -align;
    if (n > AREA_SIZE || align > AREA_SIZE / 2) {
        errno = ENOMEM;
        return NULL;
    }
    size_t old = __atomic_load_n(&used, __ATOMIC_RELAXED);
    for (;;) {
        uintptr_t base = (uintptr_t)area + old + HDR;
        uintptr_t p = (base + align - 1) & ~(uintptr_t)(align - 1);
        size_t end = (size_t)(p - (uintptr_t)area) + ((n + 15) & ~(size_t)15);
        if (end > AREA_SIZE) {
            errno = ENOMEM;
            return NULL;
        }
        if (__atomic_compare_exchange_n(&used, &old, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            ((size_t *)p)[-1] = n;
            return (void *)p;
        }
    }
}

void *malloc(size_t n)
{
    return bump(16, n);
}

void free(void *p)
{
    (void)p;
}

void cfree(void *p)
{
    (void)p;
}

void *calloc(size_t n, size_t m)
{
    size_t t;
    if (__builtin_mul_overflow(n, m, &t)) {
        errno = ENOMEM;
        return NULL;
    }
    return bump(16, t); /* never reused: still zero */
}

size_t malloc_usable_size(void *p)
{
    return p ? ((size_t *)p)[-1] : 0;
}

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    void *q = malloc(n);
    if (q) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

void *reallocarray(void *p, size_t n, size_t m)
{
    size_t t;
    if (__builtin_mul_overflow(n, m, &t)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, t);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = bump(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    return bump(align, n);
}

void *memalign(size_t align, size_t n)
{
    return bump(align, n);
}

void *valloc(size_t n)
{
    return bump(4096, n);
}

void *pvalloc(size_t n)
{
    return bump(4096, (n + 4095) & ~(size_t)4095);
}
