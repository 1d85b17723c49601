#!/bin/sh
# passthrough: on a kernel whose page size is not 4 KiB (injected: tests/api-pagesize-interpose
# makes getauxval(AT_PAGESZ) say 65536), thpalloc must not manage memory at all - its 4 KiB
# purges would round to the kernel's page and drop live data - and the process runs on
# glibc's malloc: api-table's lines equal glibc's, one by one; thpalloc_active() is 0 and
# no thpalloc arena is mapped; THPALLOC_VERBOSE=1 says why; foreign pointers, threads,
# forks and python3 run. The control: the interposer saying 4096 leaves thpalloc in charge.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

shim=$TESTS_BUILDDIR/.libs/api-pagesize-interpose.so
test -r "$shim" || bail "$shim not built"
b=$TESTS_BUILDDIR
PY=/usr/bin/python3
pre="$shim $THPALLOC_LIB"
# thpalloc_active(), and the address space thpalloc reserved (thpalloc_get_stats: reserved).
probe='import ctypes, sys
l = ctypes.CDLL(None)
data = [bytes(n % 5000) for n in range(20000)] + [bytearray(8 << 20)]
st = (ctypes.c_uint64 * 8)()
l.thpalloc_get_stats(st, ctypes.sizeof(st))
print("active", l.thpalloc_active(), "reserved", st[0])'

out=$(env PAGESIZE_FAKE=4096 LD_PRELOAD="$pre" "$PY" -c "$probe" 2>&1)
check "control: the interposer saying 4096 leaves thpalloc in charge ($out)" \
    sh -c 'case "$1" in "active 1 reserved "[1-9]*) exit 0 ;; *) exit 1 ;; esac' sh "$out"

out=$(env LD_PRELOAD="$pre" "$PY" -c "$probe" 2>&1)
check "64 KiB pages: python3 runs on glibc's malloc, nothing reserved by thpalloc ($out)" \
    test "$out" = "active 0 reserved 0"

env LD_PRELOAD="$pre" THPALLOC_VERBOSE=1 /bin/true 2>"$tap_tmp/verbose.err"
check "64 KiB pages: THPALLOC_VERBOSE=1 says why ($(cat "$tap_tmp/verbose.err"))" \
    test "$(cat "$tap_tmp/verbose.err")" = \
    "thpalloc: the kernel's page size is 65536 bytes, not 4096: every allocation goes to glibc's malloc"
env LD_PRELOAD="$pre" /bin/true 2>"$tap_tmp/quiet.err"
check "64 KiB pages: nothing on stderr without THPALLOC_VERBOSE" test ! -s "$tap_tmp/quiet.err"

if test -x "$b/api-table"; then
    tap_timeout 120 "$b/api-table" >"$tap_tmp/glibc.txt" 2>&1
    tap_timeout 120 env LD_PRELOAD="$pre" "$b/api-table" >"$tap_tmp/pass.txt" 2>&1
    rc=$?
    check "64 KiB pages: api-table exits 0 and ends its table" \
        test "$rc" = 0 -a "$(tail -n 1 "$tap_tmp/pass.txt")" = "end of table"
    check "64 KiB pages: api-table's $(wc -l <"$tap_tmp/glibc.txt") lines equal glibc's" \
        cmp -s "$tap_tmp/glibc.txt" "$tap_tmp/pass.txt"
    diff "$tap_tmp/glibc.txt" "$tap_tmp/pass.txt" | head -n 8 | while IFS= read -r l; do diag "$l"; done
fi
# api-foreign-free: its allocator-neutral checks (glibc's and RTLD_DEEPBIND pointers through
# free/realloc/malloc_usable_size) all pass; its thpalloc-only ones cannot apply.
if test -x "$b/api-foreign-free" && test -r "$b/.libs/api-foreign-deepbind.so"; then
    tap_timeout 60 "$b/api-foreign-free" "$b/.libs/api-foreign-deepbind.so" >"$tap_tmp/ff.glibc" 2>&1
    tap_timeout 60 env LD_PRELOAD="$pre" "$b/api-foreign-free" "$b/.libs/api-foreign-deepbind.so" \
        >"$tap_tmp/ff.out" 2>&1
    rc=$?
    want=$(grep -c '^ok - ' "$tap_tmp/ff.glibc")
    good=$(grep -c '^ok - ' "$tap_tmp/ff.out")
    bad=$(grep -c '^not ok - ' "$tap_tmp/ff.out")
    check "64 KiB pages: api-foreign-free exits 0, its $good neutral checks passed as under glibc ($want), $bad failed" \
        test "$rc" = 0 -a "$bad" = 0 -a "$good" = "$want" -a "$(tail -n 1 "$tap_tmp/ff.out")" = end
    grep '^not ok - ' "$tap_tmp/ff.out" | head -n 5 | while IFS= read -r l; do diag "$l"; done
fi
if test -x "$b/stress-threads"; then
    for m in prodcons fork realloc soak; do
        tap_timeout 120 env LD_PRELOAD="$pre" "$b/stress-threads" -g -s 2 "$m" \
            >"$tap_tmp/st.out" 2>&1
        rc=$?
        check "64 KiB pages: stress-threads -g $m exits 0 (exit $rc)" test "$rc" = 0
        test "$rc" = 0 || tail -n 3 "$tap_tmp/st.out" | while IFS= read -r l; do diag "$l"; done
    done
fi
done_testing
