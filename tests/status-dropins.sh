#!/bin/sh
# The PID view reads a process's drop-ins with the library's own reader: all of them, in
# the library's order. With 150 drop-ins (001.conf to 064.conf say thp = large and
# purge_delay = 1s, 150.conf says thp = never and purge_delay = 5s) the view used to read
# the first 64 names only: it showed thp=large/1s while the process ran never/5s, counted
# 86 problems where --check counted none, and said the configuration had changed.
# Checked in a --root tree (any user), and where this runs as root with unshare -m, with a
# holder whose own SYSCONFDIR is that tree (a private mount namespace; the machine's
# configuration is never touched).
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ]; then
    skip "150 drop-ins" "THPALLOC_LIB not built"
    done_testing
fi
set -- $TOOLS
SYSCONF=$("$1" --check --json | "$PYTHON" -c 'import json,sys,os; print(os.path.dirname(json.load(sys.stdin)["check"]["files"][0]))')
ROOT=$SCRATCH/root
D=$ROOT$SYSCONF/thpalloc.d
mkdir -p "$D"
i=1
while [ $i -le 150 ]; do
    f=$D/$(printf '%03d' $i).conf
    if [ $i -le 64 ]; then
        printf '[global]\nthp = large\npurge_delay = 1s\n' >"$f"
    elif [ $i -eq 150 ]; then
        printf '[global]\nthp = never\npurge_delay = 5s\n' >"$f"
    else
        printf '# nothing\n' >"$f"
    fi
    i=$((i + 1))
done
chmod -R go-w "$ROOT"
sleep 600 &
S=$!
CLEANUP_PIDS="$CLEANUP_PIDS $S"

# A holder that runs with the tree as its configuration, where a namespace can be made.
NS=
if [ "$(id -u)" = 0 ] && [ -d "$SYSCONF" ] && unshare -m true 2>/dev/null; then
    unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh \
        "$ROOT$SYSCONF" "$SYSCONF" env LD_PRELOAD="$THPALLOC_LIB" "$HOLDER" 1 >"$SCRATCH/ns.out" 2>&1 &
    NS=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $NS"
    if ! wait_line "$NS" "$SCRATCH/ns.out"; then
        sed 's/^/#   /' "$SCRATCH/ns.out"
        NS=
    fi
fi

for T in $TOOLS; do
    t=$(basename "$T")
    run "$T" --root "$ROOT" "$S"
    ok $([ "$RC" -eq 0 ] && grep -qxF "    thp            never     $D/150.conf:2 [global]" "$OUT" &&
        grep -qxF "    purge_delay    5s        $D/150.conf:3 [global]" "$OUT" &&
        ! grep -v '^    log_problems ' "$OUT" | grep -q 'problem'; echo $?) \
        "$t: --root, PID view: 150 drop-ins, the last one wins, no problem (rc $RC)"
    [ "$RC" -eq 0 ] || sed 's/^/#   /' "$OUT" | grep -E 'thp|purge|problem'
    run "$T" --root "$ROOT" --json "$S"
    is "$(json "$OUT" "[(s['key'], s['value']) for s in d['processes'][0]['policy']['settings'] if s['key'] in ('thp', 'purge_delay')], d['processes'][0]['policy']['problems']")" \
        "([('thp', 'never'), ('purge_delay', '5s')], 0)" "$t: --root --json: the same"
    run "$T" --root "$ROOT" --check
    ok $([ "$RC" -eq 0 ]; echo $?) "$t: --root --check: no problem either (rc $RC)"
    if [ -n "$NS" ]; then
        run "$T" "$NS"
        ok $([ "$RC" -eq 0 ] && grep -qE '^    thp +never +/proc/[0-9]+/root'"$SYSCONF"'/thpalloc.d/150.conf:2 \[global\]$|^    thp +never +'"$SYSCONF"'/thpalloc.d/150.conf:2 \[global\]$' "$OUT" &&
            grep -qE '^    in force +thp=never .* purge_delay=5s ' "$OUT" &&
            ! grep -v '^    log_problems ' "$OUT" | grep -qE 'problem|configuration changed'; echo $?) \
            "$t: a process whose own configuration has 150 drop-ins: the view says what it runs (rc $RC)"
        [ "$RC" -eq 0 ] || sed 's/^/#   /' "$OUT" | grep -E 'thp|purge|problem|changed'
    else
        skip "$t: a process whose own configuration has 150 drop-ins" "needs root and unshare -m"
    fi
    sanitizer_clean "$t"
done
done_testing
