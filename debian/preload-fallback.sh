# Shell functions shared by thpalloc-preload's prerm and postrm. debian/rules substitutes
# this file for the #PRELOAD_FUNCTIONS# line of both (dh_installdeb --define), so it is
# written once but is no file of the package: postrm runs after the package's files are
# gone, and the fallback below exists for when the tool (package thpalloc) is gone too.
# tests/pkg-preload-fallback.sh runs the functions on scratch roots.
# shellcheck shell=sh

# ld.so.preload as glibc's ld.so reads it (elf/rtld.c): entries are separated by blanks,
# tabs, ':' and newlines, '#' starts a comment that runs to the end of the line, and a NUL
# byte ends the string it reads, so it ends a name too (`ENTRY\0/x.so` loads ENTRY).
# Our entry as a token (a BRE for GNU grep and sed; both are Essential), with the carriage
# return of a CRLF line, which thpalloc-preload counts as ours too.
# shellcheck disable=SC2016 # $LIB is for ld.so to expand
thpalloc_entry='/usr/$LIB/libthpalloc.so.1'
thpalloc_e='/usr/\$LIB/libthpalloc\.so\.1'"$(printf '\r')"'\{0,1\}'
thpalloc_s='[[:blank:]:]'
# A NUL for GNU sed (a shell variable cannot hold one; grep reads NULs as blanks, see below).
thpalloc_n='\x00'
# A line that holds our entry outside its comment: for grep, for sed.
thpalloc_line_re='^\([^#]*'"$thpalloc_s"'\)\{0,1\}'"$thpalloc_e"'\('"$thpalloc_s"'\|#\|$\)'
thpalloc_line_nre='^\([^#]*[[:blank:]:'"$thpalloc_n"']\)\{0,1\}'"$thpalloc_e"'\('"$thpalloc_s"'\|#\|$\|'"$thpalloc_n"'\)'

# thpalloc_preload_has_entry FILE: whether FILE holds our entry (outside comments). A NUL
# ends a name for ld.so, so grep sees it as a blank.
thpalloc_preload_has_entry() {
    [ -f "$1" ] && tr '\000' ' ' <"$1" | LC_ALL=C grep -aq -- "$thpalloc_line_re"
}

# thpalloc_preload_fallback ROOT: what `thpalloc-preload --root ROOT disable` does, for
# when the tool is gone (ROOT is "" in the maintainer scripts). In each line that holds
# the entry, the entry goes with the separator after it (else the one before it), and
# every other byte stays: other entries, comments, blanks. A line left with nothing but
# separators goes whole. Atomic, mode 0644; the file goes when nothing is left in it.
thpalloc_preload_fallback() {
    f=$1/etc/ld.so.preload
    thpalloc_preload_has_entry "$f" || return 0
    echo "thpalloc-preload: the thpalloc-preload tool is gone: taking the entry out of $f"
    tmp=$(mktemp "$1/etc/.ld.so.preload.thpalloc-XXXXXX")
    # Lines without the entry: as they are. Else: a line of nothing but entries and
    # separators goes; the others lose their entries before the comment (h: the line kept,
    # the loop: each entry with the separator after it, or, before a NUL (which stays, as
    # thpalloc-preload keeps it), with the one before it; then one at the end), get their
    # comment back (G) and are printed. A NUL before an entry ends a name as a blank does.
    LC_ALL=C sed -e '
\%'"$thpalloc_line_nre"'%!b
\%^'"$thpalloc_s"'*'"$thpalloc_e"'\('"$thpalloc_s"'\{1,\}'"$thpalloc_e"'\)*'"$thpalloc_s"'*$%d
h
s/#.*//
:a
s%^\(\(.*[[:blank:]:'"$thpalloc_n"']\)\{0,1\}\)'"$thpalloc_e$thpalloc_s"'%\1%
ta
s%^\(.*\)'"$thpalloc_s$thpalloc_e"'\('"$thpalloc_n"'\)%\1\2%
ta
s%^\(\(.*'"$thpalloc_n"'\)\{0,1\}\)'"$thpalloc_e"'\('"$thpalloc_n"'\)%\1\3%
ta
s%'"$thpalloc_s$thpalloc_e"'$%%
s%\('"$thpalloc_n"'\)'"$thpalloc_e"'$%\1%
s%^'"$thpalloc_e"'$%%
G
s/\n[^#]*//' "$f" >"$tmp" || {
        rm -f "$tmp"
        return 1
    }
    chmod 0644 "$tmp"
    if LC_ALL=C grep -aq '[^[:space:]:]' "$tmp"; then
        sync "$tmp" 2>/dev/null || true
        mv -f "$tmp" "$f"
    else
        rm -f "$tmp" "$f"
    fi
    sync "$1/etc" 2>/dev/null || true
    if thpalloc_preload_has_entry "$f"; then
        echo "thpalloc-preload: $thpalloc_entry is still in $f: take it out by hand" >&2
        return 1
    fi
    return 0
}

# thpalloc_preload_disable: the entry out of /etc/ld.so.preload, by the tool when it is
# there, else by the fallback.
thpalloc_preload_disable() {
    if command -v thpalloc-preload >/dev/null 2>&1; then
        thpalloc-preload disable
    else
        thpalloc_preload_fallback ""
    fi
}
