/* Size classes: every size maps to the smallest class that holds it, block sizes are
 * multiples of 16, and waste above 128 B is at most 12.5 %. */
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
        if (size > 128 && (b - size) * 8 > size) {
            waste = 0;
            worst = b - size, worst_size = size;
        }
    }
    tap_ok(mono, "every size up to 1 MiB has a class in 1..%d", SC_COUNT - 1);
    tap_ok(fits, "every block holds its request");
    tap_ok(tight, "the class is the smallest that fits");
    tap_ok(aligned, "every block size is a multiple of 16");
    tap_ok(waste, "waste above 128 B at most 12.5 %% (worst %zu at %zu)", worst, worst_size);
    tap_ok(sc_class_of(SC_MAX_SIZE) == SC_COUNT - 1, "1 MiB is the last class");
    tap_ok(sc_block_size(sc_class_of(0)) == 16, "malloc(0) gets a 16-byte block");
    tap_ok(sc_block_size(sc_class_of(129)) == 144, "129 B -> 144 B");
    tap_ok(sc_block_size(sc_class_of(1000)) == 1024, "1000 B -> 1024 B");
    return tap_done();
}
