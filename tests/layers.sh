#!/bin/sh
# lib/'s file-level call graph (from the library objects' symbols) runs down the layers
# docs/design.md gives: no upward use but the named ones, no circle of files.
set -u
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
objs=${TESTS_BUILDDIR:-$top/tests}/../lib/.libs
out=$(python3 "$top/tools/lib-layers" --check "$objs" 2>&1)
rc=$?
printf '%s\n' "$out" | diag
ok $rc "lib/ calls only down its layers"
done_testing
