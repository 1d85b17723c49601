#!/bin/sh
# TAP test: tests/bench/freecount.so, the free counter behind the syscall table's "a MiB
# freed" line, counts what a program frees, in every process of a run.
#
# fixed mallocs and frees one 32 B block per operation: under glibc each free releases
# malloc_usable_size = 40 bytes, so N operations free 40 N bytes plus the little the
# program's own report frees (stdio, /proc reads): a few KiB at most.
# Environment (exported by make check): TESTS_BUILDDIR, THPALLOC_LIB.

bench="${TESTS_BUILDDIR:-$(dirname "$0")/..}/bench"
module="$bench/.libs/freecount.so"
if [ ! -f "$module" ]; then
    echo "1..0 # SKIP $module not built"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-freecount.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "1..5"

sum() { awk -F'[= ]' '{ s += $2 } END { printf "%d\n", s }' "$1"; }

# 1: one process, 10000 frees of 40 bytes
env BENCH_FREECOUNT_OUT="$tmp/one" LD_PRELOAD="$module" "$bench/fixed" 1 0.01 32 1 >"$tmp/out1"
got=$(sum "$tmp/one")
lines=$(wc -l <"$tmp/one")
if [ "$lines" -eq 1 ] && [ "$got" -ge 400000 ] && [ "$got" -le 416384 ]; then
    echo "ok 1 - fixed 1 0.01 32 1 frees $got bytes (40 x 10000 + its report)"
else
    echo "not ok 1 - fixed 1 0.01 32 1: $lines line(s), $got bytes, want 400000..416384"
fi

# 2: ten times as many operations, ten times the bytes (the count follows the frees)
env BENCH_FREECOUNT_OUT="$tmp/ten" LD_PRELOAD="$module" "$bench/fixed" 1 0.1 32 1 >/dev/null
got10=$(sum "$tmp/ten")
if [ "$got10" -ge 4000000 ] && [ "$got10" -le 4016384 ]; then
    echo "ok 2 - fixed 1 0.1 32 1 frees $got10 bytes"
else
    echo "not ok 2 - fixed 1 0.1 32 1 frees $got10 bytes, want 4000000..4016384"
fi

# 3: a shell running two programs: each process appends its own line (dash leaves with
# _exit, so the shell itself may write none), and the runner sums them
env BENCH_FREECOUNT_OUT="$tmp/tree" LD_PRELOAD="$module" /bin/sh -c \
    "'$bench/fixed' 1 0.01 32 1 >/dev/null; '$bench/fixed' 1 0.01 32 1 >/dev/null; :"
pids=$(awk '{ print $2 }' "$tmp/tree" | sort -u | wc -l)
gott=$(sum "$tmp/tree")
if [ "$pids" -ge 2 ] && [ "$gott" -ge 800000 ] && [ "$gott" -le 900000 ]; then
    echo "ok 3 - sh and its two children: $pids processes, $gott bytes"
else
    echo "not ok 3 - sh and its two children: $pids process line(s), $gott bytes, want >= 2 and 800000..900000"
    sed 's/^/# /' "$tmp/tree"
fi

# 4: without BENCH_FREECOUNT_OUT nothing is written and the program runs as before
(cd "$tmp" && env -u BENCH_FREECOUNT_OUT LD_PRELOAD="$module" "$bench/fixed" 1 0.01 32 1 >"$tmp/out4")
rc=$?
if [ $rc -eq 0 ] && grep -q '^bench=fixed ' "$tmp/out4" && [ "$(ls "$tmp" | wc -l)" -eq 5 ]; then
    echo "ok 4 - no BENCH_FREECOUNT_OUT: exit 0, the result line, no file written"
else
    echo "not ok 4 - no BENCH_FREECOUNT_OUT: exit $rc, files: $(ls "$tmp" | tr '\n' ' ')"
fi

# 5: in front of another allocator (as redis-server's jemalloc): the frees reach the
# allocator that made the blocks, and the count is its usable size (thpalloc's 32 B class)
lib="${THPALLOC_LIB:-${TESTS_BUILDDIR:-$(dirname "$0")/..}/../lib/.libs/libthpalloc.so.1}"
if [ -f "$lib" ]; then
    env BENCH_FREECOUNT_OUT="$tmp/other" LD_PRELOAD="$module:$lib" "$bench/fixed" 1 0.01 32 1 >"$tmp/out5"
    rc=$?
    goto=$(sum "$tmp/other")
    if [ $rc -eq 0 ] && grep -q "malloc_lib=.*libthpalloc" "$tmp/out5" && [ "$goto" -eq 320000 ]; then
        echo "ok 5 - in front of thpalloc: exit 0, $goto bytes (32 x 10000)"
    else
        echo "not ok 5 - in front of thpalloc: exit $rc, $goto bytes, want 320000; $(cat "$tmp/out5")"
    fi
else
    echo "ok 5 # SKIP no thpalloc library at $lib"
fi
