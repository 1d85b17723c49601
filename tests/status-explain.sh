#!/bin/sh
# What --explain, --unit and --check say is what processes get (issue 34):
# - a program started through a symbolic link is named by its executable (/proc/PID/exe),
#   so --explain LINK gives the policy of the real name, the one the process's own view
#   (thp-status PID, the resolver run as the process) shows, and --check says that a
#   [program LINK] section never matches (a scratch link, and python3 where it is one);
# - a drop-in, a drop-in directory or a directory on their path that other users cannot
#   read is a problem for --check, a warning for --explain and --unit, and a process of
#   another user runs without it;
# - [unit NAME] without its type, [program /A/PATH] and [program NAME.service] never
#   match: said, with the corrected form.
. "$TESTS_SRCDIR/status-lib.sh"

mkdir -p "$SCRATCH/probe"
set -- $TOOLS
"$1" --root "$SCRATCH/probe" --check --json >"$SCRATCH/paths.json"
CONF_REL=$(json "$SCRATCH/paths.json" "d['check']['files'][0]")
CONF_REL=${CONF_REL#"$SCRATCH/probe"}
DIR_REL=$(json "$SCRATCH/paths.json" "d['check']['files'][1]")
DIR_REL=${DIR_REL#"$SCRATCH/probe"}

# A program that is a symbolic link to another name, as python3 -> python3.11.
BIN=$SCRATCH/bin
mkdir -p "$BIN"
cp "$(readlink -f /bin/sleep)" "$BIN/realprog"
ln -s realprog "$BIN/linkprog"
printf '#!%s\n' "$BIN/linkprog" >"$BIN/myscript"
chmod 755 "$BIN/myscript"
R=$SCRATCH/root
mkdir -p "$R$DIR_REL"
cat >"$R$CONF_REL" <<'EOF'
[program linkprog]
thp = never
[program realprog]
purge_delay = 5s
EOF
PY=
for c in /usr/bin/python3 $(command -v python3); do
    [ -L "$c" ] && [ "$(basename "$(readlink -f "$c")")" != python3 ] && { PY=$c; break; }
done
PYREAL=$(readlink -f "${PY:-/}")
if [ -n "$PY" ]; then
    printf '[program %s]\nthp = never\n[program %s]\npurge_delay = 5s\n' \
        "$(basename "$PY")" "$(basename "$PYREAL")" >>"$R$CONF_REL"
else
    PY=
fi
printf '[path /nonexistent/thp-test/prog]\nstats = exit\n' >>"$R$CONF_REL"
chmod 644 "$R$CONF_REL"

# The same policy in drop-ins that other users cannot read: the file (R2), the directory
# (R3), a directory on the path (R4).
mkroot() { # mkroot DIR: a root whose only drop-in sets thp = never
    mkdir -p "$1$DIR_REL"
    printf '[global]\nthp = never\n' >"$1$DIR_REL/50-services.conf"
    chmod 644 "$1$DIR_REL/50-services.conf"
}
R2=$SCRATCH/root2 R3=$SCRATCH/root3 R4=$SCRATCH/root4
mkroot "$R2"
mkroot "$R3"
mkroot "$R4"
chmod 600 "$R2$DIR_REL/50-services.conf"
chmod 700 "$R3$DIR_REL"
ETC4=$(dirname "$R4$DIR_REL")
chmod 750 "$ETC4"

# Sections that never match.
R5=$SCRATCH/root5
mkdir -p "$R5$DIR_REL"
cat >"$R5$CONF_REL" <<'EOF'
[unit nginx]
thp = never
[program /usr/sbin/nginx]
thp = never
[unit nginx.service]
purge = free
[unit getty@.service]
stats = exit
[unit user.slice]
stats = exit
[program nginx.service]
purge = free
EOF
chmod 644 "$R5$CONF_REL"

# start NAME CMD...: runs CMD in the background until its executable is NAME.
start() {
    want=$1
    shift
    "$@" &
    SPID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $SPID"
    i=0
    while [ "$(basename "$(readlink "/proc/$SPID/exe")")" != "$want" ] && [ $i -lt 100 ]; do
        sleep 0.05
        i=$((i + 1))
    done
}
policy_rows() { sed -n '/^ *policy/,$p' "$1" | sed -n 's/^ *\(thp\|thp_threshold\|arena_size\|purge_delay\|purge\|stats\) \+/\1 /p' | tr -s ' '; }

start realprog env PATH="$BIN:/usr/bin:/bin" linkprog 60
LINKPID=$SPID
if [ -n "$PY" ]; then
    start "$(basename "$PYREAL")" "$PY" -c 'import time; time.sleep(60)'
    PYPID=$SPID
fi
start sleep setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60
NOBODY=$SPID

for T in $TOOLS; do
    t=$(basename "$T")

    # 1. The symbolic link: --explain agrees with the process.
    run "$T" --root "$R" "$LINKPID"
    policy_rows "$OUT" >"$SCRATCH/pid.rows"
    run env PATH="$BIN:/usr/bin:/bin" "$T" --root "$R" --explain linkprog
    policy_rows "$OUT" >"$SCRATCH/explain.rows"
    ok $(grep -q "^thp large default\$" "$SCRATCH/pid.rows" \
        && grep -q "^purge_delay 5s $R$CONF_REL:4 \[program realprog\]\$" "$SCRATCH/pid.rows"; echo $?) \
        "$t: a process started as linkprog gets [program realprog], not [program linkprog]"
    grep -q "^purge_delay 5s" "$SCRATCH/pid.rows" || sed 's/^/#   /' "$SCRATCH/pid.rows"
    ok $(cmp -s "$SCRATCH/pid.rows" "$SCRATCH/explain.rows"; echo $?) \
        "$t: --explain linkprog shows the policy of the process started as linkprog"
    cmp -s "$SCRATCH/pid.rows" "$SCRATCH/explain.rows" || diff "$SCRATCH/pid.rows" "$SCRATCH/explain.rows" | sed 's/^/#   /'
    is "$(sed -n 1,2p "$OUT")" "program      realprog ($BIN/linkprog is a symbolic link to $BIN/realprog)
executable   $BIN/realprog" "$t: --explain says which name it resolved to, and how"
    run env PATH="$BIN:/usr/bin:/bin" "$T" --root "$R" --explain myscript
    is "$(sed -n 1p "$OUT")" "program      realprog (myscript is a script run by $BIN/linkprog)" \
        "$t: --explain SCRIPT: the interpreter's real name, as /proc/PID/exe will say"
    run "$T" --root "$R" --explain /nonexistent/thp-test/prog
    ok $(grep -qE '^  stats +exit ' "$OUT"; echo $?) "$t: --explain /PATH this machine lacks: [path /PATH] still applies"
    run env PATH="$BIN:/usr/bin:/bin" "$T" --json --root "$R" --explain linkprog
    is "$(json "$OUT" "d['explain']['program'], d['explain']['given'], d['explain']['exe']")" \
        "('realprog', 'linkprog', '$BIN/realprog')" "$t: --explain --json: the resolved name, the given one"
    if [ -n "$PY" ]; then
        run "$T" --root "$R" "$PYPID"
        policy_rows "$OUT" >"$SCRATCH/pid.rows"
        run env PATH="$(dirname "$PY"):/usr/bin:/bin" "$T" --root "$R" --explain python3
        policy_rows "$OUT" >"$SCRATCH/explain.rows"
        ok $(grep -q "^purge_delay 5s " "$SCRATCH/pid.rows" && grep -q "^thp large default\$" "$SCRATCH/pid.rows" \
            && cmp -s "$SCRATCH/pid.rows" "$SCRATCH/explain.rows"; echo $?) \
            "$t: --explain python3 shows what a real python3 ($PYREAL) gets"
    else
        skip "$t: --explain python3 shows what a real python3 gets" "python3 is not a symbolic link here"
    fi
    run env PATH="$BIN:/usr/bin:/bin" "$T" --root "$R" --check
    want="$R$CONF_REL:1: [program linkprog] never matches here: $BIN/linkprog is a symbolic link to $BIN/realprog, and a process is named by its executable (/proc/PID/exe): did you mean [program realprog]?"
    ok $([ "$RC" -eq 1 ] && [ "$(sed -n 1p "$OUT")" = "$want" ]; echo $?) \
        "$t: --check: a [program] section named after a symbolic link never matches (rc $RC)"
    [ "$(sed -n 1p "$OUT")" = "$want" ] || sed 's/^/#   /' "$OUT"

    # 2. Files other users cannot read.
    F2=$R2$DIR_REL/50-services.conf
    run "$T" --root "$R2" --check
    is "$RC|$(cat "$OUT")" "1|$F2: mode 0600 (owner root, group root): processes of other users cannot read it (\"cannot open: permission denied\") and run without its settings (chmod a+r)
1 problem in $R2$CONF_REL and $R2$DIR_REL/*.conf" "$t: --check: a drop-in of mode 600 is a problem"
    run "$T" --root "$R3" --check
    is "$RC|$(cat "$OUT")" "1|$R3$DIR_REL: mode 0700 (owner root, group root): processes of other users cannot read its drop-ins (\"cannot open: permission denied\") and run without them (chmod a+rx)
1 problem in $R3$CONF_REL and $R3$DIR_REL/*.conf" "$t: --check: a drop-in directory of mode 700 is a problem"
    run "$T" --root "$R4" --check
    is "$RC|$(cat "$OUT")" "1|$R4$DIR_REL: directory $ETC4 (mode 0750, owner root, group root) is not searchable by other users: their processes cannot read this directory's drop-ins and run without them (chmod o+x $ETC4)
1 problem in $R4$CONF_REL and $R4$DIR_REL/*.conf" "$t: --check: a directory on the path other users cannot search is a problem"
    run "$T" --root "$R2" --unit any.service
    ok $([ "$RC" -eq 0 ] && grep -qxF "warning: $F2: mode 0600 (owner root, group root): processes of other users cannot read it (\"cannot open: permission denied\") and run without its settings (chmod a+r)" "$OUT"; echo $?) \
        "$t: --unit warns that other users' processes do not get the drop-in"
    run "$T" --json --root "$R2" --explain other
    is "$(json "$OUT" "[w['file'] for w in d['explain']['warnings']]")" "[\"$F2\"]" "$t: --explain --json: the warning"
    run "$T" --root "$R2" "$NOBODY"
    ok $(grep -qE '^    thp +large +default$' "$OUT"; echo $?) "$t: and indeed a process of another user runs without it"
    run "$T" --root "$R" --check
    ok $(! grep -q "mode\|searchable" "$OUT"; echo $?) "$t: readable files are no problem"

    # 3. Sections that never match.
    run "$T" --root "$R5" --check
    is "$RC|$(cat "$OUT")" "1|$R5$CONF_REL:1: [unit nginx] never matches: a unit is named with its type, as in /proc/PID/cgroup: did you mean [unit nginx.service]?
$R5$CONF_REL:3: [program /usr/sbin/nginx] never matches: a program section names the executable's file name, not a path: did you mean [program nginx] (or [path /usr/sbin/nginx])?
$R5$CONF_REL:7: [unit getty@.service] never matches: a template runs no process, its instances do: did you mean [unit getty@INSTANCE.service]?
$R5$CONF_REL:9: [unit user.slice] never matches: processes run in .service and .scope units only
$R5$CONF_REL:11: [program nginx.service] never matches: nginx.service is a systemd unit, and a program section names an executable's file name: did you mean [unit nginx.service]?
5 problems in $R5$CONF_REL and $R5$DIR_REL/*.conf" "$t: --check: sections that never match, with the corrected form"
    sanitizer_clean "$t"
done
done_testing
