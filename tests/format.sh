#!/bin/sh
# Every C source is formatted with the project's .clang-format (one TAP line per file).
set -u
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
if ! command -v clang-format >/dev/null 2>&1; then
    echo "1..0 # SKIP clang-format is not installed"
    exit 0
fi
n=0
for f in "$top"/lib/*.[ch] "$top"/tools/*.[ch] "$top"/tests/*.[ch] "$top"/tests/*.cc \
    "$top"/tests/bench/*.[ch] "$top"/tests/fuzz/*.c; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    rel=${f#"$top"/}
    if (cd "$top" && clang-format --style=file "$rel" | cmp -s - "$rel"); then
        echo "ok $n - $rel is clang-formatted"
    else
        echo "not ok $n - $rel differs from clang-format's output (run clang-format -i $rel)"
    fi
done
echo "1..$n"
