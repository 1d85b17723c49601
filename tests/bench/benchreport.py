# thpalloc benchmark report: results.md, summary.md, the plots (tests/bench/README.md).
# Imported by tests/bench/run-bench, which runs the workloads and hands their results here;
# standard library only (Debian's /usr/bin/python3).
"""The report half of tests/bench/run-bench: statistics, results.md, summary.md, plots."""

import math
import os
import platform
import statistics
import subprocess

# The system calls of the syscall table (one counting run per cell under strace -c).
# process_madvise: thpalloc's batches of purges (lib/os.c), up to 64 ranges a call.
SYSCALLS = ("madvise", "process_madvise", "mmap", "munmap", "mprotect")
# A series whose peak RSS grows by more than this from its first to its last point is
# reported as growing.
GROWTH_LIMIT = 1.10
# smaps_rollup field -> key in the results
FOOTPRINT_FIELDS = (("Private_Dirty", "private_dirty_kib"), ("Rss", "rss_kib"),
                    ("Pss", "pss_kib"), ("Anonymous", "anon_kib"),
                    ("AnonHugePages", "anonhuge_kib"))


def fmt_per_mib(calls, freed):
    """Calls per MiB freed with two significant digits (a storm is > 1, a batch << 0.1)."""
    if freed is None:
        return ""
    if not freed:
        return "nothing freed"
    x = calls / freed
    return "0" if x == 0 else "%.2f" % x if x >= 0.1 else "%.2g" % x


def syscall_table(L, workloads, names, counted):
    """The syscall section: calls per workload and allocator, per MiB freed where the
    workload says how much it freed."""
    L.append("## System calls")
    L.append("")
    L.append("`%s` calls of one run per cell under `strace -f -c` (a separate run: the "
             "timings above come from runs without it), as madvise / process_madvise / mmap / "
             "munmap / mprotect; the line below gives madvise + process_madvise + munmap per "
             "MiB freed (the bytes "
             "the program hands to free and realloc, counted in one more run by "
             "tests/bench/freecount.so in front of the program's own allocator, glibc's or "
             "redis-server's jemalloc; the same program frees the same bytes under every "
             "allocator)." % "`, `".join(SYSCALLS))
    L.append("")
    syscall_rows(L, [(w.name, counted[w.name]) for w in workloads if w.name in counted],
                 names, "---|")


def syscall_rows(L, rows, names, align):
    """The syscall table's rows: (workload, {allocator: cell}) each, a line of counts and,
    where the MiB freed are known, a line of calls per MiB freed."""
    L.append("| workload | " + " | ".join(names) + " |")
    L.append("|---|" + align * len(names))
    for name, row in rows:
        cells, per = [], []
        for a in names:
            got = row.get(a) or {}
            if not got.get("calls"):
                cells.append("failed")
                per.append("")
                continue
            c = got["calls"]
            # results from before process_madvise was counted have no such key
            cells.append(" / ".join(str(c.get(k, 0)) for k in SYSCALLS))
            per.append(fmt_per_mib(c["madvise"] + c.get("process_madvise", 0) + c["munmap"],
                                   got.get("freed_mib")))
        L.append("| %s | %s |" % (name, " | ".join(cells)))
        if any(per):
            L.append("| … a MiB freed | %s |" % " | ".join(per))
    L.append("")


# --------------------------------------------------------------------------------------
# thpalloc's huge pages at each workload's peak, by content (thp-status --scan in the
# runner's scan pass; results.json "peak_scan": {workload: {allocator: cell}}).


def peak_scan_cell(c):
    """"H MiB / Z %": thpalloc's huge pages (its arenas) and their zero-filled share at the
    peak; why not, when the process was not read (never a made-up zero)."""
    if c.get("error") and c.get("read") is None:
        return "failed: %s" % c["error"][:80]
    if not c.get("read"):
        why = c.get("not_read") or "?"
        if c.get("error"):
            why += " (%s%s)" % (c["error"], " in " + c["error_in"] if c.get("error_in") else "")
        return "not read: " + why

    def part(o):
        o = o or {}
        b = o.get("scanned_bytes") or 0
        return "%.0f MiB / %s" % (b / 1048576.0, "%.1f %%" % (100.0 * o.get("zero_bytes", 0) / b)
                                  if b else "-")
    if c.get("owners_known") is False:
        # thpalloc loaded but its arenas unknown: thp-status puts every page under "rest"
        txt = part(c.get("rest")) + " (arenas unknown: whole process)"
    else:
        txt = part(c.get("arenas"))
        rest = c.get("rest") or {}
        if rest.get("huge_pages"):
            txt += " (+ rest %s)" % part(rest)
    if c.get("complete") is False:
        txt += " (partial)"
    return txt


PEAK_SCAN_NOTE = (
    "thpalloc's huge pages at the workload's peak, read with `thp-status --scan` (tools/): "
    "*huge pages in thpalloc's arenas (MiB) / their zero-filled share* (4 KiB pieces that "
    "hold only zeros). One more run per workload and thpalloc column, apart from the timed "
    "ones: the workload stops itself (SIGSTOP) at its largest RSS sample (the point it "
    "samples for the huge-page share), the runner scans it frozen and continues it. "
    "*rest*: huge pages outside the arenas. A process thp-status could not read says "
    "why (e.g. `not read: refused (EACCES in smaps_rollup)` without the rights to "
    "attach to it): no figure is made up.")


def peak_scan_table(L, js, heading="## "):
    scan = js.get("peak_scan") or {}
    if not scan:
        return
    cols = [a for a in js["allocators"] if any(a in row for row in scan.values())]
    L.append(heading + "thpalloc's huge pages at the peak (thp-status --scan)")
    L.append("")
    L.append(PEAK_SCAN_NOTE)
    L.append("")
    L.append("| workload | " + " | ".join(cols) + " |")
    L.append("|---|" + "---:|" * len(cols))
    for w in js["workloads"]:
        row = scan.get(w["name"])
        if row is None:
            continue
        L.append("| %s | %s |" % (w["name"], " | ".join(
            peak_scan_cell(row[a]) if a in row else "-" for a in cols)))
    L.append("")


# --------------------------------------------------------------------------------------
# Statistics and report.


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    """Interquartile range over the median (max-min for fewer than 4 runs): one outlier
    run, common on a shared machine, does not move the median and does not count here."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    if not m:
        return None
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        return (q[2] - q[0]) / m
    return (max(xs) - min(xs)) / m


def geomean(xs):
    xs = [x for x in xs if x]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def fmt_time(s):
    if s is None:
        return "-"
    if s >= 10:
        return "%.1f s" % s
    if s >= 0.1:
        return "%.3f s" % s
    return "%.2f ms" % (s * 1e3)


def fmt_mib(kib):
    return "-" if kib is None else ("%.1f MiB" % (kib / 1024.0))


def fmt_ratio(r):
    return "" if r is None else " (%.2f×)" % r


def headline(rows):
    """rows without the points of a series but its largest: that one stands for the series
    in the main tables and the means (so a series counts once)."""
    top = {}
    for w in rows:
        if w.series and (w.series not in top or w.point > top[w.series].point):
            top[w.series] = w
    return [w for w in rows if not w.series or top[w.series] is w]


def build_report(ctx, workloads, footprint, allocs, results):
    """results[wname][aname] = {"runs": [metrics...], "errors": [...]}; returns (md, js).
    workloads: the ordinary ones; footprint: the idle-process rows (their own section)."""
    names = [a for a in allocs]
    summary = {}
    for w in workloads:
        summary[w.name] = {}
        for a in names:
            cell = results[w.name][a]
            runs = cell["runs"]
            med = {}
            for key in ("time_s", "wall_s", "peak_kib", "huge_share", "retained_kib",
                        "live_kib", "reuse_s", "maxrss_kib", "cpu_s", "rss_end_kib",
                        "push_rps", "pop_rps", "push_cpu_s", "pop_cpu_s"):
                med[key] = median([r.get(key) for r in runs])
            med["time_spread"] = spread([r["time_s"] for r in runs])
            med["peak_spread"] = spread([r["peak_kib"] for r in runs])
            summary[w.name][a] = med
    main = headline(workloads)
    ratios = {}
    for w in workloads:
        ratios[w.name] = {}
        base = summary[w.name]["thpalloc"]
        for a in names:
            cur = summary[w.name][a]
            rr = {}
            for key in ("time_s", "peak_kib", "retained_kib"):
                b, c = base.get(key), cur.get(key)
                rr[key] = (c / b) if (b and c is not None) else None
            ratios[w.name][a] = rr
    geo = {}
    for kind in ("synthetic", "real"):
        geo[kind] = {}
        for a in names:
            geo[kind][a] = {
                key: geomean([ratios[w.name][a][key] for w in main if w.kind == kind])
                for key in ("time_s", "peak_kib")}

    L = []
    L.append("# thpalloc benchmark results")
    L.append("")
    L.append("- date: %s" % ctx.started)
    L.append("- host: %s, %d CPUs, kernel %s, %s" % (
        ctx.cpu_model, os.cpu_count() or 0, platform.release(),
        os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else "libc ?"))
    L.append("- THP: enabled `%s`, defrag `%s`" % (ctx.thp_enabled, ctx.thp_defrag))
    L.append("- mode: %s; %d counted run(s) per cell after %d warm-up, allocators interleaved "
             "run by run; cells are medians" % (
                 "quick (smoke sizes: numbers mean nothing)" if ctx.quick else
                 "full (scale %g)" % ctx.scale, ctx.runs, ctx.warmup))
    L.append("- allocators: " + ", ".join(
        "%s (%s)" % (a, allocs[a] and os.path.realpath(allocs[a]) or "no preload") for a in names))
    if ctx.skipped:
        L.append("- **skipped**: " + "; ".join(ctx.skipped))
    L.append("")
    L.append("Ratios are *allocator / thpalloc*: above 1.00× the allocator is slower (or uses "
             "more memory) than thpalloc, below 1.00× it is faster (or smaller).  Only "
             "ratios measured in the same run are comparable.  † marks noisy cells: the "
             "interquartile range of the counted runs is more than 10 % of the median.")
    L.append("")

    def table(title, note, rows, cell_fn, geo_key=None):
        L.append("## " + title)
        L.append("")
        if note:
            L.append(note)
            L.append("")
        L.append("| workload | " + " | ".join(names) + " |")
        L.append("|---|" + "---:|" * len(names))
        for w in rows:
            cells = []
            for a in names:
                errs = results[w.name][a]["errors"]
                if errs and not results[w.name][a]["runs"]:
                    cells.append("FAIL")
                else:
                    cells.append(cell_fn(w, a) + (" (%d failed)" % len(errs) if errs else ""))
            L.append("| %s | %s |" % (w.name, " | ".join(cells)))
        if geo_key:
            for kind, label in (("synthetic", "geomean (synthetic)"), ("real", "geomean (real programs)")):
                if any(w.kind == kind for w in rows):
                    L.append("| **%s** | %s |" % (label, " | ".join(
                        "-" if geo[kind][a][geo_key] is None else "**%.2f×**" % geo[kind][a][geo_key]
                        for a in names)))
        if geo_key:
            for kind, label in (("synthetic", "synthetic workloads"), ("real", "real programs")):
                parts = ["%s %.2f" % (a, 1.0 / geo[kind][a][geo_key]) for a in names
                         if a != "thpalloc" and geo[kind][a][geo_key]]
                if parts and any(w.kind == kind for w in rows):
                    L.append("")
                    L.append("thpalloc's %s as a fraction of each allocator's (geomean over "
                             "%s): %s." % ("time" if geo_key == "time_s" else "peak RSS",
                                           label, ", ".join(parts)))
        L.append("")

    def time_cell(w, a):
        s = summary[w.name][a]
        mark = " †" if (s["time_spread"] or 0) > 0.10 else ""
        return fmt_time(s["time_s"]) + fmt_ratio(ratios[w.name][a]["time_s"]) + mark

    def rss_cell(w, a):
        return fmt_mib(summary[w.name][a]["peak_kib"]) + fmt_ratio(ratios[w.name][a]["peak_kib"])

    def huge_cell(w, a):
        h = summary[w.name][a]["huge_share"]
        return "-" if h is None else "%.0f %%" % (100 * h)

    def retained_cell(w, a):
        s = summary[w.name][a]
        txt = fmt_mib(s["retained_kib"]) + fmt_ratio(ratios[w.name][a]["retained_kib"])
        if s["live_kib"]:
            txt += ", %.1f× live" % (s["retained_kib"] / s["live_kib"]) if s["retained_kib"] else ""
        return txt

    main_rows = [w for w in main if w.kind != "thp"]
    thp_rows = [w for w in main if w.kind == "thp"]
    if main_rows:
        shown_once = "".join(
            "  %s appears (and counts) once, at its largest point; the others are in its "
            "own table below." % series for series in SERIES
            if sum(1 for w in workloads if w.series == series) > 1)
        table("Time", "Median time of the measured phase (workloads) or of the whole process "
              "(real programs); the geometric means leave out the page-level (THP) "
              "workloads below." + shown_once, main_rows, time_cell, "time_s")
        table("Peak RSS", "VmHWM (workloads) or the process's maxrss (real programs: the "
              "largest of the process and its children).", main_rows, rss_cell, "peak_kib")
    series_tables(L, workloads, names, summary, results)
    if thp_rows:
        table("Page-level workloads: time", "bigblock: the first round (every page a first "
              "touch); frag: filling and freeing, without the wait; bigrandom: the whole "
              "loop.", thp_rows, time_cell)
        table("Page-level workloads: peak RSS", None, thp_rows, rss_cell)
    server_rows = [w for w in main if any(summary[w.name][a].get("pop_rps") for a in names)]
    if server_rows:
        def rps_cell(w, a):
            s = summary[w.name][a]
            if not s.get("push_rps") or not s.get("pop_rps"):
                return "-"
            b = summary[w.name]["thpalloc"]
            return "%.0fk / %.0fk%s" % (s["push_rps"] / 1e3, s["pop_rps"] / 1e3,
                                        fmt_ratio(s["pop_rps"] / b["pop_rps"])
                                        if b.get("pop_rps") else "")
        table("Real server: requests/s", "Push / pop phase, thousands of requests a second "
              "(higher is faster; the ratio is the pop phase's, allocator / thpalloc). The "
              "glibc column is the server's own allocator (no preload).", server_rows, rps_cell)

        def server_cpu_cell(w, a):
            s = summary[w.name][a]
            if not s.get("push_cpu_s") or not s.get("pop_cpu_s"):
                return "-"
            b = summary[w.name]["thpalloc"]
            return "%.3f / %.3f%s" % (s["push_cpu_s"], s["pop_cpu_s"],
                                      fmt_ratio(s["pop_cpu_s"] / b["pop_cpu_s"])
                                      if b.get("pop_cpu_s") else "")
        table("Real server: its CPU time", "Push / pop phase, seconds of CPU (user + system, "
              "every thread) the server spent (lower is cheaper; the ratio is the pop "
              "phase's, allocator / thpalloc): steadier than requests/s on a shared machine, "
              "where the client and other tenants compete for the cores.", server_rows,
              server_cpu_cell)
    hp_rows = [w for w in main if w.kind != "real"]
    if hp_rows:
        table("Huge-page share", "AnonHugePages / RSS of the process at the workload's peak "
              "(bigblock: every block live).", hp_rows, huge_cell)
    frag_rows = [w for w in workloads if w.name in ("frag", "phase", "idlereturn")]
    if frag_rows:
        table("Memory given back (frag, phase, idlereturn)", "frag: RSS after freeing 90 % of "
              "the small objects and waiting past the purge delay; phase: RSS after a 12 MiB "
              "phase, all freed, and 1.5 s of light work; idlereturn: RSS after 1 GiB of "
              "1..64 KiB blocks, 90 % freed, and 3 s asleep with no allocator call; \"× live\" "
              "is that RSS over the bytes still allocated (1.0 is perfect).", frag_rows,
              retained_cell)
    foot_js = footprint_table(L, ctx, footprint, names, results)
    failures = []
    for w in workloads + footprint:
        for a in names:
            for e in results[w.name][a]["errors"]:
                failures.append("- %s / %s: %s" % (w.name, a, e))
    if failures:
        L.append("## Failures")
        L.append("")
        L.extend(failures)
        L.append("")
    L.append("## Workloads")
    L.append("")
    for w in workloads + footprint:
        L.append("- **%s** (%s): %s — `%s`" % (w.name, w.kind, w.about, " ".join(
            os.path.basename(x) if i == 0 else (x if len(x) < 60 else x[:57] + "...")
            for i, x in enumerate(w.args(ctx)))))
    L.append("")
    md = "\n".join(L)
    js = {
        "meta": {
            "date": ctx.started, "quick": ctx.quick, "runs": ctx.runs, "warmup": ctx.warmup,
            "scale": ctx.scale, "cpus": os.cpu_count(), "cpu_model": ctx.cpu_model,
            "kernel": platform.release(), "thp_enabled": ctx.thp_enabled,
            "thp_defrag": ctx.thp_defrag, "skipped": ctx.skipped,
            "footprint_settle_s": ctx.settle,
        },
        "allocators": {a: allocs[a] for a in names},
        "workloads": [{
            "name": w.name, "kind": w.kind, "about": w.about, "argv": w.args(ctx),
            "series": w.series, "point": w.point, "in_main_tables": w in main,
            "cells": {a: {"runs": results[w.name][a]["runs"],
                          "errors": results[w.name][a]["errors"],
                          "median": summary[w.name][a],
                          "ratio_vs_thpalloc": ratios[w.name][a]} for a in names},
        } for w in workloads],
        "geomean_ratio_vs_thpalloc": geo,
        "footprint": foot_js,
    }
    return md, js


# series -> (title, unit of a point, what the table shows)
SERIES = {
    "threadchurn": (
        "Thread churn: peak RSS against the number of batches", "batches",
        "Peak RSS (VmHWM, median) of threadchurn at each batch count: every batch runs on "
        "fresh threads that allocate, free and exit.  *last/first* is the peak at the most "
        "batches over the peak at the fewest: an allocator that reuses the memory of exited "
        "threads stays near 1.00× (*flat*); one that leaves memory behind with every batch "
        "*grows* (above %.2f×, and every run at the most batches above every run at the "
        "fewest; *grows?* when the runs overlap: noise may explain it, rerun with more "
        "`--runs`)." % GROWTH_LIMIT),
}


def series_tables(L, workloads, names, summary, results):
    """One table per series: its rows are the allocators, its columns the points."""
    for series, (title, unit, note) in SERIES.items():
        pts = sorted((w for w in workloads if w.series == series), key=lambda w: w.point)
        if len(pts) < 2:
            continue
        L.append("## " + title)
        L.append("")
        L.append(note)
        L.append("")
        L.append("| allocator | " + " | ".join("%d %s" % (w.point, unit) for w in pts) +
                 " | last/first |")
        L.append("|---|" + "---:|" * (len(pts) + 1))
        for a in names:
            cells = []
            for w in pts:
                s = summary[w.name][a]
                if s["peak_kib"] is None:
                    cells.append("FAIL" if results[w.name][a]["errors"] else "-")
                else:
                    cells.append(fmt_mib(s["peak_kib"]) +
                                 (" †" if (s["peak_spread"] or 0) > 0.10 else ""))
            first, last = summary[pts[0].name][a]["peak_kib"], summary[pts[-1].name][a]["peak_kib"]
            if first and last is not None:
                g = last / first
                # growth that the runs' spread could explain is only "grows?"
                lo = min(r["peak_kib"] for r in results[pts[-1].name][a]["runs"])
                hi = max(r["peak_kib"] for r in results[pts[0].name][a]["runs"])
                cells.append("%.2f× (%s)" % (g, "flat" if g <= GROWTH_LIMIT else
                                             "grows" if lo > hi else "grows?"))
            else:
                cells.append("-")
            L.append("| %s | %s |" % (a, " | ".join(cells)))
        L.append("")


def footprint_table(L, ctx, footprint, names, results):
    """The idle-footprint section; returns its JSON part."""
    out = []
    if not footprint:
        return out
    med = {}
    for w in footprint:
        med[w.name] = {}
        for a in names:
            runs = results[w.name][a]["runs"]
            m = {key: median([r[key] for r in runs]) for _, key in FOOTPRINT_FIELDS}
            m["unsettled_runs"] = sum(1 for r in runs if not r["settled"])
            med[w.name][a] = m
    base = "glibc" if "glibc" in names else None
    L.append("## Idle footprint")
    L.append("")
    L.append("Private_Dirty of an idle process (`/proc/PID/smaps_rollup`: the memory it has "
             "written and that no other process shares), median of %d run(s), sampled once "
             "the process has run %.1f s, all its threads are asleep and the figure held "
             "still for 0.1 s; then the process (and its children) is killed.  %s"
             "‡: not settled in time, sampled anyway." % (
                 ctx.runs, ctx.settle,
                 "In brackets: the difference to glibc (no preload) in the same run.  "
                 if base else "glibc was not run: no differences.  "))
    L.append("")
    L.append("| program | " + " | ".join(names) + " |")
    L.append("|---|" + "---:|" * len(names))
    for w in footprint:
        b = med[w.name][base]["private_dirty_kib"] if base else None
        cells = []
        for a in names:
            m = med[w.name][a]
            v = m["private_dirty_kib"]
            if v is None:
                cells.append("FAIL" if results[w.name][a]["errors"] else "-")
                continue
            txt = "%d KiB" % round(v)
            if b is not None and a != base:
                txt += " (%+d KiB)" % round(v - b)
            if m["unsettled_runs"]:
                txt += " ‡"
            cells.append(txt)
        L.append("| %s | %s |" % (w.about, " | ".join(cells)))
        out.append({
            "name": w.name, "about": w.about, "argv": w.args(ctx),
            "cells": {a: {"runs": results[w.name][a]["runs"],
                          "errors": results[w.name][a]["errors"],
                          "median": med[w.name][a],
                          "private_dirty_vs_glibc_kib":
                              (med[w.name][a]["private_dirty_kib"] - b)
                              if b is not None and med[w.name][a]["private_dirty_kib"] is not None
                              else None} for a in names},
        })
    L.append("")
    return out


# --------------------------------------------------------------------------------------
# summary.md: the results a reader sees first (docs/benchmarks.md embeds it whole), made
# from results.json alone so that --summary-from can remake it.


def summary_md(js):
    """Time and peak RSS of every allocator as multiples of glibc's, the real programs'
    huge pages, the idle footprint and the system calls, from a results.json."""
    meta, names = js["meta"], list(js["allocators"])
    L = ["<!-- summary.md written by tests/bench/run-bench; remake it with the command "
         "below and paste it whole -->", ""]
    L.append("Run of %s: thpalloc %s (`%s`, built %s); %d counted run(s) per cell after %d "
             "warm-up, "
             "allocators interleaved run by run, cells are medians; %s, %s CPUs, kernel %s, "
             "THP enabled `%s`, defrag `%s`.%s" % (
                 meta.get("date", "?"), meta.get("thpalloc_git") or "(commit unknown)",
                 js["allocators"].get("thpalloc", "?"), meta.get("thpalloc_built", "?"),
                 meta.get("runs", 0),
                 meta.get("warmup", 0), meta.get("cpu_model", "?"), meta.get("cpus", "?"),
                 meta.get("kernel", "?"), meta.get("thp_enabled", "?"),
                 meta.get("thp_defrag", "?"),
                 " **Quick mode: the numbers mean nothing.**" if meta.get("quick") else ""))
    if meta.get("command"):
        L.append("")
        L.append("Command: `%s`" % meta["command"])
    if meta.get("skipped"):
        L.append("")
        L.append("Skipped: " + "; ".join(meta["skipped"]) + ".")
    L.append("")
    if "glibc" not in names:
        L.append("glibc was not run: no summary against it (see results.md).")
        return "\n".join(L) + "\n"
    others = [a for a in names if a != "glibc"]
    names = ["glibc"] + others  # the reference first
    wl = [w for w in js["workloads"] if w["in_main_tables"]]

    def med(w, a, key):
        return w["cells"][a]["median"].get(key)

    def ratio(w, a, key):
        v, b = med(w, a, key), med(w, "glibc", key)
        return v / b if (v is not None and b) else None

    def r2(x):
        return "-" if x is None else "%.2f×" % x

    L.append("### Time and peak RSS against glibc")
    L.append("")
    L.append("Each cell: *time / peak RSS* as multiples of glibc's in the same run (below 1.00× "
             "is faster / smaller); the glibc column gives its own time and peak.  † : the "
             "time's runs spread by more than 10 % of the median.  The geomeans leave out the "
             "page-level workloads, whose ratios measure a policy (huge pages, memory given "
             "back) and run to 10× either way.  real-redis's glibc column is redis-server's "
             "own jemalloc.")
    L.append("")
    L.append("| workload | " + " | ".join(names) + " |")
    L.append("|---|" + "---:|" * len(names))
    geo = {}
    for kind, label in (("synthetic", "synthetic"), ("real", "real programs"),
                        ("thp", "page-level (not in the means)")):
        rows = [w for w in wl if w["kind"] == kind]
        if not rows:
            continue
        if kind != "synthetic":
            L.append("| *%s* |%s" % (label, " |" * len(names)))
        for w in rows:
            cells = []
            for a in names:
                c = w["cells"][a]
                if c["errors"] and not c["runs"]:
                    cells.append("FAIL")
                    continue
                if a == "glibc":
                    cells.append("%s, %s" % (fmt_time(med(w, a, "time_s")),
                                             fmt_mib(med(w, a, "peak_kib"))))
                    continue
                noisy = (c["median"].get("time_spread") or 0) > 0.10
                cells.append("%s / %s%s%s" % (
                    r2(ratio(w, a, "time_s")), r2(ratio(w, a, "peak_kib")),
                    " †" if noisy else "",
                    " (%d failed)" % len(c["errors"]) if c["errors"] else ""))
            L.append("| %s | %s |" % (w["name"], " | ".join(cells)))
        if kind == "thp":
            continue
        geo[kind] = {a: (geomean([ratio(w, a, "time_s") for w in rows]),
                         geomean([ratio(w, a, "peak_kib") for w in rows])) for a in others}
        L.append("| **geomean (%s, %d)** | | %s |" % (label, len(rows), " | ".join(
            "**%s / %s**" % (r2(geo[kind][a][0]), r2(geo[kind][a][1])) for a in others)))
    L.append("")
    for kind, label in (("synthetic", "synthetic workloads"), ("real", "real programs")):
        g = geo.get(kind, {})
        if "thpalloc" in g and g["thpalloc"][0]:
            parts = ["%s %.2f" % (a, g["thpalloc"][0] / g[a][0]) for a in others
                     if a != "thpalloc" and g[a][0]]
            if parts:
                L.append("thpalloc's time as a fraction of each allocator's (geomean over the "
                         "%s): %s." % (label, ", ".join(parts)))
                L.append("")
    summary_real_huge(L, js, names)
    peak_scan_table(L, js, "### ")
    summary_footprint(L, js, names)
    summary_syscalls(L, js, names)
    return "\n".join(L) + "\n"


def summary_real_huge(L, js, names):
    """The real programs' peak against glibc's: thpalloc's excess, the part of it that
    thp = never takes away (the huge pages' price) when that column ran, and the most
    AnonHugePages seen (the extra run sampled from outside)."""
    real = [w for w in js["workloads"] if w["kind"] == "real"]
    huge = js.get("real_huge", {})
    if not real or "thpalloc" not in names or "glibc" not in names:
        return
    never = "thp-never" in names
    L.append("### Real programs: peak RSS and huge pages")
    L.append("")
    L.append("Peak RSS (medians) against glibc's.  *Excess*: thpalloc's default policy "
             "(`thp = large`) over glibc.%s  *Most AnonHugePages*: the largest huge-page "
             "total seen in thpalloc's program (with its children) in one more run, "
             "`/proc/PID/smaps_rollup` read every 20 ms; under `thp = large` only blocks of "
             "`thp_threshold` (2 MiB) or more get huge pages, so an excess that they cover "
             "can be the policy's price, and one left under `thp = never` is not." % (
                 "  *Left under never*: the same library with `THPALLOC_THP=never` over "
                 "glibc; the difference between the two is what huge pages cost." if never
                 else ""))
    L.append("")
    head = ["program", "glibc", "thpalloc"] + (["thp = never"] if never else []) + \
        ["excess"] + (["left under never"] if never else []) + ["most AnonHugePages"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|" + "---:|" * (len(head) - 1))

    def over(v, g):
        if v is None or g is None:
            return "-"
        return "none" if v <= g else "%s (%.1f %%)" % (fmt_mib(v - g), 100.0 * (v - g) / g)

    for w in real:
        g = w["cells"]["glibc"]["median"].get("peak_kib")
        t = w["cells"]["thpalloc"]["median"].get("peak_kib")
        n = w["cells"]["thp-never"]["median"].get("peak_kib") if never else None
        h = huge.get(w["name"], {}).get("thpalloc", {}).get("huge_peak_kib")
        row = [w["name"], fmt_mib(g), fmt_mib(t) + (" (%.2f×)" % (t / g) if g and t else "")]
        if never:
            row.append(fmt_mib(n) + (" (%.2f×)" % (n / g) if g and n else ""))
        row.append(over(t, g))
        if never:
            row.append(over(n, g))
        row.append("-" if h is None else fmt_mib(h))
        L.append("| " + " | ".join(row) + " |")
    L.append("")


def summary_footprint(L, js, names):
    fp = js.get("footprint") or []
    if not fp or "glibc" not in names:
        return
    L.append("### Idle footprint")
    L.append("")
    L.append("Private_Dirty of an idle process (what each extra copy costs the machine), "
             "median of %d run(s): glibc's in KiB, the others as the difference to it.  ‡: "
             "not settled in time." % js["meta"].get("runs", 0))
    L.append("")
    L.append("| program | " + " | ".join(names) + " |")
    L.append("|---|" + "---:|" * len(names))
    for w in fp:
        cells = []
        for a in names:
            c = w["cells"][a]
            v = c["median"].get("private_dirty_kib")
            if v is None:
                cells.append("FAIL" if c["errors"] else "-")
                continue
            txt = "%d KiB" % round(v) if a == "glibc" else \
                "%+d KiB" % round(c["private_dirty_vs_glibc_kib"])
            cells.append(txt + (" ‡" if c["median"].get("unsettled_runs") else ""))
        L.append("| %s | %s |" % (w["about"], " | ".join(cells)))
    L.append("")


def summary_syscalls(L, js, names):
    sc = js.get("syscalls") or {}
    if not sc:
        return
    L.append("### System calls")
    L.append("")
    L.append("%s calls in one run per cell under `strace -f -c` (apart from the timed runs); "
             "*a MiB freed*: madvise + process_madvise + munmap per MiB the workload freed "
             "(the bytes it "
             "hands to free and realloc, counted by tests/bench/freecount.so in a run of its own)." %
             " / ".join(SYSCALLS))
    L.append("")
    syscall_rows(L, [(w["name"], sc[w["name"]]) for w in js["workloads"] if w["name"] in sc],
                 names, "---:|")


def plot(outdir, results_js):
    """SVG bar charts with gnuplot, when it is installed: time and peak RSS of the
    synthetic workloads and real programs as multiples of glibc's (the page-level ones,
    whose ratios run to 10x, would flatten the rest), and the page-level workloads'
    huge-page share."""
    gp = "/usr/bin/gnuplot"
    if not os.access(gp, os.X_OK):
        return "plots skipped: /usr/bin/gnuplot is not installed"
    names = list(results_js["allocators"])
    base = "glibc" if "glibc" in names else "thpalloc"
    made = []
    charts = [
        ("time_ratio", "time / time under %s (lower is faster)" % base, "time_s", False),
        ("rss_ratio", "peak RSS / peak RSS under %s (lower is smaller)" % base, "peak_kib",
         False),
        ("huge_share", "huge-page share of RSS at the peak (%)", "huge_share", True),
    ]
    for fname, ylabel, key, page_level in charts:
        cols = names if page_level else [a for a in names if a != base]
        dat = os.path.join(outdir, fname + ".dat")
        rows = 0
        with open(dat, "w") as f:
            f.write("workload " + " ".join(cols) + "\n")
            for w in results_js["workloads"]:
                if not w["in_main_tables"] or (w["kind"] == "thp") != page_level:
                    continue  # a series' smaller points: in its own table only
                vals = []
                for a in cols:
                    v = w["cells"][a]["median"].get(key)
                    if not page_level:
                        b = w["cells"][base]["median"].get(key)
                        v = v / b if (v is not None and b) else None
                    vals.append("?" if v is None else "%.6g" % (v * (100 if page_level else 1)))
                if all(v == "?" for v in vals):
                    continue
                rows += 1
                f.write(w["name"] + " " + " ".join(vals) + "\n")
        if not rows:
            os.unlink(dat)
            continue
        script = os.path.join(outdir, fname + ".gp")
        with open(script, "w") as f:
            f.write("set terminal svg size 1100,500 dynamic enhanced font 'sans,11'\n"
                    "set output '%s.svg'\n"
                    "set datafile missing '?'\n"
                    "set style data histograms\n"
                    "set style histogram clustered gap 1\n"
                    "set style fill solid 0.8 border -1\n"
                    "set key top left\n"
                    "set grid ytics\n"
                    "set xtics rotate by -30 noenhanced\n"
                    "set ylabel '%s'\n"
                    "set yrange [0:*]\n"
                    "%s"
                    "plot for [i=2:%d] '%s.dat' using i:xtic(1) title columnheader(i)\n"
                    % (fname, ylabel, "" if page_level else
                       "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2\n",
                       len(cols) + 1, fname))
        rc = subprocess.run([gp, os.path.basename(script)], cwd=outdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if rc.returncode == 0:
            made.append(fname + ".svg")
        else:
            return "plots failed: gnuplot: %s" % rc.stderr.decode(errors="replace").strip()[:300]
    return "plots: " + ", ".join(made) if made else "plots: nothing to plot"


def git_of(lib):
    """"COMMIT" or "COMMIT+dirty lib/" of the source tree the library was built in
    (LIB = TOP/lib/.libs/libthpalloc.so.1), None when it is not a git checkout.  The
    tree's HEAD now: the summary gives the library's build time beside it."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lib))))
    try:
        head = subprocess.run(["git", "-C", top, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=20)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", top, "status", "--porcelain", "--", "lib"],
                               capture_output=True, text=True, timeout=20)
        last = subprocess.run(["git", "-C", top, "log", "-1", "--format=%ct", "--", "lib"],
                              capture_output=True, text=True, timeout=20)
        stale = last.stdout.strip().isdigit() and \
            int(last.stdout) > os.path.getmtime(os.path.realpath(lib))
        return head.stdout.strip() + ("+dirty lib/" if dirty.stdout.strip() else "") + \
            (" (lib/ committed after the build: an older commit's library)" if stale else "")
    except (OSError, subprocess.SubprocessError):
        return None
