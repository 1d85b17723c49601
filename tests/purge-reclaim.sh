#!/bin/sh
# purge-reclaim: the free memory inside an idle thread's pages goes back to the kernel
# (lib/reclaim.c): the empty page a heap keeps per class, the OS pages of a small page
# that hold no live block (holes), the OS pages of free extents (cached by the idle thread
# or not). Read with mincore(2) page by page; live blocks keep their contents; a block in
# a hole freed again is a double free; reclaim while threads allocate and fork is safe; with
# membarrier refused by a seccomp filter nothing is touched. And the page a loop of
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
for what in kept holes inside busy fork kept-fork recycle nobarrier loop remote split emptied \
    reuse extent-reuse dirty-count; do
    relay "$what" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" "$what"
done
relay background 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" background
relay cache-age 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=200ms "$prog" cache-age
# A thread's cached extents go back before a request that no resident run fits would take
# fresh memory (extent-guard; purges on, as they are unless THP is always).
relay extent-guard 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_THP=never THPALLOC_PURGE_DELAY=10s \
    "$prog" extent-guard

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
