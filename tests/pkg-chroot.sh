#!/bin/bash
# The Debian packages, end to end (issue 5, item 9). Not part of `make check`: CI runs it as
# root. Steps:
#   1. dpkg-buildpackage -us -uc -b in a clean copy of the tree (DEB_BUILD_OPTIONS=nocheck:
#      make check has run already);
#   2. lintian on the .changes: no E: and no W: line;
#   3. a Debian 12 minbase chroot (mmdebstrap, else debootstrap), cached as a tarball under
#      /var/cache/thpalloc-ci/ and unpacked fresh for each run;
#   4. in the chroot: install libthpalloc1 + thpalloc, snapshot /etc, install
#      thpalloc-preload, run programs with its /etc/ld.so.preload in force, remove and purge,
#      compare /etc with the snapshot; the same with a pre-existing /etc/ld.so.preload that
#      holds a comment (kept byte for byte); a reinstall (the entry stays where it is);
#      a forced removal of the tool first (the maintainer scripts' fallback, also on a line
#      shared with another library and a comment); finally purge everything and compare /etc
#      with the pristine chroot. What dpkg and the maintainer scripts print is checked line
#      by line where the issues were about it (purge, reinstall).
#   0. before all that: `make distdir` of the configured tree holds every tracked file
#      (tests/pkg-dist.sh), and the packages are built as a buildd does: the source package
#      (dpkg-buildpackage -S, 3.0 (native)), dpkg-source -x of its .dsc, and
#      dpkg-buildpackage -b in that tree; lintian checks the .dsc too;
#   5. the autopkgtests of debian/tests/control, run in the chroot (deps from apt and the
#      .debs just built), as root only with needs-root;
#   6. the README's first command in another fresh chroot from the same cached tarball
#      (tests/pkg-first-command.sh: no daemon, at most 150 packages, count and time).
# The machine's own /etc/ld.so.preload is never touched (checked at the end).
# Output: TAP lines; exit 0 when all passed. When no chroot can be made (no mirror, no
# mmdebstrap/debootstrap, no root) steps 3-4 are skipped with a message, exit 0, unless
# --require-chroot (then exit 1).
# Options: --require-chroot, --keep (leave the work directory), --refresh (rebuild the
# cached chroot).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
require_chroot=0 keep=0 refresh=0
for a in "$@"; do
    case $a in
    --require-chroot) require_chroot=1 ;;
    --keep) keep=1 ;;
    --refresh) refresh=1 ;;
    *) echo "usage: $0 [--require-chroot] [--keep] [--refresh]" >&2; exit 2 ;;
    esac
done

CACHE=${THPALLOC_CI_CACHE:-/var/cache/thpalloc-ci}
SUITE=bookworm
MAXAGE_DAYS=${THPALLOC_CHROOT_MAXAGE:-14}
start=$(date +%s)
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
note() { echo "# $*"; }
# fold_tap PREFIX FILE: another script's TAP output as our own assertions.
fold_tap() {
    local l
    while IFS= read -r l; do
        case $l in
        'ok '*) ok 0 "$1: ${l#ok * - }" ;;
        'not ok '*) ok 1 "$1: ${l#not ok * - }" ;;
        1..*) ;;
        *) echo "# $1: ${l#\# }" ;;
        esac
    done <"$2"
}
finish() {
    echo "1..$tap_n"
    note "pkg-chroot: $((tap_n - tap_failed)) of $tap_n passed in $(($(date +%s) - start)) s"
    [ "$tap_failed" -eq 0 ] && exit 0
    exit 1
}

host_preload_before=$(if [ -e /etc/ld.so.preload ]; then sha256sum </etc/ld.so.preload; stat -c %a /etc/ld.so.preload; else echo absent; fi)

work=$(mktemp -d /var/tmp/thpalloc-pkg.XXXXXX) || exit 99
chroot_dir=$work/chroot
mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null; done
    if [ "$keep" -eq 1 ]; then echo "# kept $work"; else rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT

# ---- 1. build -------------------------------------------------------------------------
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version 2>/dev/null | sed 's/-[^-]*$//')
src=$work/thpalloc-${version:-0}
mkdir -p "$src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    # tracked and untracked-but-not-ignored files: no build products of the host's build
    (cd "$top" && git ls-files -z -co --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
else
    cp -a "$top/." "$src/" && (cd "$src" && { [ ! -f Makefile ] || make -s distclean >/dev/null 2>&1; })
fi
# `make dist` holds every tracked file (tests/pkg-dist.sh), from the configured tree CI built.
if [ -f "$top/Makefile" ] && git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    # `make distdir` into the work directory, packed as `make dist` packs it (the tree is left alone).
    mkdir -p "$work/dist" && make -s -C "$top" distdir distdir="$work/dist/thpalloc-${version:-0}" \
        >"$work/dist.log" 2>&1 && tar -C "$work/dist" -czf "$work/dist/thpalloc-${version:-0}.tar.gz" \
        "thpalloc-${version:-0}"
    rc=$?
    [ $rc -ne 0 ] && tail -20 "$work/dist.log" | sed 's/^/# make dist: /'
    ok $rc "make distdir (what make dist packs)"
    bash "$top/tests/pkg-dist.sh" "$work/dist/thpalloc-${version:-0}.tar.gz" >"$work/dist.tap" 2>&1
    fold_tap pkg-dist "$work/dist.tap"
else
    note "no configured git tree at $top: make dist not checked"
fi

# The source package first (issue 12, item 12), then the binary packages built from what
# its .dsc unpacks to, as a buildd would: the .debs tested below come from the source package.
# The source format is 3.0 (native) (debian/README.source).
bin=$work/bin
mkdir -p "$bin"
note "building the source package in $src"
(cd "$src" && dpkg-buildpackage -us -uc -S >"$work/source.log" 2>&1)
rc=$?
[ $rc -ne 0 ] && tail -40 "$work/source.log" | sed 's/^/# source: /'
ok $rc "dpkg-buildpackage -us -uc -S"
dsc=$(ls "$work"/thpalloc_*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] && grep -qx 'Format: 3.0 (native)' "$dsc"
ok $? "the source package ${dsc##*/} (3.0 (native)): $(sed -n 's/^ [0-9a-f]\{64\} [0-9]* //p' "$dsc" 2>/dev/null | sort -u | tr '\n' ' ')"
[ -n "$dsc" ] || finish
(cd "$bin" && dpkg-source -x "$dsc" >"$work/extract.log" 2>&1)
rc=$?
[ $rc -ne 0 ] && sed 's/^/# dpkg-source -x: /' "$work/extract.log"
ok $rc "dpkg-source -x ${dsc##*/}"
srcx=$(ls -d "$bin"/thpalloc-*/ 2>/dev/null | head -1)
[ -n "$srcx" ] || finish
note "building the binary packages in $srcx (from the .dsc)"
(cd "$srcx" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" DEB_BUILD_PROFILES=nocheck \
    dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1)
rc=$?
[ $rc -ne 0 ] && tail -40 "$work/build.log" | sed 's/^/# build: /'
ok $rc "dpkg-buildpackage -us -uc -b in the tree that dpkg-source -x unpacked"
changes=$(ls "$bin"/thpalloc_*.changes 2>/dev/null | head -1)
debs=()
for p in libthpalloc1 libthpalloc-dev thpalloc thpalloc-preload; do
    d=$(ls "$bin/${p}_"*.deb 2>/dev/null | head -1)
    [ -n "$d" ]
    ok $? "built $p (${d##*/})"
    [ -n "$d" ] && debs+=("$d")
done
[ -n "$changes" ] && [ ${#debs[@]} -eq 4 ] || finish
grep -E '^dpkg-gensymbols: warning' "$work/build.log" | sed 's/^/# /'
! grep -q '^dpkg-gensymbols: warning: some new symbols' "$work/build.log"
ok $? "the symbols file lists every exported symbol"
for d in "${debs[@]}"; do note "$(dpkg-deb -c "$d" | awk '{print $6}' | grep -v '/$' | tr '\n' ' ')"; done

# Contents that matter.
dpkg-deb -c "$bin"/libthpalloc1_*.deb | grep "\./usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libthpalloc\.so\.1" >/dev/null
ok $? "libthpalloc1 has the library in /usr/lib/<multiarch>/"
dpkg-deb -I "$bin"/thpalloc_*.deb conffiles 2>/dev/null | grep -x /etc/thpalloc.conf >/dev/null
ok $? "thpalloc: /etc/thpalloc.conf is a conffile"
dpkg-deb -c "$bin"/thpalloc-preload_*.deb | grep 'ld\.so\.preload' >/dev/null
[ $? -ne 0 ]
ok $? "no package ships /etc/ld.so.preload"

# ---- 2. lintian -----------------------------------------------------------------------
if command -v lintian >/dev/null 2>&1; then
    lintian --tag-display-limit 0 "$changes" "$dsc" >"$work/lintian.log" 2>&1
    sed 's/^/# lintian: /' "$work/lintian.log"
    ! grep -qE '^[EW]: ' "$work/lintian.log"
    ok $? "lintian (binary and source packages): no error and no warning"
    # Informational tags too: an overridden one says why in debian/*.lintian-overrides.
    lintian -I --tag-display-limit 0 "$changes" "$dsc" 2>&1 | grep '^I: ' | sed 's/^/# lintian -I: /' |
        tee "$work/lintian-i.log"
    [ ! -s "$work/lintian-i.log" ]
    ok $? "lintian -I: no informational tag either (hardening-no-fortify-functions overridden, with the reason)"
else
    ok 1 "lintian is not installed (tools/dev/install-build-deps)"
fi

# ---- 3. the chroot --------------------------------------------------------------------
skip_chroot() {
    note "SKIP chroot: $*"
    if [ "$require_chroot" -eq 1 ]; then ok 1 "a Debian 12 chroot ($*)"; fi
    finish
}
[ "$(id -u)" -eq 0 ] || skip_chroot "needs root"

# The mirror: the first Debian (not security) URI that apt's sources name for bookworm.
mirror=$(
    {
        cat /etc/apt/sources.list 2>/dev/null | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i, $(i+1); break } }'
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] || continue
            awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm/ { if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { u = substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", u); print u, "bookworm" } }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] && awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i, $(i+1); break } }' "$f"
        done
    } | awk '$2 ~ /^bookworm$/ && $1 ~ /\/debian\/?$/ { print $1; exit }'
)
mirror=${THPALLOC_MIRROR:-${mirror:-http://deb.debian.org/debian}}
arch=$(dpkg --print-architecture)
mkdir -p "$CACHE" || skip_chroot "cannot create $CACHE"
incl=libcap2,python3
tarball=$CACHE/$SUITE-minbase-$arch-$(echo "$incl" | tr -c 'a-z0-9\n' _).tar
if [ -f "$tarball" ] && [ "$refresh" -eq 0 ] &&
    [ -z "$(find "$tarball" -mtime +"$MAXAGE_DAYS" 2>/dev/null)" ]; then
    note "reusing the cached chroot $tarball ($(date -r "$tarball" +%F))"
else
    note "making a $SUITE minbase chroot from $mirror"
    made=0
    if command -v mmdebstrap >/dev/null 2>&1; then
        timeout 480 mmdebstrap --quiet --variant=minbase --include="$incl" --mode=root \
            --format=tar "$SUITE" "$tarball.new" "$mirror" >"$work/mkchroot.log" 2>&1 && made=1
    fi
    if [ "$made" -eq 0 ] && command -v debootstrap >/dev/null 2>&1; then
        rm -rf "$work/ds" && timeout 480 debootstrap --variant=minbase --include="$incl" \
            "$SUITE" "$work/ds" "$mirror" >>"$work/mkchroot.log" 2>&1 &&
            tar -C "$work/ds" -cf "$tarball.new" . && made=1
        rm -rf --one-file-system "$work/ds"
    fi
    if [ "$made" -eq 1 ]; then
        mv -f "$tarball.new" "$tarball"
    else
        rm -f "$tarball.new"
        tail -5 "$work/mkchroot.log" 2>/dev/null | sed 's/^/# mkchroot: /'
        if [ -f "$tarball" ]; then
            note "could not refresh the chroot: using the older $tarball"
        else
            skip_chroot "neither mmdebstrap nor debootstrap could make a $SUITE chroot from $mirror"
        fi
    fi
fi
mkdir -p "$chroot_dir" && tar -C "$chroot_dir" -xf "$tarball" 2>/dev/null
ok $? "a fresh $SUITE minbase chroot ($(du -sm "$chroot_dir" | cut -f1) MiB)"

# /proc (the library reads /proc/self/exe for [program] sections) and /dev.
if mount -t proc proc "$chroot_dir/proc" 2>/dev/null; then mounted+=("$chroot_dir/proc"); else note "no /proc in the chroot"; fi
if mount --bind /dev "$chroot_dir/dev" 2>/dev/null; then mounted+=("$chroot_dir/dev"); fi

in_chroot() { chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"; }
# snapshot FILE: every entry of the chroot's /etc with type, mode, owner, size and checksum
snapshot() {
    (cd "$chroot_dir" && find etc -printf '%p %y %m %u:%g %s %l\n' | LC_ALL=C sort &&
        find etc -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >"$1"
}
mkdir -p "$chroot_dir/tmp/debs" && cp "${debs[@]}" "$chroot_dir/tmp/debs/"
deb() { echo "/tmp/debs/$(cd "$chroot_dir/tmp/debs" && ls "$1"_*.deb | head -1)"; }
D_LIB=$(deb libthpalloc1) D_TOOLS=$(deb thpalloc) D_PRE=$(deb thpalloc-preload)
snapshot "$work/etc.pristine"

# ---- 4. install, preload, remove, purge -----------------------------------------------
echo "# --- transcript ---"
t() { # t COMMAND...: run in the chroot, transcript on stdout as '# ' lines
    echo "# chroot\$ $*"
    in_chroot "$@" >"$work/t.out" 2>&1
    local rc=$?
    awk '{ print "#   " $0 }' "$work/t.out"
    return $rc
}
# said LINE...: the last transcript is exactly these lines (dpkg's "(Reading database ..."
# line left out: its count varies).
said() { grep -v '^(Reading database' "$work/t.out" | cmp -s - <(printf '%s\n' "$@"); }
V=$(dpkg-deb -f "${debs[3]}" Version)
t dpkg -i "$D_LIB" "$D_TOOLS"
ok $? "dpkg -i libthpalloc1 thpalloc"
# The administrator's README (issue 12, item 15), not the developer README.md.
readme=$(ls "$chroot_dir"/usr/share/doc/thpalloc/README.Debian* 2>/dev/null | head -1)
admin_readme() {
    [ -n "$readme" ] && zcat -f "$readme" | head -1 | grep -qx 'thpalloc for administrators' || return 1
    ! zcat -f "$readme" | grep -qE 'autoreconf|install-build-deps|make check' || return 1
    local w
    for w in thpalloc-run 'Environment=LD_PRELOAD' '\[unit ' 'apt install thpalloc-preload' \
        'thp-status --check' 'apt remove thpalloc-preload'; do
        zcat -f "$readme" | grep -q "$w" || { note "README.Debian lacks $w"; return 1; }
    done
}
admin_readme
ok $? "installed ${readme#"$chroot_dir"}: the administrator's README (per command, service, system-wide, check, undo; no build commands)"
! ls "$chroot_dir"/usr/share/doc/thpalloc/README.md* >/dev/null 2>&1
ok $? "the developer README.md is not installed in /usr/share/doc/thpalloc"
snapshot "$work/etc.before"

t dpkg -i "$D_PRE"
ok $? "dpkg -i thpalloc-preload (postinst: thpalloc-preload enable)"
t cat /etc/ld.so.preload
[ "$(cat "$chroot_dir/etc/ld.so.preload" 2>/dev/null)" = '/usr/$LIB/libthpalloc.so.1' ]
ok $? "the chroot's /etc/ld.so.preload holds exactly /usr/\$LIB/libthpalloc.so.1"
[ "$(stat -c '%a %u' "$chroot_dir/etc/ld.so.preload" 2>/dev/null)" = "644 0" ]
ok $? "/etc/ld.so.preload: mode 0644, owned by root"
t thpalloc-preload status && [ "$(cat "$work/t.out")" = enabled ]
ok $? "thpalloc-preload status: enabled"

# Programs with the preload in force: exit 0, nothing on stderr, thpalloc loaded.
for cmd in "/bin/true" "ls -la /" "echo hello" "sort /etc/passwd | head -3" \
    "perl -e 'print join(q(,), map { \$_ * 2 } 1..5)'" "apt-cache policy" "dpkg -l libthpalloc1"; do
    in_chroot /bin/sh -c "$cmd" >"$work/out" 2>"$work/err"
    rc=$?
    [ $rc -eq 0 ] && [ ! -s "$work/err" ]
    good=$?
    [ $good -eq 0 ] || sed 's/^/# stderr: /' "$work/err" | head -5
    ok $good "in the chroot, under /etc/ld.so.preload: $cmd (rc=$rc)"
done
# grep reads all of it: with pipefail, grep -q exiting first would fail the pipeline on SIGPIPE.
in_chroot env LD_DEBUG=libs /bin/true 2>&1 | grep 'calling init: .*/libthpalloc\.so\.1' >/dev/null
ok $? "ld.so loads /usr/lib/<multiarch>/libthpalloc.so.1 into /bin/true"
if in_chroot python3 -c 'import ctypes' >/dev/null 2>&1; then
    t python3 -c 'import ctypes; l = ctypes.CDLL(None); b = bytearray(32 << 20); print("thpalloc_active", l.thpalloc_active())'
    grep -qx 'thpalloc_active 1' "$work/t.out"
    ok $? "python3 in the chroot runs on thpalloc (from /etc/ld.so.preload)"
fi
if [ -d "$chroot_dir/proc/self" ]; then
    in_chroot /bin/sh -c 'grep -c libthpalloc /proc/self/maps' >"$work/out" 2>&1
    [ "$(cat "$work/out")" -gt 0 ] 2>/dev/null
    ok $? "/proc/self/maps of a shell in the chroot shows libthpalloc.so.1"
fi
[ -x "$chroot_dir/usr/bin/thp-status" ] && [ ! -e "$chroot_dir/usr/sbin/thp-status" ]
ok $? "thp-status is in /usr/bin (for every user), not /usr/sbin"
# A user's PATH has no sbin: thp-status and thpalloc-run's value check (thp-status
# --check-value) work with it.
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin LC_ALL=C thp-status --check >"$work/out" 2>&1
ok $? "thp-status --check with a user's PATH (/usr/bin:/bin)"
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin LC_ALL=C thpalloc-run --thp never \
    /bin/sh -c 'echo "$THPALLOC_THP"' >"$work/out" 2>&1 && [ "$(cat "$work/out")" = never ]
ok $? "thpalloc-run --thp never with a user's PATH: THPALLOC_THP=never ($(head -1 "$work/out"))"
# Its exit status is the machine's verdict: 0 healthy, 1 when the host's THP settings
# give warnings (the chroot's preload and policy are good: no problem of theirs).
t thp-status
rc=$?
{ [ $rc -eq 0 ] && grep -qx '  healthy' "$work/t.out"; } ||
    { [ $rc -eq 1 ] && ! grep -q '^  ! .*\(ld.so.preload\|configuration\)' "$work/t.out"; }
ok $? "thp-status runs in the chroot (exit $rc: its verdict, $(tail -1 "$work/t.out"))"
for c in thp-status thpalloc-run thpalloc-preload; do
    f=/usr/share/bash-completion/completions/$c
    in_chroot bash --norc -c ". $f && complete -p $c" >"$work/out" 2>&1
    grep -q " $c\$" "$work/out"
    ok $? "$f is installed and registers the completion of $c"
done
t thp-status --check
ok $? "thp-status --check: the shipped policy is valid"

t dpkg -r thpalloc-preload
ok $? "dpkg -r thpalloc-preload (prerm: thpalloc-preload disable)"
said "Removing thpalloc-preload ($V) ..." \
    "thpalloc-preload: disabled (/etc/ld.so.preload removed: the entry was all it held)"
ok $? "dpkg -r says exactly that the file went, and postrm says nothing more"
[ ! -e "$chroot_dir/etc/ld.so.preload" ]
ok $? "/etc/ld.so.preload is gone (the entry was all it held)"
in_chroot /bin/true >/dev/null 2>"$work/err" && [ ! -s "$work/err" ]
ok $? "programs run cleanly after the removal"
t dpkg -P thpalloc-preload
ok $? "dpkg -P thpalloc-preload"
said "Purging configuration files for thpalloc-preload ($V) ..."
ok $? "dpkg -P after dpkg -r: postrm says nothing (no \"already disabled\")"
snapshot "$work/etc.after"
diff "$work/etc.before" "$work/etc.after" | sed 's/^/# diff: /'
cmp -s "$work/etc.before" "$work/etc.after"
ok $? "/etc after install + remove + purge of thpalloc-preload is as before"

# A pre-existing /etc/ld.so.preload (a comment, no final newline) is kept byte for byte.
printf '# local preloads: none yet' >"$chroot_dir/etc/ld.so.preload"
chmod 644 "$chroot_dir/etc/ld.so.preload"
snapshot "$work/etc.before2"
t dpkg -i "$D_PRE"
ok $? "dpkg -i thpalloc-preload over an existing /etc/ld.so.preload"
t cat /etc/ld.so.preload
printf '# local preloads: none yet\n/usr/$LIB/libthpalloc.so.1' | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "the entry is added on a line of its own, the comment kept"
in_chroot /bin/ls / >/dev/null 2>"$work/err" && [ ! -s "$work/err" ]
ok $? "programs run cleanly"
t dpkg -P thpalloc-preload
ok $? "dpkg -P thpalloc-preload"
# prerm remove, postrm remove, postrm purge: "disabled" once (it said "already disabled"
# twice after it).
said "Removing thpalloc-preload ($V) ..." \
    'thpalloc-preload: disabled (/usr/$LIB/libthpalloc.so.1 taken out of /etc/ld.so.preload)' \
    "Purging configuration files for thpalloc-preload ($V) ..."
ok $? "dpkg -P of the installed package says \"disabled\" once and nothing more"
snapshot "$work/etc.after2"
diff "$work/etc.before2" "$work/etc.after2" | sed 's/^/# diff: /'
cmp -s "$work/etc.before2" "$work/etc.after2"
ok $? "/etc/ld.so.preload and /etc are as they were (the comment, byte for byte)"
rm -f "$chroot_dir/etc/ld.so.preload"

# A reinstall leaves the entry where it is: above a comment and another library that the
# administrator put after it (it used to be taken out and appended again, below them).
t dpkg -i "$D_PRE" >/dev/null
printf '%s\n' '# thpalloc first:' '/usr/$LIB/libthpalloc.so.1' '# then the others:' \
    '/usr/$LIB/libm.so.6' >"$chroot_dir/etc/ld.so.preload"
cp "$chroot_dir/etc/ld.so.preload" "$work/preload.mine"
t dpkg -i "$D_PRE"
ok $? "dpkg -i thpalloc-preload again (a reinstall)"
said "Preparing to unpack .../${D_PRE##*/} ..." \
    "Unpacking thpalloc-preload ($V) over ($V) ..." \
    "Setting up thpalloc-preload ($V) ..." \
    'thpalloc-preload: already enabled (/usr/$LIB/libthpalloc.so.1 in /etc/ld.so.preload)'
ok $? "the reinstall says exactly: already enabled"
cmp -s "$work/preload.mine" "$chroot_dir/etc/ld.so.preload"
ok $? "the reinstall leaves /etc/ld.so.preload byte for byte, the entry above the comment"
t dpkg -P thpalloc-preload
printf '%s\n' '# thpalloc first:' '# then the others:' '/usr/$LIB/libm.so.6' |
    cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "dpkg -P takes the entry out and keeps the rest"
rm -f "$chroot_dir/etc/ld.so.preload"

# The tool gone (a forced removal of thpalloc): the maintainer scripts still take the entry out,
# also from a line it shares with another library and a comment, which stay.
t dpkg -i "$D_PRE" >/dev/null
t dpkg --remove --force-depends thpalloc
ok $? "dpkg --remove --force-depends thpalloc (thpalloc-preload stays, its tool is gone)"
t dpkg -P thpalloc-preload
ok $? "dpkg -P thpalloc-preload without the thpalloc-preload tool (fallback)"
[ ! -e "$chroot_dir/etc/ld.so.preload" ]
ok $? "the fallback took the entry out and removed the file"
t dpkg -i "$D_TOOLS" "$D_PRE" >/dev/null
printf '%s\n' '/usr/$LIB/libm.so.6:/usr/$LIB/libthpalloc.so.1 # by hand' >"$chroot_dir/etc/ld.so.preload"
t dpkg --remove --force-depends thpalloc >/dev/null
t dpkg -P thpalloc-preload
ok $? "dpkg -P thpalloc-preload, the tool gone, the entry on a line with libm and a comment"
printf '%s\n' '/usr/$LIB/libm.so.6:# by hand' | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "the fallback took the entry out of that line and kept the rest ($(cat "$chroot_dir/etc/ld.so.preload"))"
rm -f "$chroot_dir/etc/ld.so.preload"

# A library that does not load: enable refuses and the file stays as it was.
t dpkg -i "$D_TOOLS" >/dev/null
lib=$(ls "$chroot_dir"/usr/lib/*/libthpalloc.so.1.* 2>/dev/null | head -1)
[ -n "$lib" ] && cp "$lib" "$work/lib.good" && echo junk >"$lib"
t dpkg -i "$D_PRE"
rc=$?
[ -n "$lib" ] && [ $rc -ne 0 ] && [ ! -e "$chroot_dir/etc/ld.so.preload" ]
ok $? "with a broken library, configuring thpalloc-preload fails and /etc/ld.so.preload is not written"
in_chroot /bin/true 2>"$work/err" && [ ! -s "$work/err" ]
ok $? "the system still works"
[ -n "$lib" ] && cp "$work/lib.good" "$lib"
t dpkg -P thpalloc-preload
ok $? "dpkg -P thpalloc-preload (unconfigured)"

# ---- 4b. other entries, the command's entry, upgrade (issue 47, items 1-3) -------------
# dpkg --audit must be clean after every step: a half-configured package makes every later
# apt run fail machine-wide.
# (Its standard error is left out: ld.so's errors about the stale entries tried below.)
audit_clean() { in_chroot dpkg --audit >"$work/audit" 2>/dev/null && [ ! -s "$work/audit" ] ||
    { sed 's/^/# audit: /' "$work/audit"; return 1; }; }
# t_clean COMMAND...: t COMMAND, its status in rc; 0 when it succeeded and dpkg --audit is clean.
t_clean() {
    t "$@"
    rc=$?
    [ $rc -eq 0 ] && audit_clean
}
# warned TEXT: thpalloc-preload's last output warns "/etc/ld.so.preload: TEXT".
warned() { grep -qF "thpalloc-preload: warning: /etc/ld.so.preload: $1" "$work/t.out"; }
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
E='/usr/$LIB/libthpalloc.so.1'
stale=/usr/lib/$ma/libstale-gone.so
# A stale entry (a library since removed): the package configures, warns about it, adds ours.
printf '%s\n' "$stale" >"$chroot_dir/etc/ld.so.preload"
t_clean dpkg -i "$D_PRE"
ok $? "a stale entry: dpkg -i thpalloc-preload configures (rc=$rc), dpkg --audit clean"
warned "$stale does not exist: ld.so prints an error for it in every program; take the entry out"
ok $? "the stale entry: a warning that names it and says what to do"
printf '%s\n' "$stale" "$E" | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "the stale entry kept, ours added after it"
t_clean dpkg -P thpalloc-preload && printf '%s\n' "$stale" | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "dpkg -P thpalloc-preload: ours out, the stale entry as it was, dpkg --audit clean"
# A Windows-style file (every line CRLF): the same, and ld.so's view said.
printf '/usr/lib/%s/libm.so.6\r\n# mine\r\n' "$ma" >"$chroot_dir/etc/ld.so.preload"
cp "$chroot_dir/etc/ld.so.preload" "$work/crlf.mine"
t_clean dpkg -i "$D_PRE"
ok $? "a CRLF file: dpkg -i thpalloc-preload configures (rc=$rc), dpkg --audit clean"
warned "/usr/lib/$ma/libm.so.6 ends in a carriage return (a CRLF line)"
ok $? "the CRLF entry: a warning that says what ld.so does with it"
in_chroot /bin/sh -c 'grep -c libthpalloc /proc/self/maps' >"$work/out" 2>/dev/null
[ "$(head -1 "$work/out")" -gt 0 ] 2>/dev/null
ok $? "with the CRLF file, programs run on thpalloc (our entry is a line of its own)"
# (The warning about the CRLF entry is checked in tests/pkg-preload-matrix.sh: without /sys in
# this chroot, thp-status lists only the missing THP.)
in_chroot thp-status >"$work/out" 2>/dev/null
in_chroot thp-status --prometheus >"$work/prom" 2>/dev/null
grep -q 'system-wide preload *yes: /usr/\$LIB/libthpalloc.so.1 (present)' "$work/out" &&
    grep -qx 'thp_thpalloc_preload 1' "$work/prom"
rc=$?
[ $rc -eq 0 ] || grep -e '!' -e preload "$work/out" | sed 's/^/# thp-status: /'
ok $rc "thp-status: ours is loaded beside the CRLF entry, thp_thpalloc_preload 1 ($(grep 'system-wide preload' "$work/out"))"
t_clean dpkg -P thpalloc-preload && cmp -s "$work/crlf.mine" "$chroot_dir/etc/ld.so.preload"
ok $? "dpkg -P thpalloc-preload: the CRLF file byte for byte as it was, dpkg --audit clean"
rm -f "$chroot_dir/etc/ld.so.preload"
# A NUL byte stops enable (exit 3): the package configures without the entry, saying so.
printf '/usr/lib/%s/libm.so.6\n\0\n' "$ma" >"$chroot_dir/etc/ld.so.preload"
cp "$chroot_dir/etc/ld.so.preload" "$work/nul.mine"
t_clean dpkg -i "$D_PRE" && cmp -s "$work/nul.mine" "$chroot_dir/etc/ld.so.preload" &&
    grep -q 'thpalloc is NOT preloaded' "$work/t.out"
ok $? "a NUL byte in the file: configured without the entry, said so, file as it was, audit clean (rc=$rc)"
t dpkg -P thpalloc-preload >/dev/null
rm -f "$chroot_dir/etc/ld.so.preload"
# An entry added with the command never outlives the library.
t thpalloc-preload enable >/dev/null
t_clean dpkg -r thpalloc libthpalloc1 && [ ! -e "$chroot_dir/etc/ld.so.preload" ]
ok $? "thpalloc-preload enable, then dpkg -r thpalloc libthpalloc1: the entry goes with the library (rc=$rc)"
in_chroot /bin/true 2>"$work/err" && [ ! -s "$work/err" ]
ok $? "programs run without an ld.so error afterwards"
t dpkg -i "$D_LIB" "$D_TOOLS" >/dev/null
printf '# mine\n%s\n' "$E" >"$chroot_dir/etc/ld.so.preload"
t dpkg --purge --force-depends libthpalloc1
rc=$?
[ $rc -eq 0 ] && printf '# mine\n' | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "dpkg --purge libthpalloc1 (the tool still there): the entry out, the comment kept (rc=$rc)"
t dpkg -P thpalloc >/dev/null
audit_clean
ok $? "dpkg --audit clean after the purges"
rm -f "$chroot_dir/etc/ld.so.preload"
# An upgrade (the same packages with a higher version, repacked): the entry stays where it
# is, other lines byte for byte; then remove and purge.
V2=$V+up1
mkdir -p "$chroot_dir/tmp/debs2"
for d in "$D_LIB" "$D_TOOLS" "$D_PRE"; do
    x=$work/repack/$(basename "$d" .deb)
    rm -rf "$x" && mkdir -p "$x" && dpkg-deb -R "$chroot_dir$d" "$x" &&
        sed -i "s/^Version: .*/Version: $V2/; s/(= $V)/(= $V2)/g" "$x/DEBIAN/control" &&
        dpkg-deb -b -Zgzip "$x" "$chroot_dir/tmp/debs2/$(basename "$d" | sed "s/_${V}_/_${V2}_/")" >/dev/null
done
t dpkg -i "$D_LIB" "$D_TOOLS" "$D_PRE" >/dev/null
printf '%s\n' "$stale" "$E" '# after ours' >"$chroot_dir/etc/ld.so.preload"
cp "$chroot_dir/etc/ld.so.preload" "$work/up.mine"
t_clean sh -c 'dpkg -i /tmp/debs2/*.deb' && cmp -s "$work/up.mine" "$chroot_dir/etc/ld.so.preload" &&
    [ "$(in_chroot dpkg-query -W -f '${Version}' thpalloc-preload)" = "$V2" ]
ok $? "upgrade $V -> $V2 of all three: the file byte for byte, dpkg --audit clean (rc=$rc)"
t_clean dpkg -r thpalloc-preload && printf '%s\n' "$stale" '# after ours' | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "remove after the upgrade: ours out, the rest kept, dpkg --audit clean"
t_clean dpkg -P thpalloc-preload thpalloc libthpalloc1 && printf '%s\n' "$stale" '# after ours' | cmp -s - "$chroot_dir/etc/ld.so.preload"
ok $? "purge of everything: no thpalloc entry left, dpkg --audit clean"
rm -rf "$chroot_dir/etc/ld.so.preload" "$chroot_dir/tmp/debs2"
t dpkg -i "$D_LIB" "$D_TOOLS" >/dev/null

# Everything out: /etc as in the pristine chroot.
t dpkg -P thpalloc libthpalloc1
ok $? "dpkg -P thpalloc libthpalloc1"
rm -rf "$chroot_dir/tmp/debs"
snapshot "$work/etc.final"
diff "$work/etc.pristine" "$work/etc.final" | sed 's/^/# diff: /'
cmp -s "$work/etc.pristine" "$work/etc.final"
ok $? "after purging every package /etc is as in the pristine chroot"

# ---- 5. the autopkgtests (debian/tests/control) -----------------------------------------
# autopkgtest itself is not used (it would need its own testbed): each stanza's Depends are
# installed in this chroot with apt-get (our packages from the .debs just built), and each
# test runs as autopkgtest runs it: as root with needs-root, else as an unprivileged user
# (nobody), with AUTOPKGTEST_TMP, exit 0 and, without allow-stderr, nothing on stderr.
# The stanza with breaks-testbed runs last; the chroot is thrown away afterwards.
mkdir -p "$chroot_dir/tmp/debs" && cp "${debs[@]}" "$chroot_dir/tmp/debs/"
cp -L /etc/resolv.conf "$chroot_dir/etc/resolv.conf" 2>/dev/null
in_chroot apt-get update >"$work/apt-update.log" 2>&1
rc=$?
[ $rc -ne 0 ] && tail -5 "$work/apt-update.log" | sed 's/^/# apt-get update: /'
ok $rc "apt-get update in the chroot (for the autopkgtests' dependencies)"
# One line per stanza: breaks-testbed (0/1) TAB Tests TAB Depends TAB Restrictions, the
# breaks-testbed ones last.
awk 'BEGIN { RS = ""; FS = "\n" }
    { t = d = r = ""; key = ""
      for (i = 1; i <= NF; i++) {
          l = $i; if (l ~ /^#/) continue
          if (l ~ /^[A-Za-z-]+:/) { key = tolower(substr(l, 1, index(l, ":") - 1)); l = substr(l, index(l, ":") + 1) }
          if (key == "tests") t = t " " l; else if (key == "depends") d = d " " l; else if (key == "restrictions") r = r " " l
      }
      if (t != "") printf "%d\t%s\t%s\t%s\n", (r ~ /breaks-testbed/), t, d, r }' \
    "$top/debian/tests/control" | sort -s -t "$(printf '\t')" -k1,1n >"$work/stanzas"
while IFS="$(printf '\t')" read -r _ tests depends restrictions; do
    pkgs=()
    for dep in $(echo "$depends" | tr ',' ' ' | sed 's/([^)]*)//g'); do
        case $dep in
        libthpalloc1 | libthpalloc-dev | thpalloc | thpalloc-preload) pkgs+=("$(deb "$dep")") ;;
        '(' | ')' | '>='* | '<<'* | '='*) ;;
        *) pkgs+=("$dep") ;;
        esac
    done
    in_chroot apt-get install -y --no-install-recommends "${pkgs[@]}" >"$work/apt.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && tail -10 "$work/apt.log" | sed 's/^/# apt-get: /'
    ok $rc "autopkgtest deps installed:${depends}"
    for test in $tests; do
        rm -rf "$chroot_dir/tmp/autopkgtest" && mkdir -p "$chroot_dir/tmp/autopkgtest/tmp" &&
            install -m 0755 "$top/debian/tests/$test" "$chroot_dir/tmp/autopkgtest/$test"
        user=65534:65534 as=nobody
        case $restrictions in *needs-root*) user=0:0 as=root ;; esac
        chown -R "$user" "$chroot_dir/tmp/autopkgtest/tmp"
        chroot --userspec="$user" "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            LC_ALL=C HOME=/tmp/autopkgtest AUTOPKGTEST_TMP=/tmp/autopkgtest/tmp \
            "/tmp/autopkgtest/$test" >"$work/apt-test.out" 2>"$work/apt-test.err"
        rc=$?
        sed 's/^/#   /' "$work/apt-test.out"
        sed 's/^/#   stderr: /' "$work/apt-test.err"
        good=$rc
        case $restrictions in
        *allow-stderr*) ;;
        *) [ -s "$work/apt-test.err" ] && good=1 ;;
        esac
        ok $good "autopkgtest $test as $as (rc=$rc; restrictions:${restrictions:- none})"
    done
done <"$work/stanzas"
grep -c . "$work/stanzas" | grep -qx 5
ok $? "debian/tests/control has the 5 stanzas (library-runs, tools, preload-roundtrip, build-dev, preload-system)"

# ---- 6. the README's first command in another fresh chroot (tests/pkg-first-command.sh) --
if [ "${THPALLOC_SKIP_FIRST_COMMAND:-0}" = 1 ]; then
    note "THPALLOC_SKIP_FIRST_COMMAND=1: the README's first command is not run"
else
    bash "$top/tests/pkg-first-command.sh" ${THPALLOC_FIRST_COMMAND_OPTS:-} "$tarball" >"$work/first.tap" 2>&1
    fold_tap first-command "$work/first.tap"
fi

host_preload_after=$(if [ -e /etc/ld.so.preload ]; then sha256sum </etc/ld.so.preload; stat -c %a /etc/ld.so.preload; else echo absent; fi)
[ "$host_preload_before" = "$host_preload_after" ]
ok $? "the machine's own /etc/ld.so.preload is untouched"
finish
