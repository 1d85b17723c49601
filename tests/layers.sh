#!/bin/sh
# lib/'s file-level call graph (from the library objects' symbols) runs down the layers
# docs/design.md gives: no upward use but the named ones, no circle of files; and lib/'s
# headers say so too: one a layer, each file including only its layer's or lower ones, no
# inline calling up.
set -u
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
top=${TESTS_SRCDIR:-$(dirname "$0")}/..
objs=${TESTS_BUILDDIR:-$top/tests}/../lib/.libs
out=$(python3 "$top/tools/dev/lib-layers" --check "$objs" 2>&1)
rc=$?
printf '%s\n' "$out" | diag
ok $rc "lib/ calls and includes only down its layers, and the layer headers' blocks hold what their files define"
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

# The headers, from a copy of lib/ with one fault each (--lib): the check names it, exit 1.
fault() { # NAME SED-SCRIPT FILE: a copy of lib/ with FILE edited; the check's HEADER/INCLUDE/
    # INLINE/STALE lines, their file paths dropped
    rm -rf "$part/lib" && mkdir "$part/lib" && cp "$top"/lib/*.[ch] "$part/lib/" &&
        sed -i -e "$2" "$part/lib/$3" || bail "cannot copy lib/"
    fout=$(python3 "$top/tools/dev/lib-layers" --check --lib "$part/lib" "$objs" 2>&1)
    frc=$?
    fline=$(printf '%s\n' "$fout" | grep -E '^(HEADER|INCLUDE|INLINE|STALE) ' |
        sed -e 's/^\([A-Z]*\) [^ ]*: /\1 /')
    printf '%s\n' "$fout" | grep -E '^(HEADER|INCLUDE|INLINE|STALE) ' | diag
}
fault decl '/^HIDDEN size_t arena_purge_chunks(bool force);$/a HIDDEN size_t purge_all(bool force);' arena.h
is "$frc:$fline" "1:HEADER purge_all is declared in the block of arena.c but defined in purger.c" \
    "a declaration under another file's label fails the check"
fault block '/^\/\* ---- heap\.c/i /* ---- abandon.c ---- */' heap.h
is "$frc:$fline" "1:HEADER block abandon.c (layer 8) in heap.h, the header of layer 9" \
    "a file's block in another layer's header fails the check"
fault up '/^#include "page.h"$/a #include "heap.h"' page.c
is "$frc:$fline" "1:INCLUDE includes heap.h (layer 9), above its own layer (5)" \
    "an upward include in a .c file (page.c of heap.h) fails the check"
fault hup 's/^#include "chunk.h"$/#include "heap.h"/' extent-map.h
is "$frc:$fline" "1:INCLUDE includes heap.h (layer 9), above its own layer (7)" \
    "an upward include in a header (extent-map.h of heap.h) fails the check"
fault chain 's/^#include "page-queue.h"$/#include "page.h"/' chunk.h
is "$frc:$fline" "1:INCLUDE does not include page-queue.h, the header below it" \
    "a layer header that skips the one below it fails the check"
fault stale '/^#include "alloc.h"$/d' init.c
is "$frc:$fline" "1:STALE include exception init.c -> alloc.h: no such include any more" \
    "an include exception no file needs any more fails the check"
fault inline 's/^    return (size_t)1 << c->page_shift;$/    heap_wait_reclaim(NULL);\n&/' page.h
is "$frc:$fline" \
    "1:INLINE page_size_of calls heap_wait_reclaim, which heap.h declares (layer 9), above its own layer (5)" \
    "an inline that calls a layer above its header's fails the check"
done_testing
