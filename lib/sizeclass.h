/* Size classes: 16-byte steps up to 128 B, then eight classes per power of two, so that a
 * block is never more than 12.5 % larger than the request above 128 B (below, the 16-byte
 * alignment glibc guarantees decides). Every block size is a multiple of 16. */
#ifndef THPALLOC_SIZECLASS_H
#define THPALLOC_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

#define SC_SMALL_STEP_MAX 128
#define SC_MAX_SIZE ((size_t)1 << 20) /* largest size class: 1 MiB */
/* Class 0 is unused; 1..8 are 16..128; then 8 per doubling up to 1 MiB (class 112). */
#define SC_COUNT 113

static inline unsigned sc_floor_log2(size_t x)
{
    return (unsigned)(63 - __builtin_clzll((unsigned long long)x));
}

/* size must be <= SC_MAX_SIZE. */
static inline unsigned sc_class_of(size_t size)
{
    if (size <= SC_SMALL_STEP_MAX)
        return size ? (unsigned)((size + 15) >> 4) : 1u;
    unsigned b = sc_floor_log2(size - 1); /* 7 for 129..256 */
    unsigned sub = (unsigned)((size - 1) >> (b - 3)) & 7u;
    return 8u + (b - 7u) * 8u + sub + 1u;
}

static inline size_t sc_block_size(unsigned cls)
{
    if (cls <= 8)
        return (size_t)cls << 4;
    unsigned k = cls - 9; /* 0-based among the stepped classes */
    unsigned b = 7 + k / 8, sub = k % 8;
    return (size_t)(8 + sub + 1) << (b - 3);
}

#endif
