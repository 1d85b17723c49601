#!/bin/sh
# The rules end to end: Debian's node_exporter reads a textfile collector directory that
# examples/node-exporter/thp-status-textfile fills from a machine state this test made (a
# --root tree whose ld.so.preload puts an allocator before thpalloc's entry, a drop-in only
# root can read, a process of another user with thpalloc loaded), and Debian's prometheus
# scrapes it with examples/prometheus/thpalloc-rules.yml loaded; its HTTP API
# (/api/v1/alerts) says which alerts are active (pending or firing: the rules' "for"
# durations are promtool's to test), and they are exactly those that state should raise.
# Both servers run from tools/dev/fetch-prometheus's binaries, on 127.0.0.1 and free ports, with
# their own configuration and storage in a scratch directory, and are stopped on exit.
set -u
. "${TESTS_SRCDIR:?run through make check}/tap.sh"
TOP_SRCDIR=$(cd "$TESTS_SRCDIR/.." && pwd)
TOP_BUILDDIR=$(cd "$TESTS_BUILDDIR/.." && pwd)
THP_STATUS=$TOP_BUILDDIR/tools/thp-status/thp-status
PYTHON=${PYTHON:-python3}
CACHE=${THPALLOC_CI_CACHE:-/var/cache/thpalloc-ci}/prometheus

no_binaries() {
    if [ "${THPALLOC_REQUIRE_PROMTOOL:-0}" = 1 ]; then
        fail "prometheus and node_exporter end to end ($1)"
        done_testing
    fi
    skip_all "$1"
}
PROM=$(command -v prometheus 2>/dev/null || echo "$CACHE/prometheus")
NODEX=$(command -v prometheus-node-exporter 2>/dev/null || echo "$CACHE/node_exporter")
[ -x "$PROM" ] && [ -x "$NODEX" ] || no_binaries "no prometheus or node_exporter (tools/dev/fetch-prometheus $CACHE)"
command -v "$PYTHON" >/dev/null || skip_all "no $PYTHON"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/prom-e2e.XXXXXX") || exit 99
chmod 755 "$SCRATCH"
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# The machine state, in a --root tree: an allocator that owns malloc (the C library's own,
# under jemalloc's name) before thpalloc's entry: thpalloc dormant in every process.
R=$SCRATCH/root
mkdir -p "$R/etc" "$R/usr/lib/x86_64-linux-gnu"
: >"$R/usr/lib/x86_64-linux-gnu/libthpalloc.so.1"
printf '%s\n' '/usr/lib/libjemalloc.so.2 /usr/$LIB/libthpalloc.so.1' >"$R/etc/ld.so.preload"
LIBC_SO=$(ldd /bin/sh 2>/dev/null | sed -n 's|.*libc\.so\.6 => \(/[^ ]*\).*|\1|p')
cp "${LIBC_SO:-/lib/x86_64-linux-gnu/libc.so.6}" "$R/usr/lib/libjemalloc.so.2"
# The configuration in ROOT/SYSCONFDIR (where the tool reads it: --check --json says).
SYSCONF=$("$THP_STATUS" --root "$R" --check --json | "$PYTHON" -c 'import json,sys,os; print(os.path.dirname(json.load(sys.stdin)["check"]["files"][0]))')
mkdir -p "$SYSCONF/thpalloc.d"
printf '[global]\nthp = large\n' >"$SYSCONF/thpalloc.conf"
printf '[global]\npurge_delay = 2s\n' >"$SYSCONF/thpalloc.d/50-private.conf"
chmod 644 "$SYSCONF/thpalloc.conf"
chmod 600 "$SYSCONF/thpalloc.d/50-private.conf"
want="ThpallocDormant"
# A process of another user with thpalloc loaded cannot read the 0600 drop-in: on defaults
# for what it sets. Root only (setpriv); the library copied where that user can read it.
HOLDER=
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    cp "$THPALLOC_LIB" "$SCRATCH/libthpalloc.so.1"
    chmod 755 "$SCRATCH/libthpalloc.so.1"
    setpriv --reuid=65534 --regid=65534 --clear-groups \
        env LD_PRELOAD="$SCRATCH/libthpalloc.so.1" sleep 120 &
    HOLDER=$!
    PIDS="$PIDS $HOLDER"
    want="$want ThpallocProcessOnDefaults"
else
    skip "a process on defaults (another user's, 0600 drop-in)" "not root, or no setpriv"
fi
# The health verdict (thp_health_status) where this build writes it.
if "$THP_STATUS" --root "$R" --prometheus 2>/dev/null | grep -q '^thp_health_status '; then
    want="$want ThpallocConfigProblems"
else
    skip "ThpallocConfigProblems end to end" "this build's thp-status writes no thp_health_status"
fi

# The textfile, by the example script, through a thp-status that reads the tree.
D=$SCRATCH/textfile
mkdir -p "$D"
printf '#!/bin/sh\nexec "%s" --root "%s" "$@"\n' "$THP_STATUS" "$R" >"$SCRATCH/thp-status"
chmod 755 "$SCRATCH/thp-status"
sleep 0.3 # the holder's exec of sleep, with thpalloc mapped
THP_STATUS=$SCRATCH/thp-status sh "$TOP_SRCDIR/examples/node-exporter/thp-status-textfile" "$D"
ok $? "thp-status-textfile writes $D/thp-status.prom from the state made"
grep -E '^thp_(thpalloc_preload_dormant|thpalloc_config_problem_processes|health_status) ' "$D/thp-status.prom" | diag

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
NPORT=$(free_port)
PPORT=$(free_port)
"$NODEX" --web.listen-address="127.0.0.1:$NPORT" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$D" >"$SCRATCH/nodex.log" 2>&1 &
PIDS="$PIDS $!"
cp "$TOP_SRCDIR/examples/prometheus/thpalloc-rules.yml" "$SCRATCH/"
cat >"$SCRATCH/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $SCRATCH/thpalloc-rules.yml
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:$NPORT"]
EOC
"$PROM" --config.file="$SCRATCH/prometheus.yml" --storage.tsdb.path="$SCRATCH/data" \
    --web.listen-address="127.0.0.1:$PPORT" >"$SCRATCH/prom.log" 2>&1 &
PIDS="$PIDS $!"

# Poll the API (at most 40 s): the active alerts once the expected ones are all there, and
# a few evaluations more, so that one that should not fire has had the time to.
"$PYTHON" - "$PPORT" "$want" >"$SCRATCH/alerts.out" 2>&1 <<'PY'
import json, sys, time, urllib.request
port, want = sys.argv[1], set(sys.argv[2].split())
deadline, seen_all, got = time.time() + 40, None, set()
while time.time() < deadline:
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/api/v1/alerts" % port, timeout=2) as r:
            d = json.load(r)
        got = {a["labels"]["alertname"] for a in d["data"]["alerts"]
               if a["state"] in ("pending", "firing")}
    except OSError:
        pass
    if want <= got and seen_all is None:
        seen_all = time.time()
    if seen_all is not None and time.time() - seen_all > 4:
        break
    time.sleep(0.5)
print(" ".join(sorted(got)))
PY
is "$(head -1 "$SCRATCH/alerts.out")" "$(printf '%s\n' $want | sort | tr '\n' ' ' | sed 's/ $//')" \
    "prometheus's /api/v1/alerts: the active alerts are those of the state made"
if ! grep -q Thp "$SCRATCH/alerts.out"; then
    diag "node_exporter:" && tail -5 "$SCRATCH/nodex.log" | diag
    diag "prometheus:" && tail -5 "$SCRATCH/prom.log" | diag
fi
# The same scrape through a recording rule the dashboard shows.
"$PYTHON" - "$PPORT" >"$SCRATCH/query.out" 2>&1 <<'PY'
import json, sys, urllib.request, urllib.parse
q = urllib.parse.quote("instance:thp_thpalloc_dormant:max")
with urllib.request.urlopen("http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], q), timeout=2) as r:
    d = json.load(r)
print(" ".join("%s=%s" % (s["metric"].get("instance"), s["value"][1]) for s in d["data"]["result"]))
PY
is "$(cat "$SCRATCH/query.out")" "127.0.0.1:$NPORT=1" "the recording rule instance:thp_thpalloc_dormant:max is 1 for the scraped machine"
done_testing
