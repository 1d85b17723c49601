#!/bin/sh
# examples/prometheus/thpalloc-rules.yml: promtool accepts the rules and its unit tests
# (thpalloc-rules.test.yml: synthetic series for each alert, firing and quiet) pass; each
# alert and recording rule is exercised there; the series the rules read are those
# thp-status writes; every query of the Grafana dashboard (examples/grafana/thpalloc.json)
# is a recording rule of the file, so that the rules' tests test the dashboard's data; and
# the tests can fail (a rule made wrong on purpose fails them).
set -u
. "${TESTS_SRCDIR:?run through make check}/tap.sh"
TOP_SRCDIR=$(cd "$TESTS_SRCDIR/.." && pwd)
TOP_BUILDDIR=$(cd "$TESTS_BUILDDIR/.." && pwd)
RULES=$TOP_SRCDIR/examples/prometheus/thpalloc-rules.yml
RTEST=$TOP_SRCDIR/examples/prometheus/thpalloc-rules.test.yml
DASH=$TOP_SRCDIR/examples/grafana/thpalloc.json
THP_STATUS=$TOP_BUILDDIR/tools/thp-status/thp-status
PYTHON=${PYTHON:-python3}
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/prom-rules.XXXXXX") || exit 99
trap 'rm -rf "$SCRATCH"' EXIT

# promtool as tests/status-lib.sh finds it.
for PROMTOOL in "${PROMTOOL:-}" "$(command -v promtool 2>/dev/null)" \
    "${THPALLOC_CI_CACHE:-/var/cache/thpalloc-ci}/promtool/promtool" ""; do
    [ -n "$PROMTOOL" ] && [ -x "$PROMTOOL" ] && break
done
promtool_skip() {
    if [ "${THPALLOC_REQUIRE_PROMTOOL:-0}" = 1 ]; then
        fail "$1 (no promtool: tools/dev/fetch-promtool)"
    else
        skip "$1" "no promtool (tools/dev/fetch-promtool)"
    fi
}
HAVE_YAML=$("$PYTHON" -c 'import yaml; print(1)' 2>/dev/null)

if [ -n "$PROMTOOL" ]; then
    "$PROMTOOL" check rules "$RULES" >"$SCRATCH/check.out" 2>&1
    rc=$?
    ok $([ $rc -eq 0 ] && grep -q 'SUCCESS: [0-9]* rules found' "$SCRATCH/check.out"; echo $?) \
        "promtool check rules accepts thpalloc-rules.yml (rc $rc)"
    [ $rc -eq 0 ] || diag <"$SCRATCH/check.out"
    (cd "$(dirname "$RTEST")" && "$PROMTOOL" test rules "$(basename "$RTEST")") >"$SCRATCH/test.out" 2>&1
    rc=$?
    ok $rc "promtool test rules: every alert and recording rule against its synthetic series"
    [ $rc -eq 0 ] || head -60 "$SCRATCH/test.out" | diag
    # The tests can fail: the same tests against rules made wrong on purpose.
    for mut in 's/instance_unit:thp_huge_zero:ratio > 0.5$/instance_unit:thp_huge_zero:ratio > 0.8/' \
        's/expr: instance:thp_health_status:max > 0$/expr: instance:thp_health_status:max > 1/' \
        's/count_over_time(thp_setting_info\[1h\])/thp_setting_info/'; do
        mkdir -p "$SCRATCH/mut"
        sed "$mut" "$RULES" >"$SCRATCH/mut/thpalloc-rules.yml"
        cp "$RTEST" "$SCRATCH/mut/"
        if cmp -s "$RULES" "$SCRATCH/mut/thpalloc-rules.yml"; then
            fail "the mutation '$mut' changes the rules"
            continue
        fi
        (cd "$SCRATCH/mut" && "$PROMTOOL" test rules thpalloc-rules.test.yml) >/dev/null 2>&1
        rc=$?
        ok $([ $rc -ne 0 ]; echo $?) "the tests fail on rules made wrong: $mut (rc $rc)"
    done
else
    promtool_skip "promtool check rules"
    promtool_skip "promtool test rules"
fi

if [ -z "$HAVE_YAML" ]; then
    skip "the rules' coverage, series and the dashboard" "no python3-yaml"
    done_testing
fi

# Each alert has a test where it fires and one where it does not; each recording rule is
# evaluated by a promql_expr_test (directly, or through an alert that reads it).
"$PYTHON" - "$RULES" "$RTEST" >"$SCRATCH/cover.out" 2>&1 <<'PY'
import re, sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
records = [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]
alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
fires, quiet, exprs = set(), set(), []
for t in tests["tests"]:
    for a in t.get("alert_rule_test", []):
        (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
    exprs += [e["expr"] for e in t.get("promql_expr_test", [])]
bad = ["alert %s never fires in a test" % a for a in alerts if a not in fires]
bad += ["alert %s is never quiet in a test" % a for a in alerts if a not in quiet]
for r in records:
    if not any(re.search(r"(^|[^:\w])%s($|[^:\w])" % re.escape(r), e) for e in exprs):
        bad.append("recording rule %s is not evaluated by a promql_expr_test" % r)
print("\n".join(bad) if bad else "ok %d alerts, %d recording rules" % (len(alerts), len(records)))
PY
ok $(grep -q '^ok ' "$SCRATCH/cover.out"; echo $?) "every alert fires and stays quiet in a test; every recording rule is evaluated ($(head -1 "$SCRATCH/cover.out"))"
grep -q '^ok ' "$SCRATCH/cover.out" || diag <"$SCRATCH/cover.out"

# The raw series the rules read: those thp-status writes (the system view, --all, --scan;
# a family printed only when not zero: named in the tool's source),
# or node_exporter's own (node_*). thp_health_* comes with the health verdict of
# thp-status --check (a change of its own): checked where this build writes it.
{
    "$THP_STATUS" --prometheus
    "$THP_STATUS" --all --prometheus --scan --scan-max 1
} 2>/dev/null | sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' | sort -u >"$SCRATCH/families"
"$PYTHON" - "$RULES" >"$SCRATCH/used" <<'PY'
import re, sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
names = set()
for g in rules["groups"]:
    for r in g["rules"]:
        # raw series only: not the parts of a recording rule's level:metric:operations
        names.update(re.findall(r"(?<![\w:])(thp_[a-z_]+|node_[a-z_]+)(?![\w:])", r["expr"]))
print("\n".join(sorted(names)))
PY
missing=
for n in $(cat "$SCRATCH/used"); do
    case $n in node_*) continue ;; esac
    # written now, or by the tool's source (a family printed only when not zero)
    if ! grep -qx "$n" "$SCRATCH/families" && ! grep -q "\"$n\"" "$TOP_SRCDIR"/tools/thp-status/*.c; then
        case $n in
        thp_health_*) skip "the rules read $n" "this build's thp-status does not write it yet (the health verdict)" ;;
        *) missing="$missing $n" ;;
        esac
    fi
done
is "${missing# }" "" "every thp_* series the rules read is one thp-status writes ($(wc -l <"$SCRATCH/used") names)"

# The dashboard: valid JSON, and every query a recording rule of the file (a selector of
# it, at most with the dashboard's instance variable), the variable's query included.
"$PYTHON" - "$RULES" "$DASH" >"$SCRATCH/dash.out" 2>&1 <<'PY'
import json, re, sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
dash = json.load(open(sys.argv[2]))
bad, n = [], 0
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
for p in walk(dash.get("panels", [])):
    for t in p.get("targets", []):
        n += 1
        m = re.fullmatch(r'([a-z_:]+)(\{instance=~"\$instance"\})?', t.get("expr", ""))
        if not m or m.group(1) not in records:
            bad.append("panel %r: %r is not a recording rule" % (p.get("title"), t.get("expr")))
for v in dash.get("templating", {}).get("list", []):
    if v.get("type") != "query":
        continue
    q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
    n += 1
    m = re.fullmatch(r"label_values\(([a-z_:]+), *[a-z_]+\)", q)
    if not m or m.group(1) not in records:
        bad.append("variable %r: %r does not read a recording rule" % (v.get("name"), q))
print("\n".join(bad) if bad or not n else "ok %d queries" % n)
PY
ok $(grep -q '^ok ' "$SCRATCH/dash.out"; echo $?) "every query of the Grafana dashboard is a recording rule of the rules file ($(head -1 "$SCRATCH/dash.out"))"
grep -q '^ok ' "$SCRATCH/dash.out" || diag <"$SCRATCH/dash.out"
done_testing
