#!/bin/sh
# misuse-cases: heap misuse is detected and stops the process with a clear message, as glibc
# does, instead of corrupting the heap silently. For each case of tests/misuse-cases (small,
# extent (cached or not) and large double free, interior pointer of a small block, an extent
# and a large block, realloc of a freed large block, realloc and malloc_usable_size of an
# interior pointer; a double free through the owner's full-page and the remote free paths, a
# pointer past the last block of a full page,
# and one of a block above 1 KiB popped by malloc's fast path), under
# LD_PRELOAD=$THPALLOC_LIB: the process dies of SIGABRT; its
# stderr has a line starting "thpalloc: "; that line names the pointer that was passed.
# Controls: the misuse-free case exits 0 with an empty stderr; under plain glibc the small
# double free aborts too (the program really does the misuse). Free-list redirection (a
# freed block's link overwritten, in the owner's lists or in the list of other threads'
# frees, or one bit of it flipped) aborts with "malloc(): free block corrupted" and never
# hands out the address.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/misuse-cases
test -x "$prog" || bail "$prog not built"
ulimit -c 0 2>/dev/null

# runcase "CASE [ARG...]" [PRELOAD]: sets rc, out, err (purge_delay 100 ms for the purger's
# cases; glibc reads no such variable)
runcase() {
    if test -n "${2:-}"; then
        # shellcheck disable=SC2086 # CASE's words are the program's arguments
        tap_timeout 30 env LD_PRELOAD="$2" THPALLOC_PURGE_DELAY=100ms "$prog" $1 \
            >"$tap_tmp/out" 2>"$tap_tmp/err"
    else
        # shellcheck disable=SC2086
        tap_timeout 30 env -u LD_PRELOAD "$prog" $1 >"$tap_tmp/out" 2>"$tap_tmp/err"
    fi
    rc=$?
}

runcase ok "$THPALLOC_LIB"
check "control: no misuse exits 0 under thpalloc" test "$rc" -eq 0
check "control: no misuse prints nothing on stderr" test ! -s "$tap_tmp/err"

runcase aligned-neighbours "$THPALLOC_LIB"
check "control: plain blocks beside memalign's, random data in their first words: 2^23 calls, none refused (exit $rc)" \
    test "$rc" -eq 0 -a ! -s "$tap_tmp/err"
head -n 2 "$tap_tmp/err" | while IFS= read -r l; do diag "aligned-neighbours: $l"; done

runcase key-halves "$THPALLOC_LIB"
check "control: a live block holding half of a free block's key, at offset 4 or 8, is freed as live (exit $rc)" \
    test "$rc" -eq 0 -a ! -s "$tap_tmp/err"
head -n 2 "$tap_tmp/err" | while IFS= read -r l; do diag "key-halves: $l"; done

runcase small-double ""
check "control: glibc aborts on the small double free (exit $rc)" test "$rc" -eq 134
diag "glibc says: $(head -n 1 "$tap_tmp/err")"

for c in small-double extent-double extent-cached-double large-double huge-double small-interior \
    extent-interior large-interior large-realloc small-realloc-interior extent-realloc-interior \
    large-realloc-interior usable-interior full-remote-double full-tail remote-double mid-double; do
    runcase "$c" "$THPALLOC_LIB"
    ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/out")
    line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
    case $rc in
    134) ;;
    124) diag "$c: timed out (hang?)" ;;
    *) diag "$c: exit status $rc" ;;
    esac
    if test "$rc" -ne 134; then
        grep -v '^ptr=' "$tap_tmp/out" | sed "s/^/$c: /" | while IFS= read -r l; do diag "$l"; done
        head -n 3 "$tap_tmp/err" | sed "s/^/$c stderr: /" | while IFS= read -r l; do diag "$l"; done
    fi
    check "$c: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
    check "$c: stderr has a line starting 'thpalloc: '" test -n "$line"
    check "$c: the message names the pointer $ptr" \
        sh -c 'test -n "$1" && case "$2" in *"$1"*) true ;; *) false ;; esac' sh "$ptr" "$line"
    test -n "$line" && diag "$c: $line"
done

# Issue 38's attacks, each against glibc in the same run: a medium block freed by two
# threads (one of them exiting, or not; or both at the same moment), a second free of a cached extent whose key a write
# after free wiped, then flushed by the thread's exit (it once read far outside the extent
# map: SIGSEGV), realloc of a freed block at 4000 and 20000 bytes (the latter in the extent
# cache), and interior pointers of a block in a page that holds memalign'd blocks. Each
# must stop in the misuse call itself with the message given here, naming the pointer.
for spec in "extent-xthread-double:free(): double free detected" \
    "extent-xthread-double-exit:free(): double free detected" \
    "extent-race-double:free(): double free detected" \
    "extent-scribble-flush:free(): double free detected" \
    "small-realloc-freed:realloc(): invalid pointer" \
    "extent-realloc-freed:realloc(): invalid pointer" \
    "aligned-interior:free(): invalid pointer" \
    "aligned-realloc-interior:realloc(): invalid pointer" \
    "aligned-usable-interior:malloc_usable_size(): invalid pointer"; do
    c=${spec%%:*}
    want="thpalloc: ${spec#*:} "
    runcase "$c" ""
    if test "$c" = aligned-usable-interior; then
        # glibc reads a size from inside the block and answers with it
        diag "glibc on $c (exit $rc): $(head -n 1 "$tap_tmp/err")$(grep -v '^ptr=' "$tap_tmp/out")"
    else
        check "control: glibc aborts on $c (exit $rc)" test "$rc" -eq 134
        diag "glibc says: $(head -n 1 "$tap_tmp/err")"
    fi
    runcase "$c" "$THPALLOC_LIB"
    ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/out")
    line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
    if test "$rc" -ne 134; then
        grep -v '^ptr=' "$tap_tmp/out" | sed "s/^/$c: /" | while IFS= read -r l; do diag "$l"; done
    fi
    check "$c: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
    check "$c: stderr says '$want($ptr)'" test "$line" = "$want($ptr)"
    test -n "$line" && diag "$c: $line"
done

# Free-list redirection (write after free, overflow, the same for a block another thread
# freed): the link points at a global whose second word holds the key read from the block.
# glibc aborts too for the first two (its safe-linking); for remote-link it has no control:
# the freeing thread's cache keeps the block, so glibc never hands it out again here.
# partial-link flips one bit of a link instead: it leads 16 bytes off a block's start, which
# glibc's alignment check does not see (no glibc control).
for c in uaf-link overflow-link remote-link partial-link; do
    if test "$c" = uaf-link || test "$c" = overflow-link; then
        runcase "$c" ""
        check "control: glibc never hands out the attacker's address ($c, exit $rc)" \
            sh -c '! grep -q "silent corruption" "$1"' sh "$tap_tmp/out"
    fi
    runcase "$c" "$THPALLOC_LIB"
    line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
    test "$rc" -eq 134 || grep -v '^ptr=' "$tap_tmp/out" | sed "s/^/$c: /" | while IFS= read -r l; do diag "$l"; done
    check "$c: malloc never hands out the attacker's address" \
        sh -c '! grep -q "silent corruption" "$1"' sh "$tap_tmp/out"
    check "$c: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
    check "$c: stderr says 'thpalloc: malloc(): free block corrupted'" \
        sh -c 'case "$1" in "thpalloc: malloc(): free block corrupted"*) true ;; *) false ;; esac' sh "$line"
    test -n "$line" && diag "$c: $line"
done
# The owner takes other threads' list as it is when its free list is dry, without a walk
# to its tail (a chain of cache misses): a redirected link in the middle of the list is
# caught by the pop that follows it, after the blocks before it were handed out, and the
# attacker's address never is.
runcase remote-link-mid "$THPALLOC_LIB"
line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
check "remote-link-mid: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
check "remote-link-mid: stderr says 'thpalloc: malloc(): free block corrupted'" \
    sh -c 'case "$1" in "thpalloc: malloc(): free block corrupted"*) true ;; *) false ;; esac' sh "$line"
check "remote-link-mid: c, then b handed out before the abort, never the attacker's address" \
    sh -c 'test "$(grep -v "^ptr=" "$1" | tr "\n" " ")" = "c handed out b handed out "' sh "$tap_tmp/out"
grep -v '^ptr=' "$tap_tmp/out" | sed 's/^/remote-link-mid: /' | while IFS= read -r l; do diag "$l"; done
test -n "$line" && diag "remote-link-mid: $line"
# purge-cycle: b, x, b freed by a thread that then idles. The fast free used to look only at
# the last block freed, so the third free made a cycle b -> x -> b that only the purger's
# walk of the idle heap found (before that, the walk held its claim forever). Every free
# now reads the block's key (lib/types.h, block_mark_free): the third free itself stops.
# (The purge's walk keeps its checks: reclaim.c.)
runcase purge-cycle "$THPALLOC_LIB"
line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/out")
check "purge-cycle: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
is "$line" "thpalloc: free(): double free detected ($ptr)" "purge-cycle: the third free stops"

# The third round (issue 46): a double free is caught in the free that repeats it, whoever
# freed first and whatever happened between. free(p); free(x); free(p) in the owning thread
# with live blocks beside them in p's page (the fast free compared p only with the block
# freed last: the page's count went to 0 with blocks live, and malloc handed a live block
# out again), from 16 B to 6000 B, with 1 and 250 live blocks (or as many as the class's
# pages hold); another thread's free, then the owner's, directly, after malloc_trim(0), and
# after the purger thread reclaimed the idle owner's heap. glibc's answer beside each (it
# misses some: blocks in its fastbins, or consolidated by the trim).
for c in "owner-double 16 1" "owner-double 16 250" "owner-double 48 1" "owner-double 48 250" \
    "owner-double 112 250" "owner-double 1024 1" "owner-double 1024 250" "owner-double 2000 1" \
    "owner-double 2000 250" "owner-double 4000 1" "owner-double 4000 250" "owner-double 6000 1" \
    "owner-double 6000 250" "remote-owner-double" "remote-owner-double trim" \
    "remote-owner-double purger"; do
    runcase "$c" ""
    diag "glibc on $c (exit $rc): $(head -n 1 "$tap_tmp/err")$(grep -v -e '^ptr=' -e '^live=' "$tap_tmp/out")"
    runcase "$c" "$THPALLOC_LIB"
    ptr=$(sed -n 's/^ptr=//p' "$tap_tmp/out")
    line=$(grep '^thpalloc: ' "$tap_tmp/err" | head -n 1)
    test "$rc" -eq 134 || grep -v '^ptr=' "$tap_tmp/out" | sed "s/^/$c: /" | diag
    check "$c: the process is stopped by SIGABRT (exit $rc)" test "$rc" -eq 134
    is "$line" "thpalloc: free(): double free detected ($ptr)" "$c: the repeated free stops"
done
done_testing
