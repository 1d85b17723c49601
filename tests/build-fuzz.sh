#!/bin/sh
# build-fuzz: the libFuzzer harnesses of tests/fuzz/, built here with clang:
#   fuzz-config  the policy parser and resolver (lib/config*.c, thp.c, os.c
#                + libinih.a) under -fsanitize=fuzzer,address,undefined;
#   fuzz-alloc   the allocator API driven by a byte stream, against a private build of
#                the lib/ sources as libthpalloc.so.1 with -fsanitize=fuzzer-no-link,undefined
#                and the invariant checks (-DTHPALLOC_DEBUG)
#                (coverage-guided on the allocator, UBSan in it; no ASan, which would
#                replace malloc): thpalloc is the malloc of the whole process.
# Asserted: both build; every input kept in tests/fuzz/regressions-*/ and every seed in
# tests/fuzz/corpus-*/ replays without a crash; then each harness fuzzes for
# REL_FUZZ_SECONDS (default 30; make fuzz-long: 600) from a scratch copy of its corpus
# and finds nothing. A crash is shown (base64) and kept in $TESTS_BUILDDIR/fuzz-crashes/.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

secs=${REL_FUZZ_SECONDS:-30}
top=$(cd "$TESTS_SRCDIR/.." && pwd)
# lib/thpalloc.h is made by configure: in the build tree (not the source tree in a VPATH build).
btop=$(cd "${TESTS_BUILDDIR:-$TESTS_SRCDIR}/.." && pwd)
fz=$TESTS_SRCDIR/fuzz
CLANG=${CLANG:-clang}
inih=
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    test -f "$d/libinih.a" && inih=$d/libinih.a && break
done
if ! command -v "$CLANG" >/dev/null || test -z "$inih" ||
    ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' |
    "$CLANG" -x c -fsanitize=fuzzer - -o "$tap_tmp/probe" 2>/dev/null; then
    echo "1..0 # SKIP needs clang with libFuzzer (libclang-rt-14-dev) and libinih.a"
    exit 0
fi
defs="-D_GNU_SOURCE=1 -DHAVE_SYS_AUXV_H=1 -DSYSCONFDIR=\"/etc\""
crashdir=$TESTS_BUILDDIR/fuzz-crashes

"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    $defs -I"$btop/lib" -I"$top/lib" "$fz/fuzz-config.c" "$top/lib/config.c" \
    "$top/lib/config-parse.c" "$top/lib/config-open.c" "$top/lib/config-keys.c" "$top/lib/thp.c" "$top/lib/os.c" "$inih" \
    -o "$tap_tmp/fuzz-config" >"$tap_tmp/cc1" 2>&1
check "fuzz-config builds (clang -fsanitize=fuzzer,address,undefined)" test -x "$tap_tmp/fuzz-config"
test -s "$tap_tmp/cc1" && diag "$(head -n 10 "$tap_tmp/cc1")"

mkdir -p "$tap_tmp/lib"
libsrc=$(ls "$top"/lib/*.c)
"$CLANG" -shared -fPIC -g -O1 -std=gnu11 -DTHPALLOC_DEBUG=1 -fsanitize=fuzzer-no-link,undefined \
    -fno-sanitize-recover=undefined -fvisibility=hidden -fno-builtin -ftls-model=initial-exec \
    -pthread $defs -I"$btop/lib" -I"$top/lib" $libsrc -Wl,--version-script="$top/lib/thpalloc.map" \
    -Wl,-z,nodelete -Wl,--exclude-libs,ALL -Wl,-soname,libthpalloc.so.1 "$inih" \
    -o "$tap_tmp/lib/libthpalloc.so.1" >"$tap_tmp/cc2" 2>&1 &&
    "$CLANG" -g -O1 -fno-builtin -fsanitize=fuzzer,undefined -fno-sanitize-recover=undefined \
        -D_GNU_SOURCE=1 -I"$btop/lib" -I"$top/lib" "$fz/fuzz-alloc.c" "$tap_tmp/lib/libthpalloc.so.1" \
        -Wl,-rpath,"$tap_tmp/lib" -pthread -o "$tap_tmp/fuzz-alloc" >>"$tap_tmp/cc2" 2>&1
check "fuzz-alloc builds (the lib/ sources with fuzzer-no-link,undefined; the harness against them)" \
    test -x "$tap_tmp/fuzz-alloc"
grep -E 'error|warning: implicit' "$tap_tmp/cc2" | head -n 10 | while IFS= read -r l; do diag "$l"; done

# replay NAME DIR: every file of DIR, once each
replay() {
    files=$(find "$2" -type f ! -name '*.md' 2>/dev/null | sort)
    if test -z "$files"; then
        pass "$1: replay $(basename "$2") (empty)"
        return
    fi
    # shellcheck disable=SC2086
    tap_timeout 300 "$tap_tmp/$1" -rss_limit_mb=4096 $files >"$tap_tmp/replay.log" 2>&1
    rc=$?
    check "$1: every input in tests/fuzz/$(basename "$2") replays cleanly ($(echo "$files" | wc -l) files, exit $rc)" \
        test "$rc" -eq 0
    test "$rc" -eq 0 || grep -E 'fuzz-|runtime error|ERROR|Running: ' "$tap_tmp/replay.log" | tail -n 8 |
        while IFS= read -r l; do diag "$l"; done
}

# fuzz NAME CORPUS: REL_FUZZ_SECONDS of fuzzing from a scratch copy of CORPUS
fuzz() {
    mkdir -p "$tap_tmp/corpus-$1" "$tap_tmp/art-$1"
    cp "$fz/$2"/* "$tap_tmp/corpus-$1/" 2>/dev/null
    (cd "$tap_tmp/art-$1" && tap_timeout $((secs + 120)) "$tap_tmp/$1" -max_total_time="$secs" \
        -rss_limit_mb=4096 -max_len=4096 -timeout=30 -print_final_stats=1 \
        "$tap_tmp/corpus-$1" >"$tap_tmp/fuzz-$1.log" 2>&1)
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tap_tmp/fuzz-$1.log")
    crash=$(ls "$tap_tmp/art-$1" 2>/dev/null | head -n 1)
    check "$1: ${secs}s of fuzzing found nothing (${runs:-?} runs, exit $rc${crash:+, $crash})" \
        test "$rc" -eq 0 -a -z "$crash"
    if test -n "$crash"; then
        mkdir -p "$crashdir" && cp "$tap_tmp/art-$1"/* "$crashdir/"
        diag "kept in $crashdir/$crash; reproduce: $1 $crashdir/$crash"
        diag "base64: $(base64 -w0 "$tap_tmp/art-$1/$crash")"
        grep -E 'fuzz-|runtime error|ERROR|SUMMARY' "$tap_tmp/fuzz-$1.log" | head -n 8 |
            while IFS= read -r l; do diag "$l"; done
    fi
}

if test -x "$tap_tmp/fuzz-config"; then
    replay fuzz-config "$fz/regressions-config"
    replay fuzz-config "$fz/corpus-config"
    fuzz fuzz-config corpus-config
fi
if test -x "$tap_tmp/fuzz-alloc"; then
    replay fuzz-alloc "$fz/regressions-alloc"
    replay fuzz-alloc "$fz/corpus-alloc"
    fuzz fuzz-alloc corpus-alloc
fi
done_testing
