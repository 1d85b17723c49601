#!/bin/bash
# The man pages render without a warning: groff -man -ww -z prints nothing, man(1) with
# --warnings prints nothing at 80 columns in UTF-8, and lexgrog finds a whatis line (what
# mandb and lintian read from NAME).
set -u
BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
MAN=$BUILD/../man # made from man/*.in by the build (man/man.am)
pages=()
for p in "$MAN"/*.[1-8]; do [ -f "$p" ] && pages+=("$p"); done
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
if [ ${#pages[@]} -eq 0 ] || ! command -v groff >/dev/null 2>&1; then
    skip_all "no man pages or no groff"
fi
for p in thpalloc.7 thpalloc.conf.5 thpalloc.3 thpalloc-run.1 thpalloc-preload.8; do
    [ -f "$MAN/$p" ]
    ok $? "man/$p exists"
done
# One date and one version on every page: both come from configure.ac (man/man.am).
dates=$(for p in "${pages[@]}"; do sed -n '1s/^\.TH [^ ]* [0-9] \([^ ]*\) .*/\1/p' "$p"; done | sort -u)
[ "$(wc -l <<<"$dates")" -eq 1 ] && [[ $dates =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]]
ok $? "every page has the same date, YYYY-MM-DD ($(echo $dates))"
if [ -n "${THPALLOC_VERSION-}" ]; then
    bad=$(for p in "${pages[@]}"; do
        head -1 "$p" | grep -qF " \"thpalloc $THPALLOC_VERSION\" \"thpalloc\"" || echo "${p##*/}"
    done)
    [ -z "$bad" ]
    ok $? "every page says thpalloc $THPALLOC_VERSION (not: ${bad:-none})"
fi
! grep -l '@[A-Z_]*@' "${pages[@]}" >/dev/null
ok $? "no @NAME@ left unsubstituted"
for p in "${pages[@]}"; do
    name=${p##*/}
    out=$(LC_ALL=C.UTF-8 groff -man -ww -z "$p" 2>&1)
    [ -z "$out" ]
    ok $? "groff -man -ww -z $name: no warning"
    [ -z "$out" ] || echo "$out" | sed 's/^/# /'
    if command -v man >/dev/null 2>&1; then
        out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l -E UTF-8 "$p" 2>&1 >/dev/null)
        [ -z "$out" ]
        ok $? "man --warnings -l $name: no warning"
        [ -z "$out" ] || echo "$out" | sed 's/^/# /'
        # Nothing wider than the 80 columns asked for (overlong EX lines overflow).
        wide=$(LC_ALL=C MANWIDTH=80 man -l -E ascii "$p" 2>/dev/null |
            awk 'length($0) > 80' | head -3)
        [ -z "$wide" ]
        ok $? "$name fits in 80 columns"
        [ -z "$wide" ] || echo "$wide" | sed 's/^/# /'
    fi
    if command -v lexgrog >/dev/null 2>&1; then
        lexgrog "$p" >/dev/null 2>&1
        ok $? "lexgrog $name: a whatis entry"
    fi
done
# thpalloc(7) at 80 columns: MODES without the gaps of a line stretched around a word too
# long for it (four blanks or more between two words), and an EXAMPLES section.
if command -v man >/dev/null 2>&1; then
    text=$(LC_ALL=C MANWIDTH=80 man -l -E ascii "$MAN/thpalloc.7" 2>/dev/null)
    gaps=$(sed -n '/^MODES/,/^[A-Z]/p' <<<"$text" | grep -E '[^ ]    +[^ ]')
    [ -z "$gaps" ]
    ok $? "thpalloc.7: MODES at 80 columns has no stretched line${gaps:+ ($gaps)}"
    grep -q '^EXAMPLES$' <<<"$text"
    ok $? "thpalloc.7 has EXAMPLES"
    # thpalloc(3) is in libthpalloc-dev, not beside them: the pages that cite it say so.
    for p in thpalloc.7 thpalloc.conf.5; do
        LC_ALL=C MANWIDTH=200 man -l -E ascii "$MAN/$p" 2>/dev/null | sed -n '/^SEE ALSO/,$p' |
            tr -s ' \n' ' ' | grep -q 'thpalloc(3) (the extension API, in the libthpalloc-dev package)'
        ok $? "$p: SEE ALSO says thpalloc(3) is in libthpalloc-dev"
    done
fi
done_testing
