#!/bin/sh
# build-debug: the allocator's invariants checked at run time. The lib/ sources are built as
# a separate libthpalloc.so.1 with -DTHPALLOC_DEBUG (what configure --enable-debug
# defines: LIB_ASSERT checks the page list partition, the slot state transitions, each
# arena's free count against its bitmaps, the registry after every write), and the
# stress, thread and reclaim suites run again against it, their TAP lines relayed with a
# "debug: " prefix. A failed invariant aborts with "thpalloc: invariant failed: EXPR at
# FILE:LINE", which fails the suite that met it. (The fuzz harness builds its library
# with the same define: tests/build-fuzz.sh.)
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

top=$(cd "$TESTS_SRCDIR/.." && pwd)
# lib/thpalloc.h is made by configure: in the build tree (not the source tree in a VPATH build).
btop=$(cd "${TESTS_BUILDDIR:-$TESTS_SRCDIR}/.." && pwd)
CC=${CC:-gcc}
inih=
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    test -f "$d/libinih.a" && inih=$d/libinih.a && break
done
test -n "$inih" || bail "libinih.a not found (apt-get install libinih-dev)"
mkdir -p "$tap_tmp/debug"
dlib=$tap_tmp/debug/libthpalloc.so.1
$CC -shared -fPIC -std=gnu11 -g -O1 -DTHPALLOC_DEBUG=1 -D_GNU_SOURCE=1 -DHAVE_SYS_AUXV_H=1 \
    -DSYSCONFDIR=\"/etc\" -Wall -Wextra -Werror -fvisibility=hidden -fno-builtin \
    -ftls-model=initial-exec -pthread -I"$btop/lib" -I"$top/lib" "$top"/lib/*.c \
    -Wl,--version-script="$top/lib/thpalloc.map" -Wl,-z,nodelete -Wl,--exclude-libs,ALL \
    -Wl,-soname,libthpalloc.so.1 "$inih" -o "$dlib" >"$tap_tmp/debug.cc" 2>&1
check "the debug build (-DTHPALLOC_DEBUG, -Werror) builds" test -f "$dlib"
head -n 5 "$tap_tmp/debug.cc" | while IFS= read -r l; do diag "$l"; done
test -f "$dlib" || done_testing
check "the debug build has its invariant checks compiled in" \
    sh -c 'strings "$1" | grep -q "invariant failed"' sh "$dlib"

# suite SCRIPT: runs a suite against the debug build; its assertions count here.
suite() {
    THPALLOC_LIB=$dlib tap_timeout 600 bash "$TESTS_SRCDIR/$1" >"$tap_tmp/suite.out" 2>&1
    _rc=$?
    _n=0
    while IFS= read -r _l; do
        case $_l in
        "ok "*) pass "debug: $1: ${_l#ok * - }"; _n=$((_n + 1)) ;;
        "not ok "*) fail "debug: $1: ${_l#not ok * - }"; _n=$((_n + 1)) ;;
        "# "*) printf '%s\n' "$_l" ;;
        esac
    done <"$tap_tmp/suite.out"
    check "debug: $1 ran to its end ($_n assertions, exit $_rc)" test "$_rc" -eq 0 -a "$_n" -gt 0
    grep -h "invariant failed" "$tap_tmp/suite.out" | head -n 3 | while IFS= read -r l; do diag "$l"; done
}
suite stress-threads.sh
suite stress-churn.sh
suite purge-reclaim.sh
done_testing
