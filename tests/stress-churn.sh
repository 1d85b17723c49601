#!/bin/sh
# stress-churn: 100,000 thread create/exit cycles (2 chains at once) handing blocks of
# 1 B .. 3 MiB from each thread to the next, under LD_PRELOAD=$THPALLOC_LIB: every create
# succeeds, every handed-on block keeps its contents, nothing leaks (in_use back to its
# start value) and thread heaps are recycled. Then vm.max_map_count pressure, provoked
# inside the process only (it fills its own map table by splitting one mapping; no
# sysctl is touched): from 4 threads, every allocation in every size range is NULL +
# ENOMEM or a usable block, never a crash or a hang; once the filler is unmapped, every
# allocation succeeds. Then 4000 threads whose TLS destructor allocates in glibc's last
# destructor pass (after thpalloc's own exit destructor): contents intact, and no heap or
# chunk left behind per thread (it was 2 MiB each). Then batches of threads whose leftovers
# the main thread frees (janitor), and exited threads' chunks that nobody adopts: the purger
# gives their free memory back within a few purge delays (orphans), and the purger of a
# program with a large static TLS (stress-bigtls), and a purger asked for in a thread's last
# destructor is not started from the free that pthread_join makes through ld.so with glibc's
# stack-cache lock held (stress-joinfree: that deadlocked). All but the last two also run under
# plain glibc, the test's own sanity.
#   REL_THREAD_CYCLES=N  (default 100000; check-long: 1000000)
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

prog=$TESTS_BUILDDIR/stress-churn
test -x "$prog" || bail "$prog not built"
cycles=${REL_THREAD_CYCLES:-100000}
relay "glibc" 120 "$prog" -g cycles 4000 2
relay "glibc" 60 "$prog" -g mapcount
relay "thpalloc" $((60 + cycles / 1000)) env LD_PRELOAD="$THPALLOC_LIB" "$prog" cycles "$cycles" 2
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" mapcount
relay "glibc" 60 "$prog" -g late 2000
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" late 4000
relay "glibc" 60 "$prog" -g janitor 20
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$prog" janitor 20
relay "glibc" 60 "$prog" -g orphans
relay "thpalloc" 60 env THPALLOC_PURGE_DELAY=100ms LD_PRELOAD="$THPALLOC_LIB" "$prog" orphans
# A program with 256 KiB of static TLS per thread still gets its purger.
relay "thpalloc" 30 env LD_PRELOAD="$THPALLOC_LIB" "$TESTS_BUILDDIR/stress-bigtls"
# pthread_join frees the joined thread's TLS through ld.so under glibc's stack-cache lock.
relay "thpalloc" 60 env LD_PRELOAD="$THPALLOC_LIB" "$TESTS_BUILDDIR/stress-joinfree"
done_testing
