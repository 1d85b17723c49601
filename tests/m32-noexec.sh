#!/bin/bash
# m32-noexec: the 32-bit tests on a kernel that does not run 32-bit programs (IA-32
# emulation off: gcc -m32 links, executing the result fails with "Exec format error", exit
# 126). tests/m32-probe.sh runs a 32-bit program instead of only linking one; here
# tests/m32-enoexec answers in the kernel's place (THPALLOC_TEST_EXEC32), so that the path
# is exercised on every machine, and:
#   1. the probe says "kernel", with the exit status and the message, and without the
#      wrapper it says what this machine does;
#   2. tests/m32-suites.sh under THPALLOC_REQUIRE_M32=1 (as in CI) still builds the 32-bit
#      library and programs and checks their exports, skips every run with the reason, and
#      fails nothing (on a machine whose kernel refuses 32-bit programs itself, its own run
#      in make check is that case, and it is not made twice).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"
. "$TESTS_SRCDIR/m32-probe.sh"

m32_probe "$tap_tmp"
real_kind=$M32_KIND real_why=$M32_WHY
diag "this machine: ${real_why:-gcc -m32 builds and the kernel runs 32-bit programs}"
if test "$real_kind" = toolchain; then
    echo "1..0 # SKIP $real_why"
    exit 0
fi

THPALLOC_TEST_EXEC32=$TESTS_SRCDIR/m32-enoexec m32_probe "$tap_tmp"
check "the probe, its program refused: kind 'kernel' ($M32_KIND)" test "$M32_KIND" = kernel
case $M32_WHY in
"this kernel does not run 32-bit programs (exit 126: "*"Exec format error; IA-32 emulation off)")
    pass "the reason names the kernel, exit 126 and the message ($M32_WHY)" ;;
*) fail "the reason names the kernel, exit 126 and the message ($M32_WHY)" ;;
esac

if test "$real_kind" = kernel; then
    skip "m32-suites.sh with its programs refused: this kernel refuses them itself, and m32-suites.sh's own run is that case"
    done_testing
fi
tap_timeout 900 env THPALLOC_REQUIRE_M32=1 THPALLOC_TEST_EXEC32="$TESTS_SRCDIR/m32-enoexec" \
    "${BASH:-bash}" "$TESTS_SRCDIR/m32-suites.sh" >"$tap_tmp/m32.out" 2>"$tap_tmp/m32.err"
rc=$?
check "m32-suites.sh, THPALLOC_REQUIRE_M32=1, programs refused: exit 0 (exit $rc)" test "$rc" = 0
nok=$(grep -c '^not ok' "$tap_tmp/m32.out")
check "... nothing fails ($nok not ok)" test "$nok" = 0
grep '^not ok' "$tap_tmp/m32.out" | head -n 5 | while IFS= read -r l; do diag "$l"; done
check "... the library is still built and checked" \
    grep -q '^ok [0-9]* - the lib/ sources build as a 32-bit libthpalloc.so.1' "$tap_tmp/m32.out"
check "... the exports are still compared" \
    grep -q '^ok [0-9]* - it exports exactly the 64-bit library' "$tap_tmp/m32.out"
nskip=$(grep -c '^ok [0-9]* - .*this kernel does not run 32-bit programs (exit 126.*# SKIP$' "$tap_tmp/m32.out")
check "... every run is skipped with the reason ($nskip skipped, the suites, unit-registry and the preload among them)" \
    test "$nskip" -ge 10
check "... the system-wide preload is among them" \
    grep -q '^ok [0-9]* - system-wide preload, 32- and 64-bit: this kernel does not run.*# SKIP' "$tap_tmp/m32.out"
done_testing
