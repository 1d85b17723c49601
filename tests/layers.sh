#!/bin/sh
# lib/'s file-level call graph (from the library objects' symbols) runs down the layers
# docs/design.md gives: no upward use but the named ones, no circle of files.
set -u
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
objs=${TESTS_BUILDDIR:-$top/tests}/../lib/.libs
out=$(python3 "$top/tools/lib-layers" --check "$objs" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then echo "ok 1 - lib/ calls only down its layers"; else echo "not ok 1 - lib/ calls only down its layers"; fi
echo "1..1"
