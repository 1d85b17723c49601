#!/bin/bash
# Bad configuration never changes what a process does or prints: garbage, binary data,
# over-long lines, a directory, a symlink loop, a missing file, a file anyone may write,
# bad values for every key and bad environment values. The process's output is the same as
# without any configuration, its stderr is empty, and the untrusted file is not obeyed.
set -u
probe=$TESTS_BUILDDIR/policy-probe
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

prog='import hashlib; d = {str(i): i * i for i in range(50000)}; print(hashlib.sha256(repr(sorted(d.items())).encode()).hexdigest())'
want=$(python3 -c "$prog")
want_policy=$(env -u THPALLOC_CONF LD_PRELOAD="$THPALLOC_LIB" THPALLOC_CONF=/dev/null/none "$probe" policy 2>/dev/null | sed 's/ .*//')

printf 'thp = never\n' >"$tmp/world.conf"; chmod 666 "$tmp/world.conf"
head -c 4096 /dev/urandom >"$tmp/random.conf"
printf 'thp = never\0\001\002\n[\xff\xfe\n' >"$tmp/binary.conf"
{ printf 'thp = '; head -c 5000 /dev/zero | tr '\0' 'x'; printf '\n'; } >"$tmp/long.conf"
printf '%s\n' 'thp = sometimes' 'thp_threshold = big' 'arena_size = 3M' 'purge_delay = soon' \
    'purge = maybe' 'stats = loud' 'unknown = 1' '[weird section]' 'no equals sign' >"$tmp/values.conf"
mkdir "$tmp/dir.conf"
ln -s "$tmp/loop.conf" "$tmp/loop.conf"
chmod 644 "$tmp"/*.conf 2>/dev/null; chmod 666 "$tmp/world.conf"

check() { # NAME ENV...
    local name=$1; shift
    out=$(env "$@" LD_PRELOAD="$THPALLOC_LIB" python3 -c "$prog" 2>"$tmp/err")
    [ "$out" = "$want" ] && [ ! -s "$tmp/err" ]
    ok $? "$name: python3's output unchanged, stderr empty"
    pol=$(env "$@" LD_PRELOAD="$THPALLOC_LIB" "$probe" policy 2>"$tmp/err" | sed 's/ .*//')
    [ "$pol" = "$want_policy" ] && [ ! -s "$tmp/err" ]
    ok $? "$name: the built-in defaults stay in force"
}
for f in world random binary long values dir loop missing; do
    check "$f file" THPALLOC_CONF="$tmp/$f.conf"
done
for k in THP THP_THRESHOLD ARENA_SIZE PURGE_DELAY PURGE STATS; do
    check "bad THPALLOC_$k" "THPALLOC_$k=bogus value"
done
check "empty THPALLOC_THP" THPALLOC_THP=

# Section headers inih misread, in a real process. A header without ']': its keys went to
# [global] (every process got them). A [path] longer than inih's 49 characters: the
# program at the truncated prefix got it, the real one did not.
printf '[program policy-probe\nthp = never\n' >"$tmp/header.conf"
chmod 644 "$tmp/header.conf"
check "header without ]" THPALLOC_CONF="$tmp/header.conf"
long=$tmp/a-directory-name-long-enough-for-the-test/policy-probe
mkdir -p "${long%/*}"
cp "$probe" "$long"
prefix=$(printf '%.44s' "$long")
printf '[path %s]\nthp = never\n' "$long" >"$tmp/long-path.conf"
chmod 644 "$tmp/long-path.conf"
pol=$(LD_PRELOAD="$THPALLOC_LIB" THPALLOC_CONF="$tmp/long-path.conf" "$long" policy 2>"$tmp/err")
case $pol in "thp=never $tmp/long-path.conf:2 [path $long]"*) r=0 ;; *) r=1 ;; esac
ok $r "a [path] of ${#long} characters applies to its program"
case $prefix in
"$tmp"/?*)
    cp "$probe" "$prefix"
    pol=$(LD_PRELOAD="$THPALLOC_LIB" THPALLOC_CONF="$tmp/long-path.conf" "$prefix" policy 2>&1 | sed 's/ .*//')
    [ "$pol" = "$want_policy" ]
    ok $? "the program at inih's 49-character prefix keeps the defaults"
    ;;
*) skip "the program at the prefix" "$tmp is too long" ;;
esac

# THPALLOC_VERBOSE=1 says what was rejected, with file:line.
LD_PRELOAD="$THPALLOC_LIB" THPALLOC_VERBOSE=1 THPALLOC_CONF="$tmp/values.conf" "$probe" policy \
    >/dev/null 2>"$tmp/err"
for line in 1 2 3 4 5 6 7 8 9; do
    grep -q "^thpalloc: $tmp/values.conf:$line: " "$tmp/err"
    ok $? "THPALLOC_VERBOSE names values.conf:$line"
done
grep -q "^thpalloc: policy thp = large (default)" "$tmp/err"
ok $? "THPALLOC_VERBOSE prints the policy in force"
LD_PRELOAD="$THPALLOC_LIB" THPALLOC_VERBOSE=1 THPALLOC_CONF="$tmp/world.conf" "$probe" policy \
    >/dev/null 2>"$tmp/err"
grep -q "world.conf: writable by group or others" "$tmp/err"
ok $? "THPALLOC_VERBOSE says why a file was not trusted"
done_testing
