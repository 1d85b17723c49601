#!/bin/sh
# footprint-realloc: buffers grown by realloc (tests/footprint-realloc.c). One buffer grown 100 bytes at
# a time to 512 KiB keeps its contents and, past 4 KiB, grows where it stands (an extent);
# 2000 buffers grown in random order through the medium sizes cost at most 1.9x their bytes
# of anonymous memory (smaps_rollup). glibc's malloc runs the same program beside it, for
# the record and as a control that the program itself is sound.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/footprint-realloc
test -x "$prog" || bail "$prog not built"
for what in inplace medium; do
    relay "$what" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" "$what"
    tap_timeout 60 "$prog" "$what" >"$tap_tmp/glibc.out" 2>&1
    rc=$?
    diag "glibc, $what: $(grep '^#' "$tap_tmp/glibc.out" | tr '\n' ' ')"
    check "glibc, $what: the buffers keep their contents" \
        grep -q "^ok - .* keep" "$tap_tmp/glibc.out"
done
done_testing
