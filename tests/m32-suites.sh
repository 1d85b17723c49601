#!/bin/bash
# m32-suites: thpalloc for 32-bit programs. The Debian packages are linux-any and Multi-Arch:
# same, so libthpalloc1:i386 is what a machine running i386 programs installs next to the
# amd64 one, and the single ld.so.preload line /usr/$LIB/libthpalloc.so.1 then reaches
# both. Here, with gcc -m32 (gcc-multilib) and Debian's i386 libinih.a
# (tools/dev/fetch-inih-i386, run by tools/dev/install-build-deps):
#   1. the lib/ sources build as a 32-bit libthpalloc.so.1 with the project's warnings and
#      -Werror, exporting exactly the 64-bit library's symbols; tests/unit-registry and
#      tests/unit-os-purge pass at 32 bits;
#   2. the API, foreign-pointer, out-of-memory, misuse (cases and the fuzzer), thread-churn,
#      reclaim and stress suites (the same scripts as the 64-bit run) pass with 32-bit
#      builds of their programs under the 32-bit library; a UBSan build of the 32-bit
#      library runs api-table (the same table), stress-threads' modes and thread cycles
#      with no report;
#   3. system-wide preload (as root, in a private mount namespace over a copy of /etc whose
#      ld.so.preload holds "$DIR/$LIB/libthpalloc.so.1"): a 32-bit and a 64-bit program each
#      get the library of their own architecture, and ld.so prints nothing.
# Without gcc -m32 or the i386 libinih.a the test is skipped, unless
# THPALLOC_REQUIRE_M32=1 (CI): then it fails. On a kernel that does not execute 32-bit
# programs (tests/m32-probe.sh runs one) the builds are made and checked and every run is
# skipped with the reason, with or without THPALLOC_REQUIRE_M32.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

top=$(cd "$TESTS_SRCDIR/.." && pwd)
# lib/thpalloc.h is made by configure: in the build tree (not the source tree in a VPATH build).
btop=$(cd "${TESTS_BUILDDIR:-$TESTS_SRCDIR}/.." && pwd)
CC=${CC:-gcc}
inih=
for a in "${INIH32_STATIC:-}" /usr/lib/i386-linux-gnu/libinih.a \
    "${THPALLOC_CI_CACHE:-/var/cache/thpalloc-ci}/inih-i386/libinih.a"; do
    test -n "$a" && test -f "$a" && inih=$a && break
done
. "$TESTS_SRCDIR/m32-probe.sh"
m32_probe "$tap_tmp"
why= norun=
if test "$M32_KIND" = toolchain; then
    why=$M32_WHY
elif test -z "$inih"; then
    why="no i386 libinih.a (tools/dev/fetch-inih-i386 /var/cache/thpalloc-ci/inih-i386)"
fi
if test -n "$why"; then
    if test "${THPALLOC_REQUIRE_M32:-0}" = 1; then
        echo "not ok 1 - the 32-bit build can be made: $why"
        echo "1..1"
        exit 1
    fi
    echo "1..0 # SKIP $why"
    exit 0
fi
# A kernel that cannot run them: the builds are still made and checked (the sources must
# stay 32-bit clean), every run is skipped with the reason, even under THPALLOC_REQUIRE_M32.
if test "$M32_KIND" = kernel; then
    norun=$M32_WHY
    diag "32-bit programs are built, not run: $norun"
fi

# The flags of lib_libthpalloc_la in Makefile.am, plus -m32.
warn="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror"
defs="-D_GNU_SOURCE=1 -DHAVE_SYS_AUXV_H=1 -DSYSCONFDIR=\"/etc\""
m32=$tap_tmp/m32
mkdir -p "$m32/lib" "$m32/tests/.libs"
lib=$m32/lib/libthpalloc.so.1
$CC -m32 -shared -fPIC -std=gnu11 -g -O2 $warn -fvisibility=hidden -fno-builtin \
    -ftls-model=initial-exec -fno-plt -pthread $defs -I"$btop/lib" -I"$top/lib" "$top"/lib/*.c \
    -Wl,-z,nodelete -Wl,--version-script="$top/lib/thpalloc.map" -Wl,--exclude-libs,ALL \
    -Wl,-T,"$top/lib/layout.ld" -Wl,-z,defs -Wl,-soname,libthpalloc.so.1 "$inih" -o "$lib" >"$tap_tmp/lib.cc" 2>&1
check "the lib/ sources build as a 32-bit libthpalloc.so.1 (-m32, project warnings, -Werror)" \
    test -f "$lib"
head -n 12 "$tap_tmp/lib.cc" | while IFS= read -r l; do diag "$l"; done
test -f "$lib" || done_testing
class=$(od -An -tu1 -j4 -N1 "$lib" | tr -d ' ')
check "it is an ELF32 object (EI_CLASS $class)" test "$class" = 1
exports() { nm -D --defined-only "$1" | awk '{ print $3 }' | sort; }
exports "$THPALLOC_LIB" >"$tap_tmp/sym.64"
exports "$lib" >"$tap_tmp/sym.32"
check "it exports exactly the 64-bit library's $(wc -l <"$tap_tmp/sym.64") symbols" \
    cmp -s "$tap_tmp/sym.64" "$tap_tmp/sym.32"
diff "$tap_tmp/sym.64" "$tap_tmp/sym.32" | head -n 8 | while IFS= read -r l; do diag "$l"; done

# 2. 32-bit builds of the test programs, laid out as in the 64-bit build's tests/.
cflags="-m32 -std=gnu11 -O2 -g $warn -fno-builtin -pthread -D_GNU_SOURCE=1 -I$btop/lib -I$top/lib -I$top/tests"
built=0 failed=
prog() { # NAME SRC [FLAGS...]
    _n=$1 _s=$2
    shift 2
    if $CC $cflags "$@" "$top/tests/$_s" -o "$m32/tests/$_n" -ldl >"$tap_tmp/cc.log" 2>&1; then
        built=$((built + 1))
    else
        failed="$failed $_n"
        head -n 5 "$tap_tmp/cc.log" | while IFS= read -r l; do diag "$l"; done
    fi
}
prog api-table api-table.c
prog api-foreign-free api-foreign-free.c
prog .libs/api-foreign-deepbind.so api-foreign-deepbind.c -shared -fPIC
prog oom-rlimit oom-rlimit.c
prog oom-mmapfail oom-mmapfail.c
prog .libs/oom-mmapfail-interpose.so oom-mmapfail-interpose.c -shared -fPIC
prog misuse-cases misuse-cases.c
prog misuse-fuzz misuse-fuzz.c
prog stress-churn stress-churn.c
prog stress-bigtls stress-bigtls.c
prog stress-joinfree stress-joinfree.c
prog purge-reclaim purge-reclaim.c
prog stress-threads stress-threads.c
prog stress-threads-nopie stress-threads.c -fno-pie -no-pie -DSTRESS_TAKE_MALLOC_ADDRESS
check "the test programs build for 32 bits ($built built${failed:+; failed:$failed})" test -z "$failed"

# suite SCRIPT: the 64-bit suite's script, run against the 32-bit builds; its TAP lines
# are relayed one by one, then one assertion that it ran to its plan and exited 0.
suite() {
    _name=${1%.sh}
    tap_timeout 600 env THPALLOC_LIB="$lib" TESTS_BUILDDIR="$m32/tests" \
        TESTS_SRCDIR="$TESTS_SRCDIR" "${BASH:-bash}" "$TESTS_SRCDIR/$1" >"$tap_tmp/suite.out" 2>"$tap_tmp/suite.err"
    _rc=$? _plan= _seen=0
    while IFS= read -r _line; do
        case $_line in
        "ok "*"# SKIP"*)
            _seen=$((_seen + 1))
            _d=${_line#ok * - }
            skip "m32 $_name: ${_d%%# SKIP*}"
            ;;
        "ok "*) _seen=$((_seen + 1)) && pass "m32 $_name: ${_line#ok * - }" ;;
        "not ok "*) _seen=$((_seen + 1)) && fail "m32 $_name: ${_line#not ok * - }" ;;
        1..*) _plan=${_line#1..} && _plan=${_plan%% *} ;;
        "#"*) printf '%s\n' "$_line" ;;
        esac
    done <"$tap_tmp/suite.out"
    if test "$_rc" -eq 0 && test "$_plan" = "$_seen" && test "$_seen" -gt 0; then
        pass "m32 $_name: ran its plan ($_seen assertions), exit 0"
    else
        fail "m32 $_name: ran its plan (plan ${_plan:-none}, $_seen results, exit $_rc)"
        tail -n 5 "$tap_tmp/suite.err" | while IFS= read -r l; do diag "$l"; done
    fi
}
# Unit tests at 32 bits, built with the lib/ sources they test: the registry's (the top of
# the 4 GiB, the 2 GiB line) and the purge batch's (process_madvise's 32-bit iovecs; it is
# also purge-reclaim's probe of whether the kernel takes the call).
unit() { # NAME SOURCE...: build tests/NAME, relay its TAP lines, then its exit status
    _u=$1
    shift
    if $CC $cflags -I"$btop/lib" -I"$top/lib" "$top/tests/$_u.c" "$@" -o "$m32/tests/$_u" \
        >"$tap_tmp/cc.log" 2>&1; then
        pass "m32 $_u builds"
    else
        fail "m32 $_u builds"
        head -n 5 "$tap_tmp/cc.log" | while IFS= read -r l; do diag "$l"; done
        return 0
    fi
    if test -n "$norun"; then
        skip "m32 $_u: $norun"
        return 0
    fi
    "$m32/tests/$_u" >"$tap_tmp/unit.out" 2>&1
    _urc=$?
    while IFS= read -r l; do
        case $l in
        "ok "*) pass "m32 $_u: ${l#ok * - }" ;;
        "not ok "*) fail "m32 $_u: ${l#not ok * - }" ;;
        esac
    done <"$tap_tmp/unit.out"
    check "m32 $_u exits 0 (exit $_urc)" test "$_urc" = 0
}
unit unit-registry "$top/lib/registry.c" "$top/lib/meta.c" "$top/lib/os.c"
unit unit-os-purge "$top/lib/os.c"

# (Not api-dormant.sh: it also preloads the library into the machine's 64-bit /bin/sh.)
for s in ${REL_M32_SUITES:-api-conformance.sh api-foreign.sh oom-rlimit.sh oom-mmapfail.sh \
    misuse-cases.sh misuse-fuzz.sh stress-churn.sh purge-reclaim.sh stress-threads.sh}; do
    if test -n "$norun"; then skip "m32 ${s%.sh}: $norun"; else suite "$s"; fi
done

# The 32-bit library under UBSan (-fno-sanitize-recover=all): shifts and conversions that
# are fine at 64 bits and undefined at 32 show up here.
ulib=$m32/lib/ubsan/libthpalloc.so.1
mkdir -p "$m32/lib/ubsan"
if $CC -m32 -shared -fPIC -std=gnu11 -g -O2 -fsanitize=undefined -fno-sanitize-recover=all \
    -fvisibility=hidden -fno-builtin -ftls-model=initial-exec -pthread $defs -I"$btop/lib" -I"$top/lib" \
    "$top"/lib/*.c -Wl,-z,nodelete -Wl,--version-script="$top/lib/thpalloc.map" \
    -Wl,--exclude-libs,ALL -Wl,-soname,libthpalloc.so.1 "$inih" -o "$ulib" >"$tap_tmp/ub.cc" 2>&1; then
    pass "the 32-bit library builds with -fsanitize=undefined"
    ubrun() { # DESC CMD...: exit 0, no UBSan report
        _d=$1
        shift
        if test -n "$norun"; then
            skip "m32 ubsan: $_d: $norun"
            return 0
        fi
        tap_timeout 300 env LD_PRELOAD="$ulib" "$@" >"$tap_tmp/ub.out" 2>"$tap_tmp/ub.err"
        _rc=$?
        check "m32 ubsan: $_d (exit $_rc)" test "$_rc" = 0 -a ! -s "$tap_tmp/ub.err"
        # what stopped it: UBSan's report, else the last lines it wrote (a thpalloc message)
        { grep -m 3 'runtime error' "$tap_tmp/ub.err" || tail -n 3 "$tap_tmp/ub.err"; } |
            while IFS= read -r l; do diag "$l"; done
    }
    if test -n "$norun"; then
        skip "m32 ubsan: api-table gives the 32-bit library's table: $norun"
    elif test -x "$m32/tests/api-table"; then
        ubrun "api-table" "$m32/tests/api-table"
        cp "$tap_tmp/ub.out" "$tap_tmp/ub.table"
        tap_timeout 300 env LD_PRELOAD="$lib" "$m32/tests/api-table" >"$tap_tmp/reg.table" 2>&1
        check "m32 ubsan: api-table gives the 32-bit library's table, line for line" \
            cmp -s "$tap_tmp/reg.table" "$tap_tmp/ub.table"
    fi
    if test -x "$m32/tests/stress-threads"; then
        for m in soak prodcons realloc fork manythreads; do
            ubrun "stress-threads $m" "$m32/tests/stress-threads" -s 3 "$m"
        done
    fi
    test -x "$m32/tests/stress-churn" && ubrun "stress-churn cycles 20000" \
        "$m32/tests/stress-churn" cycles 20000 2
else
    fail "the 32-bit library builds with -fsanitize=undefined"
    head -n 5 "$tap_tmp/ub.cc" | while IFS= read -r l; do diag "$l"; done
fi

# 3. system-wide preload with both architectures installed
if test -n "$norun"; then
    skip "system-wide preload, 32- and 64-bit: $norun"
    done_testing
fi
if test "$(id -u)" != 0 || ! unshare -m true 2>/dev/null; then
    skip "system-wide preload, 32- and 64-bit (needs root and unshare -m)"
    done_testing
fi
w=$(mktemp -d /var/tmp/thpalloc-m32.XXXXXX)
chmod 755 "$w"
trap 'rm -rf "$tap_tmp" "$w"' EXIT
# $LIB: lib/x86_64-linux-gnu for Debian's amd64 ld.so; lib32 for the biarch i386 ld.so
# of gcc-multilib programs, lib/i386-linux-gnu for multiarch i386 (libthpalloc1:i386).
libdir64=$(ldd /bin/true | sed -n 's|.*=> /\(usr/\)\{0,1\}\(lib[^ ]*\)/libc\.so\.6.*|\2|p')
mkdir -p "$w/${libdir64:=lib/x86_64-linux-gnu}" "$w/lib32" "$w/lib/i386-linux-gnu" "$w/etc"
cp "$THPALLOC_LIB" "$w/$libdir64/libthpalloc.so.1"
cp "$lib" "$w/lib32/libthpalloc.so.1"
cp "$lib" "$w/lib/i386-linux-gnu/libthpalloc.so.1"
cp -a /etc/. "$w/etc/" 2>/dev/null
printf '%s/$LIB/libthpalloc.so.1\n' "$w" >"$w/etc/ld.so.preload"
chmod 644 "$w/etc/ld.so.preload"
cat >"$tap_tmp/which.c" <<'EOF'
/* Which allocator is in charge, and which thpalloc file this process mapped. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "thpalloc_active");
    char *p = malloc(100000), line[4096];
    FILE *f = fopen("/proc/self/maps", "r");
    const char *file = "none";
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libthpalloc")) {
            file = strchr(line, '/');
            break;
        }
    printf("active %d bits %zu file %s", active ? active() : -1, sizeof(void *) * 8, file);
    free(p);
    return 0;
}
EOF
$CC -m32 -O2 "$tap_tmp/which.c" -o "$w/which32" -ldl && $CC -O2 "$tap_tmp/which.c" -o "$w/which64" -ldl
for b in 32 64; do
    timeout -k 5 60 unshare -m --propagation private sh -c \
        'mount --bind "$1/etc" /etc && exec "$1/which$2"' sh "$w" "$b" \
        >"$tap_tmp/which$b.out" 2>"$tap_tmp/which$b.err"
    rc=$?
    got=$(cat "$tap_tmp/which$b.out")
    case $b in 32) want="$w/lib32/libthpalloc.so.1" ;; *) want="$w/$libdir64/libthpalloc.so.1" ;; esac
    check "ld.so.preload \$DIR/\$LIB/libthpalloc.so.1: a $b-bit program runs on thpalloc ($got)" \
        test "$rc" = 0 -a "$got" = "active 1 bits $b file $want"
    check "ld.so.preload: the $b-bit program's stderr is empty (no ld.so error)" \
        test ! -s "$tap_tmp/which$b.err"
    head -n 3 "$tap_tmp/which$b.err" | while IFS= read -r l; do diag "$l"; done
done
done_testing
