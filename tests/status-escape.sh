#!/bin/sh
# thp-status prints what other users chose (process names, executable and library paths,
# drop-in file names and contents, ld.so.preload entries): none of it may drive root's
# terminal, forge lines or break the JSON or Prometheus output. Processes made here:
#   A  named (PR_SET_NAME, through /proc/self/comm) "\e[2J\e[31mX";
#   B  named with bytes that are not UTF-8: a surrogate (ED A0 80), an overlong NUL (C0 80),
#      F5 F6 F7;
#   C  an executable "sl\e]0;t\aeep" in a directory "evil\n\e[31mdir";
#   D  under a copy of libthpalloc in a directory "lib\e[2J\ndir";
#   E  named with bidirectional controls: U+202E, U+2066, U+200E, U+061C between letters;
#   F  an executable "sl<U+202D>eep" in a directory "bidi<U+202A><U+2069><U+200F>dir";
#   ten named "ss<X>hd", X one invisible character each (U+200B, U+2060, U+FEFF, U+00AD,
#      U+034F, U+180E, U+206A, U+FFF9, U+E0041, U+1D173: format and default-ignorable),
#      through the PID view, --all, --json and --all --prometheus, exact escapes;
# and a --root tree with such a preload entry and drop-in. The text views escape them
# (\xHH, as the test checks byte for byte), --json is strict JSON (python3 -m json.tool)
# with U+FFFD for what is not UTF-8 and \uXXXX for controls and bidirectional controls
# (none raw: they would reorder what a dashboard shows), Prometheus passes promtool and
# has U+FFFD for both.
. "$TESTS_SRCDIR/status-lib.sh"

if [ ! -r "${THPALLOC_LIB:-}" ] || [ ! -x /usr/bin/python3 ]; then
    skip "hostile names" "needs THPALLOC_LIB and /usr/bin/python3"
    done_testing
fi
# named HEX: a process whose name is the bytes HEX; sets NPID.
named() {
    /usr/bin/python3 -c 'import sys, time
open("/proc/self/comm", "wb").write(bytes.fromhex(sys.argv[1]))
print("ready", flush=True)
time.sleep(600)' "$1" >"$SCRATCH/named.$1" 2>&1 &
    NPID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $NPID"
    i=0
    while ! grep -q ready "$SCRATCH/named.$1" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
}
named 1b5b324a1b5b33316d58
A=$NPID
named eda080c080f5f6f7
B=$NPID
EVIL=$SCRATCH/$(printf 'evil\n\033[31mdir')
EXE=$EVIL/$(printf 'sl\033]0;t\007eep')
mkdir -p "$EVIL"
cp /bin/sleep "$EXE"
"$EXE" 600 &
C=$!
CLEANUP_PIDS="$CLEANUP_PIDS $C"
LIBD=$SCRATCH/$(printf 'lib\033[2J\ndir')
mkdir -p "$LIBD"
cp "$THPALLOC_LIB" "$LIBD/libthpalloc.so.1"
if ! HOLDER_PRELOAD=$LIBD/libthpalloc.so.1 start_holder 1; then
    ok 1 "status-holder runs under a copy of the library in an odd directory"
    done_testing
fi
D=$HOLDER_PID
named e280ae61e281a662e2808e63d89c
E=$NPID
BIDI=$SCRATCH/$(printf 'bidi\342\200\252\342\201\251\342\200\217dir')
BEXE=$BIDI/$(printf 'sl\342\200\255eep')
mkdir -p "$BIDI"
cp /bin/sleep "$BEXE"
"$BEXE" 600 &
F=$!
CLEANUP_PIDS="$CLEANUP_PIDS $F"
diag "A $A, B $B, C $C, D $D, E $E, F $F"
# Invisible characters (issue 46): format characters, default-ignorable code points, one in
# each process's name "ss<X>hd", which must never print as "sshd": a symbolic link to sleep
# of that name, executed (the kernel names the process after the link). In UTF-8: U+200B,
# U+2060, U+FEFF, U+00AD, U+034F, U+180E, U+206A, U+FFF9, U+E0041, U+1D173.
INVIS="e2808b e281a0 efbbbf c2ad cd8f e1a08e e281aa efbfb9 f3a08181 f09d85b3"
IPIDS=
mkdir -p "$SCRATCH/inv"
for h in $INVIS; do
    name=$("$PYTHON" -c 'import sys; sys.stdout.buffer.write(b"ss" + bytes.fromhex(sys.argv[1]) + b"hd")' "$h")
    ln -s /bin/sleep "$SCRATCH/inv/$name"
    "$SCRATCH/inv/$name" 600 &
    IPIDS="$IPIDS $!"
    CLEANUP_PIDS="$CLEANUP_PIDS $!"
done
diag "invisible: $IPIDS"
# inv_expect FORMAT: a line "PID EXPECTED" per process, EXPECTED the name as FORMAT writes
# it: text (\xHH per byte), all (the same cut to 15 characters between escapes), json (as
# JSON text has it: \uXXXX, a surrogate pair above U+FFFF), prom (U+FFFD).
inv_expect() {
    # shellcheck disable=SC2086
    "$PYTHON" - "$1" $IPIDS -- $INVIS <<'PY'
import sys
fmt, rest = sys.argv[1], sys.argv[2:]
pids, hexes = rest[:rest.index("--")], rest[rest.index("--") + 1:]
for pid, h in zip(pids, hexes):
    c = bytes.fromhex(h).decode()
    if fmt in ("text", "all"):
        x = "".join("\\x%02x" % b for b in c.encode())
        name = "ss" + x + "hd"
        if fmt == "all":  # ts_text_max(name, 15): whole characters and escapes only
            name = ""
            for piece in ["s", "s", x, "h", "d"]:
                if len(name) + len(piece) > 15:
                    break
                name += piece
    elif fmt == "json":
        u = c.encode("utf-16-be")
        name = "ss" + "".join("\\u%02x%02x" % (u[i], u[i + 1]) for i in range(0, len(u), 2)) + "hd"
    else:
        name = "ss\ufffdhd"
    print(pid, name)
PY
}
# inv_each FORMAT CHECK DESCRIPTION: one assertion that CHECK PID EXPECTED finds each line
# of inv_expect FORMAT in the tool's output (CHECK adds what it misses to $bad).
inv_each() {
    inv_expect "$1" >"$SCRATCH/inv.want"
    bad=
    while read -r pid want; do
        "$2" "$pid" "$want"
    done <"$SCRATCH/inv.want"
    ok $([ -z "$bad" ]; echo $?) "$3${bad:+ (missing:$bad)}"
}
inv_in_text() { grep -qxF "PID $1  $2" "$SCRATCH/inv.text" || bad="$bad $1:$2"; }
inv_in_all() {
    grep -qE "^ *$1 +[^ ]+ +$(printf '%s' "$2" | sed 's/[][\\.]/\\&/g') +[0-9]" "$SCRATCH/inv.all" ||
        bad="$bad $1:$2"
}
inv_in_json() {
    grep -qF "\"name\":\"$2\"" "$SCRATCH/inv.json" || bad="$bad $1:$2"
    grep -qF "\"name\":\"$2\"" "$SCRATCH/inv.alljson" || bad="$bad all:$1:$2"
}
inv_in_prom() { grep -qF "pid=\"$1\",comm=\"$2\"" "$SCRATCH/inv.prom" || bad="$bad $1"; }

set -- $TOOLS
SYSCONF=$("$1" --check --json | "$PYTHON" -c 'import json,sys,os; print(os.path.dirname(json.load(sys.stdin)["check"]["files"][0]))')
ROOT=$SCRATCH/root
mkdir -p "$ROOT/etc" "$ROOT$SYSCONF/thpalloc.d"
printf '/usr/lib/\033[2J/libthpalloc.so.1\n' >"$ROOT/etc/ld.so.preload"
DROPIN=$ROOT$SYSCONF/thpalloc.d/$(printf '20-\033[31m.conf')
printf '[global]\npurge = free\n\033[2J = 1\n' >"$DROPIN"
chmod -R go-w "$ROOT"

# What the text views must show instead of the raw bytes.
E_A='\x1b[2J\x1b[31mX'
E_B='\xed\xa0\x80\xc0\x80\xf5\xf6\xf7'
E_EXE="$SCRATCH/evil\\x0a\\x1b[31mdir/sl\\x1b]0;t\\x07eep"
E_LIB="$SCRATCH/lib\\x1b[2J\\x0adir/libthpalloc.so.1"
E_DROPIN="$ROOT$SYSCONF/thpalloc.d/20-\\x1b[31m.conf"

for T in $TOOLS; do
    t=$(basename "$T")
    # Text views: nothing raw, and each name escaped as ps would.
    bad=
    n=0
    for args in "$A $B $C $D $E $F" "--all" "--all -v" "--root $ROOT" "--root $ROOT --check" "--root $ROOT $A"; do
        # shellcheck disable=SC2086
        run "$T" $args
        r=$(text_clean "$OUT")
        [ -z "$r" ] || bad="$bad '$args': $r;"
        n=$((n + 1))
        cp "$OUT" "$SCRATCH/text.$n"
    done
    ok $([ -z "$bad" ]; echo $?) "$t: no raw control character or invalid UTF-8 in any text view${bad:+ (wrong:$bad)}"
    ok $(grep -qxF "PID $A  $E_A" "$SCRATCH/text.1" && grep -qxF "PID $B  $E_B" "$SCRATCH/text.1"; echo $?) \
        "$t: PID view: the names escaped byte for byte"
    ok $(grep -qxF "  executable       $E_EXE" "$SCRATCH/text.1"; echo $?) "$t: PID view: the executable's path escaped"
    ok $(grep -qxF "  thpalloc         loaded: $E_LIB" "$SCRATCH/text.1" \
        && [ "$(grep -c '^    state          in charge$' "$SCRATCH/text.1")" = 1 ]; echo $?) \
        "$t: PID view: the library path escaped (maps writes its newline as octal 012), and its table read"
    ok $(grep -qxF 'PID '"$E"'  \xe2\x80\xaea\xe2\x81\xa6b\xe2\x80\x8ec\xd8\x9c' "$SCRATCH/text.1" &&
        grep -qxF "  executable       $SCRATCH/bidi\\xe2\\x80\\xaa\\xe2\\x81\\xa9\\xe2\\x80\\x8fdir/sl\\xe2\\x80\\xadeep" "$SCRATCH/text.1"
        echo $?) "$t: PID view: bidirectional controls in a name and a path escaped byte for byte"
    ok $(grep -qE "^ *$A +[^ ]+ +$(printf '%.15s' "$E_A" | sed 's/[][\\]/\\&/g') +[0-9]" "$SCRATCH/text.2"; echo $?) \
        "$t: --all: the name escaped, cut to 15 characters between escapes"
    ok $(grep -qxF "  system-wide preload    yes: /usr/lib/\\x1b[2J/libthpalloc.so.1 (MISSING)" "$SCRATCH/text.4"; echo $?) \
        "$t: system view: the preload entry escaped"
    ok $(grep -qF "$E_DROPIN:3: unknown key \"\\x1b[2J\"" "$SCRATCH/text.5"; echo $?) \
        "$t: --check: the drop-in's name and the key in it escaped"
    ok $(grep -qxF "    purge          free      $E_DROPIN:2 [global]" "$SCRATCH/text.6"; echo $?) \
        "$t: PID view: the drop-in's name escaped in the policy"

    # JSON: strict, and the names as they are (U+FFFD for what is not UTF-8).
    bad=
    for args in "--json $A $B $C $D $E $F" "--all --json" "--root $ROOT --json" "--root $ROOT --check --json"; do
        # shellcheck disable=SC2086
        run "$T" $args
        "$PYTHON" -m json.tool "$OUT" >/dev/null 2>"$SCRATCH/jt.err" || bad="$bad '$args': $(head -c 200 "$SCRATCH/jt.err")"
        r=$(text_clean "$OUT")
        [ -z "$r" ] || rawj="${rawj:-} '$args': $r;"
    done
    ok $([ -z "${rawj:-}" ]; echo $?) "$t: no raw control or bidirectional character in any JSON output${rawj:+ (wrong:$rawj)}"
    rawj=
    ok $([ -z "$bad" ]; echo $?) "$t: every JSON output passes python3 -m json.tool${bad:+ (wrong:$bad)}"
    run "$T" --json "$A" "$B" "$C" "$D" "$E" "$F"
    got=$("$PYTHON" - "$OUT" "$EXE" "$LIBD/libthpalloc.so.1" "$BEXE" <<'PY'
import json, os, sys
p = json.load(open(sys.argv[1], encoding="utf-8"))["processes"]
want = [b"\x1b[2J\x1b[31mX".decode(), b"\xed\xa0\x80\xc0\x80\xf5\xf6\xf7".decode("utf-8", "replace")]
print(p[0]["name"] == want[0], p[1]["name"] == want[1], p[2]["exe"] == sys.argv[2],
      p[3]["thpalloc"]["library"] == sys.argv[3],
      p[4]["name"] == "\u202ea\u2066b\u200ec\u061c", p[5]["exe"] == sys.argv[4])
PY
)
    is "$got" "True True True True True True" "$t: JSON: names, executable and library path as they are, U+FFFD for each invalid part"

    # Prometheus: promtool accepts it; the label values are UTF-8 with U+FFFD for controls.
    run "$T" --all --prometheus --per-process
    cp "$OUT" "$SCRATCH/prom"
    promtool_check "$SCRATCH/prom" "$t: --all --prometheus --per-process with these processes"
    r=$(text_clean "$SCRATCH/prom")
    ok $([ -z "$r" ] && grep -qF "comm=\"$(printf '\357\277\275[2J\357\277\275[31mX')\"" "$SCRATCH/prom" \
        && grep -qF "comm=\"$(printf '\357\277\275%.0s' 1 2 3 4 5 6 7 8)\"" "$SCRATCH/prom"; echo $?) \
        "$t: --prometheus: the comm labels UTF-8, controls as U+FFFD${r:+ ($r)}"
    ok $(grep -qF "pid=\"$E\",comm=\"$(printf '\357\277\275a\357\277\275b\357\277\275c\357\277\275')\"" "$SCRATCH/prom"; echo $?) \
        "$t: --prometheus: bidirectional controls in a comm label as U+FFFD"

    # Invisible characters in names, through every format: escaped exactly, never raw.
    # shellcheck disable=SC2086
    run "$T" $IPIDS
    cp "$OUT" "$SCRATCH/inv.text"
    run "$T" --all
    cp "$OUT" "$SCRATCH/inv.all"
    # shellcheck disable=SC2086
    run "$T" --json $IPIDS
    cp "$OUT" "$SCRATCH/inv.json"
    run "$T" --all --json
    cp "$OUT" "$SCRATCH/inv.alljson"
    run "$T" --all --prometheus --per-process
    cp "$OUT" "$SCRATCH/inv.prom"
    bad=
    for f in text all json alljson prom; do
        r=$(text_clean "$SCRATCH/inv.$f")
        [ -z "$r" ] || bad="$bad $f: $r;"
    done
    ok $([ -z "$bad" ]; echo $?) "$t: no invisible character raw in the PID view, --all, --json, --all --json, --prometheus${bad:+ (wrong:$bad)}"
    inv_each text inv_in_text "$t: PID view: each invisible character escaped byte for byte (ss\\xe2\\x80\\x8bhd)"
    inv_each all inv_in_all "$t: --all: each name escaped, cut to 15 characters between escapes"
    inv_each json inv_in_json "$t: --json, --all --json: each name with \\uXXXX (a surrogate pair above U+FFFF)"
    bad=
    for f in json alljson; do
        "$PYTHON" -m json.tool "$SCRATCH/inv.$f" >/dev/null 2>"$SCRATCH/jt.err" || bad="$bad $f: $(head -c 200 "$SCRATCH/jt.err")"
    done
    # shellcheck disable=SC2086
    got=$("$PYTHON" - "$SCRATCH/inv.json" $INVIS <<'PY'
import json, sys
names = [p["name"] for p in json.load(open(sys.argv[1]))["processes"]]
print(names == ["ss" + bytes.fromhex(h).decode() + "hd" for h in sys.argv[2:]])
PY
)
    ok $([ -z "$bad" ] && [ "$got" = True ]; echo $?) "$t: that JSON passes python3 -m json.tool and decodes to the names as they are${bad:+ ($bad)}"
    inv_each prom inv_in_prom "$t: --prometheus: each invisible character in a comm label as U+FFFD"
    promtool_check "$SCRATCH/inv.prom" "$t: --all --prometheus --per-process with invisible names"
    sanitizer_clean "$t"
done
done_testing
