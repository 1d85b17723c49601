/* Size classes: every size maps to the smallest class that holds it, block sizes are
 * multiples of 16, and waste above 128 B is at most 12.5 % and a 16-byte step (the page-fit
 * classes between 4 and 8 KiB: 7281 B takes 8192, 12.51 %); the classes from 1 to 8 KiB
 * fill their pages. */
#define SC_TABLES_DEFINE /* the tables, as page.c defines them */
#include "sizeclass.h"
#include "tap.h"

int main(void)
{
    int mono = 1, fits = 1, tight = 1, aligned = 1, waste = 1;
    size_t worst = 0, worst_size = 0;
    for (size_t size = 0; size <= SC_MAX_SIZE; size++) {
        unsigned c = sc_class_of(size);
        size_t b = sc_block_size(c);
        if (c < 1 || c >= SC_COUNT)
            mono = 0;
        if (b < size)
            fits = 0;
        if (c > 1 && sc_block_size(c - 1) >= size && size > 0)
            tight = 0;
        if (b % 16)
            aligned = 0;
        if (size > 128 && b - size > 16 && (b - size - 16) * 8 > size) {
            waste = 0;
            worst = b - size, worst_size = size;
        }
    }
    tap_ok(mono, "every size up to 1 MiB has a class in 1..%d", SC_COUNT - 1);
    tap_ok(fits, "every block holds its request");
    tap_ok(tight, "the class is the smallest that fits");
    tap_ok(aligned, "every block size is a multiple of 16");
    tap_ok(waste, "waste above 128 B at most 12.5 %% and 16 B (worst %zu at %zu)", worst,
           worst_size);
    tap_ok(sc_class_of(SC_MAX_SIZE) == SC_COUNT - 1, "1 MiB is the last class");
    tap_ok(sc_block_size(sc_class_of(0)) == 16, "malloc(0) gets a 16-byte block");
    tap_ok(sc_block_size(sc_class_of(129)) == 144, "129 B -> 144 B");
    tap_ok(sc_block_size(sc_class_of(1000)) == 1024, "1000 B -> 1024 B");
    /* (4 KiB, 8 KiB]: the largest blocks that n of fill a 64 KiB page, n = 15 .. 8 */
    static const size_t fit[] = {4368, 4672, 5040, 5456, 5952, 6544, 7280, 8192};
    int fill = 1;
    for (unsigned i = 0; i < 8; i++) {
        size_t b = sc_block_size(sc_class_of(4096) + 1 + i), n = (64 << 10) / b;
        if (b != fit[i] || n != 15 - i || (64 << 10) - n * b >= 16 * n)
            fill = 0;
    }
    tap_ok(fill, "the classes above 4 KiB fill a 64 KiB page to less than 16 B a block");
    tap_ok(sc_block_size(sc_class_of(4104)) == 4368, "4104 B (4 KiB + sqlite's header) -> 4368 B");
    tap_ok(sc_block_size(sc_class_of(4369)) == 4672, "4369 B -> 4672 B");
    tap_ok(sc_block_size(sc_class_of(8192)) == 8192 && sc_block_size(sc_class_of(8193)) == 9216,
           "8 KiB -> 8 KiB, 8 KiB + 1 -> 9 KiB");
    /* the malloc fast path's table for 1 KiB + 1 .. 8 KiB (sizeclass.h, sc_mid_class), which
     * sc_class_of reads too: against a search of the block sizes */
    int mid = 1;
    size_t mid_bad = 0;
    for (size_t size = 1025; size <= 8192; size++) {
        unsigned c = 1;
        while (sc_block_size(c) < size)
            c++;
        if (sc_mid_class[((size + 15) >> 4) - SC_MID_FIRST] != c && mid) {
            mid = 0;
            mid_bad = size;
        }
    }
    tap_ok(mid,
           "the fast path's class table gives the smallest class that holds each size from "
           "1025 B to 8 KiB (first wrong: %zu)",
           mid_bad);
    /* (1 KiB, 4 KiB]: blocks that fill their page (chunk.c, kind_of_class: a 16 KiB page
     * when it leaves at most 1 KiB, else 64 KiB) */
    static const size_t fit16[] = {1088, 1168, 1248, 1360, 1488, 1632, 1808, 2048,
                                   2320, 2624, 2720, 2960, 3264, 3440, 3632, 4096};
    int fill16 = 1, medium = 0;
    for (unsigned i = 0; i < 16; i++) {
        size_t b = sc_block_size(sc_class_of(1025) + i);
        size_t page = (16 << 10) % b <= 1024 ? 16 << 10 : 64 << 10;
        medium += page == 64 << 10;
        if (b != fit16[i] || page % b > (page == 16 << 10 ? 1024 : 512))
            fill16 = 0;
    }
    tap_ok(fill16 && medium == 3,
           "the classes between 1 and 4 KiB leave at most 1 KiB of a 16 KiB page, 512 B of a "
           "64 KiB one (%d of them)",
           medium);
    tap_ok(sc_block_size(sc_class_of(1025)) == 1088 && sc_block_size(sc_class_of(2049)) == 2320 &&
               sc_block_size(sc_class_of(4000)) == 4096,
           "1025 B -> 1088 B, 2049 B -> 2320 B, 4000 B -> 4096 B");
    return tap_done();
}
