#!/bin/sh
# thp-status: command line (usage errors exit 2, --help, --version), every view's --json
# parses, a PID that does not exist or exits while being read is reported, not a crash,
# and --all survives processes coming and going. Both builds (plain, ASan+UBSan).
. "$TESTS_SRCDIR/status-lib.sh"

# A PID that no process can have: the kernel keeps PIDs below pid_max, and pid_max
# is at most PID_MAX_LIMIT (4194304 on 64-bit). A free PID just below pid_max is
# not enough: on a busy machine the PIDs wrap and a new process takes it mid-test.
nopid=4194304

printf '[global]\nthp = large\n' >"$SCRATCH/good.conf"
chmod 644 "$SCRATCH/good.conf"

for T in $TOOLS; do
    t=$(basename "$T")
    if [ ! -x "$T" ]; then
        ok 1 "$t: built"
        continue
    fi
    for bad in "--bogus" "-x" "abc" "0" "12abc" "--explain" "--all 1" "--json --prometheus" \
        "--unit web.service --all" "--unit web.service 1" "--environment" "--prometheus --unit x" \
        "--root /nonexistent/dir" "--prometheus 1" "--check --all" "--prometheus --check" \
        "--per-process" "--all --per-process" "--prometheus --per-process"; do
        # shellcheck disable=SC2086
        run "$T" $bad
        ok $([ "$RC" -eq 2 ] && grep -q "thp-status" "$ERR" && [ ! -s "$OUT" ]; echo $?) \
            "$t: '$bad' exits 2 with a message on stderr (rc $RC)"
    done

    # An option without its argument is named as given, not as its short form.
    for o in --explain --unit -e --root; do
        run "$T" $o
        is "$RC|$(cat "$ERR")" "2|thp-status: option '$o' requires an argument
Try 'thp-status --help' for more information." "$t: '$o' without its argument: said so, exit 2"
    done

    run "$T" --help
    ok $([ "$RC" -eq 0 ] && grep -q '^Usage:' "$OUT" && grep -q -- '--explain' "$OUT" && [ ! -s "$ERR" ]; echo $?) \
        "$t: --help to stdout, exit 0"
    run "$T" --version
    ok $([ "$RC" -eq 0 ] && grep -q '^thp-status from thpalloc [0-9]' "$OUT"; echo $?) "$t: --version"

    # Conventions (issue 47): the synopsis has --scan; --prometheus with a PID points to
    # --scan; sizes follow the policy's grammar (thpalloc.conf(5), Values).
    run "$T" --help
    ok $(grep -qE '^ thp-status \[options\] --scan PID\.\.\.\|--all ' "$OUT"; echo $?) "$t: --help's synopsis has --scan"
    run "$T" --prometheus 1
    is "$RC|$(cat "$ERR")" "2|thp-status: --prometheus is for the system view, --all, and PID... with --scan
Try 'thp-status --help' for more information." "$t: --prometheus PID: the error names --scan"
    bad=
    for size in 512MiB 512M 512m 2G 2GiB 1T 4096 4096B 0; do
        run "$T" --scan --scan-rate "$size" --scan-max "$size" "$nopid"
        [ "$RC" -eq 1 ] && [ "$(cat "$ERR")" = "thp-status: $nopid: no such process" ] || bad="$bad $size(rc $RC)"
    done
    ok $([ -z "$bad" ]; echo $?) "$t: --scan-rate and --scan-max take the policy's sizes (512MiB, 2GiB, 4096B, ...)${bad:+ (refused:$bad)}"
    bad=
    for size in 1.5G 12X 2KiBB -1 M ""; do
        run "$T" --scan --scan-rate "$size" "$nopid"
        [ "$RC|$(cat "$ERR")" = "2|thp-status: --scan-rate: not a size: '$size' (a whole number of bytes, with K, M, G or T: 512M, 512MiB, 2G)
Try 'thp-status --help' for more information." ] || bad="$bad '$size'(rc $RC)"
    done
    ok $([ -z "$bad" ]; echo $?) "$t: what the policy refuses (1.5G, 12X, 2KiBB, -1, M, '') --scan-rate refuses, saying the grammar, exit 2${bad:+ (wrong:$bad)}"
    # "1 process read": alone with one holder in a PID namespace (root or user namespaces).
    if unshare -pf --mount-proc true 2>/dev/null; then
        cat >"$SCRATCH/ns.sh" <<'EOF'
LD_PRELOAD=$THPALLOC_LIB "$HOLDER" 1 >"$SCRATCH/ns.holder" 2>&1 &
i=0
while ! grep -q ready "$SCRATCH/ns.holder" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
"$T" --all --scan
EOF
        run env SCRATCH="$SCRATCH" HOLDER="$HOLDER" T="$T" unshare -pf --mount-proc sh "$SCRATCH/ns.sh"
        n=$(sed -n 's/^\([0-9]*\) process\(es\)\{0,1\} shown$/\1/p' "$OUT")
        ok $(grep -q '^Huge pages by content (--scan: 1 process read in ' "$OUT" &&
            grep -qx "$n process$([ "$n" = 1 ] || echo es) shown" "$OUT"; echo $?) \
            "$t: --all --scan with one process of huge pages: '1 process read', '$n process(es) shown'"
    else
        skip "$t: '1 process read'" "no PID namespace here (unshare -pf --mount-proc)"
    fi

    # Every view's --json parses.
    run "$T" --json
    ok $(json_valid "$OUT" && [ "$RC $(json "$OUT" 'd["health"]["status"]')" = "0 healthy" ] ||
        [ "$RC $(json "$OUT" 'd["health"]["status"]')" = "1 problems" ]; echo $?) \
        "$t: system --json parses, its exit status is its health verdict (rc $RC)"
    run "$T" --json $$
    ok $([ "$RC" -eq 0 ] && json_valid "$OUT" && [ "$(json "$OUT" 'd["processes"][0]["pid"]')" = $$ ]; echo $?) \
        "$t: PID --json parses and names the PID"
    run "$T" --json --all
    ok $([ "$RC" -eq 0 ] && json_valid "$OUT"; echo $?) "$t: --all --json parses"
    run "$T" --json --check "$SCRATCH/good.conf"
    ok $([ "$RC" -eq 0 ] && json_valid "$OUT" && [ "$(json "$OUT" 'd["check"]["ok"]')" = true ]; echo $?) \
        "$t: --check --json parses"
    run "$T" --json --explain some-program --unit x.service
    ok $([ "$RC" -eq 0 ] && json_valid "$OUT" && [ "$(json "$OUT" 'd["explain"]["unit"]')" = x.service ]; echo $?) \
        "$t: --explain --json parses"

    # A PID that does not exist.
    run "$T" "$nopid"
    is "$(cat "$OUT")|$(cat "$ERR")|$RC" "|thp-status: $nopid: no such process|1" \
        "$t: a PID that does not exist: said once, on stderr, exit 1"
    run "$T" "$nopid" $$
    ok $([ "$RC" -eq 1 ] && [ "$(head -1 "$OUT")" = "PID $$  $(cat /proc/$$/comm)" ] \
        && [ "$(cat "$ERR")" = "thp-status: $nopid: no such process" ]; echo $?) \
        "$t: ... and among others, only on stderr (rc $RC)"
    run "$T" --json "$nopid"
    ok $([ "$RC" -eq 1 ] && [ "$(json "$OUT" 'd["processes"][0]["exists"]')" = false ]; echo $?) \
        "$t: ... and in JSON, exists false"

    # A process that exits while being read, at each step of the reading.
    for step in smaps_rollup maps introspect smaps; do
        if ! start_holder 1; then
            ok 1 "$t: status-holder starts"
            continue
        fi
        victim=$HOLDER_PID
        : >"$ERR" # not the last run's lines, before the background shell truncates it
        THP_STATUS_TEST_PAUSE="$step:1500" "$T" "$victim" >"$OUT" 2>"$ERR" &
        tpid=$!
        i=0
        while ! grep -q "test pause before $step" "$ERR" && [ $i -lt 200 ]; do
            sleep 0.05
            i=$((i + 1))
        done
        kill -9 "$victim"
        wait "$victim" 2>/dev/null
        wait "$tpid"
        RC=$?
        grep -qE 'Sanitizer|runtime error:' "$ERR" && cat "$ERR" >>"$SANLOG"
        ok $(not_crashed "$RC" && [ "$RC" -eq 1 ] && grep -q "exited while being read" "$OUT" \
            && grep -q "PID $victim" "$OUT"; echo $?) \
            "$t: the process exits before $step is read: said, exit 1, no crash (rc $RC)"
    done

    # --all while processes come and go.
    (while :; do /bin/true; done) &
    churn1=$!
    (while :; do sh -c 'sleep 0.01' ; done) &
    churn2=$!
    allrc=0
    for i in 1 2 3 4 5; do
        run "$T" --all
        [ "$RC" -eq 0 ] && grep -qE 'process(es)? shown' "$OUT" || allrc=1
        run "$T" --all --json
        [ "$RC" -eq 0 ] && json_valid "$OUT" || allrc=1
    done
    kill "$churn1" "$churn2"
    wait "$churn1" "$churn2" 2>/dev/null
    ok $allrc "$t: --all and --all --json while processes come and go"

    sanitizer_clean "$t"
done
done_testing
