#!/bin/sh
# real-redis: Debian's redis-server under LD_PRELOAD=$THPALLOC_LIB, on 127.0.0.1 and a free
# port, loaded with a known data set (tests/real-redis.py: strings of 1 B to 3 MiB, lists,
# hashes, sets, sorted sets), driven by redis-benchmark (bounded: -n per test, a timeout),
# then verified: every known key read back exactly, after DEBUG RELOAD, and after SAVE +
# restart (DBSIZE kept); the per-key DEBUG DIGEST-VALUE list equals the stock run's (redis
# with its own jemalloc, no preload), which runs the same steps first. thpalloc must be in
# charge in the server (its stats line at exit shows the data it held) and the server
# exits 0 on SHUTDOWN. Servers are always killed at the end.
#   REL_REDIS_REQUESTS=N  requests per benchmark test (default 20000; check-long: more)
. "${TESTS_SRCDIR:-$(dirname "$0")}/api-taplib.sh"

PY=/usr/bin/python3
client="$PY $TESTS_SRCDIR/real-redis.py"
requests=${REL_REDIS_REQUESTS:-20000}
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    echo "1..0 # SKIP needs redis-server and redis-tools"
    exit 0
fi
pids=
# $pids are the timeout(1) wrappers this script started; redis-server is each one's child.
cleanup() {
    for p in $pids; do
        pkill -KILL -P "$p" 2>/dev/null
        kill -9 "$p" 2>/dev/null
    done
    test -n "${REL_KEEP:-}" || rm -rf "$tap_tmp"
}
trap cleanup EXIT

freeport() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME PRELOAD: starts the server in $tap_tmp/NAME, sets $port and $pid
start() {
    mkdir -p "$tap_tmp/$1"
    port=$(freeport)
    (cd "$tap_tmp/$1" && exec env ${2:+LD_PRELOAD=$2 THPALLOC_STATS=exit} \
        timeout -k 5 300 redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
        --dir "$tap_tmp/$1" --dbfilename dump.rdb --save "" --appendonly no \
        --daemonize no --enable-debug-command local --logfile "$tap_tmp/$1/log" \
        2>>"$tap_tmp/$1/stderr") &
    pid=$!
    pids="$pids $pid"
    $client "$port" wait >/dev/null
}

# stop: SHUTDOWN NOSAVE; sets $stop_rc to the server's exit status
stop() {
    $client "$port" cmd SHUTDOWN NOSAVE >/dev/null 2>&1
    wait "$pid"
    stop_rc=$?
}

# one NAME PRELOAD: the whole sequence; results in $tap_tmp/NAME.*
one() {
    name=$1
    start "$name" "$2"
    # redis-server itself (not the timeout wrapper): the child of $pid
    srv=$(pgrep -P "$pid" redis-server | head -n 1)
    if test -n "$srv" && grep -q libthpalloc "/proc/$srv/maps" 2>/dev/null; then
        echo yes >"$tap_tmp/$name.mapped"
    else
        echo no >"$tap_tmp/$name.mapped"
    fi
    $client "$port" load >"$tap_tmp/$name.load" 2>&1
    t0=$(date +%s)
    timeout -k 5 300 redis-benchmark -h 127.0.0.1 -p "$port" -n "$requests" -c 20 -r 100000 \
        -d 200 -q -t set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100,mset \
        >"$tap_tmp/$name.bench" 2>&1
    echo $? >"$tap_tmp/$name.bench.rc"
    diag "$name: redis-benchmark, $requests requests per test: $(($(date +%s) - t0)) s"
    $client "$port" verify >"$tap_tmp/$name.verify1" 2>&1
    echo $? >>"$tap_tmp/$name.verify1"
    $client "$port" cmd DEBUG RELOAD >"$tap_tmp/$name.reload" 2>&1
    $client "$port" verify >"$tap_tmp/$name.verify2" 2>&1
    echo $? >>"$tap_tmp/$name.verify2"
    $client "$port" cmd DBSIZE >"$tap_tmp/$name.dbsize1" 2>&1
    $client "$port" cmd SAVE >"$tap_tmp/$name.save" 2>&1
    stop
    echo "$stop_rc" >"$tap_tmp/$name.stop1"
    start "$name" "$2"
    $client "$port" verify >"$tap_tmp/$name.verify3" 2>&1
    echo $? >>"$tap_tmp/$name.verify3"
    $client "$port" cmd DBSIZE >"$tap_tmp/$name.dbsize2" 2>&1
    $client "$port" digest >"$tap_tmp/$name.digest" 2>&1
    stop
    echo "$stop_rc" >"$tap_tmp/$name.stop2"
}

verified() { # FILE: the verifier said so and exited 0
    grep -q '^verified .* 0 mismatches$' "$1" && test "$(tail -n 1 "$1")" = 0
}

one stock ""
one thp "$THPALLOC_LIB"

check "control: the stock server (jemalloc) keeps the data set across the benchmark" verified "$tap_tmp/stock.verify1"
check "control: the stock server keeps it across SAVE + restart" verified "$tap_tmp/stock.verify3"

check "thpalloc is loaded into redis-server" test "$(cat "$tap_tmp/thp.mapped")" = yes
check "the known data set loaded ($(cat "$tap_tmp/thp.load"))" grep -q '^loaded ' "$tap_tmp/thp.load"
sed 's/^/thpalloc: /' "$tap_tmp/thp.bench" | tr '\r' '\n' | grep 'requests per second' | \
    while IFS= read -r l; do diag "$l"; done
ntests=$(tr '\r' '\n' <"$tap_tmp/thp.bench" | grep -c 'requests per second')
check "redis-benchmark ran all 13 tests and exited 0 (exit $(cat "$tap_tmp/thp.bench.rc"), $ntests tests)" \
    sh -c 'test "$1" = 0 && test "$2" -ge 13' sh "$(cat "$tap_tmp/thp.bench.rc")" "$ntests"
check "every known key intact after the benchmark ($(head -n 1 "$tap_tmp/thp.verify1"))" verified "$tap_tmp/thp.verify1"
check "DEBUG RELOAD answered OK" grep -qx OK "$tap_tmp/thp.reload"
check "every known key intact after DEBUG RELOAD" verified "$tap_tmp/thp.verify2"
check "SAVE answered OK" grep -qx OK "$tap_tmp/thp.save"
check "the server exited 0 on SHUTDOWN (exit $(cat "$tap_tmp/thp.stop1"))" test "$(cat "$tap_tmp/thp.stop1")" = 0
check "every known key intact after a restart from the dump" verified "$tap_tmp/thp.verify3"
check "DBSIZE the same before and after the restart ($(cat "$tap_tmp/thp.dbsize1") / $(cat "$tap_tmp/thp.dbsize2"))" \
    sh -c 'test "$1" -gt 2300 && test "$1" = "$2"' sh "$(cat "$tap_tmp/thp.dbsize1")" "$(cat "$tap_tmp/thp.dbsize2")"
check "per-key digests equal the stock server's ($(wc -l <"$tap_tmp/thp.digest") keys)" \
    sh -c 'test "$(wc -l <"$1")" -ge 2350 && cmp -s "$1" "$2"' sh "$tap_tmp/thp.digest" "$tap_tmp/stock.digest"
check "the restarted server exited 0 on SHUTDOWN (exit $(cat "$tap_tmp/thp.stop2"))" test "$(cat "$tap_tmp/thp.stop2")" = 0
stats=$(grep '^thpalloc: stats' "$tap_tmp/thp/stderr" | head -n 1)
diag "server stderr: $stats"
# The first server held the data set and the benchmark's keys: tens of MiB in use at exit.
inuse=$(echo "$stats" | sed -n 's/.* in_use=\([0-9]*\)K.*/\1/p')
check "thpalloc served the server's data (in_use at exit ${inuse:-?} KiB >= 8 MiB)" \
    test "${inuse:-0}" -ge 8192
other=$(grep -v '^thpalloc: stats' "$tap_tmp/thp/stderr")
test -n "$other" && diag "other stderr: $other"
check "nothing else on the server's stderr" test -z "$other"
done_testing
