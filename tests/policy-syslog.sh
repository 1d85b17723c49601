#!/bin/sh
# log_problems = syslog: a process whose configuration has problems sends exactly one line
# to the system log (a datagram to /dev/log: "<12>PROG[PID]: thpalloc: ..."), none with
# the key off, and runs normally, without waiting, where there is no log or the log's
# socket buffer is full. /dev/log is the test's own: a private mount namespace (unshare
# -m) with a tmpfs over /dev, in which the test's listener binds /dev/log; the machine's
# /dev and its log are not touched.
set -u
. "${TESTS_SRCDIR:?run through make check}/tap.sh"
PYTHON=${PYTHON:-python3}
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    skip_all "needs root and unshare -m (a private /dev/log)"
fi
command -v "$PYTHON" >/dev/null || skip_all "no $PYTHON"
S=$(mktemp -d "${TMPDIR:-/tmp}/policy-syslog.XXXXXX") || exit 99
trap 'rm -rf "$S"' EXIT
chmod 755 "$S"
PROG=$(command -v ls)
# A configuration with one problem (an unknown key), the key on or off.
printf 'log_problems = syslog\ncolour = blue\n' >"$S/on.conf"
printf 'colour = blue\n' >"$S/off.conf"
printf 'log_problems = syslog\nthp = never\n' >"$S/clean.conf"
# Two problems: the count, the first one.
printf '[global]\nlog_problems = syslog\narena_size = 3M\ncolour = blue\n' >"$S/two.conf"

# The listener: binds PATH, writes each datagram as a line to OUT until SECONDS pass;
# "full": binds and never reads, filling its own buffer first (the sender sees EAGAIN).
cat >"$S/listen.py" <<'PY'
import os, socket, sys, time
path, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
if mode == "full":
    c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    c.setblocking(False)
    n = 0
    try:
        while True:
            c.sendto(b"x" * 200, path)
            n += 1
    except BlockingIOError:
        pass
    open(out, "w").write("filled %d\n" % n)
    time.sleep(30)
    sys.exit(0)
open(out + ".ready", "w").close()
s.settimeout(0.2)
with open(out, "w") as f:
    end = time.time() + float(mode)
    while time.time() < end:
        try:
            d = s.recv(4096)
        except socket.timeout:
            continue
        f.write(d.decode("utf-8", "replace") + "\n")
        f.flush()
PY

# Inside the namespace: /dev a tmpfs with null, zero, urandom bound from the real one.
cat >"$S/inner.sh" <<'SH'
set -u
S=$1 LIB=$2 PROG=$3 PY=$4
mkdir -p "$S/olddev"
mount --bind /dev "$S/olddev"
mount -t tmpfs -o mode=755 tmpfs /dev
for n in null zero urandom random; do
    : >"/dev/$n"
    mount --bind "$S/olddev/$n" "/dev/$n"
done
run() { # run NAME CONF: PROG under thpalloc with that configuration; its pid and status
    THPALLOC_CONF=$S/$2 LD_PRELOAD=$LIB "$PROG" / >/dev/null 2>"$S/$1.err" &
    p=$!
    wait $p
    echo "$p $?" >"$S/$1.status"
}
# The listener for the cases that log.
"$PY" "$S/listen.py" /dev/log "$S/log.out" 6 &
lp=$!
i=0
while [ ! -e "$S/log.out.ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
run on on.conf
run off off.conf
run clean clean.conf
run two two.conf
wait $lp
rm -f /dev/log
# No log at all: /dev/log missing.
start=$(date +%s%N)
run none on.conf
echo $(( ($(date +%s%N) - start) / 1000000 )) >"$S/none.ms"
# A log that never reads, its buffer full.
"$PY" "$S/listen.py" /dev/log "$S/full.out" full &
lp=$!
i=0
while [ ! -s "$S/full.out" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
start=$(date +%s%N)
run full on.conf
echo $(( ($(date +%s%N) - start) / 1000000 )) >"$S/full.ms"
kill $lp
SH
timeout 40 unshare -m --propagation private sh "$S/inner.sh" "$S" "$THPALLOC_LIB" "$PROG" "$PYTHON" \
    >"$S/inner.log" 2>&1
rc=$?
ok $rc "the private /dev/log and the runs (rc $rc)"
[ $rc -eq 0 ] || diag <"$S/inner.log"

name=$(basename "$PROG")
pid_of() { cut -d' ' -f1 "$S/$1.status" 2>/dev/null; }
st_of() { cut -d' ' -f2 "$S/$1.status" 2>/dev/null; }
is "$(grep -c . "$S/log.out" 2>/dev/null)" 2 "two lines in all: the two processes with problems and the key on"
is "$(grep "\[$(pid_of on)\]" "$S/log.out")" \
    "<12>$name[$(pid_of on)]: thpalloc: 1 configuration problem, running without what it would set: $S/on.conf:2: unknown key \"colour\" (keys: thp, thp_threshold, arena_size, purge_delay, purge, stats, log_problems, thp_dense)" \
    "key on, one problem: exactly one line, user.warning, the program's name and pid, the problem"
is "$(grep "\[$(pid_of two)\]" "$S/log.out")" \
    "<12>$name[$(pid_of two)]: thpalloc: 2 configuration problems, running without what they would set: $S/two.conf:3: bad value \"3M\" for arena_size: expected a multiple of 2M from 2M to 1G, such as 64M (and more: thp-status --check)" \
    "two problems: one line, the count and the first"
is "$(grep -c "\[$(pid_of off)\]\|\[$(pid_of clean)\]" "$S/log.out")" 0 \
    "key off, or the key on and no problem: no line"
is "$(st_of on) $(st_of off) $(st_of clean) $(st_of two)" "0 0 0 0" "each process ran to its end (exit 0)"
is "$(cat "$S/on.err" "$S/two.err" 2>/dev/null)" "" "nothing on the process's own stderr (THPALLOC_VERBOSE is off)"
is "$(st_of none)" 0 "no /dev/log: the process runs normally (exit 0, $(cat "$S/none.ms" 2>/dev/null) ms)"
is "$(st_of full)$(cat "$S/full.err" 2>/dev/null)" 0 \
    "a log whose buffer is full ($(cat "$S/full.out" 2>/dev/null | tr -d '\n') datagrams): the process does not wait for it (exit 0, $(cat "$S/full.ms" 2>/dev/null) ms)"
done_testing
