#!/bin/sh
# thp-status and privileges: an unprivileged user (setpriv --reuid=65534) asking about a
# root process gets a clear message, a non-zero exit and the rest of the output; run as
# root, the tool keeps only CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, CAP_PERFMON and
# CAP_CHECKPOINT_RESTORE (read from
# its own /proc/PID/status while it is paused) and can still read a root process.
. "$TESTS_SRCDIR/status-lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
    skip "privileges" "needs root and setpriv"
    done_testing
fi
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"

sleep 600 &
ROOTP=$!
$NOBODY sleep 600 &
NOBODYP=$!
CLEANUP_PIDS="$CLEANUP_PIDS $ROOTP $NOBODYP"
i=0
while ! grep -qx 'Uid:	65534	65534	65534	65534' "/proc/$NOBODYP/status" && [ $i -lt 200 ]; do
    sleep 0.05
    i=$((i + 1))
done

# The capabilities the tool should end with: ours, masked to the three it keeps.
last=$(cat /proc/sys/kernel/cap_last_cap)
keep=$(((1 << 2) | (1 << 19)))
[ "$last" -ge 38 ] && keep=$((keep | (1 << 38)))
[ "$last" -ge 40 ] && keep=$((keep | (1 << 40))) # CHECKPOINT_RESTORE: /proc/PID/map_files
capof() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
my_prm=$((0x$(capof $$ CapPrm)))
my_bnd=$((0x$(capof $$ CapBnd)))
# SYS_ADMIN (21): permitted, never effective but while opening /proc/PID/pagemap (--scan:
# page frame numbers, to count a shared huge page once)
want_prm=$((my_prm & (keep | (1 << 21))))
want_eff=$((my_prm & keep))
want_bnd=$((my_bnd & (keep | (1 << 21))))
has_setpcap=$(((0x$(capof $$ CapEff) >> 8) & 1))

# unreadable_why FILE: the cause --all gives below "N could not be read:", on one line.
unreadable_why() {
    awk '/^[0-9]+ could not be read:$/ { on = 1; next } on && /^  / { sub(/^  /, ""); s = s (s ? " " : "") $0; next } { on = 0 } END { print s }' "$1"
}

for T in $TOOLS; do
    t=$(basename "$T")

    # Unprivileged, about a root process.
    run $NOBODY "$T" "$ROOTP"
    ok $([ "$RC" -eq 1 ]; echo $?) "$t: as uid 65534 about a root process: exit 1 (rc $RC)"
    ok $(grep -q "cannot read /proc/$ROOTP/smaps_rollup: permission denied" "$OUT" \
        && grep -q 'CAP_SYS_PTRACE' "$OUT" && grep -q 'root' "$OUT"; echo $?) \
        "$t: says which file, why, and what would allow it (root, CAP_SYS_PTRACE)"
    ok $(grep -q "^PID $ROOTP  sleep\$" "$OUT" && grep -qE '^  THP_enabled +[01] ' "$OUT" \
        && grep -qE '^  uid +0$' "$OUT"; echo $?) "$t: the rest is still printed (name, uid, THP_enabled)"
    ok $(grep -q "^thp-status: $ROOTP: " "$ERR"; echo $?) "$t: a line on stderr"
    run $NOBODY "$T" --json "$ROOTP"
    is "$(json "$OUT" "d['processes'][0]['readable'], d['processes'][0]['memory_kb'], d['processes'][0]['name'], sorted(set(e['errno'] for e in d['processes'][0]['errors']))")" \
        "(False, None, 'sleep', ['EACCES'])" "$t: JSON: readable false, memory null, name, EACCES"

    # Unprivileged: the system view and --all still work.
    run $NOBODY "$T"
    ok $([ "$RC" -eq 0 ] && grep -q '^Huge pages in use' "$OUT"; echo $?) "$t: as uid 65534: the system view"
    run $NOBODY "$T" --all --json
    ok $([ "$RC" -eq 0 ] && [ "$(json "$OUT" "d['unreadable'] >= 1")" = true ]; echo $?) \
        "$t: as uid 65534: --all counts the unreadable processes"
    run $NOBODY "$T" --all
    ok $([ "$RC" -eq 0 ] && grep -qE 'process(es)? shown$' "$OUT" && grep -qE '^[0-9]+ could not be read:$' "$OUT" \
        && unreadable_why "$OUT" | grep -q '^permission denied: the processes of other users need root or CAP_SYS_PTRACE'; echo $?) \
        "$t: as uid 65534: --all says how many could not be read and why"

    # As root without CAP_SYS_PTRACE (dropped by the caller): --all gives that cause, the
    # one the PID view gives, not "run as root".
    run setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace "$T" "$NOBODYP"
    why=$(sed -n "s|^  ! cannot read /proc/$NOBODYP/[a-z_]*: ||p" "$OUT" | head -n 1)
    run setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace "$T" --all
    ok $([ "$RC" -eq 0 ] && [ -n "$why" ] && [ "$(unreadable_why "$OUT")" = "$why" ] \
        && ! grep -q 'run as root' "$OUT"; echo $?) \
        "$t: as root without CAP_SYS_PTRACE: --all says so, as the PID view does (${why:-no cause})"
    [ -n "$why" ] || sed 's/^/#   /' "$OUT" | tail -3

    # As root: the capabilities left while it works, and a root process is still readable.
    : >"$ERR" # not the last run's lines, before the background shell truncates it
    THP_STATUS_TEST_PAUSE="smaps_rollup:1500" "$T" "$ROOTP" >"$OUT" 2>"$ERR" &
    tpid=$!
    i=0
    while ! grep -q 'test pause' "$ERR" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    prm=$((0x$(capof $tpid CapPrm))) eff=$((0x$(capof $tpid CapEff))) inh=$((0x$(capof $tpid CapInh)))
    bnd=$((0x$(capof $tpid CapBnd))) amb=$((0x$(capof $tpid CapAmb)))
    wait $tpid
    RC=$?
    is "$(printf '%x %x %x %x' $prm $eff $inh $amb)" "$(printf '%x %x 0 0' $want_prm $want_eff)" \
        "$t: effective = {DAC_READ_SEARCH, SYS_PTRACE, PERFMON, CHECKPOINT_RESTORE} of ours, permitted = those and SYS_ADMIN; none inheritable or ambient"
    if [ "$has_setpcap" -eq 1 ]; then
        is "$(printf '%x' $bnd)" "$(printf '%x' $want_bnd)" "$t: the bounding set is reduced to the same"
    else
        skip "$t: bounding set" "no CAP_SETPCAP here"
    fi
    ok $([ "$RC" -eq 0 ] && grep -qE '^    Rss +[0-9]+ kB$' "$OUT"; echo $?) \
        "$t: as root with only those capabilities, a root process is read (rc $RC)"
    sanitizer_clean "$t"
done
done_testing
