#!/bin/bash
# `make dist` holds the tree's shipped files (issue 12, item 12): every file git tracks (and
# every new file it does not ignore, as pkg-chroot.sh copies them) is
# in the tarball, and the tarball holds nothing else but what autoreconf generates.
# Not part of `make check` (it runs `make dist` itself); CI's package stage runs it from
# tests/pkg-chroot.sh. Usage: tests/pkg-dist.sh TARBALL (run in a git checkout).
# Output: TAP lines; exit 0 when all passed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tarball=${1:?usage: $0 TARBALL}
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# Tracked files that are not shipped: git's own files and the placeholder that keeps m4/.
git -C "$top" ls-files -co --exclude-standard | grep -vE '(^|/)\.git(ignore|attributes|keep)$' | LC_ALL=C sort >"$tmp/git"
tar tf "$tarball" | sed 's|^[^/]*/||' | grep -v '/$' | grep . | LC_ALL=C sort >"$tmp/tar"
# What autoreconf and `make dist` generate.
generated='^(Makefile\.in|aclocal\.m4|configure|build-aux/[^/]+|m4/(libtool|ltoptions|ltsugar|ltversion|lt~obsolete)\.m4)$'
LC_ALL=C comm -23 "$tmp/git" "$tmp/tar" >"$tmp/missing"
sed 's/^/# missing from the tarball: /' "$tmp/missing"
[ ! -s "$tmp/missing" ]
ok $? "$(basename "$tarball") holds every tracked file ($(wc -l <"$tmp/git") files; add new ones to EXTRA_DIST)"
LC_ALL=C comm -13 "$tmp/git" "$tmp/tar" | grep -vE "$generated" >"$tmp/extra"
sed 's/^/# in the tarball, not tracked: /' "$tmp/extra"
[ ! -s "$tmp/extra" ]
ok $? "$(basename "$tarball") holds nothing else than tracked and generated files"
done_testing
