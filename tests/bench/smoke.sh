#!/bin/sh
# TAP test: the benchmark runner's --quick mode produces every cell (the idle-footprint
# table's included).
#
# Runs tests/bench/run-bench --quick against the freshly built library ($THPALLOC_LIB) and
# every installed allocator, then checks that each (workload, allocator) cell has a result.
# Never a timing gate: on a shared machine timings say nothing; a missing cell means a
# workload or an allocator failed to run at all.
# Environment (exported by make check): THPALLOC_LIB, TESTS_BUILDDIR, TESTS_SRCDIR.

srcdir_bench="${TESTS_SRCDIR:-$(dirname "$0")/..}/bench"
builddir_bench="${TESTS_BUILDDIR:-$(dirname "$0")/..}/bench"
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)

if [ -z "$python" ]; then
    echo "1..0 # SKIP no python3"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-smoke.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "# runner: $srcdir_bench/run-bench --quick"
echo "# thpalloc: ${THPALLOC_LIB:-(default)}"
# The peers in ../shared/peers are for measuring, never a test dependency: left out here.
set -- --quick --peers "" --bindir "$builddir_bench" --results "$tmp/results"
[ -n "$THPALLOC_LIB" ] && set -- "$@" --thpalloc "$THPALLOC_LIB"
start=$(date +%s)
"$python" "$srcdir_bench/run-bench" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
end=$(date +%s)
sed 's/^/# /' "$tmp/stderr"

# Every cell of results.json: one TAP line each.
"$python" - "$tmp/results/results.json" "$rc" "$((end - start))" <<'PY'
import json, sys
path, rc, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = []
try:
    with open(path) as f:
        js = json.load(f)
except (OSError, ValueError) as e:
    print("1..2")
    print("not ok 1 - runner exit status %d" % rc)
    print("not ok 2 - results.json readable: %s" % e)
    sys.exit(0)
lines.append((rc == 0, "runner exit status %d (%d s)" % (rc, secs)))
allocs = list(js["allocators"])
lines.append(("thpalloc" in allocs, "thpalloc is among the allocators: %s" % ", ".join(allocs)))
lines.append((len(js["workloads"]) > 0, "%d workloads, %d idle-footprint rows" % (
    len(js["workloads"]), len(js.get("footprint", [])))))
for w in js["workloads"]:
    for a in allocs:
        c = w["cells"][a]
        ok = bool(c["runs"]) and not c["errors"] and c["median"].get("time_s") is not None \
            and c["median"].get("peak_kib") is not None
        why = "" if ok else " # " + "; ".join(c["errors"])[:200]
        lines.append((ok, "%s / %s%s" % (w["name"], a, why)))
# the idle-footprint table: a sample for every cell
for w in js.get("footprint", []):
    for a in allocs:
        c = w["cells"][a]
        ok = bool(c["runs"]) and not c["errors"] \
            and c["median"].get("private_dirty_kib") is not None
        why = "" if ok else " # " + "; ".join(c["errors"])[:200]
        lines.append((ok, "%s / %s%s" % (w["name"], a, why)))
# the syscall table (when strace is installed): every workload's MiB freed, counted by
# freecount.so, so that every row gets its calls per MiB freed
sc = js.get("syscalls") or {}
if sc:
    nofreed = [n for n, cells in sorted(sc.items())
               if not any("freed_mib" in (c or {}) for c in cells.values())]
    lines.append((not nofreed, "syscall table: MiB freed for each of %d workloads%s" % (
        len(sc), " # missing: " + ", ".join(nofreed) if nofreed else "")))
# the scan pass: thp-status --scan read every workload under thpalloc at its peak (or
# said why it could not: "not read" is an answer, a failed run or a missing stop is not)
scan = js.get("peak_scan") or {}
want = [w["name"] for w in js["workloads"] if w["kind"] != "real"]
bad = [n for n in want if (scan.get(n, {}).get("thpalloc") or {}).get("read") is None]
lines.append((not bad, "peak scan: thpalloc's huge pages read at the peak of each of %d "
              "workloads%s" % (len(want), " # missing: " + ", ".join(
                  "%s (%s)" % (n, (scan.get(n, {}).get("thpalloc") or {}).get("error", "no cell"))
                  for n in bad) if bad else "")))
# summary.md (docs/benchmarks.md embeds it): a row for every workload of the main tables,
# glibc's column first
import os
try:
    with open(os.path.join(os.path.dirname(path), "summary.md")) as f:
        summary = f.read().splitlines()
except OSError:
    summary = []
rows = set(l.split("|")[1].strip() for l in summary if l.startswith("| "))
want = [w["name"] for w in js["workloads"] if w["in_main_tables"]]
missing = [n for n in want if n not in rows]
lines.append(("thpalloc's huge pages at the peak (thp-status --scan)" in "\n".join(summary),
              "summary.md: the peak scan's section"))
lines.append(("| workload | glibc | thpalloc |" in "\n".join(summary) and not missing,
              "summary.md: glibc first, a row for each of %d workloads%s" % (
                  len(want), " # missing: " + ", ".join(missing) if missing else "")))
print("1..%d" % len(lines))
for i, (ok, text) in enumerate(lines, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, text))
PY
if [ -f "$tmp/results/results.md" ]; then
    echo "# --- results.md ---"
    sed 's/^/# /' "$tmp/results/results.md"
fi
exit 0
