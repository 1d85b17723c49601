#!/bin/bash
# `make dist` holds the tree's shipped files (issue 12, item 12): every file git tracks (and
# every new file it does not ignore, as pkg-chroot.sh copies them) is
# in the tarball, and the tarball holds nothing else but what autoreconf generates; the
# benchmark log (docs/benchmarks-log.md) is the one tracked document left out (issue 48).
# Not in `make check`'s list; CI's package stage runs it from tests/pkg-chroot.sh with the
# tarball it made. Usage: tests/pkg-dist.sh [TARBALL] (run in a git checkout); without
# TARBALL it packs one itself from the configured build tree with `make distdir`, as
# pkg-chroot.sh does (`make check TESTS=tests/pkg-dist.sh`).
# Output: TAP lines; exit 0 when all passed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || skip_all "$top is not a git checkout"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
tarball=${1:-}
if [ -z "$tarball" ]; then
    build=${TESTS_BUILDDIR:+$TESTS_BUILDDIR/..}
    build=$(cd "${build:-$top}" && pwd)
    [ -f "$build/Makefile" ] || skip_all "no TARBALL and no configured build tree at $build"
    mkdir -p "$tmp/dist" &&
        make -s -C "$build" distdir distdir="$tmp/dist/thpalloc" >"$tmp/dist.log" 2>&1 &&
        tar -C "$tmp/dist" -czf "$tmp/thpalloc.tar.gz" thpalloc
    rc=$?
    [ $rc -ne 0 ] && tail -20 "$tmp/dist.log" | sed 's/^/# make distdir: /'
    ok $rc "make distdir from $build, packed as make dist packs it"
    [ $rc -eq 0 ] || done_testing
    tarball=$tmp/thpalloc.tar.gz
fi
# Tracked files that are not shipped: git's own files, the placeholder that keeps m4/, and
# the benchmark log (its history stays in the repository; Makefile.am's EXTRA_DIST).
unshipped='^docs/benchmarks-log\.md$'
git -C "$top" ls-files -co --exclude-standard | grep -vE '(^|/)\.git(ignore|attributes|keep)$' |
    LC_ALL=C sort >"$tmp/tracked"
grep -vE "$unshipped" "$tmp/tracked" >"$tmp/git"
tar tf "$tarball" | sed 's|^[^/]*/||' | grep -v '/$' | grep . | LC_ALL=C sort >"$tmp/tar"
grep -qxF docs/benchmarks-log.md "$tmp/tracked"
ok $? "docs/benchmarks-log.md is tracked"
! grep -qxF docs/benchmarks-log.md "$tmp/tar"
ok $? "$(basename "$tarball") leaves out docs/benchmarks-log.md"
# The rest of docs/ ships: the current results and the design the README and man pages cite.
grep '^docs/' "$tmp/git" >"$tmp/docs"
LC_ALL=C comm -23 "$tmp/docs" "$tmp/tar" >"$tmp/docs-missing"
sed 's/^/# docs file missing from the tarball: /' "$tmp/docs-missing"
[ -s "$tmp/docs" ] && [ ! -s "$tmp/docs-missing" ] && grep -qxF docs/benchmarks.md "$tmp/tar" &&
    grep -qxF docs/design.md "$tmp/tar"
ok $? "$(basename "$tarball") holds the rest of docs/ ($(tr '\n' ' ' <"$tmp/docs"| sed 's/ $//'))"
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
