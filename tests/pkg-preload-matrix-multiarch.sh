#!/bin/sh
# The thpalloc-preload matrix again, with the tool built as the Debian package builds it
# and under ASan + UBSan: its entry is /usr/$LIB/libthpalloc.so.1 (ld.so expands $LIB),
# which also brings in the checks for foreign dpkg architectures; a sanitizer report makes
# the tool exit non-zero or write to stderr, which the matrix's cases catch. Skipped where
# the compiler has no multiarch triplet.
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
case $("$BUILD/thpalloc-preload-multiarch" --help 2>/dev/null | sed -n 's/^entry: //p') in
*'$LIB'*) ;;
*)
    echo "1..0 # SKIP no multiarch triplet: the tool's entry has no \$LIB"
    exit 0
    ;;
esac
THPALLOC_PRELOAD_TOOL=$BUILD/thpalloc-preload-multiarch exec bash \
    "${TESTS_SRCDIR:-$(dirname "$0")}/pkg-preload-matrix.sh"
