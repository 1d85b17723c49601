#!/bin/sh
# thp-status (the system view): every figure equals the kernel's own, in text, JSON and
# Prometheus output: sysfs settings, /proc/meminfo (within what the kernel showed while the
# tool ran, sampled: other processes change it), /proc/vmstat counters (between a read before and one after), and the
# preload and policy from a scratch --root. Nothing machine-wide is changed.
. "$TESTS_SRCDIR/status-lib.sh"

THP=/sys/kernel/mm/transparent_hugepage

# A scratch root: ld.so.preload with a thpalloc entry that exists, one that does not, a
# 0600 file, and a policy file.
mkroot() { # mkroot NAME PRELOAD-CONTENT [MODE]
    mkdir -p "$SCRATCH/$1/etc" "$SCRATCH/$1/usr/lib/x86_64-linux-gnu"
    : >"$SCRATCH/$1/usr/lib/x86_64-linux-gnu/libthpalloc.so.1"
    printf '%s\n' "$2" >"$SCRATCH/$1/etc/ld.so.preload"
    chmod "${3:-644}" "$SCRATCH/$1/etc/ld.so.preload"
}
mkroot good '/usr/$LIB/libthpalloc.so.1'
mkroot missing '/usr/lib/nowhere/libthpalloc.so.1'
mkroot private '/usr/$LIB/libthpalloc.so.1' 600
mkroot other '/usr/lib/libsomethingelse.so'
# Another allocator before ours (issue 34): a library that defines malloc (the C library's
# own, under jemalloc's name) owns every program's malloc, and thpalloc is dormant.
mkroot dormant '/usr/lib/libjemalloc.so.2 /usr/$LIB/libthpalloc.so.1'
LIBC_SO=$(ldd /bin/sh 2>/dev/null | sed -n 's|.*libc\.so\.6 => \(/[^ ]*\).*|\1|p')
cp "${LIBC_SO:-/lib/x86_64-linux-gnu/libc.so.6}" "$SCRATCH/dormant/usr/lib/libjemalloc.so.2"
# The same allocator in a comment: no entry (ld.so blanks comments first).
mkroot commented "$(printf '# /usr/lib/libjemalloc.so.2\n/usr/$LIB/libthpalloc.so.1')"
cp "$SCRATCH/dormant/usr/lib/libjemalloc.so.2" "$SCRATCH/commented/usr/lib/"
# The configuration lives in ROOT/SYSCONFDIR (the library's own place, /etc on Debian):
# the tool says where (--check --json lists the files it reads).
set -- $TOOLS
"$1" --root "$SCRATCH/good" --check --json >"$SCRATCH/paths.json"
GOODCONF=$(json "$SCRATCH/paths.json" "d['check']['files'][0]")
case $GOODCONF in "$SCRATCH"/good/*) ;; *) echo "Bail out! config path '$GOODCONF' not under the scratch root"; exit 1 ;; esac
mkdir -p "$(dirname "$GOODCONF")"
printf '# test policy\n[global]\nthp = never\npurge_delay = 250ms\n' >"$GOODCONF"
chmod 644 "$GOODCONF"

# Fake kernel files for the commit charge (THP_STATUS_TEST_PROC stands for /proc): each
# overcommit mode, a missing file, a value the kernel never writes.
mkproc() { # mkproc NAME OVERCOMMIT-CONTENT (none: no file)
    mkdir -p "$SCRATCH/proc-$1/sys/vm"
    printf 'MemTotal:        2048000 kB\nCommitLimit:     1000000 kB\nCommitted_AS:     123456 kB\nAnonHugePages:      4096 kB\n' \
        >"$SCRATCH/proc-$1/meminfo"
    [ "$2" = none ] || printf '%s\n' "$2" >"$SCRATCH/proc-$1/sys/vm/overcommit_memory"
}
for m in 0 1 2; do mkproc $m $m; done
# the huge-page fault counters: a third fell back (a warning), one in twenty (none)
mkproc frag 0
printf 'thp_fault_alloc 100\nthp_fault_fallback 50\n' >"$SCRATCH/proc-frag/vmstat"
mkproc fine 0
printf 'thp_fault_alloc 95\nthp_fault_fallback 5\n' >"$SCRATCH/proc-fine/vmstat"
mkproc none none
mkproc bad 7

for T in $TOOLS; do
    t=$(basename "$T")
    # The exit status is the verdict (0 healthy, 1 problems), as the Health line says; this
    # machine's THP settings decide which (tests/status-health.sh makes both happen).
    run "$T"
    ok $({ [ "$RC" -eq 0 ] && [ "$(tail -2 "$OUT")" = "$(printf 'Health\n  healthy')" ]; } ||
        { [ "$RC" -eq 1 ] && tail -1 "$OUT" | grep -qE '^  [0-9]+ problems? \(the warnings above\)$'; }
        echo $?) "$t: exit $RC, as the Health line says: $(tail -1 "$OUT")"
    cp "$OUT" "$SCRATCH/text"
    # The same machine with an empty --root (no configuration, no preload): the verdict of
    # its THP settings alone, which the --root runs below add to (or take from: a policy
    # of thp = never silences the warning of enabled = never).
    mkdir -p "$SCRATCH/bare"
    run "$T" --root "$SCRATCH/bare"
    BARE_RC=$RC

    if [ ! -d "$THP" ]; then
        skip "$t: THP settings" "this kernel has no $THP"
    else
        # Top-level choice files and numbers, as text and JSON.
        run "$T" --json
        cp "$OUT" "$SCRATCH/json"
        bad=
        for k in enabled defrag shmem_enabled; do
            [ -r "$THP/$k" ] || continue
            want=$(sysfs_selected "$THP/$k")
            grep -qE "^  $k +$want " "$SCRATCH/text" || bad="$bad text:$k"
            [ "$(json "$SCRATCH/json" "d['system']['thp']['$k']")" = "$want" ] || bad="$bad json:$k"
        done
        for k in use_zero_page hpage_pmd_size; do
            [ -r "$THP/$k" ] || continue
            want=$(cat "$THP/$k")
            grep -qE "^  $k +$want\$" "$SCRATCH/text" || bad="$bad text:$k"
            [ "$(json "$SCRATCH/json" "d['system']['thp']['$k']")" = "$want" ] || bad="$bad json:$k"
        done
        ok $([ -z "$bad" ]; echo $?) "$t: enabled, defrag, shmem_enabled, use_zero_page, hpage_pmd_size equal sysfs${bad:+ (wrong:$bad)}"

        bad=
        for f in "$THP"/khugepaged/*; do
            k=$(basename "$f")
            case $k in full_scans | pages_collapsed) continue ;; esac # moving counters
            want=$(cat "$f")
            grep -qE "^  $k +$want\$" "$SCRATCH/text" || bad="$bad text:$k"
            [ "$(json "$SCRATCH/json" "d['system']['thp']['khugepaged']['$k']")" = "$want" ] || bad="$bad json:$k"
        done
        ok $([ -z "$bad" ]; echo $?) "$t: every khugepaged setting equals sysfs${bad:+ (wrong:$bad)}"

        bad=
        nsizes=0
        for d in "$THP"/hugepages-*kB; do
            [ -d "$d" ] || continue
            kb=${d##*hugepages-}
            kb=${kb%kB}
            nsizes=$((nsizes + 1))
            if [ -r "$d/enabled" ]; then
                want=$(sysfs_selected "$d/enabled")
                got=$(json "$SCRATCH/json" "[s['enabled'] for s in d['system']['thp']['sizes'] if s['size_kb'] == $kb][0]")
                [ "$got" = "$want" ] || bad="$bad $kb:$got/$want"
            fi
        done
        got=$(json "$SCRATCH/json" "len(d['system']['thp']['sizes'])")
        ok $([ -z "$bad" ] && [ "$got" = "$nsizes" ]; echo $?) \
            "$t: all $nsizes per-size (mTHP) settings equal sysfs${bad:+ (wrong:$bad)}"
    fi

    # meminfo: the tool's figure lies within what the kernel showed while it ran (sampled);
    # a try whose sampler missed a neighbour's brief change is made again.
    for k in AnonHugePages ShmemHugePages FileHugePages; do
        tries=0
        while :; do
            sampled /proc/meminfo $k "$T" --json
            got=$(json "$OUT" "d['system']['meminfo_kb']['$k']")
            tries=$((tries + 1))
            { in_sampled "$got" || [ $tries -ge 10 ]; } && break
            sleep 0.1
        done
        within "$got" "$t: $k in JSON is /proc/meminfo's"
    done
    tries=0
    while :; do
        sampled /proc/meminfo AnonHugePages "$T"
        got=$(awk '$1 == "AnonHugePages" && $3 == "kB" { print $2 }' "$OUT")
        tries=$((tries + 1))
        { in_sampled "$got" || [ $tries -ge 10 ]; } && break
        sleep 0.1
    done
    within "$got" "$t: AnonHugePages in the text view is /proc/meminfo's"

    # vmstat counters only grow: before <= tool <= after.
    vmstat_before=$SCRATCH/vm.before
    grep '^thp_' /proc/vmstat >"$vmstat_before"
    run "$T" --json
    cp "$OUT" "$SCRATCH/json2"
    bad=
    n=0
    while read -r k b; do
        a=$(vmstat "$k")
        g=$(json "$SCRATCH/json2" "d['system']['vmstat'].get('$k', -1)")
        n=$((n + 1))
        [ "$g" -ge "$b" ] && [ "$g" -le "$a" ] || bad="$bad $k:$b<=$g<=$a"
    done <"$vmstat_before"
    ok $([ -z "$bad" ] && [ $n -gt 0 ]; echo $?) "$t: all $n thp_* counters of /proc/vmstat in JSON${bad:+ (wrong:$bad)}"
    ratio_ok=$("$PYTHON" - "$SCRATCH/json2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["system"]
a, f = s["vmstat"].get("thp_fault_alloc", 0), s["vmstat"].get("thp_fault_fallback", 0)
r = s["fault_fallback_ratio"]
print("yes" if (r is None and a + f == 0) or (r is not None and abs(r - f / (a + f)) < 1e-5) else "no")
PY
)
    is "$ratio_ok" yes "$t: fault_fallback_ratio = thp_fault_fallback / (thp_fault_alloc + thp_fault_fallback)"

    # Prometheus: well-formed, one HELP/TYPE per family, the same settings.
    run "$T" --prometheus
    cp "$OUT" "$SCRATCH/prom"
    prom_ok=$("$PYTHON" - "$SCRATCH/prom" <<'PY'
import re, sys
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? -?[0-9.eE+-]+$')
helps, types, seen, bad = {}, {}, set(), []
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# HELP "):
        n = line.split()[2]; helps[n] = helps.get(n, 0) + 1
    elif line.startswith("# TYPE "):
        n = line.split()[2]; types[n] = types.get(n, 0) + 1
    elif not sample.match(line):
        bad.append(line)
    else:
        seen.add(sample.match(line).group(1))
bad += [n for n in seen if helps.get(n) != 1 or types.get(n) != 1]
print("yes" if not bad and seen else "no: %r" % bad[:3])
PY
)
    is "$prom_ok" yes "$t: --prometheus is valid text format, one HELP and TYPE per family"
    if [ -r "$THP/enabled" ]; then
        want=$(sysfs_selected "$THP/enabled")
        ok $(grep -qx "thp_setting_info{knob=\"enabled\",value=\"$want\"} 1" "$SCRATCH/prom"; echo $?) \
            "$t: --prometheus carries enabled = $want"
    fi
    ok $(grep -q '^thp_vmstat_events_total{event="thp_fault_alloc"} [0-9]' "$SCRATCH/prom"; echo $?) \
        "$t: --prometheus carries the vmstat counters"

    # Preload and policy from a scratch root.
    run "$T" --root "$SCRATCH/good"
    ok $([ "$RC" -le "$BARE_RC" ] && grep -q 'system-wide preload *yes: /usr/\$LIB/libthpalloc.so.1 (present)' "$OUT"; echo $?) \
        "$t: --root: a thpalloc entry in etc/ld.so.preload is shown"
    ok $(grep -qE "^ +thp +never +$GOODCONF:3 \[global\]" "$OUT" \
        && grep -qE "^ +purge_delay +250ms +$GOODCONF:4 \[global\]" "$OUT"; echo $?) \
        "$t: --root: the global policy comes from etc/thpalloc.conf with file:line"
    run "$T" --json --root "$SCRATCH/good"
    is "$(json "$OUT" "d['system']['preload']['thpalloc'], d['system']['policy'][0]['value'], d['system']['policy'][0]['line']")" \
        "(True, 'never', 3)" "$t: --root --json: preload and policy"
    run "$T" --root "$SCRATCH/missing"
    ok $(grep -q 'MISSING' "$OUT" && grep -q '! .*does not exist: every program' "$OUT"; echo $?) \
        "$t: a preload entry whose file is missing is a warning"
    run "$T" --root "$SCRATCH/private"
    ok $(grep -q '! .*has mode 0600' "$OUT"; echo $?) "$t: a 0600 ld.so.preload is a warning"
    run "$T" --root "$SCRATCH/dormant"
    ok $([ "$RC" -eq 1 ] && grep -q 'system-wide preload *dormant: /usr/\$LIB/libthpalloc.so.1 (present), after /usr/lib/libjemalloc.so.2, which owns malloc$' "$OUT" &&
        grep -qF "! $SCRATCH/dormant/etc/ld.so.preload lists /usr/lib/libjemalloc.so.2 before /usr/\$LIB/libthpalloc.so.1, and it owns malloc: thpalloc is preloaded but dormant in every process (thpalloc-preload enable --first puts it first)" "$OUT"
        echo $?) "$t: behind an allocator in ld.so.preload: dormant, a warning, exit 1"
    run "$T" --json --root "$SCRATCH/dormant"
    is "$(json "$OUT" "d['system']['preload']['dormant'], d['system']['preload']['malloc_owner']")" \
        "(True, '/usr/lib/libjemalloc.so.2')" "$t: --json: dormant, and the entry that owns malloc"
    run "$T" --json --root "$SCRATCH/good"
    is "$(json "$OUT" "d['system']['preload']['dormant'], d['system']['preload']['malloc_owner']")" \
        "(False, None)" "$t: --json: not dormant alone"
    run "$T" --root "$SCRATCH/commented"
    ok $(grep -q 'system-wide preload *yes: /usr/\$LIB/libthpalloc.so.1 (present)$' "$OUT"; echo $?) \
        "$t: an allocator in a comment before the entry: not dormant"
    run "$T" --prometheus --root "$SCRATCH/dormant"
    ok $(grep -qx 'thp_thpalloc_preload_dormant 1' "$OUT"; echo $?) "$t: --prometheus: dormant 1"
    run "$T" --prometheus --root "$SCRATCH/good"
    ok $(grep -qx 'thp_thpalloc_preload_dormant 0' "$OUT"; echo $?) "$t: --prometheus: dormant 0 alone"
    run "$T" --root "$SCRATCH/other"
    ok $(grep -q 'system-wide preload *no (no thpalloc entry' "$OUT"; echo $?) \
        "$t: a preload file without thpalloc: no"
    en=$(sysfs_selected "$THP/enabled" 2>/dev/null)
    if [ "$en" = never ]; then
        ok $(grep -q '! enabled = never' "$SCRATCH/text"; echo $?) "$t: warns: enabled = never"
    else
        ok $(! grep -q '! enabled = never' "$SCRATCH/text"; echo $?) "$t: no enabled = never warning (enabled = $en)"
    fi
    # Huge-page faults that fell back, from a fake vmstat: over 10 % is a warning that says
    # the counters are since boot and names the file.
    THP_STATUS_TEST_PROC=$SCRATCH/proc-frag run "$T"
    ok $(grep -q "^  ! 33.3 % of huge-page faults since boot fell back to 4 KiB pages: .* (now, or at some time since boot" "$OUT"
        echo $?) "$t: fake vmstat, 50 of 150 faults fell back: a warning that says since boot"
    THP_STATUS_TEST_PROC=$SCRATCH/proc-frag run "$T" --json
    is "$(json "$OUT" "' | '.join(p['kind'] + ' ' + p['where'] for p in d['health']['problems'] if p['kind'] == 'thp_fault_fallback')")" \
        "thp_fault_fallback $SCRATCH/proc-frag/vmstat" "$t: --json: the problem's kind and file"
    THP_STATUS_TEST_PROC=$SCRATCH/proc-fine run "$T"
    ok $(! grep -q "huge-page faults since boot fell back" "$OUT"; echo $?) \
        "$t: fake vmstat, 5 of 100 fell back: no warning"
    # The commit charge from fake files: exact lines, JSON values, Prometheus samples.
    THP_STATUS_TEST_PROC=$SCRATCH/proc-2 run "$T"
    ok $([ "$RC" -le 1 ] && grep -qx '  overcommit_memory      2 (strict: refused beyond CommitLimit)' "$OUT" \
        && grep -qx '  CommitLimit            1000000 kB' "$OUT" && grep -qx '  Committed_AS           123456 kB' "$OUT" \
        && grep -qx '  AnonHugePages          4096 kB' "$OUT"; echo $?) \
        "$t: fake /proc, strict mode: overcommit_memory, CommitLimit, Committed_AS lines"
    THP_STATUS_TEST_PROC=$SCRATCH/proc-2 run "$T" --json
    is "$(json "$OUT" "d['system']['overcommit']")" \
        '{"mode": 2, "mode_name": "strict", "commit_limit_kb": 1000000, "committed_as_kb": 123456}' \
        "$t: fake /proc, strict mode: JSON overcommit"
    THP_STATUS_TEST_PROC=$SCRATCH/proc-2 run "$T" --prometheus
    is "$(grep -E '^(# (HELP|TYPE) )?thp_(overcommit_mode|commit_limit_bytes|committed_as_bytes)' "$OUT" | grep -v '^# HELP')" \
        "$(printf '%s\n' '# TYPE thp_overcommit_mode gauge' 'thp_overcommit_mode 2' \
            '# TYPE thp_commit_limit_bytes gauge' 'thp_commit_limit_bytes 1024000000' \
            '# TYPE thp_committed_as_bytes gauge' 'thp_committed_as_bytes 126418944')" \
        "$t: fake /proc, strict mode: Prometheus gauges in bytes"
    got=
    for m in 0 1; do
        THP_STATUS_TEST_PROC=$SCRATCH/proc-$m run "$T" --json
        got="$got $(json "$OUT" "d['system']['overcommit']['mode'], d['system']['overcommit']['mode_name']")"
        THP_STATUS_TEST_PROC=$SCRATCH/proc-$m run "$T"
        got="$got $(sed -n 's/^  overcommit_memory  *//p' "$OUT")"
    done
    is "$got" " (0, 'heuristic') 0 (heuristic: only obvious overcommits refused) (1, 'always') 1 (always: no commit check)" \
        "$t: fake /proc: modes 0 and 1 by name"
    bad=
    for c in none bad; do
        THP_STATUS_TEST_PROC=$SCRATCH/proc-$c run "$T" --json
        [ "$RC" -le 1 ] && [ "$(json "$OUT" "d['system']['overcommit']['mode'], d['system']['overcommit']['mode_name'], d['system']['overcommit']['committed_as_kb']")" = "(None, None, 123456)" ] || bad="$bad json:$c"
        THP_STATUS_TEST_PROC=$SCRATCH/proc-$c run "$T" --prometheus
        ! grep -q '^thp_overcommit_mode' "$OUT" && grep -qx 'thp_committed_as_bytes 126418944' "$OUT" || bad="$bad prom:$c"
    done
    THP_STATUS_TEST_PROC=$SCRATCH/proc-none run "$T"
    grep -qx "  overcommit_memory      unknown ($SCRATCH/proc-none/sys/vm/overcommit_memory: No such file or directory)" "$OUT" || bad="$bad text:none"
    THP_STATUS_TEST_PROC=$SCRATCH/proc-bad run "$T"
    grep -qx "  overcommit_memory      unknown ($SCRATCH/proc-bad/sys/vm/overcommit_memory: Invalid argument)" "$OUT" || bad="$bad text:bad"
    ok $([ -z "$bad" ]; echo $?) "$t: fake /proc: a missing or unknown overcommit_memory is unknown, null, no sample${bad:+ (wrong:$bad)}"

    # The commit charge of this machine: the mode and CommitLimit hold still.
    mode=$(cat /proc/sys/vm/overcommit_memory)
    run "$T" --json
    is "$(json "$OUT" "d['system']['overcommit']['mode']")" "$mode" "$t: overcommit mode $mode as in /proc/sys/vm/overcommit_memory"
    run "$T"
    ok $(grep -qE "^  overcommit_memory +$mode \((heuristic|always|strict): " "$OUT"; echo $?) "$t: the text view names mode $mode"
    tries=0
    while :; do
        before=$(meminfo CommitLimit)
        run "$T" --prometheus
        after=$(meminfo CommitLimit)
        tries=$((tries + 1))
        { [ "$before" = "$after" ] || [ $tries -ge 20 ]; } && break
    done
    is "$(sed -n 's/^thp_commit_limit_bytes //p' "$OUT")" "$((after * 1024))" "$t: CommitLimit in Prometheus equals /proc/meminfo ($after kB)"
    # Committed_AS includes every process's charge, the tool's own among them: it pauses right
    # before it reads /proc/meminfo, so the sampler reads the machine's figure in the state
    # the tool reads it; 2 MiB of slack for what the tool maps between the pause and its
    # read (its stdio buffer).
    tries=0
    while :; do
        sampled /proc/meminfo Committed_AS env THP_STATUS_TEST_PAUSE=meminfo:300 "$T" --json
        got=$(json "$OUT" "d['system']['overcommit']['committed_as_kb']")
        tries=$((tries + 1))
        { in_sampled "$got" 2048 || [ $tries -ge 10 ]; } && break
        sleep 0.1
    done
    within "$got" "$t: Committed_AS in JSON is /proc/meminfo's" 2048

    sanitizer_clean "$t"
done
done_testing
