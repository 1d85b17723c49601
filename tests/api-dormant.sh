#!/bin/sh
# dormant: thpalloc loaded but not in charge does nothing at all.
#  - LD_PRELOAD=$THPALLOC_LIB /bin/true and /bin/sh -c 'echo ...': exit 0, stderr empty.
#  - LD_PRELOAD="api-dormant-fake.so:$THPALLOC_LIB" (a bump allocator wins malloc):
#    thpalloc_active() == 0, every statistic 0, purge 0, owns 0, however much is allocated.
#  - the reverse order (thpalloc first): thpalloc_active() == 1 (the check can tell).
#  - strace: with thpalloc dormant the program makes exactly the same anonymous mmaps,
#    munmaps, madvise, prctl, brk and openat calls as without it, apart from loading the
#    library file itself (skipped when strace is missing or cannot trace here).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/api-dormant-check
fake=$TESTS_BUILDDIR/.libs/api-dormant-fake.so
test -x "$prog" || bail "$prog not built"
test -r "$fake" || bail "$fake not built"

tap_timeout 10 env LD_PRELOAD="$THPALLOC_LIB" /bin/true 2>"$tap_tmp/err"
rc=$?
check "LD_PRELOAD=thpalloc /bin/true exits 0 (got $rc)" test "$rc" -eq 0
check "LD_PRELOAD=thpalloc /bin/true writes nothing to stderr" test ! -s "$tap_tmp/err"
out=$(tap_timeout 10 env LD_PRELOAD="$THPALLOC_LIB" /bin/sh -c 'echo "hello $((6 * 7))"' 2>"$tap_tmp/err")
rc=$?
check "LD_PRELOAD=thpalloc /bin/sh -c echo works (rc $rc, '$out')" test "$rc" -eq 0 -a "x$out" = "xhello 42"
check "LD_PRELOAD=thpalloc /bin/sh writes nothing to stderr" test ! -s "$tap_tmp/err"
tap_timeout 10 env LD_PRELOAD="$fake:$THPALLOC_LIB" /bin/true 2>"$tap_tmp/err"
rc=$?
check "LD_PRELOAD=fake:thpalloc /bin/true exits 0 with empty stderr (rc $rc)" test "$rc" -eq 0 -a ! -s "$tap_tmp/err"

relay "fake first" 20 env LD_PRELOAD="$fake:$THPALLOC_LIB" "$prog" dormant
relay "thpalloc first" 20 env LD_PRELOAD="$THPALLOC_LIB:$fake" "$prog" active

# Syscall comparison: fake alone vs fake + dormant thpalloc.
lib_base=$(basename "$THPALLOC_LIB")
trace() { # trace NAME LD_PRELOAD
    rm -f "$tap_tmp/$1".*
    tap_timeout 30 strace -ff -qq -o "$tap_tmp/$1" -e trace=mmap,munmap,madvise,prctl,brk,openat \
        -E LD_PRELOAD="$2" "$prog" workload >/dev/null 2>"$tap_tmp/$1.err" || return 1
    # Kept: anonymous non-fixed mmaps (before main, where ld.so's own small mappings vary
    # with the set of loaded objects, only those of 64 KiB or more), munmap, madvise, prctl,
    # brk, and every openat but the one of the library file; then made pid-independent,
    # address-independent and sorted (threads).
    for _f in "$tap_tmp/$1".[0-9]*; do
        if grep -q 'api-dormant-check-main' "$_f"; then _m=0; else _m=1; fi
        awk -v m="$_m" '
            /api-dormant-check-main/ { m = 1 }
            /^mmap\(/ && !m { split($0, a, ", "); if (a[2] + 0 < 65536) next }
            { print }' "$_f"
    done |
        grep -v "MAP_FIXED" |
        grep -v "\"[^\"]*$lib_base\"" |
        grep -E '^(mmap\(.*MAP_ANONYMOUS|munmap|madvise|prctl|brk|openat)' |
        sed 's/0x[0-9a-f]*/ADDR/g' | sort >"$tap_tmp/$1.calls"
}
if ! command -v strace >/dev/null 2>&1; then
    skip "syscall comparison: strace is not installed"
elif ! tap_timeout 10 strace -f -qq -o /dev/null /bin/true 2>/dev/null; then
    skip "syscall comparison: strace cannot trace here (ptrace not permitted?)"
elif trace alone "$fake" && trace both "$fake:$THPALLOC_LIB"; then
    if cmp -s "$tap_tmp/alone.calls" "$tap_tmp/both.calls"; then
        pass "dormant thpalloc adds no mmap/munmap/madvise/prctl/brk/openat calls ($(wc -l <"$tap_tmp/alone.calls") calls each)"
    else
        fail "dormant thpalloc adds no mmap/munmap/madvise/prctl/brk/openat calls"
        diff "$tap_tmp/alone.calls" "$tap_tmp/both.calls" | head -n 30 | sed 's/^/# /'
    fi
    if grep -E 'thpalloc\.conf|thpalloc\.d|transparent_hugepage' "$tap_tmp/both.calls" >/dev/null; then
        fail "dormant thpalloc reads no configuration or THP settings"
        grep -E 'thpalloc\.conf|thpalloc\.d|transparent_hugepage' "$tap_tmp/both.calls" | head -n 5 | sed 's/^/# /'
    else
        pass "dormant thpalloc reads no configuration or THP settings"
    fi
else
    fail "syscall comparison: strace of the workload ran"
    cat "$tap_tmp"/*.err | head -n 10 | sed 's/^/# /'
fi
done_testing
