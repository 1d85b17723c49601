#!/bin/sh
# lib/'s file-level call graph (from the library objects' symbols) runs down the layers
# docs/design.md gives: no upward use but the named ones, no circle of files.
set -u
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
objs=${TESTS_BUILDDIR:-$top/tests}/../lib/.libs
out=$(python3 "$top/tools/dev/lib-layers" --check "$objs" 2>&1)
rc=$?
printf '%s\n' "$out" | diag
ok $rc "lib/ calls only down its layers, and lib/internal.h's blocks hold what their files define"
case $out in
*"allowed circle: alloc -> init -> alloc"*) pass "the one documented circle (init's dormancy probe and alloc) is found and named" ;;
*) fail "the one documented circle (init's dormancy probe and alloc) is found and named" ;;
esac

# A partial build proves nothing: without one file's object the tool refuses (exit 2).
part=$(mktemp -d) && trap 'rm -rf "$part"' EXIT
cp "$objs"/libthpalloc_la-*.o "$part"/ && rm "$part/libthpalloc_la-arena.o"
perr=$(python3 "$top/tools/dev/lib-layers" --check "$part" 2>&1 >/dev/null)
prc=$?
is "$prc:$perr" "2:lib-layers: $part: no object for arena: a partial build, nothing checked (run make)" \
    "a build without arena.o is refused, exit 2"

# lib/internal.h: a declaration in the block of a file that does not define it is named.
sed -e '/^HIDDEN size_t purge_all(bool force);$/d' \
    -e 's/^HIDDEN void arena_fork(enum fork_phase phase);$/&\nHIDDEN size_t purge_all(bool force);/' \
    "$top/lib/internal.h" >"$part/internal.h"
hout=$(python3 "$top/tools/dev/lib-layers" --check --header "$part/internal.h" "$objs" 2>&1)
hrc=$?
hline=$(printf '%s\n' "$hout" | grep '^HEADER' | sed 's/^HEADER [^ ]*: //')
is "$hrc:$hline" "1:purge_all is declared in the block of arena.c but defined in purger.c" \
    "a declaration under another file's label in lib/internal.h fails the check"
done_testing
