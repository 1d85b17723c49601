#!/bin/bash
# Secure execution: a setuid-root program reached through /etc/ld.so.preload (in a private
# mount namespace over a copy of /etc; the machine's own file is never touched) ignores
# every THPALLOC_* variable, opens no file the environment names, and obeys only root-owned
# configuration files reached through root-owned directories (a drop-in linked into a
# directory another user owns is not obeyed, and thp-status --check says so).
set -u
probe=$TESTS_BUILDDIR/policy-probe
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null || ! command -v setpriv >/dev/null; then
    skip_all "needs root, unshare -m and setpriv"
fi
tmp=$(mktemp -d /var/tmp/thpalloc-setuid.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
# Root-owned copies: the library, the probe (setuid root), and a fake /etc.
cp "$THPALLOC_LIB" "$tmp/libthpalloc.so.1"
cp "$probe" "$tmp/probe"
chmod 4755 "$tmp/probe"
mkdir "$tmp/etc"
cp -a /etc/. "$tmp/etc/" 2>/dev/null
echo "$tmp/libthpalloc.so.1" >"$tmp/etc/ld.so.preload"
chmod 644 "$tmp/etc/ld.so.preload"
printf '[global]\npurge = free\n' >"$tmp/etc/thpalloc.conf"
chmod 644 "$tmp/etc/thpalloc.conf"
mkdir -p "$tmp/etc/thpalloc.d"
printf '[global]\nstats = exit\n' >"$tmp/etc/thpalloc.d/50-user.conf"
chown 65534:65534 "$tmp/etc/thpalloc.d/50-user.conf"
printf '[global]\nthp = never\n' >"$tmp/evil.conf"
chmod 644 "$tmp/evil.conf"
# Drop-ins that are symbolic links (issue 38): to a root-owned file in a root-owned
# directory (obeyed), and to a root-owned file in a directory another user owns, who may
# put any file there, root's own included (not obeyed). Both inside the fake /etc, so that
# only the directory differs.
mkdir "$tmp/etc/thpalloc-ok" "$tmp/etc/userdir"
printf '[global]\narena_size = 128M\n' >"$tmp/etc/thpalloc-ok/ok.conf"
printf '[global]\nthp_threshold = 8M\n' >"$tmp/etc/userdir/x.conf"
chmod 755 "$tmp/etc/thpalloc-ok" "$tmp/etc/userdir"
chmod 644 "$tmp/etc/thpalloc-ok/ok.conf" "$tmp/etc/userdir/x.conf"
chown 65534:65534 "$tmp/etc/userdir"
ln -s /etc/thpalloc-ok/ok.conf "$tmp/etc/thpalloc.d/60-ok.conf"
ln -s ../userdir/x.conf "$tmp/etc/thpalloc.d/70-user-dir.conf"

# The library is built with the configured sysconfdir; point it at the fake /etc by
# mounting the fake tree over both /etc and that directory.
sysconf=$(strings "$THPALLOC_LIB" | sed -n 's|/thpalloc\.conf$||p' | head -1)
inner="mount --bind $tmp/etc /etc"
made=
if [ -n "$sysconf" ] && [ "$sysconf" != /etc ]; then
    # e.g. a distcheck prefix that is not installed yet; removed again at the end
    if [ ! -d "$sysconf" ]; then
        made=$sysconf
        while [ ! -d "$(dirname "$made")" ]; do made=$(dirname "$made"); done
        mkdir -p "$sysconf" || made=
    fi
    [ -d "$sysconf" ] && inner="$inner && mount --bind $tmp/etc $sysconf"
fi
trap 'rm -rf "$tmp"; [ -z "$made" ] || rm -r "$made"' EXIT
run() { # as nobody, with hostile environment, optionally under strace (as root: setuid kept)
    unshare -m --propagation private sh -c "$inner && exec \"\$@\"" sh "$@"
}
out=$(run setpriv --reuid=65534 --regid=65534 --clear-groups env THPALLOC_THP=always \
    THPALLOC_CONF="$tmp/evil.conf" THPALLOC_VERBOSE=1 THPALLOC_PURGE_DELAY=0 \
    "$tmp/probe" policy 2>"$tmp/err")
diag "$out"
grep -q '^secure=1$' <<<"$out"
ok $? "the setuid probe runs in secure execution (AT_SECURE)"
grep -q '^thp=large default$' <<<"$out"
ok $? "THPALLOC_THP and THPALLOC_CONF are ignored"
grep -q '^purge_delay=1s default$' <<<"$out"
ok $? "THPALLOC_PURGE_DELAY is ignored"
grep -q '^purge=free .*thpalloc.conf:2 \[global\]$' <<<"$out"
ok $? "the root-owned system file is obeyed"
grep -q '^stats=no default$' <<<"$out"
ok $? "a drop-in owned by another user is not obeyed"
[ ! -s "$tmp/err" ]
ok $? "nothing printed on stderr (THPALLOC_VERBOSE ignored)"
grep -q '^arena_size=128M .*/thpalloc.d/60-ok.conf:2 \[global\]$' <<<"$out"
ok $? "a drop-in linked to a root-owned file through root-owned directories is obeyed"
grep -q '^thp_threshold=2M default$' <<<"$out"
ok $? "a drop-in linked to a root-owned file in a directory another user owns is not obeyed"
# thp-status --check (run as root, over the same files) decides alike.
status=$TESTS_BUILDDIR/../tools/thp-status/thp-status
if [ -x "$status" ]; then
    chk=$(run "$status" --check 2>&1)
    printf '%s\n' "$chk" | sed 's/^/check: /' | diag
    grep -q '/thpalloc.d/70-user-dir.conf: a directory on its path is not owned by root (or you) or is writable by group or others: setuid/setcap programs ignore it$' <<<"$chk" &&
        ! grep -q '60-ok.conf' <<<"$chk"
    ok $? "thp-status --check reports the linked drop-in setuid programs ignore, not the other"
    # The PID view of a setuid process (a setuid copy of sleep, as nobody, in the namespace)
    # reads its drop-ins as the library in it does.
    cp "$(command -v sleep)" "$tmp/sleep"
    chmod 4755 "$tmp/sleep"
    unshare -m --propagation private sh -c "$inner && exec \"\$@\"" sh \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/sleep" 120 &
    sp=$!
    i=0
    while [ "$(readlink "/proc/$sp/exe")" != "$tmp/sleep" ] && [ $i -lt 100 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    view=$("$status" "$sp" 2>&1)
    kill "$sp" 2>/dev/null
    wait "$sp" 2>/dev/null
    printf '%s\n' "$view" | grep -E 'secure|thp_threshold|arena_size' | sed 's/^/view: /' | diag
    grep -qE '^    arena_size +128M +.*/thpalloc.d/60-ok.conf:2 \[global\]$' <<<"$view" &&
        grep -qE '^    thp_threshold +2M +default$' <<<"$view"
    ok $? "the PID view of a setuid process: the same two decisions"
else
    skip "thp-status --check" "tools/thp-status/thp-status not built"
    skip "thp-status PID" "tools/thp-status/thp-status not built"
fi
run strace -f -qq -e trace=openat -o "$tmp/strace" setpriv --reuid=65534 --regid=65534 \
    --clear-groups env THPALLOC_CONF="$tmp/evil.conf" "$tmp/probe" policy >/dev/null 2>&1
grep -q 'thpalloc' "$tmp/strace" && ! grep -q 'evil.conf' "$tmp/strace"
ok $? "the file named by THPALLOC_CONF is never opened"
done_testing
