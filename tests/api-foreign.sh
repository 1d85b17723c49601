#!/bin/sh
# foreign: pointers thpalloc did not hand out (glibc's __libc_malloc & co, blocks from an
# RTLD_DEEPBIND module) passed to the interposed free/realloc/malloc_usable_size go back
# to glibc, keep their contents, and leave glibc's heap consistent; thpalloc_owns() tells
# them apart. tests/api-foreign-free runs plainly (the test's own sanity) and under the preload.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/api-foreign-free
module=$TESTS_BUILDDIR/.libs/api-foreign-deepbind.so
test -x "$prog" || bail "$prog not built"
test -r "$module" || bail "$module not built"

relay "glibc" 60 "$prog" "$module"
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" "$module"
done_testing
