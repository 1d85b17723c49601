#!/bin/sh
# api-conformance: tests/api-table prints one line per edge case of the malloc API
# (errno, NULL, EINVAL, alignment, usable size, calloc zeroing, realloc contents, mallopt,
# mallinfo2...), in a form that does not depend on the allocator. The lines printed under
# glibc and under LD_PRELOAD=$THPALLOC_LIB must be identical: one assertion per line.
# Plus: under the preload the process's malloc is thpalloc's and thpalloc_active() is 1.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/api-table
test -x "$prog" || bail "$prog not built"

tap_timeout 300 "$prog" >"$tap_tmp/glibc.txt" 2>"$tap_tmp/glibc.err"
rc_glibc=$?
tap_timeout 300 env LD_PRELOAD="$THPALLOC_LIB" "$prog" >"$tap_tmp/thp.txt" 2>"$tap_tmp/thp.err"
rc_thp=$?

# The reference run under glibc must itself be sane, or the comparison means nothing.
if test "$rc_glibc" -eq 0 && test "$(tail -n 1 "$tap_tmp/glibc.txt")" = "end of table"; then
    pass "api-table runs to completion under glibc"
else
    fail "api-table runs to completion under glibc (exit $rc_glibc)"
    sed 's/^/# glibc stderr: /' "$tap_tmp/glibc.err" | head -n 5
fi
if test "$rc_thp" -eq 0 && test "$(tail -n 1 "$tap_tmp/thp.txt")" = "end of table"; then
    pass "api-table runs to completion under LD_PRELOAD=thpalloc"
else
    fail "api-table runs to completion under LD_PRELOAD=thpalloc (exit $rc_thp, last line: $(tail -n 1 "$tap_tmp/thp.txt"))"
fi
check "api-table under thpalloc writes nothing to stderr" test ! -s "$tap_tmp/thp.err"
test -s "$tap_tmp/thp.err" && sed 's/^/# thpalloc stderr: /' "$tap_tmp/thp.err" | head -n 10

# One assertion per table line: identical under glibc and thpalloc.
n_glibc=$(wc -l <"$tap_tmp/glibc.txt")
i=0
while IFS= read -r want; do
    i=$((i + 1))
    got=$(sed -n "${i}p" "$tap_tmp/thp.txt")
    if test "x$got" = "x$want"; then
        pass "$want"
    else
        fail "$want"
        diag "  glibc:    $want" "  thpalloc: ${got:-<no line $i>}"
    fi
done <"$tap_tmp/glibc.txt"
n_thp=$(wc -l <"$tap_tmp/thp.txt")
check "thpalloc run prints as many lines as glibc's ($n_thp vs $n_glibc)" test "$n_thp" -eq "$n_glibc"

# Which malloc is in charge.
"$prog" --which >"$tap_tmp/which-glibc.txt" 2>&1
check "plain run: malloc is glibc's" grep -qx 'malloc-dso: libc.so.6' "$tap_tmp/which-glibc.txt"
check "plain run: no thpalloc_active symbol" grep -qx 'thpalloc_active: absent' "$tap_tmp/which-glibc.txt"
tap_timeout 10 env LD_PRELOAD="$THPALLOC_LIB" "$prog" --which >"$tap_tmp/which-thp.txt" 2>&1
diag "under preload: $(tr '\n' ' ' <"$tap_tmp/which-thp.txt")"
lib_base=$(basename "$THPALLOC_LIB")
check "preload run: malloc is defined by $lib_base" grep -qx "malloc-dso: $lib_base" "$tap_tmp/which-thp.txt"
thp_check "preload run: dlsym(RTLD_DEFAULT, thpalloc_active)() == 1" \
    grep -qx 'thpalloc_active: 1' "$tap_tmp/which-thp.txt"
thp_check "preload run: thpalloc_version() equals the header's THPALLOC_VERSION_STRING" \
    grep -qx 'thpalloc_version: matches header' "$tap_tmp/which-thp.txt"

done_testing
