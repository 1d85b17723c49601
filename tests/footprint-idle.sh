#!/bin/sh
# footprint-idle: what an idle process pays for thpalloc, read from the kernel
# (tests/footprint-idle.py): Private_Dirty (smaps_rollup) of idle sleep, bash, perl and python3
# under glibc and under the library, medians of three, within the bound; and the pages of
# the library's own writable segment that an idle sleep has written (pagemap), at most 3.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

relay footprint 300 "${PYTHON:-python3}" "$TESTS_SRCDIR/footprint-idle.py" "$THPALLOC_LIB"
done_testing
