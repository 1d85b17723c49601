#!/bin/bash
# thpalloc-run: each option becomes its THPALLOC_* variable (seen by `env` and by python3's
# os.environ under the wrapper), the library is appended to LD_PRELOAD without duplicates,
# bad values are refused with usage and exit 2, and a missing or unrunnable command exits
# 127 / 126 as the shell does. End to end: python3 under the wrapper runs on thpalloc, and
# the library reports the policy it was given.
set -u

BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
RUN=${THPALLOC_RUN_TOOL:-$BUILD/../tools/thpalloc-run/thpalloc-run}
LIB=${THPALLOC_LIB:-$BUILD/../lib/.libs/libthpalloc.so.1}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
if [ ! -x "$RUN" ] || [ ! -f "$LIB" ]; then
    skip_all "thpalloc-run ($RUN) or the library ($LIB) is not built"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-run.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
cp "$LIB" "$tmp/libthpalloc.so.1" && LIB=$tmp/libthpalloc.so.1
unset LD_PRELOAD THPALLOC_THP THPALLOC_THP_THRESHOLD THPALLOC_ARENA_SIZE THPALLOC_PURGE_DELAY \
    THPALLOC_PURGE THPALLOC_STATS THPALLOC_VERBOSE THPALLOC_CONF
export LC_ALL=C

# The default entry, from the usage text: "Runs COMMAND with thpalloc preloaded (ENTRY)."
E=$("$RUN" --help | sed -n 's/^Runs COMMAND with thpalloc preloaded (\(.*\))\.$/\1/p')
[ -n "$E" ]
ok $? "--help names the library ($E)"

# --version: the version configure has (AC_INIT), substituted into the script.
if [ -n "${THPALLOC_VERSION-}" ]; then
    out=$("$RUN" --version 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] && [ "$out" = "thpalloc-run from thpalloc $THPALLOC_VERSION" ]
    ok $? "--version: 'thpalloc-run from thpalloc $THPALLOC_VERSION', exit 0 ($out, rc=$rc)"
    out=$("$RUN" -V 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] && [ "$out" = "thpalloc-run from thpalloc $THPALLOC_VERSION" ]
    ok $? "-V, as the other tools take it: the version, exit 0 ($out, rc=$rc)"
else
    ok 0 "# SKIP THPALLOC_VERSION is not set (run by make check)"
fi
# The installed thp-status it checks values with: the one in bindir, beside it.
if [ -n "${THPALLOC_BINDIR-}" ]; then
    checker=$(sed -n "s/^checker='\(.*\)'\$/\1/p" "$RUN")
    [ "$checker" = "$THPALLOC_BINDIR/thp-status" ]
    ok $? "the installed checker is \$(bindir)/thp-status ($checker)"
else
    ok 0 "# SKIP THPALLOC_BINDIR is not set (run by make check)"
fi

# envof ARGS...: the environment `env` sees under thpalloc-run ARGS... env
envof() { "$RUN" "$@" env 2>/dev/null; }
has() { # has LINE ARGS...: envof ARGS has exactly LINE
    local line=$1
    shift
    envof "$@" | grep -qxF -- "$line"
}

has "LD_PRELOAD=$E"
ok $? "no LD_PRELOAD: the entry alone"
has "LD_PRELOAD=$LIB" --library "$LIB"
ok $? "--library PATH replaces the entry"
LD_PRELOAD=/x/a.so has "LD_PRELOAD=/x/a.so $LIB" --library "$LIB" 2>/dev/null
ok $? "appended to an existing LD_PRELOAD, space separated"
LD_PRELOAD="/x/a.so $LIB" has "LD_PRELOAD=/x/a.so $LIB" --library "$LIB" 2>/dev/null
ok $? "no duplicate when already there (blank separated)"
LD_PRELOAD="$LIB:/x/a.so" has "LD_PRELOAD=$LIB:/x/a.so" --library "$LIB" 2>/dev/null
ok $? "no duplicate when already there (':' separated, first)"
LD_PRELOAD="${LIB}x" has "LD_PRELOAD=${LIB}x $LIB" --library "$LIB" 2>/dev/null
ok $? "a longer path is not a duplicate"

# Every option and its variable.
map() { # map VAR=VALUE ARGS...
    local want=$1
    shift
    has "$want" --library "$LIB" "$@"
    ok $? "$* -> $want"
}
map THPALLOC_THP=never --thp never
map THPALLOC_THP=always --thp=always
map THPALLOC_THP=system --thp system
map THPALLOC_THP=large --thp large
map THPALLOC_THP_THRESHOLD=512K --thp-threshold 512K
map THPALLOC_THP_THRESHOLD=4096 --thp-threshold=4096
map THPALLOC_ARENA_SIZE=128M --arena-size 128M
map THPALLOC_ARENA_SIZE=1G --arena-size 1G
map THPALLOC_ARENA_SIZE=2M --arena-size 2M
map THPALLOC_PURGE_DELAY=10ms --purge-delay 10ms
map THPALLOC_PURGE_DELAY=0 --purge-delay 0
map THPALLOC_PURGE_DELAY=never --purge-delay never
map THPALLOC_PURGE_DELAY=1s --purge-delay=1s
map THPALLOC_PURGE_DELAY=5min --purge-delay 5min
map THPALLOC_PURGE_DELAY=24h --purge-delay 24h
map THPALLOC_PURGE_DELAY=NEVER --purge-delay NEVER
map THPALLOC_THP_THRESHOLD=2MiB --thp-threshold 2MiB
map THPALLOC_THP_THRESHOLD=1g --thp-threshold 1g
map THPALLOC_ARENA_SIZE=1024M --arena-size 1024M
map THPALLOC_ARENA_SIZE=4194304 --arena-size 4194304
map THPALLOC_THP=Never --thp Never
map THPALLOC_PURGE=free --purge free
map THPALLOC_PURGE=dontneed --purge dontneed
map THPALLOC_STATS=exit --stats
map THPALLOC_VERBOSE=1 --verbose

# Nothing set that was not asked for.
n_thp=$(envof --library "$LIB" |
    grep -cE '^THPALLOC_(THP|THP_THRESHOLD|ARENA_SIZE|PURGE_DELAY|PURGE|STATS|VERBOSE)=')
[ "$n_thp" -eq 0 ]
ok $? "no option: no THPALLOC_* variable"
# Later options win.
map THPALLOC_THP=always --thp never --thp always

# Arguments reach the command untouched, after -- too.
out=$("$RUN" --library "$LIB" -- sh -c 'printf "%s|" "$@"' x "a b" "" 'c*' '--thp' 2>/dev/null)
[ "$out" = "a b||c*|--thp|" ]
ok $? "arguments passed verbatim ($out)"
out=$("$RUN" --library "$LIB" sh -c 'echo "$0"' 2>/dev/null)
[ "$out" = sh ]
ok $? "the command keeps its name as argv[0] ($out)"

# Bad values and options: one line saying what is wrong and the pointer to --help (as
# util-linux does: not the whole usage), exit 2, the command not run.
TRY="Try 'thpalloc-run --help' for more information."
refused() { # refused: $tmp/err is one 'thpalloc-run: ...' line and the pointer to --help
    [ "$(wc -l <"$tmp/err")" -eq 2 ] && [ "$(sed -n 2p "$tmp/err")" = "$TRY" ] &&
        sed -n 1p "$tmp/err" | grep -q '^thpalloc-run: .'
}
bad() { # bad DESCRIPTION ARGS...
    local d=$1 rc=0
    shift
    "$RUN" --library "$LIB" "$@" touch "$tmp/ran" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 2 ] && refused && [ ! -s "$tmp/out" ] && [ ! -e "$tmp/ran" ]
    ok $? "refused in one line and the pointer to --help, exit 2: $d (rc=$rc: $(head -1 "$tmp/err"))"
    rm -f "$tmp/ran"
}
bad "--thp huge" --thp huge
bad "--thp ''" --thp ''
bad "--thp-threshold abc" --thp-threshold abc
bad "--thp-threshold 2MX" --thp-threshold 2MX
bad "--thp-threshold 2KiBB" --thp-threshold 2KiBB
bad "--thp-threshold 2iB" --thp-threshold 2iB
bad "--thp-threshold -1" --thp-threshold -1
bad "--thp-threshold M" --thp-threshold M
bad "--arena-size 3M (not a multiple of 2M)" --arena-size 3M
bad "--arena-size 2G (above 1G)" --arena-size 2G
bad "--arena-size 0" --arena-size 0
bad "--arena-size 1T" --arena-size 1T
bad "--arena-size 99999999999999G" --arena-size 99999999999999G
bad "--purge-delay 5 (no unit)" --purge-delay 5
bad "--purge-delay 25h (above 24h)" --purge-delay 25h
bad "--purge-delay 1d" --purge-delay 1d
bad "--purge-delay 10 ms" --purge-delay "10 ms"
bad "--purge-delay ms" --purge-delay ms
bad "--purge madvise" --purge madvise
bad "--stats=yes" --stats=yes
bad "unknown option" --frobnicate
"$RUN" --library "$LIB" --thp huge true 2>"$tmp/err"
[ "$(sed -n 1p "$tmp/err")" = 'thpalloc-run: --thp: bad value "huge" for thp: expected system, never, large or always' ]
ok $? "--thp huge: the line names the option and the value ($(head -1 "$tmp/err"))"
out=$("$RUN" --thp 2>"$tmp/err")
rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$tmp/err")" = "thpalloc-run: option '--thp' requires an argument
$TRY" ]
ok $? "an option without its value: util-linux's words and the pointer to --help, exit 2"
# util-linux's wording (getopt_long's) for the other mistakes in an option.
for args in "--bogus|unrecognized option '--bogus'" "-xy|invalid option -- 'x'" \
    "--stats=1|option '--stats' doesn't allow an argument"; do
    "$RUN" "${args%%|*}" true >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$tmp/err")" = "thpalloc-run: ${args#*|}
$TRY" ]
    ok $? "${args%%|*}: '${args#*|}' and the pointer to --help, exit 2 (rc $rc: $(head -1 "$tmp/err"))"
done
"$RUN" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$tmp/err")" = "thpalloc-run: no command given
$TRY" ]
ok $? "no command: one line and the pointer to --help, exit 2"
"$RUN" --thp never >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "options but no command: exit 2"
out=$("$RUN" --help) && case $out in Usage:*) true ;; *) false ;; esac
ok $? "--help: usage on stdout, exit 0"
"$RUN" --help >"$tmp/help"
[ "$(sed -n 2p "$tmp/help")" = " thpalloc-run [options] [--] COMMAND [ARGUMENT]..." ] && grep -qx 'Options:' "$tmp/help" &&
    grep -qE '^ -h, --help +display this help$' "$tmp/help" && [ "$(tail -1 "$tmp/help")" = "For more details see thpalloc-run(1)." ]
ok $? "--help as util-linux writes it: Usage:, the synopsis, Options:, the man page last"

# The one grammar: thpalloc-run takes a value exactly when the library does. The library's
# verdict is its own (THPALLOC_VERBOSE names a rejected variable); values near every edge
# of the size and time grammars, where a second copy of the grammar drifts.
PROBE=$BUILD/policy-probe
if [ -x "$PROBE" ]; then
    while read -r opt var values; do
        for v in $values; do
            [ "$v" = "''" ] && v=
            "$RUN" --library "$LIB" "$opt=$v" true >/dev/null 2>&1
            run_rc=$?
            env THPALLOC_CONF=/dev/null/none THPALLOC_VERBOSE=1 "$var=$v" LD_PRELOAD="$LIB" \
                "$PROBE" policy 2>&1 >/dev/null | grep -q "^thpalloc: $var: bad value"
            lib_bad=$?
            [ "$run_rc" -eq 2 ] && [ "$lib_bad" -eq 0 ] || { [ "$run_rc" -eq 0 ] && [ "$lib_bad" -eq 1 ]; }
            ok $? "$opt '$v': thpalloc-run and the library agree (run rc=$run_rc, library $([ "$lib_bad" -eq 0 ] && echo rejects || echo takes) it)"
        done
    done <<'EOF'
--thp THPALLOC_THP never NeVeR large huge '' 1
--thp-threshold THPALLOC_THP_THRESHOLD 0 4096 2B 2KiB 2kib 2Mb 1T 16777215T 999999999999999G 00000000000000002M 9223372036854775807 9223372036854775808 18446744073709551616
--arena-size THPALLOC_ARENA_SIZE 2M 1G 1024M 0M 3M 2G 00000000000000000064M 2097152 2097152B 2048KiB 1T
--purge-delay THPALLOC_PURGE_DELAY 0 00 0ms 1s 24h 1440m 1441m 0000000001s 86400000ms 86400001ms 1000000001ms 5 never NeVeR 1min 1MIN
--purge THPALLOC_PURGE free FREE madvise
EOF
else
    ok 0 "# SKIP $PROBE is not built"
fi

# Without thp-status (a copy of the script alone, its installed checker absent): a value
# cannot be checked, so it is refused (exit 2, saying why); options without values still run.
checker=$(sed -n "s/^checker='\(.*\)'\$/\1/p" "$RUN")
cp "$RUN" "$tmp/thpalloc-run-alone"
if [ -n "$checker" ] && [ ! -e "$checker" ]; then
    "$tmp/thpalloc-run-alone" --library "$LIB" --thp never touch "$tmp/ran" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$tmp/err")" = "thpalloc-run: cannot check --thp: $checker is missing" ] &&
        [ ! -e "$tmp/ran" ]
    ok $? "no thp-status: a value is refused, exit 2 (rc=$rc)"
    "$tmp/thpalloc-run-alone" --library "$LIB" --verbose true 2>/dev/null
    ok $? "no thp-status: --verbose alone still runs the command"
else
    ok 0 "# SKIP $checker is installed"
    ok 0 "# SKIP $checker is installed"
fi

# 127 / 126.
"$RUN" --library "$LIB" thpalloc-no-such-command-xyz 2>"$tmp/err"
rc=$?
[ "$rc" -eq 127 ] && grep -q 'not found' "$tmp/err"
ok $? "missing command: exit 127 (rc=$rc)"
"$RUN" --library "$LIB" "$tmp/nowhere/cmd" 2>/dev/null
[ $? -eq 127 ]
ok $? "missing command given as a path: exit 127"
printf '#!/bin/sh\necho hi\n' >"$tmp/noexec" && chmod 644 "$tmp/noexec"
"$RUN" --library "$LIB" "$tmp/noexec" 2>/dev/null
[ $? -eq 126 ]
ok $? "a file that is not executable: exit 126"
"$RUN" --library "$LIB" "$tmp" 2>/dev/null
[ $? -eq 126 ]
ok $? "a directory: exit 126"
"$RUN" --library "$LIB" -- --thp 2>/dev/null
[ $? -eq 127 ]
ok $? "after --, an option-like word is the command"
"$RUN" --library "$LIB" sh -c 'exit 7' 2>/dev/null
[ $? -eq 7 ]
ok $? "the command's own exit status comes back"

# End to end with python3: the variables reach the process, and thpalloc is its malloc
# and reports the policy it was given (thpalloc_policy(3), when the library has it).
if [ -n "$PY" ]; then
    out=$("$RUN" --library "$LIB" --thp never --purge-delay 10ms "$PY" -c '
import os, ctypes
print(os.environ["THPALLOC_THP"], os.environ["THPALLOC_PURGE_DELAY"], os.environ["LD_PRELOAD"])
lib = ctypes.CDLL(None)
print("active", lib.thpalloc_active())
class S(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p), ("origin", ctypes.c_char_p)]
try:
    f = lib.thpalloc_policy
except AttributeError:
    print("nopolicy")
else:
    arr = (S * 8)()
    k = f(arr, 8)
    for i in range(min(k, 8)):
        print("policy", arr[i].key.decode(), arr[i].value.decode(), arr[i].origin.decode())
' 2>"$tmp/err")
    rc=$?
    echo "$out" | sed 's/^/# /'
    echo "$out" | grep -qxF "never 10ms $LIB"
    ok $? "python3 under thpalloc-run sees THPALLOC_THP, THPALLOC_PURGE_DELAY, LD_PRELOAD"
    echo "$out" | grep -qx "active 1"
    ok $? "python3 under thpalloc-run runs on thpalloc (thpalloc_active() = 1)"
    if echo "$out" | grep -q '^nopolicy'; then
        ok 0 "# SKIP the library has no thpalloc_policy yet"
    else
        echo "$out" | grep -q '^policy thp never .*THPALLOC_THP'
        ok $? "the library's policy: thp = never, from THPALLOC_THP"
    fi
    [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ]
    ok $? "python3 exits 0 with nothing on stderr (rc=$rc)"
else
    ok 0 "# SKIP no python3"
fi

done_testing
