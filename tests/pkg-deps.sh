#!/bin/bash
# tools/dev/install-build-deps: the README's first command installs what building and `make demo`
# need and nothing else (no service such as redis-server); --tests adds what `make check`
# and CI need; every package named exists in apt's lists; a user who is not root and has no
# sudo gets one line and exit 1; a bad argument gets one line, the pointer to --help, exit 2.
# Nothing is installed: --list prints, and the root check comes before apt-get.
set -u
SRC=${TESTS_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
DEPS=$SRC/../tools/dev/install-build-deps

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-deps.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

build=$(sh "$DEPS" --list)
[ "$build" = "build-essential
autoconf
automake
libtool
pkg-config
libinih-dev
libcap-dev
python3" ]
ok $? "--list: the compiler, autotools, pkg-config, libinih-dev, libcap-dev, python3"

all=$(sh "$DEPS" --tests --list)
missing=$(comm -23 <(sort <<<"$build") <(sort <<<"$all"))
[ -z "$missing" ]
ok $? "--tests --list holds every package of --list (missing: ${missing:-none})"
grep -qx redis-server <<<"$all" && ! grep -qx redis-server <<<"$build"
ok $? "redis-server (a service) comes with --tests only"
[ "$(sort <<<"$all" | uniq -d)" = "" ]
ok $? "--tests --list names each package once"

# Every package is one apt knows (a typo would fail on a fresh machine only).
if command -v apt-cache >/dev/null && apt-cache policy build-essential 2>/dev/null | grep -q Candidate; then
    unknown=
    for p in $all; do
        apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [^(]' || unknown="$unknown $p"
    done
    [ -z "$unknown" ]
    ok $? "every package has an installation candidate (unknown:${unknown:- none})"
else
    ok 0 "# SKIP apt's package lists are not available"
fi

# Not root, no sudo: a PATH that holds only an `id` saying uid 1000.
mkdir "$tmp/bin"
printf '#!/bin/sh\necho 1000\n' >"$tmp/bin/id"
chmod +x "$tmp/bin/id"
for args in "" "--tests"; do
    # shellcheck disable=SC2086
    PATH=$tmp/bin /bin/sh "$DEPS" $args >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 1 ] && [ ! -s "$tmp/out" ] &&
        [ "$(cat "$tmp/err")" = "install-build-deps: apt-get needs root and sudo is not installed: run '$DEPS${args:+ $args}' as root" ]
    ok $? "not root, no sudo${args:+ ($args)}: one line, exit 1 (rc=$rc: $(cat "$tmp/err"))"
done

sh "$DEPS" --frobnicate >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] && [ "$(cat "$tmp/err")" = "install-build-deps: unknown argument '--frobnicate'
Try 'install-build-deps --help' for more information." ]
ok $? "a bad argument: one line and the pointer to --help, exit 2 (rc=$rc)"
out=$(sh "$DEPS" --help)
rc=$?
[ "$rc" -eq 0 ] && [ "${out%%$'\n'*}" = "usage: install-build-deps [--tests] [--list]" ]
ok $? "--help: usage on stdout, exit 0"

done_testing
