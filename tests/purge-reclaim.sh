#!/bin/sh
# purge-reclaim: the free memory inside an idle thread's pages goes back to the kernel
# (lib/reclaim.c): the empty page a heap keeps per class, the OS pages of a small page
# that hold no live block (holes), the OS pages of free extents (cached by the idle thread
# or not). Read with mincore(2) page by page; live blocks keep their contents; a block in
# a hole freed again is a double free; reclaim while threads allocate and fork is safe; with
# membarrier refused by a seccomp filter nothing is touched. The holes go back in one
# process_madvise where the kernel takes it, one madvise each under a seccomp filter. And the page a loop of
# malloc/free uses stays (loop): no page or chunk given back per call. Full pages that only
# other threads freed into are collected and given back too (remote). The first blocks of
# a dozen classes share three OS pages of one split slot, freed from another thread and
# allocated again in place, and the slot goes back whole once they are all free; eight
# classes more fill it and take a second (split). A thread that waits while another frees
# what it allocated gets those pages purged before the other takes new ones: the anonymous
# memory stays flat (emptied). Blocks freed into full pages are allocated again before new
# memory is taken: a program that keeps 350,000 blocks of 64 bytes and replaces 50,000 more
# oldest first stays within 6.25 % of its live bytes (reuse; 25 % above when full pages came
# back only once their class had no other page). Until a second thread allocates, freed
# extents go to the shared runs at once and serve requests of other lengths; then they wait
# in the thread's cache for their own (extent-reuse), but not for longer than purge_delay
# while the thread stays busy (cache-age: the purger flushes only idle threads' caches).
# An emptied page that goes back to its chunk counts as waiting for purge what was carved
# of it, not its whole 64 KiB slot (dirty-count).
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/purge-reclaim
test -x "$prog" || bail "$prog not built"
for what in kept holes holes-filtered inside busy fork kept-fork recycle nobarrier loop remote \
    split emptied reuse extent-reuse dirty-count; do
    relay "$what" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" "$what"
done
relay background 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" background
relay cache-age 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" cache-age
# A thread's cached extents go back before a request that no resident run fits would take
# fresh memory (extent-guard; purges on, as they are unless THP is always).
relay extent-guard 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_THP=never THPALLOC_PURGE_DELAY=10s \
    "$prog" extent-guard

# The holes of a heap go back together: one process_madvise(2) on the process itself for up
# to 64 ranges, where the kernel takes it (Linux 6.15, PIDFD_SELF) and no seccomp filter is
# in force, instead of a madvise each (holes-filtered above: under a filter that kills on
# process_madvise, one madvise each, and the process lives). Read from strace.
if ! command -v strace >/dev/null 2>&1; then
    skip "holes in one call: strace is not installed"
elif ! tap_timeout 10 strace -f -qq -o /dev/null /bin/true 2>/dev/null; then
    skip "holes in one call: strace cannot trace here (ptrace not permitted?)"
elif ! tap_timeout 10 "$TESTS_BUILDDIR/unit-os-purge" >"$tap_tmp/probe.out" 2>&1 ||
    ! grep -q "takes process_madvise on the caller itself; no seccomp filter" "$tap_tmp/probe.out"; then
    skip "holes in one call: $(sed -n 's/^# //p' "$tap_tmp/probe.out" | head -1) (Linux 6.15 and no seccomp filter needed)"
else
    tap_timeout 60 strace -f -qq -e trace=madvise,process_madvise -o "$tap_tmp/holes.strace" \
        env LD_PRELOAD="$THPALLOC_LIB" "$prog" holes >"$tap_tmp/holes.out" 2>&1
    check "holes in one call: the holes run passes under strace" grep -qx end "$tap_tmp/holes.out"
    # the vector's ranges: "process_madvise(-10000, [{iov_base=..., iov_len=4096}, ...], N, MADV_DONTNEED, 0) = BYTES"
    vec=$(grep -c 'process_madvise(-10000, .*MADV_\(DONTNEED\|FREE\).* = [1-9]' "$tap_tmp/holes.strace")
    ranges=$(grep 'process_madvise(-10000' "$tap_tmp/holes.strace" | grep -o 'iov_base=' | wc -l)
    single=$(grep -c '^[0-9]* *madvise(0x[0-9a-f]*, 4096, MADV_\(DONTNEED\|FREE\))' "$tap_tmp/holes.strace")
    diag "holes: $vec process_madvise calls for $ranges ranges, $single madvise calls of one 4 KiB page"
    check "holes in one call: the holes went back by process_madvise ($vec calls, $ranges ranges)" \
        test "$vec" -ge 1 -a "$ranges" -ge 4
    check "holes in one call: fewer calls than ranges" test "$vec" -lt "$ranges"
fi

# A double free of a block in a hole, or of a block of a page reset empty, aborts with
# glibc's words, like any other.
for what in hole-double-free reset-double-free; do
    tap_timeout 30 env LD_PRELOAD="$THPALLOC_LIB" "$prog" $what \
        >"$tap_tmp/df.out" 2>"$tap_tmp/df.err"
    rc=$?
    diag "$what: exit status $rc, stderr: $(head -c 300 "$tap_tmp/df.err")"
    check "$what: the second free aborts (SIGABRT)" test "$rc" = 134
    check "$what: with a \"double free detected\" message" \
        grep -q "thpalloc: free(): double free detected" "$tap_tmp/df.err"
done
done_testing
