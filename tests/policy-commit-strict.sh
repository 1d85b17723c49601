#!/bin/sh
# policy-commit-strict: the commit charge read from the kernel (smaps VmFlags "ac"). Strict
# overcommit (vm.overcommit_memory = 2) is injected through tests/policy-shim.c, never set:
# the arenas are reserved PROT_NONE and committed chunk by chunk, so that no reserved but
# unused range is charged, the charge follows use, the mappings stay few, and RLIMIT_DATA
# meets NULL + ENOMEM. Then the machine's own mode: in 0 or 1 the arenas are not charged
# and a block with a mapping of its own is; in 2 the strict checks run without injection.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/policy-commit-strict
shim=$TESTS_BUILDDIR/.libs/libpolicyshim.so
test -x "$prog" || bail "$prog not built"
test -r "$shim" || bail "$shim not built"
echo 2 >"$tap_tmp/overcommit"
relay "injected mode 2" 120 env POLICY_SHIM_OVERCOMMIT="$tap_tmp/overcommit" \
    LD_PRELOAD="$shim:$THPALLOC_LIB" "$prog" strict
mode=$(cat /proc/sys/vm/overcommit_memory 2>/dev/null || echo 0)
diag "this machine: vm.overcommit_memory = $mode"
if [ "$mode" = 2 ]; then
    relay "machine's mode 2" 120 env LD_PRELOAD="$THPALLOC_LIB" "$prog" strict
else
    relay "machine's mode $mode" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" lax
    echo 0 >"$tap_tmp/overcommit"
    relay "injected mode 0" 60 env POLICY_SHIM_OVERCOMMIT="$tap_tmp/overcommit" \
        LD_PRELOAD="$shim:$THPALLOC_LIB" "$prog" lax
fi
done_testing
