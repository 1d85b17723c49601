#!/bin/sh
# Every C source is formatted with the project's .clang-format (one TAP line per file).
set -u
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
command -v clang-format >/dev/null 2>&1 || skip_all "clang-format is not installed"
for f in "$top"/lib/*.[ch] "$top"/tools/*/*.[ch] "$top"/tests/*.[ch] "$top"/tests/*.cc \
    "$top"/tests/bench/*.[ch] "$top"/tests/fuzz/*.c; do
    [ -f "$f" ] || continue
    rel=${f#"$top"/}
    if (cd "$top" && clang-format --style=file "$rel" | cmp -s - "$rel"); then
        pass "$rel is clang-formatted"
    else
        fail "$rel differs from clang-format's output (run clang-format -i $rel)"
    fi
done
done_testing
