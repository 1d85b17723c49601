#!/bin/sh
# One health verdict for a machine (issue 47): with a drop-in of mode 0600 and a
# [unit nginx] section, --check reports 2 problems, and so do every view of the system:
# the text view lists them under Warnings and exits 1, --json has policy_problems 2 and
# "health": {"status": "problems", "problems": [...]} with each, --prometheus has
# thp_thpalloc_config_problems 2, thp_health_status 1, thp_health_problems and one
# thp_health_problem_info per problem (and exits 0: its verdict is in the metric). The
# machine's own warnings (its THP settings, counted alike) are measured first with an
# empty --root and added. thpalloc-preload status: 1 when dormant (tests/pkg-preload-matrix.sh).
. "$TESTS_SRCDIR/status-lib.sh"

set -- $TOOLS
EMPTY=$SCRATCH/empty
mkdir -p "$EMPTY"
"$1" --root "$EMPTY" --check --json >"$SCRATCH/paths.json"
CONF=$(json "$SCRATCH/paths.json" "d['check']['files'][0]")
DIR=$(json "$SCRATCH/paths.json" "d['check']['files'][1]")
CONF_REL=${CONF#"$EMPTY"}
DIR_REL=${DIR#"$EMPTY"}
BAD=$SCRATCH/bad
mkdir -p "$BAD$DIR_REL" "$BAD/etc"
printf '[unit nginx]\nthp = never\n' >"$BAD$CONF_REL"
printf '[global]\npurge = free\n' >"$BAD$DIR_REL/50-private.conf"
chmod 644 "$BAD$CONF_REL"
chmod 600 "$BAD$DIR_REL/50-private.conf"
P1="$BAD$CONF_REL:1: [unit nginx] never matches: a unit is named with its type, as in /proc/PID/cgroup: did you mean [unit nginx.service]?"
P2="$BAD$DIR_REL/50-private.conf: mode 0600 (owner root, group root): processes of other users cannot read it (\"cannot open: permission denied\") and run without its settings (chmod a+r)"
# A healthy configuration: readable, every section can match.
GOOD=$SCRATCH/good
mkdir -p "$GOOD$DIR_REL"
printf '[unit nginx.service]\nthp = never\n' >"$GOOD$CONF_REL"
chmod 644 "$GOOD$CONF_REL"
# A dormant preload entry: behind a library that defines malloc (the C library's, under
# jemalloc's name).
DORM=$SCRATCH/dormant
mkdir -p "$DORM/etc" "$DORM/usr/lib/x86_64-linux-gnu"
: >"$DORM/usr/lib/x86_64-linux-gnu/libthpalloc.so.1"
LIBC_SO=$(ldd /bin/sh 2>/dev/null | sed -n 's|.*libc\.so\.6 => \(/[^ ]*\).*|\1|p')
cp "${LIBC_SO:-/lib/x86_64-linux-gnu/libc.so.6}" "$DORM/usr/lib/libjemalloc.so.2"
printf '/usr/lib/libjemalloc.so.2 /usr/$LIB/libthpalloc.so.1\n' >"$DORM/etc/ld.so.preload"

# views ROOT: the text view ($SCRATCH/text, $TRC), --json ($SCRATCH/json, $JRC),
# --prometheus ($SCRATCH/prom, $PRC).
views() {
    run "$T" --root "$1"
    cp "$OUT" "$SCRATCH/text"
    TRC=$RC
    run "$T" --root "$1" --json
    cp "$OUT" "$SCRATCH/json"
    JRC=$RC
    run "$T" --root "$1" --prometheus
    cp "$OUT" "$SCRATCH/prom"
    PRC=$RC
}
prom() { sed -n "s/^$1 //p" "$SCRATCH/prom"; }

for T in $TOOLS; do
    t=$(basename "$T")
    # The machine alone: its warnings, if any, are the whole verdict.
    views "$EMPTY"
    base=$(prom thp_health_problems)
    nwarn=$(sed -n '/^Warnings$/,/^Health$/p' "$SCRATCH/text" | grep -c '^  ! ')
    want=$([ "$base" -gt 0 ] && echo 1 || echo 0)
    is "$TRC $JRC $PRC|$(prom thp_health_status)|$(json "$SCRATCH/json" "d['health']['status'], len(d['health']['problems'])")|$nwarn" \
        "$want $want 0|$want|('$([ "$want" = 1 ] && echo problems || echo healthy)', $base)|$base" \
        "$t: no configuration: text, --json and --prometheus agree ($base machine warnings): exit $want, 0 for --prometheus"

    views "$GOOD"
    is "$TRC $JRC $PRC|$(prom thp_health_problems)|$(prom thp_thpalloc_config_problems)|$(json "$SCRATCH/json" "d['system']['policy_problems']")" \
        "$want $want 0|$base|0|0" "$t: a healthy configuration adds nothing"

    run "$T" --root "$BAD" --check
    is "$RC|$(cat "$OUT")" "1|$P1
$P2
2 problems in $BAD$CONF_REL and $BAD$DIR_REL/*.conf" "$t: --check: 2 problems, exit 1"
    views "$BAD"
    is "$TRC $JRC $PRC" "1 1 0" "$t: 2 problems: the text view and --json exit 1, --prometheus 0"
    is "$(sed -n '/^Warnings$/,$p' "$SCRATCH/text" | tail -5)" "  ! the configuration has 2 problems (ignored settings or files some processes cannot read): thp-status --check
    $P1
    $P2
Health
  $((base + 2)) problems (the warnings above)" \
        "$t: the text view lists them under Warnings, as --check does, and the verdict"
    got=$("$PYTHON" - "$SCRATCH/json" "$BAD$CONF_REL:1" "$BAD$DIR_REL/50-private.conf" "$P1" "$P2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = d["health"]
conf = [p for p in h["problems"] if p["kind"] == "config"]
want = [{"kind": "config", "where": sys.argv[2], "message": sys.argv[4].split(": ", 1)[1]},
        {"kind": "config", "where": sys.argv[3], "message": sys.argv[5].split(": ", 1)[1]}]
print(d["system"]["policy_problems"], h["status"], len(h["problems"]), conf == want,
      sum(1 for w in d["system"]["warnings"] if "configuration has 2 problems" in w))
PY
)
    is "$got" "2 problems $((base + 2)) True 1" "$t: --json: policy_problems 2, health problems with kind, where and message"
    is "$(prom thp_thpalloc_config_problems) $(prom thp_health_status) $(prom thp_health_problems)" "2 1 $((base + 2))" \
        "$t: --prometheus: thp_thpalloc_config_problems 2, thp_health_status 1, thp_health_problems $((base + 2))"
    ok $(grep -qxF "thp_health_problem_info{kind=\"config\",where=\"$BAD$CONF_REL:1\"} 1" "$SCRATCH/prom" &&
        grep -qxF "thp_health_problem_info{kind=\"config\",where=\"$BAD$DIR_REL/50-private.conf\"} 1" "$SCRATCH/prom"
        echo $?) "$t: --prometheus: thp_health_problem_info for each, by kind and where"
    promtool_check "$SCRATCH/prom" "$t: --prometheus with problems"

    views "$DORM"
    got=$("$PYTHON" - "$SCRATCH/json" <<'PY'
import json, sys
print([p["kind"] for p in json.load(open(sys.argv[1]))["health"]["problems"] if p["kind"].startswith("preload")])
PY
)
    is "$TRC $JRC|$(prom thp_health_status)|$got|$(grep -c "^thp_health_problem_info{kind=\"preload_dormant\",where=\"$DORM/etc/ld.so.preload\"} 1$" "$SCRATCH/prom")" \
        "1 1|1|['preload_dormant']|1" "$t: a dormant preload entry is a problem: exit 1, kind preload_dormant"
    sanitizer_clean "$t"
done
done_testing
