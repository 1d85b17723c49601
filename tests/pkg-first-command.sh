#!/bin/bash
# The README's first command, as a new user runs it (issue 12, closing note): in a fresh
# Debian 12 minbase chroot, as root, `tools/dev/install-build-deps` (without --tests), then
# `autoreconf -fi && ./configure && make && make demo` unless --install-only. Asserts that
# it installs no daemon (no systemd service enabled, no .service file installed), at most
# MAX_NEW (150) packages, and prints the count and the times.
# Usage: tests/pkg-first-command.sh [--install-only] CHROOT_TARBALL
# Run by tests/pkg-chroot.sh (CI's package stage) with the chroot tarball it caches; needs
# root and the network (apt). Output: TAP lines; exit 0 when all passed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
install_only=0
[ "${1:-}" = --install-only ] && { install_only=1; shift; }
tarball=${1:?usage: $0 [--install-only] CHROOT_TARBALL}
MAX_NEW=${THPALLOC_FIRST_MAX_NEW:-150}
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
note() { echo "# $*"; }
finish() { echo "1..$tap_n"; [ "$tap_failed" -eq 0 ]; exit $?; }

work=$(mktemp -d /var/tmp/thpalloc-first.XXXXXX) || exit 99
root=$work/chroot
mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null; done
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mkdir -p "$root" && tar -C "$root" -xf "$tarball"
ok $? "a fresh Debian 12 minbase chroot from ${tarball##*/}"
for m in proc sys dev; do
    case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs -o ro sysfs "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    esac 2>/dev/null && mounted+=("$root/$m")
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
# The source as `git clone` gives it: the tracked files (and new, not ignored ones).
mkdir -p "$root/src/thpalloc"
(cd "$top" && git ls-files -z -co --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$root/src/thpalloc"
in_chroot() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
    HOME=/root /bin/sh -c "cd /src/thpalloc && $1"; }
count() { in_chroot "dpkg -l | grep -c '^ii'"; }

# daemons FILE: what could start a daemon at boot, one a line.
daemons() {
    (cd "$root/etc/systemd/system" 2>/dev/null && find . -path '*.wants/*' | LC_ALL=C sort) >"$work/wants.$1"
    (cd "$root" && ls -d lib/systemd/system/*.service usr/lib/systemd/system/*.service 2>/dev/null |
        LC_ALL=C sort) >"$work/services.$1"
    (ls "$root/etc/init.d" 2>/dev/null | LC_ALL=C sort) >"$work/initd.$1"
}
daemons before
before=$(count)
t0=$(date +%s)
in_chroot tools/dev/install-build-deps >"$work/install.log" 2>&1
rc=$?
t1=$(date +%s)
after=$(count)
daemons after
new=$((after - before))
[ $rc -ne 0 ] && tail -20 "$work/install.log" | sed 's/^/# install: /'
ok $rc "tools/dev/install-build-deps as root in the chroot ($((t1 - t0)) s)"
note "packages: $before before, $after after: $new installed by the README's first command"
[ "$new" -gt 0 ] && [ "$new" -le "$MAX_NEW" ]
ok $? "it installs $new packages (at most $MAX_NEW)"
grep -q '^Get:\|^Fetched\|^Setting up' "$work/install.log"
ok $? "apt's progress is shown (Get:/Setting up lines)"
# No daemon: no systemd unit enabled and no systemd service or init script shipped by what it
# installed (minbase's own, e2scrub_reap and the like, are in the "before" lists).
new_lines() { LC_ALL=C comm -13 "$work/$1.before" "$work/$1.after" | tr '\n' ' '; }
wants=$(new_lines wants) services=$(new_lines services) initd=$(new_lines initd)
[ -z "$wants" ]
ok $? "no systemd unit newly enabled (/etc/systemd/system/*.wants/: ${wants:-nothing new})"
[ -z "$services" ]
ok $? "no new systemd service file (/lib/systemd/system/*.service: ${services:-nothing new})"
[ -z "$initd" ]
ok $? "no new SysV init script (/etc/init.d: ${initd:-nothing new})"
if [ "$install_only" -eq 0 ]; then
    t2=$(date +%s)
    in_chroot "autoreconf -fi && ./configure && make -j$(nproc) && make demo" >"$work/build.log" 2>&1
    rc=$?
    t3=$(date +%s)
    [ $rc -ne 0 ] && tail -20 "$work/build.log" | sed 's/^/# build: /'
    ok $rc "autoreconf -fi && ./configure && make && make demo in the chroot ($((t3 - t2)) s)"
    sed -n '/^THP setting/,$p' "$work/build.log" | sed 's/^/# demo: /'
    grep -q 'python3 under thpalloc' "$work/build.log"
    ok $? "the demo ran python3 under thpalloc"
fi
note "first command: $new packages, install $((t1 - t0)) s${t3:+, build and demo $((t3 - t2)) s}"
finish
