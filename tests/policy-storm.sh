#!/bin/bash
# No syscall storm (issue 36): a FIFO of 8 KiB nodes grown by realloc and drained by realloc
# shrinks and frees (tests/bench/listdrain, a server's list type) gives its memory back in
# batches, at most 2 madvise calls a MiB freed, single-threaded and with idle helper
# threads; the calls counted by tests/policy-shim.c. Before, the trim by length made one a
# node freed (123 a MiB). And the emptied page slots of a chunk go back in ranges; a process
# that takes back what the delayed purge gave back keeps it while it works.
set -u
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
shim=$TESTS_BUILDDIR/.libs/libpolicyshim.so
prog=$TESTS_BUILDDIR/bench/listdrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for helpers in 0 4; do
    rm -f "$tmp/out"
    # timeout outside the preload: the shim's count is written at exit, the last one wins
    out=$(timeout 120 env POLICY_SHIM_OUT="$tmp/out" LD_PRELOAD="$shim:$THPALLOC_LIB" \
        "$prog" 2 300000 $helpers)
    diag "$out" "madvise: $(cat "$tmp/out" 2>/dev/null)"
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
diag "$out; madvise: $(cat "$tmp/out" 2>/dev/null)"
kept=$(sed -n 's/^kept=//p' <<<"$out")
calls=$(sed -n 's/.*other=\([0-9]*\).*/\1/p' "$tmp/out" 2>/dev/null)
test -n "$kept" -a -n "$calls" && test "$calls" -le $((3 * kept))
ok $? "emptied page slots of ${kept:-?} live chunks: ${calls:-?} madvise (at most 3 a chunk)"
# A process that takes back the chunks the delayed purge gave back (a refault: 32 MiB of
# 1.5 MiB blocks freed, purged, taken again and freed again) keeps them while it works
# (up to 16 purge_delays), and gets them back once it sleeps. Before, every phase's chunks
# went back after purge_delay and were faulted in again (clang -O2 -c of a large file:
# 1.26x glibc's page faults).
out=$(timeout 60 env THPALLOC_PURGE_DELAY=200ms LD_PRELOAD="$THPALLOC_LIB" \
    "$TESTS_BUILDDIR/policy-probe" refault | tr '\n' ' ')
diag "$out"
busy=$(sed -n 's/.*busy_kb=\([0-9]*\).*/\1/p' <<<"$out")
idle=$(sed -n 's/.*idle_kb=\([0-9]*\).*/\1/p' <<<"$out")
test -n "$busy" && test "$busy" -ge $((30 * 1024))
ok $? "refault: freed again after a refault, 32 MiB stays resident while the process works 5 purge_delays (${busy:-?} kB)"
test -n "$idle" && test "$idle" -le $((4 * 1024))
ok $? "refault: and goes back once it sleeps 5 purge_delays (${idle:-?} kB)"
done_testing
