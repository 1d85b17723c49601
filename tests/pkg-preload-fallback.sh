#!/bin/bash
# The maintainer scripts' fallback (debian/preload-fallback.sh: prerm and postrm take the
# entry out with it when the thpalloc-preload tool is gone), run by sh on scratch roots:
# for each ld.so.preload, the exit status, what it prints and the file byte for byte. The
# entry is the Debian package's, /usr/$LIB/libthpalloc.so.1. Never touches /etc.
set -u
SRC=${TESTS_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
FUNCS=$SRC/../debian/preload-fallback.sh
. "$SRC/tap.sh"
if [ ! -f "$FUNCS" ]; then
    skip_all "no debian/preload-fallback.sh (not in a dist tarball)"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-fallback.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

E='/usr/$LIB/libthpalloc.so.1'
A=/usr/lib/other/libother.so
B=/opt/lib/libb.so
NL=$'\n'
CR=$'\r'
show() { if [ -e "$1" ]; then od -An -c "$1" | tr -s ' \n' ' '; else echo '<absent>'; fi; }

# case_ NAME INITIAL EXPECTED [INITIAL_MODE]: the fallback on a root whose ld.so.preload
# is INITIAL (ABSENT: none) exits 0 and leaves EXPECTED (ABSENT: no file), mode 0644 when
# it wrote, and no temporary file. It says what it does only when the entry was there.
case_() {
    local name=$1 initial=$2 expected=$3 imode=${4:-644}
    local r=$tmp/$tap_n f out rc=0 good=0 said
    mkdir -p "$r/etc"
    f=$r/etc/ld.so.preload
    [ "$initial" = ABSENT ] || { printf '%s' "$initial" >"$f" && chmod "$imode" "$f"; }
    out=$(sh -c '. "$1" && thpalloc_preload_fallback "$2"' sh "$FUNCS" "$r" 2>&1) || rc=$?
    said="thpalloc-preload: the thpalloc-preload tool is gone: taking the entry out of $f"
    if [ "$initial" = "$expected" ]; then said=; fi
    if [ "$expected" = ABSENT ]; then
        [ ! -e "$f" ] || good=1
    else
        printf '%s' "$expected" >"$tmp/want"
        cmp -s "$f" "$tmp/want" || good=1
        [ -z "$said" ] || [ "$(stat -c %a "$f")" = 644 ] || good=1
    fi
    [ "$rc" -eq 0 ] && [ "$out" = "$said" ] || good=1
    [ -z "$(find "$r/etc" -name '.ld.so.preload*')" ] || good=1
    if [ "$good" -ne 0 ]; then
        echo "# rc=$rc output: $out"
        echo "# got:  $(show "$f")"
        [ "$expected" = ABSENT ] && echo "# want: <absent>" || echo "# want: $(show "$tmp/want")"
    fi
    ok "$good" "fallback: $name"
}

# The entry on a line with a comment or other libraries (issue: the fallback returned 0
# and left these as they were).
case_ "our entry with a comment on its line" "$E # thpalloc$NL" "# thpalloc$NL"
case_ "after another library and a colon" "/keep.so:$E$NL" "/keep.so$NL"
case_ "after another library and a blank" "/keep.so $E$NL" "/keep.so$NL"
case_ "before another library" "$E:/keep.so$NL" "/keep.so$NL"
case_ "between two libraries, blanks" "$A $E $B$NL" "$A $B$NL"
case_ "between two libraries, colons" "$A:$E:$B$NL" "$A:$B$NL"
case_ "after a tab, before a tab" "	$E	$B$NL" "	$B$NL"
case_ "another library, then a comment" "/keep.so:$E # thpalloc$NL" "/keep.so:# thpalloc$NL"
case_ "ended by a comment" "$E#x$NL$A$NL" "#x$NL$A$NL"
case_ "twice on a line with another" "$A:$E:$E$NL" "$A$NL"
# A CRLF line: the entry with its carriage return is ours (thpalloc-preload agrees).
case_ "CRLF lines" "$E$CR$NL$A$CR$NL" "$A$CR$NL"
case_ "CRLF, after another library" "$A:$E$CR$NL" "$A$NL"
# What the tool writes.
case_ "our entry only: file removed" "$E$NL" ABSENT
case_ "our entry only, no final newline" "$E" ABSENT
case_ "our entry twice, lines and blanks" "$E$NL  $E $E$NL" ABSENT
case_ "first line" "$E$NL$A$NL" "$A$NL"
case_ "last line, no final newline" "$A$NL$E" "$A$NL"
case_ "our entry and a comment line about it" "# thpalloc$NL$E$NL" "# thpalloc$NL"
case_ "0600: mode 0644 after" "$A$NL$E$NL" "$A$NL" 600
# Not ours: the file is not touched.
case_ "no file" ABSENT ABSENT
case_ "only another library" "$A$NL" "$A$NL"
case_ "our path in a comment" "# $E$NL" "# $E$NL"
case_ "our path in another library's comment" "$A # $E$NL" "$A # $E$NL"
case_ "a longer path that starts with ours" "${E}x$NL" "${E}x$NL"
case_ "a path that ends with ours" "/x$E$NL" "/x$E$NL"
case_ "our path followed by text after a carriage return" "$E${CR}x$NL" "$E${CR}x$NL"

# NUL bytes (issue 38): ld.so reads the file as a C string, so a NUL ends a name as a
# blank does; "ENTRY\0/x.so" loads ENTRY. The fallback takes it out as thpalloc-preload
# does (tests/pkg-preload-matrix.sh): the NUL stays. Specs through printf %b, @E@ the entry.
bcase() { # bcase NAME INITIAL EXPECTED
    local r=$tmp/b$tap_n f out rc=0 good=0
    mkdir -p "$r/etc"
    f=$r/etc/ld.so.preload
    printf '%b' "${2//@E@/$E}" >"$f"
    printf '%b' "${3//@E@/$E}" >"$tmp/want"
    out=$(sh -c '. "$1" && thpalloc_preload_fallback "$2"' sh "$FUNCS" "$r" 2>&1) || rc=$?
    [ "$rc" -eq 0 ] && [ "$out" = "thpalloc-preload: the thpalloc-preload tool is gone: taking the entry out of $f" ] &&
        cmp -s "$f" "$tmp/want" && [ "$(stat -c %a "$f")" = 644 ] || good=1
    [ -z "$(find "$r/etc" -name '.ld.so.preload*')" ] || good=1
    [ "$good" -eq 0 ] || echo "# rc=$rc output: $out${NL}# got:  $(show "$f")${NL}# want: $(show "$tmp/want")"
    ok "$good" "fallback: $1"
}
bcase "a NUL right after our entry, then a library" '@E@\0/x.so\n' '\0/x.so\n'
bcase "a NUL right after our entry, on its own line" '@E@\0\n/b\n' '\0\n/b\n'
bcase "after a library and a colon, before a NUL" '/a:@E@\0junk\n' '/a\0junk\n'
bcase "right after a NUL" '/a\0@E@:/b\n' '/a\0/b\n'
bcase "after a NUL line" '\0\n@E@\n' '\0\n'
bcase "twice around a NUL" '@E@\0@E@\n' '\0\n'
bcase "with its carriage return, before a NUL" '@E@\r\0x\n' '\0x\n'
bcase "before a NUL, no final newline" '/a\n@E@\0' '/a\n\0'

# thpalloc_preload_has_entry: what postrm asks before it acts.
has() { sh -c '. "$1" && thpalloc_preload_has_entry "$2"' sh "$FUNCS" "$1"; }
printf '%s\n' "$A" "$A:$E # x" >"$tmp/has"
has "$tmp/has"
ok $? "has_entry: our entry between a colon and a comment"
printf '%s\n' "$A # $E" >"$tmp/has"
! has "$tmp/has"
ok $? "has_entry: not in a comment"
printf '%s\0/x.so\n' "$E" >"$tmp/has"
has "$tmp/has"
ok $? "has_entry: our entry ended by a NUL"
! has "$tmp/none"
ok $? "has_entry: no file"

done_testing
