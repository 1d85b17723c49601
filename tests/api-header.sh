#!/bin/sh
# api-header: <thpalloc.h> in a program that calls every function it declares
# (tests/api-header.c) compiles warning-free with -Wall -Wextra -Werror under gcc and clang,
# as C (gnu11) and as C++ (g++/clang++), at -O0 and -O2, links with -lthpalloc and answers
# as thpalloc does.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

btop=$(cd "$TESTS_BUILDDIR/.." && pwd)
libdir=$(dirname "$THPALLOC_LIB")
src=$TESTS_SRCDIR/api-header.c
want="active=1 owns=1 stats=0 in_use>0=1 keys=8 first=thp purge=ok version=same"
for cc in gcc clang g++ clang++; do
    if ! command -v "$cc" >/dev/null 2>&1; then
        skip "$cc: not installed"
        continue
    fi
    lang=c std=gnu11
    case $cc in *++) lang=c++ std=gnu++17 ;; esac
    for o in -O0 -O2; do
        d="$cc $o ($lang)"
        if "$cc" -x "$lang" -std=$std -Wall -Wextra -Werror $o -I"$btop/lib" "$src" \
            -L"$libdir" -lthpalloc -Wl,-rpath,"$libdir" -o "$tap_tmp/prog" >"$tap_tmp/cc.log" 2>&1; then
            pass "$d: compiles with -Wall -Wextra -Werror"
        else
            fail "$d: compiles with -Wall -Wextra -Werror"
            head -n 8 "$tap_tmp/cc.log" | while IFS= read -r l; do diag "$l"; done
            continue
        fi
        got=$("$tap_tmp/prog" 2>&1)
        check "$d: linked, every call answers as thpalloc does ($got)" test "$got" = "$want"
    done
done
done_testing
