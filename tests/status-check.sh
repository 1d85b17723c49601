#!/bin/sh
# thp-status --check and --explain, through the library's own parser: a file with errors
# on known lines names exactly those lines and exits 1; the shipped etc/thpalloc.conf
# passes; --explain says for each key which file:line and section it comes from, and
# --unit alone the policy of a systemd unit.
. "$TESTS_SRCDIR/status-lib.sh"

BAD=$SCRATCH/bad.conf
cat >"$BAD" <<'EOF'
# errors on lines 4, 6 and 9
[global]
thp = large
thp = sometimes
purge = free
bogus_key = 1
[program no-such-program]
thp = never
arena_size = 3M
EOF
chmod 644 "$BAD"

# A scratch root for the system's files and drop-ins, in ROOT/SYSCONFDIR (the library's
# own place, /etc on Debian): the tool says where (--check --json lists what it reads).
R=$SCRATCH/root
R2=$SCRATCH/root2
mkdir -p "$R" "$R2"
set -- $TOOLS
"$1" --root "$R" --check --json >"$SCRATCH/paths.json"
RC_FILE=$(json "$SCRATCH/paths.json" "d['check']['files'][0]")
RC_DIR=$(json "$SCRATCH/paths.json" "d['check']['files'][1]")
case $RC_FILE$RC_DIR in "$R"/*"$R"/*) ;; *) echo "Bail out! config paths '$RC_FILE' '$RC_DIR' not under the scratch root"; exit 1 ;; esac
mkdir -p "$RC_DIR"
TRUE_EXE=$(readlink -f /bin/true)
mkdir -p "$SCRATCH/bin"
cp /bin/true "$SCRATCH/bin/myprog2"
cat >"$RC_FILE" <<EOF
# scratch policy
thp = large
[program myprog]
thp = never
[path $TRUE_EXE]
purge = free
[unit web.service]
thp_threshold = 8M
[path $SCRATCH/bin/myprog2]
arena_size = 128M
EOF
printf '[program myprog]\npurge_delay = 10ms\n' >"$RC_DIR/50-myprog.conf"
printf '[global]\nstats = maybe\n' >"$RC_DIR/90-bad.conf"
chmod 644 "$RC_FILE" "$RC_DIR"/*.conf
R2_FILE=$R2${RC_FILE#"$R"}
mkdir -p "$(dirname "$R2_FILE")"
cp "$RC_FILE" "$R2_FILE"

# Section headers inih misread: a [path] longer than its 49 characters (the program at the
# truncated prefix got the settings), a header without ']' (its keys landed in [global]),
# and a NAME longer than any path. LONGEXE is a real program, and so is PREFIXEXE: the 44
# characters of LONGEXE that inih kept after "path ".
LONGDIR=$SCRATCH/a-directory-name-long-enough-to-pass-inih-limit
mkdir -p "$LONGDIR"
LONGEXE=$LONGDIR/prog
PREFIXEXE=$(printf '%.44s' "$LONGEXE")
cp /bin/true "$LONGEXE"
case $PREFIXEXE in "$SCRATCH"/?*) cp /bin/true "$PREFIXEXE" ;; *) PREFIXEXE= ;; esac
HUGE=/$(head -c 4096 /dev/zero | tr '\0' x)
HDR=$SCRATCH/headers.conf
cat >"$HDR" <<EOF
[global]
thp = large
[program redis-server
thp = always
[path $LONGEXE]
thp = never
[path $HUGE]
purge = free
[global]
stats = exit
EOF
chmod 644 "$HDR"
R3=$SCRATCH/root3
R3_FILE=$R3${RC_FILE#"$R"}
mkdir -p "$(dirname "$R3_FILE")"
cp "$HDR" "$R3_FILE"

# More drop-ins than the resolver sorts at once (64): every one is read, in lexical order,
# so the lexically last one, the override, is obeyed and checked.
R4=$SCRATCH/root4
R4_DIR=$R4${RC_DIR#"$R"}
mkdir -p "$R4_DIR"
i=70
while [ $i -gt 0 ]; do
    printf '[global]\npurge_delay = %dms\n' $i >"$R4_DIR/$i-drop.conf"
    i=$((i - 1))
done
printf '[global]\nthp = never\nstats = maybe\n' >"$R4_DIR/99-last.conf"
chmod 644 "$R4_DIR"/*.conf

# The defaults as the key table has them (--explain on an empty root), and as the shipped
# file and thpalloc.conf(5) write them: "key value" lines, in table order.
R5=$SCRATCH/root5
mkdir -p "$R5"
set -- $TOOLS
"$1" --root "$R5" --explain x | sed -n 's/^  \([a-z_]*\) *\([^ ]*\) *default$/\1 \2/p' >"$SCRATCH/defaults.table"
sed -n '/^\[global\]/,/^# Per-service/p' "$TOP_SRCDIR/etc/thpalloc.conf" |
    sed -n 's/^#\([a-z_]*\) = \(.*\)$/\1 \2/p' >"$SCRATCH/defaults.conf"
awk '/^\.TP/ { tp = 1; next } tp && /^\.B[RI] [a-z_]+ " = "/ { key = $2 } { tp = 0 }
    /^Default:/ { d = 1; next } d { print key, $2; d = 0 }' "$TOP_SRCDIR/man/thpalloc.conf.5.in" >"$SCRATCH/defaults.man"

SHIPPED=$TOP_SRCDIR/etc/thpalloc.conf
# The shipped per-service example, where it says to save it, and the command it names:
# thp-status --unit redis-server.service.
R6=$SCRATCH/root6
R6_DIR=$R6${RC_DIR#"$R"}
mkdir -p "$R6_DIR"
cp "$TOP_SRCDIR/tools/examples/thpalloc-unit.conf" "$R6_DIR/50-services.conf"
chmod 644 "$R6_DIR/50-services.conf"
grep -q '; thp-status --unit redis-server.service$' "$R6_DIR/50-services.conf" ||
    echo "Bail out! tools/examples/thpalloc-unit.conf no longer names thp-status --unit redis-server.service"

for T in $TOOLS; do
    t=$(basename "$T")

    run "$T" --check "$BAD"
    ok $([ "$RC" -eq 1 ]; echo $?) "$t: --check on a bad file exits 1 (rc $RC)"
    lines=$(sed -n "s|^$BAD:\([0-9]*\): .*|\1|p" "$OUT" | tr '\n' ' ')
    is "$lines" "4 6 9 " "$t: --check names lines 4, 6 and 9 and nothing else"
    ok $(grep -q "^$BAD:4: .*sometimes.*expected system, never, large or always" "$OUT" \
        && grep -q "^$BAD:6: .*bogus_key" "$OUT" && grep -q "^$BAD:9: .*3M.*multiple of 2M" "$OUT"; echo $?) \
        "$t: each problem says what is wrong and what would fix it"
    run "$T" --json --check "$BAD"
    is "$(json "$OUT" "d['check']['ok'], [p['line'] for p in d['check']['problems']]")" \
        "(False, [4, 6, 9])" "$t: --check --json: ok false, the same lines"

    if [ -f "$SHIPPED" ]; then
        run "$T" --check "$SHIPPED"
        ok $([ "$RC" -eq 0 ] && grep -q '^0 problems' "$OUT"; echo $?) "$t: the shipped etc/thpalloc.conf passes (rc $RC)"
    else
        skip "$t: the shipped etc/thpalloc.conf passes" "$SHIPPED not there yet"
    fi

    # Without FILE: the system's file and drop-ins (under --root).
    run "$T" --root "$R" --check
    ok $([ "$RC" -eq 1 ] && grep -q "^$RC_DIR/90-bad.conf:2: .*maybe" "$OUT" \
        && [ "$(grep -c "^$R/" "$OUT")" -eq 1 ]; echo $?) "$t: --check with no FILE reads the file and the drop-ins"
    run "$T" --root "$R2" --check
    ok $([ "$RC" -eq 0 ]; echo $?) "$t: --check of a good system configuration exits 0 (rc $RC)"

    # --explain: key by key, with file:line.
    run "$T" --root "$R" --explain myprog
    ok $([ "$RC" -eq 0 ] && grep -qE "^  thp +never +$RC_FILE:4 \[program myprog\]\$" "$OUT" \
        && grep -qE "^  purge_delay +10ms +$RC_DIR/50-myprog.conf:2 \[program myprog\]\$" "$OUT" \
        && grep -qE "^  purge +dontneed +default\$" "$OUT"; echo $?) \
        "$t: --explain PROGRAM: [program] sections from the file and a drop-in, defaults"
    run "$T" --root "$R" --explain /bin/true
    ok $(grep -qE "^  purge +free +$RC_FILE:6 \[path $TRUE_EXE\]\$" "$OUT" \
        && grep -qE "^  thp +large +$RC_FILE:2 \[global\]\$" "$OUT"; echo $?) \
        "$t: --explain PATH: [path] sections match the resolved executable"
    run env PATH="$SCRATCH/bin" "$T" --root "$R" --explain myprog2
    ok $(grep -qE "^  arena_size +128M +$RC_FILE:10 \[path $SCRATCH/bin/myprog2\]\$" "$OUT"; echo $?) \
        "$t: --explain NAME finds the executable in PATH for [path] sections"
    run "$T" --root "$R" --explain other --unit web.service
    ok $(grep -qE "^  thp_threshold +8M +$RC_FILE:8 \[unit web.service\]\$" "$OUT"; echo $?) \
        "$t: --explain --unit: the [unit] section"
    run "$T" --root "$R" --explain other
    ok $(grep -qE "^  thp_threshold +2M +default\$" "$OUT"; echo $?) "$t: --explain without --unit: no [unit] section"
    run env THPALLOC_THP=always "$T" --root "$R" --explain myprog --environment
    ok $(grep -qE "^  thp +always +environment THPALLOC_THP\$" "$OUT"; echo $?) \
        "$t: --explain --environment: THPALLOC_* of the caller win"
    run env THPALLOC_THP=always "$T" --root "$R" --explain myprog
    ok $(grep -qE "^  thp +never " "$OUT"; echo $?) "$t: --explain without --environment ignores THPALLOC_*"
    run "$T" --json --root "$R" --explain myprog
    is "$(json "$OUT" "[(s['key'], s['value'], s.get('line'), s.get('section')) for s in d['explain']['policy']][0]")" \
        "('thp', 'never', 4, 'program myprog')" "$t: --explain --json: value, line, section"
    # The headers inih misread: named, and their keys apply to nothing.
    run "$T" --check "$HDR"
    printf '%s\n' "$HDR:3: section header without a closing ]: its keys are ignored up to the next section" \
        "$HDR:7: section name longer than 4095 characters: its keys are ignored up to the next section" \
        "2 problems in 1 file" >"$SCRATCH/want"
    ok $([ "$RC" -eq 1 ] && cmp -s "$OUT" "$SCRATCH/want"; echo $?) \
        "$t: --check names a header without ] and a NAME over 4095 characters (rc $RC)"
    cmp -s "$OUT" "$SCRATCH/want" || diff "$SCRATCH/want" "$OUT" | sed 's/^/#   /'
    run "$T" --root "$R3" --explain "$LONGEXE"
    ok $(grep -qE "^  thp +never +$R3_FILE:6 \[path $LONGEXE\]\$" "$OUT" \
        && grep -qE "^  stats +exit +$R3_FILE:10 \[global\]\$" "$OUT"; echo $?) \
        "$t: a [path] of ${#LONGEXE} characters applies to its program"
    if [ -n "$PREFIXEXE" ]; then
        run "$T" --root "$R3" --explain "$PREFIXEXE"
        ok $(grep -qE "^  thp +large +$R3_FILE:2 \[global\]\$" "$OUT" \
            && grep -qE "^  purge +dontneed +default\$" "$OUT"; echo $?) \
            "$t: the program at inih's 49-character prefix does not get those settings"
    else
        skip "$t: the program at inih's 49-character prefix" "scratch path too long"
    fi
    run "$T" --root "$R3" --explain redis-server
    ok $(grep -qE "^  thp +large +$R3_FILE:2 \[global\]\$" "$OUT"; echo $?) \
        "$t: keys below a header without ] land nowhere (not in [global])"
    run "$T" --root "$R4" --check
    ok $([ "$RC" -eq 1 ] && [ "$(sed -n 1p "$OUT")" = "$R4_DIR/99-last.conf:3: bad value \"maybe\" for stats: expected no or exit" ] \
        && [ "$(wc -l <"$OUT")" -eq 2 ]; echo $?) "$t: --check reads all 71 drop-ins (rc $RC)"
    run "$T" --root "$R4" --explain other
    ok $(grep -qE "^  thp +never +$R4_DIR/99-last.conf:2 \[global\]\$" "$OUT" \
        && grep -qE "^  purge_delay +9ms +$R4_DIR/9-drop.conf:2 \[global\]\$" "$OUT"; echo $?) \
        "$t: the lexically last drop-ins win"
    # --check-value: one value as the library reads it (thpalloc-run's check).
    run "$T" --check-value thp=never
    is "$RC $(cat "$OUT")" "0 THPALLOC_THP=never" "$t: --check-value thp=never: the assignment, exit 0"
    run "$T" --check-value ARENA_SIZE=64m
    is "$RC $(cat "$OUT")" "0 THPALLOC_ARENA_SIZE=64m" "$t: --check-value: keys in any case, the value as given"
    run "$T" --check-value arena_size=3M
    is "$RC $(cat "$OUT")|$(cat "$ERR")" "1 |thp-status: --check-value: bad value \"3M\" for arena_size: expected a multiple of 2M from 2M to 1G, such as 64M" \
        "$t: --check-value arena_size=3M: the resolver's message on stderr with the program's name, exit 1"
    run "$T" --check-value purge_delay=
    is "$RC $(cat "$OUT")|$(cat "$ERR")" "1 |thp-status: --check-value: bad value \"\" for purge_delay: expected 0, a time with a unit (10ms, 1s, 5m; at most 24h) or never" \
        "$t: --check-value with an empty value: exit 1"
    run "$T" --check-value colour=blue
    is "$RC $(head -n 1 "$ERR")" "2 thp-status: --check-value: expected KEY=VALUE, KEY one of thp, thp_threshold, arena_size, purge_delay, purge, stats, log_problems, thp_dense: 'colour=blue'" \
        "$t: --check-value of an unknown key: usage error, exit 2"
    run "$T" --check-value thp=never --json
    ok $([ "$RC" -eq 2 ]; echo $?) "$t: --check-value takes no other option (rc $RC)"
    # --unit alone: the documented command, the policy of any program of that unit.
    run "$T" --root "$R6" --unit redis-server.service
    is "$(cat "$OUT"; echo "rc $RC")" "$(printf '%s\n' \
        'program      (any: [program ...] and [path ...] sections not applied)' \
        'unit         redis-server.service' \
        "environment  not considered (--environment to add this shell's THPALLOC_*)" \
        'policy' \
        "  thp            never     $R6_DIR/50-services.conf:9 [unit redis-server.service]" \
        '  thp_threshold  2M        default' '  arena_size     64M       default' \
        '  purge_delay    1s        default' '  purge          dontneed  default' \
        '  stats          no        default' '  log_problems   no        default' \
        '  thp_dense      90%       default' 'rc 0')" "$t: thp-status --unit redis-server.service, as tools/examples/thpalloc-unit.conf says"
    run "$T" --json --root "$R6" --unit redis-server.service
    is "$(json "$OUT" "d['explain']['program'], d['explain']['exe'], d['explain']['unit'], d['explain']['policy'][0]['value']")" \
        "(None, None, 'redis-server.service', 'never')" "$t: --unit --json: no program, the unit, its policy"
    sanitizer_clean "$t"
done
ok $([ "$(wc -l <"$SCRATCH/defaults.table")" -eq 8 ] && cmp -s "$SCRATCH/defaults.table" "$SCRATCH/defaults.conf"; echo $?) \
    "the shipped etc/thpalloc.conf shows every key at the table's default"
ok $(cmp -s "$SCRATCH/defaults.table" "$SCRATCH/defaults.man"; echo $?) \
    "thpalloc.conf(5) gives every key the table's default"
done_testing
