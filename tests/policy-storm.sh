#!/bin/bash
# No syscall storm (issue 36): a FIFO of 8 KiB nodes grown by realloc and drained by realloc
# shrinks and frees (tests/bench/listdrain, a server's list type) gives its memory back in
# batches, at most 2 madvise calls a MiB freed, single-threaded and with idle helper
# threads; the calls counted by tests/policy-shim.c. Before, the trim by length made one a
# node freed (123 a MiB). And the emptied page slots of a chunk go back in ranges.
set -u
shim=$TESTS_BUILDDIR/.libs/libpolicyshim.so
prog=$TESTS_BUILDDIR/bench/listdrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

for helpers in 0 4; do
    rm -f "$tmp/out"
    # timeout outside the preload: the shim's count is written at exit, the last one wins
    out=$(timeout 120 env POLICY_SHIM_OUT="$tmp/out" LD_PRELOAD="$shim:$THPALLOC_LIB" \
        "$prog" 2 300000 $helpers)
    echo "# $out"
    echo "# madvise: $(cat "$tmp/out" 2>/dev/null)"
    freed=$(sed -n 's/.*freed_mib=\([0-9]*\).*/\1/p' <<<"$out")
    calls=$(sed -n 's/.*other=\([0-9]*\).*/\1/p' "$tmp/out" 2>/dev/null)
    test -n "$freed" -a -n "$calls" && test "$calls" -le $((2 * freed))
    ok $? "list drained with $helpers idle helper threads: ${calls:-?} madvise for ${freed:-?} MiB freed (at most 2 a MiB)"
done
# The page slots a chunk's blocks emptied go back in ranges: 16 MiB of 1000-byte blocks, all
# freed but the first of each chunk, then malloc_trim. Before, one madvise a 16 KiB slot
# (1,048 calls for 9 chunks).
rm -f "$tmp/out"
out=$(timeout 60 env POLICY_SHIM_OUT="$tmp/out" LD_PRELOAD="$shim:$THPALLOC_LIB" \
    "$TESTS_BUILDDIR/policy-probe" slots 16)
echo "# $out; madvise: $(cat "$tmp/out" 2>/dev/null)"
kept=$(sed -n 's/^kept=//p' <<<"$out")
calls=$(sed -n 's/.*other=\([0-9]*\).*/\1/p' "$tmp/out" 2>/dev/null)
test -n "$kept" -a -n "$calls" && test "$calls" -le $((3 * kept))
ok $? "emptied page slots of ${kept:-?} live chunks: ${calls:-?} madvise (at most 3 a chunk)"
echo "1..$n"
