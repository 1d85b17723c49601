#!/bin/sh
# purge-park: the heaps of exited threads parked whole for the next new thread (lib/thread.c):
# the next thread takes the heap as it stands (no trim and refault of its kept page), frees
# of an exited thread's blocks are still checked (a second one aborts) and counted exactly,
# threads that exit for good leave their chunks to the others, and a child forked while
# heaps are parked frees into them and runs threads on them; the empty pages a parked heap
# kept serve the next thread's other classes, and its trimmed ones stay (no trim again once
# refilled); the dirty slots a thread took back and then exited with are counted as before
# (lib/chunk.c's heap credit folded at park). See tests/purge-park.c.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/purge-park
test -x "$prog" || bail "$prog not built"
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" refault
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" remote
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" unpark
relay "thpalloc" 120 env LD_PRELOAD="$THPALLOC_LIB" "$prog" fork
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" kept
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" kept-trim
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" THPALLOC_PURGE_DELAY=10s "$prog" credit
tap_timeout 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" remote-double >"$tap_tmp/out" 2>"$tap_tmp/err"
rc=$?
check "remote-double: a second free of an exited thread's block aborts (exit $rc, want 134)" \
    test "$rc" = 134
check "remote-double: with 'thpalloc: free(): double free detected' ($(head -c 200 "$tap_tmp/err"))" \
    grep -q '^thpalloc: free(): double free detected' "$tap_tmp/err"
done_testing
