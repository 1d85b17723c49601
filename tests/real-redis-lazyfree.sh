#!/bin/sh
# real-redis-lazyfree: Debian's redis-server under LD_PRELOAD=$THPALLOC_LIB fills 80,000 keys
# of 1000 B from its main thread (DEBUG POPULATE), then FLUSHALL ASYNC: its bio_lazy_free
# thread frees them all while the main thread waits for requests, and no client sends one.
# The memory must go back within 10 s (VmRSS read from /proc; on thpalloc before
# note_remote_emptied, lib/heap.c, it stayed for good: no purger was ever asked for). The
# server exits 0 on SHUTDOWN; it is always killed at the end. tests/purge-lazyfree.sh is the
# same without redis.
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

PY=/usr/bin/python3
client="$PY $TESTS_SRCDIR/real-redis.py"
if ! command -v redis-server >/dev/null; then
    echo "1..0 # SKIP needs redis-server"
    exit 0
fi
pid=
cleanup() {
    if test -n "$pid"; then
        pkill -KILL -P "$pid" 2>/dev/null
        kill -9 "$pid" 2>/dev/null
    fi
    test -n "${REL_KEEP:-}" || rm -rf "$tap_tmp"
}
trap cleanup EXIT

port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$tap_tmp" && exec env LD_PRELOAD="$THPALLOC_LIB" timeout -k 5 120 redis-server \
    --bind 127.0.0.1 --port "$port" --protected-mode yes --dir "$tap_tmp" --save "" \
    --appendonly no --daemonize no --enable-debug-command local --logfile "$tap_tmp/log" \
    2>>"$tap_tmp/stderr") &
pid=$!
$client "$port" wait >/dev/null
srv=$(pgrep -P "$pid" redis-server | head -n 1)
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$srv/status" 2>/dev/null; }
check "thpalloc is loaded into redis-server" grep -q libthpalloc "/proc/$srv/maps"
base=$(rss)
pop=$($client "$port" cmd DEBUG POPULATE 80000 key 1000 2>&1)
full=$(rss)
check "DEBUG POPULATE answered OK ($pop; VmRSS $base -> $full KiB)" \
    sh -c 'test "$1" = OK && test "$3" -ge $(($2 + 65536))' sh "$pop" "${base:-0}" "${full:-0}"
flush=$($client "$port" cmd FLUSHALL ASYNC 2>&1)
want=$((full - (full - base) * 3 / 4))
now=$(rss)
t=0
while test "${now:-0}" -gt "$want" && test $t -lt 50; do
    sleep 0.2
    t=$((t + 1))
    now=$(rss)
done
check "FLUSHALL ASYNC answered OK ($flush)" test "$flush" = OK
check "the lazily freed data goes back while the server waits idle: VmRSS $full -> $now KiB after $((t * 200)) ms (want <= $want)" \
    test "${now:-0}" -le "$want"
$client "$port" cmd SHUTDOWN NOSAVE >/dev/null 2>&1
wait "$pid"
rc=$?
pid=
check "the server exited 0 on SHUTDOWN (exit $rc)" test "$rc" = 0
check "nothing on the server's stderr ($(head -c 200 "$tap_tmp/stderr"))" test ! -s "$tap_tmp/stderr"
done_testing
