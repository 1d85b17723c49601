#!/bin/bash
# Real Debian programs under LD_PRELOAD=$THPALLOC_LIB: each workload runs twice, once on
# plain glibc and once preloaded, in the same fresh directory; stdout and the exit status
# must be identical (and the exit status 0). Then: proof that thpalloc's malloc is the one
# in charge (tests/real-whoami, python3 + ctypes).
set -u

LIB=${THPALLOC_LIB:-}
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
TIMEOUT=${THPALLOC_TEST_TIMEOUT:-120}
# Debian's python3, not a pyenv/venv shim found first on PATH.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || echo python3)

tests=(python3 perl sqlite3 git gcc real-cxx-containers sort xz)
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-real.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
if [ -z "$LIB" ] || [ ! -f "$LIB" ]; then
    echo "# THPALLOC_LIB='$LIB' does not exist: every preloaded run will fail"
fi

# Environment for both runs: deterministic, and untouched by the caller's config.
export LC_ALL=C TZ=UTC PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP

# run CMD...: runs CMD with or without the preload ($PRE), under a timeout.
PRE=
run() {
    if [ -n "$PRE" ]; then
        timeout -k 5 "$TIMEOUT" env LD_PRELOAD="$PRE" "$@"
    else
        timeout -k 5 "$TIMEOUT" env -u LD_PRELOAD "$@"
    fi
}

# compare NAME FUNCTION: runs FUNCTION in $tmp/work (fresh each time) plain, then
# preloaded; compares stdout and exit status.
compare() {
    local name=$1 fn=$2 mode rc start secs
    for mode in plain thp; do
        rm -rf "$tmp/work"
        mkdir -p "$tmp/work/home"
        if [ $mode = thp ]; then PRE=$LIB; else PRE=; fi
        start=$(date +%s.%N)
        (set -o pipefail && cd "$tmp/work" && HOME=$tmp/work/home "$fn") >"$tmp/$name.$mode.out" \
            2>"$tmp/$name.$mode.err"
        rc=$?
        secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        echo "$rc" >"$tmp/$name.$mode.rc"
        echo "# $name ($mode): exit $rc, $(wc -l <"$tmp/$name.$mode.out") lines, $secs s"
    done
    local ok=0
    if ! cmp -s "$tmp/$name.plain.rc" "$tmp/$name.thp.rc"; then
        echo "# exit status differs: plain $(cat "$tmp/$name.plain.rc"), preloaded $(cat "$tmp/$name.thp.rc")"
        ok=1
    elif [ "$(cat "$tmp/$name.plain.rc")" != 0 ]; then
        echo "# the workload failed in both runs (exit $(cat "$tmp/$name.plain.rc"))"
        ok=1
    fi
    if ! cmp -s "$tmp/$name.plain.out" "$tmp/$name.thp.out"; then
        echo "# stdout differs (plain vs preloaded):"
        diff "$tmp/$name.plain.out" "$tmp/$name.thp.out" | head -n 20 | sed 's/^/#   /'
        ok=1
    elif [ ! -s "$tmp/$name.plain.out" ]; then
        echo "# no output at all"
        ok=1
    fi
    if [ $ok -ne 0 ] || ! cmp -s "$tmp/$name.plain.err" "$tmp/$name.thp.err"; then
        local m
        for m in plain thp; do
            if [ -s "$tmp/$name.$m.err" ]; then
                echo "# stderr ($m):"
                head -n 15 "$tmp/$name.$m.err" | sed 's/^/#   /'
            fi
        done
    fi
    tail -n 3 "$tmp/$name.thp.out" | sed 's/^/#   > /'
    return $ok
}

# ---- workloads ---------------------------------------------------------------------------

w_python3() {
    cat >churn.py <<'PYEOF'
import hashlib, json, threading, random, collections

def churn(seed, out):
    rnd = random.Random(seed)
    d = {}
    for i in range(120000):
        k = "k%d" % rnd.randrange(50000)
        d[k] = d.get(k, []) + [i] if rnd.random() < 0.3 else [i]
        if rnd.random() < 0.2:
            d.pop("k%d" % rnd.randrange(50000), None)
    s = "".join(sorted(d))[:200000]
    words = [s[i:i + rnd.randrange(1, 30)] for i in range(0, len(s), 7)]
    c = collections.Counter(w[:2] for w in words)
    out[seed] = hashlib.sha256(repr((len(d), sorted(c.items())[:50], sum(map(len, d.values())))).encode()).hexdigest()

out = {}
threads = [threading.Thread(target=churn, args=(s, out)) for s in range(4)]
for t in threads: t.start()
for t in threads: t.join()
for s in sorted(out): print("thread", s, out[s])

doc = {"items": [{"id": i, "name": "item-%d" % i, "tags": ["t%d" % (i % 7)] * (i % 5),
                  "nested": {"x": i * 1.5, "y": [None, True, "z" * (i % 50)]}} for i in range(30000)]}
text = json.dumps(doc, sort_keys=True)
back = json.loads(text)
assert back == doc
print("json", len(text), hashlib.sha256(text.encode()).hexdigest())
big = [bytes(range(256)) * 4000 for _ in range(40)]   # 1 MB objects
print("bytes", sum(map(len, big)), hashlib.md5(b"".join(big)).hexdigest())
print("list", sum(sorted([random.Random(9).random() for _ in range(10)])) > 0, len(list(range(10**6))))
PYEOF
    run "$PY" churn.py
}

w_perl() {
    cat >work.pl <<'PLEOF'
use strict; use warnings; use Digest::MD5 qw(md5_hex);
my %h; my $x = 12345;
sub rnd { $x = ($x * 1103515245 + 12345) % 2147483648; return $x; }
for my $i (1 .. 200000) {
    my $k = "key" . (rnd() % 60000);
    $h{$k} .= chr(65 + $i % 26);
    delete $h{"key" . (rnd() % 60000)} if $i % 5 == 0;
}
my $text = join("\n", map { "$_=$h{$_}" } sort keys %h);
my $n = () = $text =~ /key(\d*7)=([A-M]+)/g;
(my $t2 = $text) =~ s/([aeiou])(\d+)/$2$1/g;
my @parts = split /\n/, $t2;
my %len; $len{length $_}++ for @parts;
print "keys ", scalar(keys %h), "\n";
print "matches $n\n";
print "md5 ", md5_hex($t2), "\n";
print "lengths ", join(",", map { "$_:$len{$_}" } sort { $a <=> $b } keys %len), "\n";
my @sorted = sort { $h{$a} cmp $h{$b} or $a cmp $b } keys %h;
print "first $sorted[0] last $sorted[-1]\n";
PLEOF
    run perl work.pl
}

w_sqlite3() {
    {
        echo "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);"
        echo "BEGIN;"
        awk 'BEGIN { x = 7; for (i = 1; i <= 20000; i++) {
                x = (x * 1103515245 + 12345) % 2147483648;
                printf "INSERT INTO t(grp, name, val) VALUES (%d, '\''name-%d-%s'\'', %d.%02d);\n",
                       x % 97, i, substr("abcdefghijklmnopqrstuvwxyz", 1 + x % 26, 1 + x % 20),
                       x % 100000, x % 100 } }'
        echo "COMMIT;"
        echo "CREATE INDEX t_grp ON t(grp, val);"
        echo "CREATE TABLE g AS SELECT grp, count(*) AS n, sum(val) AS s FROM t GROUP BY grp;"
        echo "SELECT count(*), sum(val), min(name), max(name) FROM t;"
        echo "SELECT grp, n, printf('%.2f', s) FROM g ORDER BY s DESC LIMIT 5;"
        echo "SELECT t.grp, count(*), printf('%.2f', avg(t.val)) FROM t JOIN g ON g.grp = t.grp WHERE g.n > 200 GROUP BY t.grp ORDER BY 2 DESC, 1 LIMIT 5;"
        echo "SELECT group_concat(name, ',') IS NOT NULL, length(group_concat(name, ',')) FROM (SELECT name FROM t ORDER BY val DESC LIMIT 1000);"
        echo "DELETE FROM t WHERE id % 3 = 0; VACUUM;"
        echo "SELECT count(*), printf('%.2f', total(val)) FROM t;"
        echo "PRAGMA integrity_check;"
    } >script.sql
    run sqlite3 test.db <script.sql
}

w_git() {
    export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
    export GIT_AUTHOR_NAME=Test GIT_AUTHOR_EMAIL=test@example.invalid
    export GIT_COMMITTER_NAME=Test GIT_COMMITTER_EMAIL=test@example.invalid
    local i c rc=0
    run git init -q -b main repo || return 1
    cd repo || return 1
    for c in 1 2 3 4 5; do
        export GIT_AUTHOR_DATE="2024-01-0$c 12:00:00 +0000" GIT_COMMITTER_DATE="2024-01-0$c 12:00:00 +0000"
        mkdir -p "d$c"
        for i in $(seq 1 60); do
            seq "$c" "$((i * 40))" >"d$((i % c + 1))/f$i.txt"
        done
        run git add -A || rc=1
        run git commit -q -m "commit $c" || rc=1
    done
    run git log --stat --format='%H %s' | tail -n 20 || rc=1
    run git diff --stat HEAD~3 HEAD | tail -n 3 || rc=1
    run git diff HEAD~1 HEAD | sha256sum
    run git gc -q || rc=1
    run git fsck --no-progress || rc=1
    run git count-objects -v | grep -E '^(count|in-pack|packs)'
    run git rev-parse HEAD HEAD:d1
    return $rc
}

w_gcc() {
    {
        echo '#include <stdio.h>'
        echo '#include <stdlib.h>'
        echo '#include <string.h>'
        for i in $(seq 1 300); do
            echo "static long f$i(long x) { long a[16]; for (int i = 0; i < 16; i++) a[i] = x * $i + i; long s = 0; for (int i = 0; i < 16; i++) s ^= a[i] << (i % 7); return s + $i; }"
        done
        echo 'int main(void) { long s = 0; char *b = malloc(1 << 20); memset(b, 1, 1 << 20);'
        for i in $(seq 1 300); do echo "  s += f$i(s % 1000 + b[$i]);"; done
        echo '  printf("result %ld\n", s); free(b); return 0; }'
    } >prog.c
    run gcc -O2 -frandom-seed=1 -Wall -o prog prog.c || return 1
    ./prog || return 1
    # The compiler's output must be byte-identical with and without the preload.
    sha256sum prog | cut -c1-64
}

w_cxx() {
    run "$BUILD/real-cxx-containers"
}

w_sort() {
    awk 'BEGIN { x = 1; for (i = 0; i < 400000; i++) {
            x = (x * 1103515245 + 12345) % 2147483648; print (x % 2000000) - 1000000 "." x % 1000 } }' >in.txt
    run sort -n -S 16M --parallel=2 -T . in.txt >out.txt || return 1
    wc -l <out.txt
    head -n 2 out.txt
    tail -n 2 out.txt
    sha256sum <out.txt | cut -c1-64
}

w_xz() {
    # a few MB of half-compressible data
    { seq 1 300000; head -c 2000000 /dev/zero | tr '\0' 'x'; awk 'BEGIN { x = 3; for (i = 0; i < 100000; i++) { x = (x * 69069 + 1) % 4294967296; printf "%08x\n", x } }'; } >data
    sha256sum <data | cut -c1-64
    run xz -T2 -4 -k -c data >data.xz || return 1
    rm -f data.out
    run xz -d -T2 -c data.xz >data.out || return 1
    cmp data data.out && echo "round trip ok"
    # xz's output for the same input and settings must not depend on the malloc
    sha256sum <data.xz | cut -c1-64
    wc -c <data.xz
}

for t in "${tests[@]}"; do
    case $t in
    python3) compare python3 w_python3; ok $? "python3: dict/list/str churn, json round trip, threads, 1 MB objects: same output" ;;
    perl) compare perl w_perl; ok $? "perl: 200k-key hash, regexes, sort: same output" ;;
    sqlite3) compare sqlite3 w_sqlite3; ok $? "sqlite3: 20000 inserts, index, aggregates, join, vacuum: same output" ;;
    git) compare git w_git; ok $? "git: init, 5 commits, log, diff, gc, fsck: same output and commit ids" ;;
    gcc) compare gcc w_gcc; ok $? "gcc: compiles and runs a 300-function C file: same output, same binary" ;;
    real-cxx-containers) compare cxx w_cxx; ok $? "C++ containers (vector, map, unordered_map, string, shared_ptr, threads): same output" ;;
    sort) compare sort w_sort; ok $? "sort -n --parallel=2 of 400000 lines: same output" ;;
    xz) compare xz w_xz; ok $? "xz -T2 compress/decompress ~5 MB: round trip and identical .xz" ;;
    esac
done

# ---- who is in charge? --------------------------------------------------------------------
out=$(run env LD_PRELOAD="$LIB" "$BUILD/real-whoami" 2>&1)
rc=$?
plain=$(run env -u LD_PRELOAD "$BUILD/real-whoami" 2>&1 | sed -n 's/^malloc //p')
echo "$out" | sed 's/^/# preloaded: /'
echo "# plain: malloc from $plain"
first=$(echo "$out" | sed -n 's/^malloc //p')
[ $rc -eq 0 ] && [ "$first" = libthpalloc.so.1 ] && [ "$plain" != libthpalloc.so.1 ] && [ -n "$plain" ]
ok $? "real-whoami: dladdr(malloc) is libthpalloc.so.1 under the preload (got '${first:-nothing}'), '${plain:-nothing}' without"

others=$(echo "$out" | awk '$2 != "libthpalloc.so.1" || NF != 2' | tr '\n' ';')
[ $rc -eq 0 ] && [ -n "$out" ] && [ -z "$others" ]
ok $? "real-whoami: every allocation entry point (free, calloc, realloc, ..., malloc_usable_size) comes from libthpalloc.so.1${others:+ (not: $others)}"

PRE=$LIB
out=$(run "$PY" - 2>&1 <<'PYEOF'
import ctypes, sys
lib = ctypes.CDLL(None)
class Stats(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in
                "reserved committed huge_advised in_use purge_pending purged large_count heaps".split()]
def stats():
    s = Stats()
    rc = lib.thpalloc_get_stats(ctypes.byref(s), ctypes.sizeof(s))
    assert rc == 0, "thpalloc_get_stats returned %d" % rc
    return s
active = lib.thpalloc_active()
s0 = stats()
big = bytearray(64 << 20)          # a 64 MiB malloc from python itself
s1 = stats()
del big
s2 = stats()
print("active", active)
print("in_use", s0.in_use, "heaps", s0.heaps, "reserved", s0.reserved)
print("in_use with a 64 MiB bytearray", s1.in_use, "after del", s2.in_use)
ok = active == 1 and s0.in_use > 0 and s1.in_use - s0.in_use >= 64 << 20 and s1.in_use - s2.in_use >= 64 << 20
sys.exit(0 if ok else 1)
PYEOF
)
rc=$?
PRE=
echo "$out" | sed 's/^/# /'
[ $rc -eq 0 ]
ok $? "python3 + ctypes under the preload: thpalloc_active() == 1, in_use > 0 and follows a 64 MiB bytearray"
done_testing
