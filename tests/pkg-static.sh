#!/bin/bash
# libthpalloc.a (libthpalloc-dev): it defines exactly the symbols libthpalloc.so.1 exports
# (inih and the internal names stay private), and a program linked with
# `$(pkg-config --static --libs thpalloc) -static` runs on thpalloc: thpalloc_active() is 1,
# its blocks (malloc, calloc, realloc, posix_memalign, another thread's) are thpalloc's, it
# has no dynamic loader, and its own ini_parse and lib_init do not collide with the archive.
set -u
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
SRC=${TESTS_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
top=$BUILD/..
A=$top/lib/libthpalloc.a
SO=$top/lib/.libs/libthpalloc.so.1

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
if [ ! -f "$A" ] || [ ! -f "$SO" ]; then
    skip_all "$A or $SO is not built"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-static.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

nm -g --defined-only "$A" | awk 'NF == 3 { print $3 }' | LC_ALL=C sort >"$tmp/a.syms"
nm -D --defined-only "$SO" | awk 'NF == 3 && $3 !~ /^THPALLOC/ { sub(/@.*/, "", $3); print $3 }' |
    LC_ALL=C sort >"$tmp/so.syms"
diff "$tmp/so.syms" "$tmp/a.syms" | sed 's/^/# /'
cmp -s "$tmp/so.syms" "$tmp/a.syms" && [ -s "$tmp/a.syms" ]
ok $? "libthpalloc.a defines what libthpalloc.so.1 exports, nothing more ($(wc -l <"$tmp/a.syms") symbols)"
! grep -q '^ini_' "$tmp/a.syms"
ok $? "inih's functions are private in libthpalloc.a"

if ! command -v pkg-config >/dev/null; then
    ok 0 "# SKIP pkg-config is not installed"
    echo "1..$tap_n"
    exit 0
fi
# The build tree's thpalloc.pc, pointed at the build tree.
sed -e "s|^libdir=.*|libdir=$top/lib|" -e "s|^includedir=.*|includedir=$top/lib|" \
    "$top/thpalloc.pc" >"$tmp/thpalloc.pc"
export PKG_CONFIG_PATH=$tmp
libs=$(pkg-config --static --libs thpalloc)
libs=${libs% }
[ "$libs" = "-L$top/lib -lthpalloc -pthread" ]
ok $? "pkg-config --static --libs thpalloc: -L... -lthpalloc -pthread ($libs)"
# shellcheck disable=SC2046,SC2086
${CC:-cc} -o "$tmp/prog" "$SRC/pkg-static.c" $(pkg-config --cflags thpalloc) $libs -static \
    2>"$tmp/cc.err"
rc=$?
sed 's/^/# cc: /' "$tmp/cc.err"
[ "$rc" -eq 0 ] && [ ! -s "$tmp/cc.err" ]
ok $? "cc ... \$(pkg-config --static --libs thpalloc) -static links, without a warning (rc=$rc)"
if [ "$rc" -eq 0 ]; then
    ! LC_ALL=C readelf -l "$tmp/prog" | grep -q 'INTERP'
    ok $? "the program is static (no program interpreter)"
    out=$(env -u LD_PRELOAD THPALLOC_CONF=/dev/null "$tmp/prog" 2>"$tmp/err")
    rc=$?
    [ "$rc" -eq 0 ] && [ "$out" = "active=1 owns=11111 static=yes ini_parse=7" ] && [ ! -s "$tmp/err" ]
    ok $? "it runs on thpalloc: '$out' (rc=$rc)"
else
    ok 1 "the program is static (not built)"
    ok 1 "it runs on thpalloc (not built)"
fi

done_testing
