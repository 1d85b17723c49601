#!/bin/sh
# build-sanitize: the parser, the tests' C programs and the allocator under the sanitizers.
#  1. ASan + UBSan (gcc -fsanitize=address,undefined -fno-sanitize-recover=all): the policy
#     code (lib/config*.c, thp.c, os.c) with the unit tests that drive it
#     (unit-config, unit-thp, unit-sizeclass) pass; the stress and reliability programs run
#     clean under glibc's malloc with ASan watching the programs themselves (stress-threads
#     soak and prodcons, stress-churn cycles, misuse-cases's control case).
#  2. UBSan in the allocator: the lib/ sources built as a separate libthpalloc.so.1 with
#     -fsanitize=undefined -fno-sanitize-recover=all, preloaded into: api-table (its table
#     must equal the regular library's, line for line), api-foreign-free (glibc and
#     RTLD_DEEPBIND pointers), stress-threads (soak, prodcons, realloc, fork), stress-churn
#     (20,000 thread cycles; map-table pressure), purge-load (2 phases) and python3
#     running a workload. Every run: exit 0 and no "runtime error" on stderr.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

top=$(cd "$TESTS_SRCDIR/.." && pwd)
# lib/thpalloc.h is made by configure: in the build tree (not the source tree in a VPATH build).
btop=$(cd "${TESTS_BUILDDIR:-$TESTS_SRCDIR}/.." && pwd)
b=$TESTS_BUILDDIR
CC=${CC:-gcc}
inih=
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    test -f "$d/libinih.a" && inih=$d/libinih.a && break
done
if test -z "$inih" || ! echo 'int main(void){return 0;}' |
    $CC -x c -fsanitize=address,undefined - -o "$tap_tmp/probe" 2>/dev/null; then
    echo "1..0 # SKIP needs $CC with libasan/libubsan and libinih.a"
    exit 0
fi
defs="-D_GNU_SOURCE=1 -DHAVE_SYS_AUXV_H=1 -DSYSCONFDIR=\"/etc\""
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cflags="-std=gnu11 -g -O1 -fno-builtin -pthread $defs -I$btop/lib -I$top/lib -I$top/tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# build NAME SRC...: an ASan+UBSan program
build() {
    _n=$1
    shift
    $CC $cflags $san "$@" -o "$tap_tmp/$_n" -ldl >"$tap_tmp/$_n.cc" 2>&1
    check "asan: $_n builds" test -x "$tap_tmp/$_n"
    test -x "$tap_tmp/$_n" || head -n 5 "$tap_tmp/$_n.cc" | while IFS= read -r l; do diag "$l"; done
}
# runs DESC CMD...: exit 0 and no sanitizer report
runs() {
    _d=$1
    shift
    tap_timeout 300 "$@" >"$tap_tmp/run.out" 2>"$tap_tmp/run.err"
    _rc=$?
    if test "$_rc" -eq 0 && ! grep -qE 'runtime error|ERROR: (Address|Leak|Undefined)Sanitizer' \
        "$tap_tmp/run.err" "$tap_tmp/run.out"; then
        pass "$_d"
    else
        fail "$_d (exit $_rc)"
        grep -hE 'runtime error|Sanitizer|FAIL|not ok|#[0-3] ' "$tap_tmp/run.err" "$tap_tmp/run.out" |
            head -n 12 | while IFS= read -r l; do diag "$l"; done
    fi
}

# 1. ASan + UBSan
build unit-config "$top/tests/unit-config.c" "$top/lib/config.c" "$top/lib/config-parse.c" \
    "$top/lib/config-open.c" "$top/lib/config-keys.c" \
    "$top/lib/thp.c" "$top/lib/os.c" "$inih"
build unit-thp "$top/tests/unit-thp.c" "$top/lib/thp.c" "$top/lib/os.c"
build unit-sizeclass "$top/tests/unit-sizeclass.c"
build stress-threads "$top/tests/stress-threads.c"
build stress-churn "$top/tests/stress-churn.c"
build misuse-cases "$top/tests/misuse-cases.c"
for u in unit-config unit-thp unit-sizeclass; do
    test -x "$tap_tmp/$u" && runs "asan: $u passes with no sanitizer report" \
        sh -c '"$1" >"$2" && ! grep -q "^not ok" "$2"' sh "$tap_tmp/$u" "$tap_tmp/$u.tap"
done
test -x "$tap_tmp/stress-threads" && {
    runs "asan: stress-threads -g soak (2 s) is clean" "$tap_tmp/stress-threads" -g -s 2 soak
    runs "asan: stress-threads -g prodcons is clean" "$tap_tmp/stress-threads" -g prodcons
}
test -x "$tap_tmp/stress-churn" &&
    runs "asan: stress-churn -g cycles 2000 is clean" "$tap_tmp/stress-churn" -g cycles 2000 2
test -x "$tap_tmp/misuse-cases" && runs "asan: misuse-cases ok is clean" "$tap_tmp/misuse-cases" ok

# 2. the allocator under UBSan
mkdir -p "$tap_tmp/ubsan"
ulib=$tap_tmp/ubsan/libthpalloc.so.1
$CC -shared -fPIC -std=gnu11 -g -O2 -fsanitize=undefined -fno-sanitize-recover=all \
    -fvisibility=hidden -fno-builtin -ftls-model=initial-exec -pthread $defs -I"$btop/lib" -I"$top/lib" \
    "$top"/lib/*.c -Wl,--version-script="$top/lib/thpalloc.map" -Wl,-z,nodelete \
    -Wl,--exclude-libs,ALL -Wl,-soname,libthpalloc.so.1 "$inih" -o "$ulib" \
    >"$tap_tmp/ubsan.cc" 2>&1
check "ubsan: the allocator builds with -fsanitize=undefined -fno-sanitize-recover=all" test -f "$ulib"
head -n 5 "$tap_tmp/ubsan.cc" | while IFS= read -r l; do diag "$l"; done
if test -f "$ulib"; then
    active=$(env LD_PRELOAD="$ulib" /usr/bin/python3 -c \
        'import ctypes; print(ctypes.CDLL(None).thpalloc_active())' 2>&1)
    check "ubsan: the UBSan build is the malloc in charge in python3 ($active)" test "$active" = 1
    if test -x "$b/api-table"; then
        tap_timeout 60 env LD_PRELOAD="$THPALLOC_LIB" "$b/api-table" >"$tap_tmp/t.reg" 2>&1
        tap_timeout 60 env LD_PRELOAD="$ulib" "$b/api-table" >"$tap_tmp/t.ub" 2>&1
        check "ubsan: api-table gives the regular library's table, line for line ($(wc -l <"$tap_tmp/t.ub") lines)" \
            cmp -s "$tap_tmp/t.reg" "$tap_tmp/t.ub"
        cmp -s "$tap_tmp/t.reg" "$tap_tmp/t.ub" ||
            diff "$tap_tmp/t.reg" "$tap_tmp/t.ub" | head -n 8 | while IFS= read -r l; do diag "$l"; done
    fi
    test -x "$b/api-foreign-free" && runs "ubsan: api-foreign-free (glibc and RTLD_DEEPBIND pointers)" \
        env LD_PRELOAD="$ulib" "$b/api-foreign-free" "$b/.libs/api-foreign-deepbind.so"
    if test -x "$b/stress-threads"; then
        for m in soak prodcons realloc fork; do
            runs "ubsan: stress-threads $m" env LD_PRELOAD="$ulib" "$b/stress-threads" -s 3 $m
        done
    fi
    if test -x "$b/stress-churn"; then
        runs "ubsan: stress-churn cycles 20000" env LD_PRELOAD="$ulib" "$b/stress-churn" cycles 20000 2
        runs "ubsan: stress-churn mapcount" env LD_PRELOAD="$ulib" "$b/stress-churn" mapcount
    fi
    test -x "$b/purge-load" && runs "ubsan: purge-load, 2 phases" \
        env LD_PRELOAD="$ulib" THPALLOC_PURGE_DELAY=200ms "$b/purge-load" -p 2 -i 400
    runs "ubsan: python3 workload (dicts, lists, big bytes, json, threads)" \
        env LD_PRELOAD="$ulib" /usr/bin/python3 -c '
import json, threading
def work(k):
    d = {i: str(i) * (i % 50) for i in range(20000)}
    s = json.dumps(d); assert json.loads(s)["7"] == "7" * 7
    b = [bytes(1 << (i % 23)) for i in range(60)]
    return len(s) + sum(map(len, b))
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("ok")'
fi
done_testing
