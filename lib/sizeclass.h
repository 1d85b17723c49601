/* Size classes: 16-byte steps up to 128 B, then eight classes per power of two, so that a
 * block is never more than 12.5 % and 16 B larger than the request above 128 B (below, the
 * 16-byte alignment glibc guarantees decides). Every block size is a multiple of 16.
 *
 * Between 1 and 4 KiB the sixteen classes are instead chosen to fill their page: the largest
 * blocks that n of fill a 16 KiB page (n = 15 .. 8, 6 .. 4: 1088, 1168, 1248, 1360, 1488,
 * 1632, 1808, 2048, 2720, 3264, 4096), and between them 2320 and 2624 B (7 and 6 to a 16 KiB
 * page, 144 and 640 B left: 2336, 7's largest, is more than 12.5 % above 2048) and 2960,
 * 3440, 3632 B (22, 19, 18 to a 64 KiB page). Eight stepped classes left up to 1 KiB of a
 * 16 KiB page unused (1280 .. 3840 B) or took 64 KiB pages; a page's tail is resident with
 * its last block (docs/benchmarks-log.md). Finer classes would cost memory, not save it:
 * each class keeps the pages of its own high-water mark (16 a doubling from 1 to 4 KiB:
 * same log).
 *
 * Between 4 and 8 KiB the eight classes are the largest blocks that n of fill a
 * 64 KiB page, n = 15 .. 8 (4368, 4672, 5040, 5456, 5952, 6544, 7280, 8192): a page leaves
 * at most 128 B unused (the 16 B above: 7281 B takes 8192, 12.51 % more), and a page with a
 * small header (4096 + 8 from sqlite's allocator, 4096 + 272 for its page cache entries)
 * takes 4368 B, not 4608: such page-sized records are common (databases' pages). */
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

#define SC_PAGE_FIT_FIRST 49 /* the class of 4097 B */
#define SC_PAGE_FIT_LAST 56  /* of 8192 B */
#define SC_PAGE_FIT_BYTES ((size_t)64 << 10)

/* The classes of sizes DIRECT_MAX + 1 .. 8 KiB by (size + 15) / 16 - 65, as constants: the
 * malloc fast path's, and sc_class_of's (two divisions above 4 KiB otherwise). A class
 * serves every size up to its block size, a multiple of 16, so sizes that round up to the
 * same multiple of 16 have one class. */
#define SC_MID_FIRST 65 /* (1025 + 15) / 16 */
#define SC_MID_SLOTS (8192 / 16 - SC_MID_FIRST + 1)
#define SC_MID_N_(s)                                                                               \
    ((SC_PAGE_FIT_BYTES / (s)) -                                                                   \
     (((SC_PAGE_FIT_BYTES / (SC_PAGE_FIT_BYTES / (s))) & ~(size_t)15) < (s)))
#define SC_FIT16_FIRST 33 /* the class of 1025 B */
#define SC_FIT16_OF_(s)                                                                            \
    (SC_FIT16_FIRST + ((s) > 1088) + ((s) > 1168) + ((s) > 1248) + ((s) > 1360) + ((s) > 1488) +   \
     ((s) > 1632) + ((s) > 1808) + ((s) > 2048) + ((s) > 2320) + ((s) > 2624) + ((s) > 2720) +     \
     ((s) > 2960) + ((s) > 3264) + ((s) > 3440) + ((s) > 3632))
/* The two tables below are defined once, where SC_TABLES_DEFINE is (page.c; the unit
 * test, which links no library object): a static copy in each file that reads them took 512
 * B of the one page of .rodata every process maps (tests/build-layout.sh). */
#ifdef SC_TABLES_DEFINE
#define SC_TABLE_(decl, ...) __attribute__((visibility("hidden"))) const decl = __VA_ARGS__
#else
#define SC_TABLE_(decl, ...) extern __attribute__((visibility("hidden"))) const decl
#endif
SC_TABLE_(uint16_t sc_fit16_block[16], {1088, 1168, 1248, 1360, 1488, 1632, 1808, 2048, 2320, 2624,
                                        2720, 2960, 3264, 3440, 3632, 4096});
#define SC_MID_OF_(s)                                                                              \
    ((s) > 4096 ? SC_PAGE_FIT_FIRST + 15u - (unsigned)SC_MID_N_(s) : (unsigned)SC_FIT16_OF_(s))
#define SC_MID_X1_(i) (uint8_t) SC_MID_OF_(((size_t)(i) + SC_MID_FIRST) * 16),
#define SC_MID_X4_(i) SC_MID_X1_(i) SC_MID_X1_((i) + 1) SC_MID_X1_((i) + 2) SC_MID_X1_((i) + 3)
#define SC_MID_X16_(i) SC_MID_X4_(i) SC_MID_X4_((i) + 4) SC_MID_X4_((i) + 8) SC_MID_X4_((i) + 12)
#define SC_MID_X64_(i)                                                                             \
    SC_MID_X16_(i) SC_MID_X16_((i) + 16) SC_MID_X16_((i) + 32) SC_MID_X16_((i) + 48)
SC_TABLE_(uint8_t sc_mid_class[SC_MID_SLOTS],
          {SC_MID_X64_(0) SC_MID_X64_(64) SC_MID_X64_(128) SC_MID_X64_(192) SC_MID_X64_(256)
               SC_MID_X64_(320) SC_MID_X64_(384)});
_Static_assert(SC_MID_SLOTS == 448, "sc_mid_class lists 7 * 64 sizes");

/* size must be <= SC_MAX_SIZE. */
static inline unsigned sc_class_of(size_t size)
{
    if (size <= SC_SMALL_STEP_MAX)
        return size ? (unsigned)((size + 15) >> 4) : 1u;
    if (size > 1024 && size <= 8192)
        return sc_mid_class[((size + 15) >> 4) - SC_MID_FIRST];
    unsigned b = sc_floor_log2(size - 1); /* 7 for 129..256 */
    unsigned sub = (unsigned)((size - 1) >> (b - 3)) & 7u;
    return 8u + (b - 7u) * 8u + sub + 1u;
}

static inline size_t sc_block_size(unsigned cls)
{
    if (cls <= 8)
        return (size_t)cls << 4;
    if (cls >= SC_FIT16_FIRST && cls < SC_PAGE_FIT_FIRST)
        return sc_fit16_block[cls - SC_FIT16_FIRST];
    if (cls >= SC_PAGE_FIT_FIRST && cls <= SC_PAGE_FIT_LAST)
        return (SC_PAGE_FIT_BYTES / (15u - (cls - SC_PAGE_FIT_FIRST))) & ~(size_t)15;
    unsigned k = cls - 9; /* 0-based among the stepped classes */
    unsigned b = 7 + k / 8, sub = k % 8;
    return (size_t)(8 + sub + 1) << (b - 3);
}

#endif
