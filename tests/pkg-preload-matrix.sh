#!/bin/bash
# thpalloc-preload on scratch roots (mktemp -d): the edge-case matrix of issue 5. Each case
# writes DIR/etc/ld.so.preload, runs enable / disable / status with --root DIR and compares
# the file byte for byte (and its mode) with what it must be. Never touches /etc.
set -u

BUILD=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
TOOL=${THPALLOC_PRELOAD_TOOL:-$BUILD/../tools/thpalloc-preload/thpalloc-preload}
LIB=${THPALLOC_LIB:-$BUILD/../lib/.libs/libthpalloc.so.1}

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"

if [ ! -x "$TOOL" ] || [ ! -f "$LIB" ]; then
    skip_all "thpalloc-preload ($TOOL) or the library ($LIB) is not built"
fi
P=${TOOL##*/} # the name its messages start with
E=$("$TOOL" --help | sed -n 's/^entry: //p')
if [ -z "$E" ]; then
    echo "1..1"
    echo "not ok 1 - thpalloc-preload --help names its entry"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thpalloc-preload.XXXXXX") || exit 99
# --host-test runs the library as nobody (65534) when root runs this: it must reach it.
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
cp "$LIB" "$tmp/libthpalloc.so.1" && LIB=$tmp/libthpalloc.so.1

# A scratch root with the library where the entry points (inside the root). The entry may
# hold $LIB, which ld.so expands (lib/x86_64-linux-gnu on Debian amd64, lib64 elsewhere):
# the library goes to every directory $LIB can name.
ma=$(${CC:-cc} -print-multiarch 2>/dev/null || gcc -print-multiarch 2>/dev/null || true)
place() { # place ROOT FILE: FILE where the entry points inside ROOT
    local d p
    case $E in
    *'$LIB'*)
        for d in ${ma:+lib/$ma} lib64 lib lib32 libx32; do
            p=$1${E%%\$LIB*}$d${E#*\$LIB}
            mkdir -p "$(dirname "$p")" && cp "$2" "$p"
        done
        ;;
    *) mkdir -p "$1$(dirname "$E")" && cp "$2" "$1$E" ;;
    esac
}
mkroot() { # mkroot NAME [nolib]: prints the new root
    local r=$tmp/$1
    mkdir -p "$r/etc"
    [ "${2:-}" = nolib ] || place "$r" "$LIB"
    echo "$r"
}
# The library as ld.so finds it under ROOT ($LIB: the multiarch directory, as on Debian).
loaded() { if [ -n "$ma" ]; then echo "$1${E/\$LIB/lib/$ma}"; else echo "$1$E"; fi; }

# With --root, enable runs DIR's library only in a chroot of DIR, or not at all (issue 38):
# the file-editing cases below try the test's own library on this system, as they always
# did (--host-test); the cases at the end check the default.
HT=--host-test

# The file's content as a printable string, and its mode.
show() { if [ -e "$1" ]; then od -An -c "$1" | tr -s ' \n' ' '; else echo '<absent>'; fi; }
mode() { stat -c %a "$1" 2>/dev/null || echo absent; }

# case_ VERB NAME INITIAL EXPECTED [INITIAL_MODE]: with INITIAL as the file's content
# (the word ABSENT: no file), `thpalloc-preload VERB` must exit 0 and leave EXPECTED
# (ABSENT: no file) with mode 0644; no temporary file may be left behind.
R=
case_() {
    local verb=$1 name=$2 initial=$3 expected=$4 imode=${5:-644}
    R=$(mkroot "$verb-$tap_n")
    local f=$R/etc/ld.so.preload
    if [ "$initial" != ABSENT ]; then printf '%s' "$initial" >"$f" && chmod "$imode" "$f"; fi
    local out rc=0
    out=$(umask 077 && "$TOOL" --root "$R" $HT "$verb" 2>&1) || rc=$?
    local want good=0
    if [ "$expected" = ABSENT ]; then
        [ ! -e "$f" ] || good=1
    else
        want=$tmp/want && printf '%s' "$expected" >"$want"
        cmp -s "$f" "$want" || good=1
        [ "$(mode "$f")" = 644 ] || good=1
    fi
    [ "$rc" -eq 0 ] || good=1
    [ -z "$(find "$R/etc" -name '.ld.so.preload*')" ] || good=1
    if [ "$good" -ne 0 ]; then
        echo "# $verb: rc=$rc output: $out"
        echo "# got:  $(show "$f") mode $(mode "$f")"
        [ "$expected" = ABSENT ] && echo "# want: <absent>" || echo "# want: $(show "$want") mode 644"
    fi
    ok "$good" "$verb: $name"
}

# status_ NAME INITIAL WANT: `status` prints WANT (enabled / disabled) and changes nothing.
status_() {
    local r f out rc=0 before after good=0
    r=$(mkroot "status-$tap_n" nolib)
    f=$r/etc/ld.so.preload
    [ "$2" = ABSENT ] || printf '%s' "$2" >"$f"
    before=$(show "$f")
    out=$("$TOOL" --root "$r" status 2>&1) || rc=$?
    after=$(show "$f")
    [ "$rc" -eq 0 ] && [ "$out" = "$3" ] && [ "$before" = "$after" ] || good=1
    [ "$good" -eq 0 ] || echo "# rc=$rc output: $out"
    ok "$good" "status: $1 -> $3"
}

A=/usr/lib/other/libother.so
B=/opt/lib/libb.so
NL=$'\n'

echo "# entry: $E"

# --- status: glibc's parsing ---
status_ "no file" ABSENT disabled
status_ "empty file" "" disabled
status_ "our entry only" "$E$NL" enabled
status_ "our entry, no final newline" "$E" enabled
status_ "only another entry" "$A$NL" disabled
status_ "a comment that contains our path" "# $E$NL" disabled
status_ "our path after an entry's comment" "$A # $E$NL" disabled
status_ "our entry ended by a comment" "$E#comment$NL" enabled
status_ "our entry between colons" "$A:$E:$B$NL" enabled
status_ "our entry after a tab" "$A	$E$NL" enabled
status_ "a longer path that starts with ours" "${E}x$NL" disabled
status_ "a path that ends with ours" "/x$E$NL" disabled

# --- enable ---
case_ enable "no file" ABSENT "$E$NL"
case_ enable "empty file" "" "$E$NL"
case_ enable "our entry only: unchanged" "$E$NL" "$E$NL"
case_ enable "only another entry" "$A$NL" "$A$NL$E$NL"
case_ enable "no final newline: kept missing" "$A" "$A$NL$E"
case_ enable "trailing space" "$A $NL" "$A $NL$E$NL"
case_ enable "trailing tab, no final newline" "$A	" "$A	$NL$E"
case_ enable "a comment that contains our path" "# $E$NL" "# $E$NL$E$NL"
case_ enable "a final comment without newline" "$A # $E" "$A # $E$NL$E"
case_ enable "duplicates of ours: one kept" "$E$NL$A$NL$E$NL" "$E$NL$A$NL"
case_ enable "duplicates on one line" "$E $E$NL" "$E$NL"
case_ enable "0600 file: mode 0644 after" "$A$NL" "$A$NL$E$NL" 600
case_ enable "0600 file with our entry: mode repaired" "$E$NL" "$E$NL" 600
case_ enable "0640 file" "$A$NL" "$A$NL$E$NL" 640
case_ enable "blank lines and comments kept" "$NL# local$NL$NL$A$NL  $NL" "$NL# local$NL$NL$A$NL  $NL$E$NL"

# enable twice: the second run changes nothing (not even the inode).
r=$(mkroot twice-enable)
printf '%s\n' "$A" >"$r/etc/ld.so.preload"
"$TOOL" --root "$r" enable >/dev/null 2>&1
ino1=$(stat -c %i "$r/etc/ld.so.preload")
out=$("$TOOL" --root "$r" enable 2>&1)
rc=$?
ino2=$(stat -c %i "$r/etc/ld.so.preload")
printf '%s\n%s\n' "$A" "$E" >"$tmp/want"
[ "$rc" -eq 0 ] && [ "$ino1" = "$ino2" ] && cmp -s "$tmp/want" "$r/etc/ld.so.preload" \
    && [ "$("$TOOL" --root "$r" status)" = enabled ]
ok $? "enable twice: one entry, second run a no-op ($out)"

# --- disable ---
case_ disable "no file" ABSENT ABSENT
case_ disable "empty file: untouched" "" ""
case_ disable "our entry only: file removed" "$E$NL" ABSENT
case_ disable "our entry only, no final newline: file removed" "$E" ABSENT
case_ disable "our entry with trailing space" "$E $NL" ABSENT
case_ disable "our entry with trailing tab" "$E	$NL" ABSENT
case_ disable "our entry, indented, then blank lines" "  $E$NL$NL" ABSENT
case_ disable "only another entry: untouched" "$A$NL" "$A$NL"
case_ disable "first" "$E$NL$A$NL$B$NL" "$A$NL$B$NL"
case_ disable "middle" "$A$NL$E$NL$B$NL" "$A$NL$B$NL"
case_ disable "last" "$A$NL$B$NL$E$NL" "$A$NL$B$NL"
case_ disable "last, no final newline" "$A$NL$E" "$A"
case_ disable "first on a line" "$E $A $B$NL" "$A $B$NL"
case_ disable "middle of a line" "$A $E $B$NL" "$A $B$NL"
case_ disable "last on a line" "$A $B $E$NL" "$A $B$NL"
case_ disable "between colons" "$A:$E:$B$NL" "$A:$B$NL"
case_ disable "after a tab, no final newline" "$A	$E" "$A"
case_ disable "duplicates of ours" "$E$NL$A$NL$E$NL" "$A$NL"
case_ disable "duplicates only" "$E$NL$E $E$NL" ABSENT
case_ disable "a comment that contains our path: untouched" "# $E$NL" "# $E$NL"
case_ disable "our entry and a comment about it" "# thpalloc$NL$E$NL" "# thpalloc$NL"
case_ disable "our entry with a comment on its line" "$E # thpalloc$NL" "# thpalloc$NL"
case_ disable "our entry ended by a comment" "$E#x$NL$A$NL" "#x$NL$A$NL"
case_ disable "trailing blanks of other lines kept" "$A $NL$E$NL$B	$NL" "$A $NL$B	$NL"
case_ disable "0600 file: mode 0644 after" "$A$NL$E$NL" "$A$NL" 600
# Without our entry, disable writes nothing: a 0600 mode stays (not ours to change).
r=$(mkroot keep-mode)
printf '%s\n' "$A" >"$r/etc/ld.so.preload" && chmod 600 "$r/etc/ld.so.preload"
"$TOOL" --root "$r" disable >/dev/null 2>&1
[ "$(mode "$r/etc/ld.so.preload")" = 600 ]
ok $? "disable without our entry does not write (mode 0600 stays)"

# disable twice.
r=$(mkroot twice-disable)
printf '%s\n%s\n' "$A" "$E" >"$r/etc/ld.so.preload"
"$TOOL" --root "$r" disable >/dev/null 2>&1
rc1=$?
"$TOOL" --root "$r" disable >/dev/null 2>&1
rc2=$?
printf '%s\n' "$A" >"$tmp/want"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && cmp -s "$tmp/want" "$r/etc/ld.so.preload" \
    && [ "$("$TOOL" --root "$r" status)" = disabled ]
ok $? "disable twice: second run a no-op"

# Round trips: enable then disable gives back the original bytes.
for init in "$A$NL" "$A" "$A$NL# c" "# only a comment$NL" "$A	" "$NL$NL$A:$B$NL"; do
    r=$(mkroot "round-$tap_n")
    printf '%s' "$init" >"$r/etc/ld.so.preload"
    cp "$r/etc/ld.so.preload" "$tmp/orig"
    "$TOOL" --root "$r" enable >/dev/null 2>&1 && "$TOOL" --root "$r" disable >/dev/null 2>&1 \
        && cmp -s "$tmp/orig" "$r/etc/ld.so.preload"
    ok $? "enable + disable gives back: $(show "$tmp/orig")"
done
r=$(mkroot round-none)
"$TOOL" --root "$r" enable >/dev/null 2>&1 && "$TOOL" --root "$r" disable >/dev/null 2>&1 \
    && [ ! -e "$r/etc/ld.so.preload" ]
ok $? "enable + disable with no file: no file"

# --- NUL bytes and CRLF lines ---
# ld.so reads the file as a C string: nothing after a NUL (outside a comment), except the
# last word when the file does not end in a separator. '\r' is no separator: a CRLF line's
# entry names a file that ends in '\r', which ld.so cannot load.
# bytes SPEC: SPEC through printf %b (\0, \r, \n) with @E@ for the entry, @J@ and @O@ for
# the libraries J and O (see "behind another allocator").
J=/usr/lib/libjemalloc.so.2
bytes() { local t=${1//@E@/$E}; t=${t//@J@/$J}; printf '%b' "${t//@O@//usr/lib/libother.so}"; }
# fill TEXT FILE: TEXT with @P@, @E@, @F@ for the program, the entry and FILE; @W@ and @WB@:
# the warning that J (as a path, as a bare name) owns malloc.
W_DORMANT="@P@: warning: @F@: @J@ comes before @E@ and owns malloc: thpalloc is preloaded but dormant in every process (thpalloc-preload enable --first puts it first)"
fill() {
    local t=${1//@WB@/${W_DORMANT//@J@/libjemalloc.so.2}}
    t=${t//@W@/${W_DORMANT//@J@/$J}}
    t=${t//@P@/$P}
    t=${t//@E@/$E}
    printf '%b' "${t//@F@/$2}"
}
# xcase VERB NAME INITIAL EXPECTED RC STDOUT STDERR: with the bytes INITIAL (a spec, as for
# bytes; ABSENT: no file), `VERB` (words) exits RC, prints exactly STDOUT and STDERR (fill)
# and leaves the bytes EXPECTED (SAME: as they were; ABSENT: no file), mode 0644.
xcase() {
    local verb=$1 name=$2 r f rc=0 good=0
    r=$(mkroot "x-$tap_n")
    if [ -f "$tmp/libjemalloc.so.2" ]; then
        mkdir -p "$r/usr/lib" && cp "$tmp/libjemalloc.so.2" "$tmp/libother.so" "$r/usr/lib/"
    fi
    f=$r/etc/ld.so.preload
    [ "$3" = ABSENT ] || { bytes "$3" >"$f" && chmod 644 "$f"; }
    if [ "$4" = SAME ]; then cp "$f" "$tmp/want"; else bytes "$4" >"$tmp/want"; fi
    "$TOOL" --root "$r" $HT $verb >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$4" = ABSENT ]; then [ ! -e "$f" ] || good=1; else
        cmp -s "$f" "$tmp/want" && [ "$(mode "$f")" = 644 ] || good=1
    fi
    [ "$rc" -eq "$5" ] && [ "$(cat "$tmp/out")" = "$(fill "$6" "$f")" ] &&
        [ "$(cat "$tmp/err")" = "$(fill "$7" "$f")" ] || good=1
    if [ "$good" -ne 0 ]; then
        echo "# rc=$rc stdout: $(cat "$tmp/out") stderr: $(cat "$tmp/err")"
        echo "# got: $(show "$f") want: $(show "$tmp/want")"
    fi
    ok "$good" "$verb: $name"
}
W_NUL='@P@: warning: @F@: @E@ comes after a NUL byte (offset 0), where ld.so stops reading: it is not loaded'
W_CR='@P@: warning: @F@: @E@ ends in a carriage return (a CRLF line): ld.so cannot load it and says so in every program; thpalloc-preload enable repairs it'
# Other entries that ld.so cannot load (issue 47, items 1 and 3): status and enable name a
# CRLF line's entry, enable also an entry whose library does not exist; neither stops enable.
w_ocr() { printf '%s' "@P@: warning: @F@: $1 ${2:-ends in a carriage return (a CRLF line)}: ld.so looks for a file of that name, loads nothing for it and prints an error in every program; convert the file to LF line ends"; }
w_gone() { printf '%s' "@P@: warning: @F@: $1 does not exist: ld.so prints an error for it in every program; take the entry out"; }
xcase status "our entry after a NUL: not loaded" '\0\n@E@\n' SAME 1 disabled "$W_NUL"
xcase status "a NUL after our entry" '@E@\n\0\n' SAME 0 enabled ''
xcase status "a NUL right after our entry" '@E@\0junk\n' SAME 0 enabled ''
xcase status "after a NUL but the last word, no final newline (ld.so reads it)" '\0\n@E@' SAME 0 enabled ''
xcase status "a NUL in a comment (ld.so blanks comments first)" '# a\0b\n@E@\n' SAME 0 enabled ''
xcase status "a CRLF line" '/a\r\n@E@\r\n' SAME 1 disabled "$W_CR\n$(w_ocr /a)"
xcase status "our entry, and a copy on a CRLF line" '@E@\n@E@\r\n' SAME 1 enabled "$W_CR"
xcase status "our path and more after a carriage return: not ours" '@E@\rx\n' SAME 1 disabled \
    "$(w_ocr @E@ 'and more after a carriage return are one entry')"
xcase enable "a CRLF line: repaired where it is" '/a\r\n@E@\r\n/b\r\n' '/a\r\n@E@\n/b\r\n' 0 \
    '@P@: enabled (carriage return after @E@ in @F@ removed)' "$(w_ocr /a)\n$(w_ocr /b)"
xcase enable "a CRLF line and a copy after a NUL" '@E@\r\n\0\n@E@\n' '@E@\n\0\n' 0 \
    '@P@: enabled (carriage return after @E@ in @F@ removed)' ''
xcase enable "a NUL: refused (exit 3: the file, not the library)" '/a\n\0\n' SAME 3 '' \
    '@P@: refusing to enable: @F@ has a NUL byte (offset 3): ld.so reads no entry after it; take it out by hand\n@P@: @F@ left as it was'
xcase enable "our entry after a NUL: refused (exit 3)" '\0\n@E@\n' SAME 3 '' \
    '@P@: refusing to enable: @F@ has a NUL byte (offset 0): ld.so reads no entry after it; take it out by hand\n@P@: @F@ left as it was'
xcase enable "a NUL after our entry: nothing to do" '@E@\n\0\n' SAME 0 '@P@: already enabled (@E@ in @F@)' ''
xcase enable "our entry and a CRLF copy: the copy goes" '@E@\n/a\n@E@\r\n' '@E@\n/a\n' 0 \
    '@P@: already enabled (@E@ in @F@); duplicates removed' "$(w_gone /a)"
xcase disable "a CRLF line" '@E@\r\n/a\r\n' '/a\r\n' 0 '@P@: disabled (@E@ taken out of @F@)' ''
xcase disable "a CRLF line only" '@E@\r\n' ABSENT 0 \
    '@P@: disabled (@F@ removed: the entry was all it held)' ''
xcase disable "our entry after a NUL: the NUL stays" '\0\n@E@\n' '\0\n' 0 \
    '@P@: disabled (@E@ taken out of @F@)' ''
xcase disable "a NUL right after our entry: the NUL stays" '@E@\0\n/b\n' '\0\n/b\n' 0 \
    '@P@: disabled (@E@ taken out of @F@)' ''

# --- behind another allocator (issue 34) ---
# ld.so binds every program's malloc to the first preloaded library that defines it: our
# entry after such a library is dormant in every process. In each root: J, a library that
# defines malloc (as libjemalloc.so.2 does), and O, one that does not.
if command -v "${CC:-cc}" >/dev/null 2>&1 &&
    printf '%s\n' '#include <stddef.h>' 'void *malloc(size_t n) { (void)n; return 0; }' >"$tmp/jm.c" &&
    echo 'int other_function(void) { return 1; }' >"$tmp/other.c" &&
    "${CC:-cc}" -shared -fPIC -o "$tmp/libjemalloc.so.2" "$tmp/jm.c" 2>/dev/null &&
    "${CC:-cc}" -shared -fPIC -o "$tmp/libother.so" "$tmp/other.c" 2>/dev/null; then
    xcase status "after an allocator: dormant" '@J@\n@E@\n' SAME 1 dormant '@W@'
    xcase status "after an allocator, bare name (searched as ld.so does)" 'libjemalloc.so.2:@E@\n' SAME 1 dormant '@WB@'
    xcase status "before an allocator" '@E@\n@J@\n' SAME 0 enabled ''
    xcase status "after a library without malloc" '@O@ @E@\n' SAME 0 enabled ''
    xcase status "after an allocator's comment" '# @J@\n@E@\n' SAME 0 enabled ''
    xcase enable "after an allocator: added, and said dormant" '@J@\n' '@J@\n@E@\n' 0 \
        '@P@: enabled (@E@ added to @F@)' '@W@'
    xcase enable "already after an allocator: said dormant" '@J@\n@E@\n' SAME 0 \
        '@P@: already enabled (@E@ in @F@)' '@W@'
    xcase "enable --first" "--first: added at the top" '# local\n@J@\n' '@E@\n# local\n@J@\n' 0 \
        '@P@: enabled (@E@ added first to @F@)' ''
    xcase "enable --first" "--first: moved to the top, the line it left goes" '@J@ @O@\n@E@\n' '@E@\n@J@ @O@\n' 0 \
        '@P@: enabled (@E@ moved to the top of @F@)' ''
    xcase "enable --first" "--first: out of a line it shares" '@J@:@E@:@O@\n' '@E@\n@J@:@O@\n' 0 \
        '@P@: enabled (@E@ moved to the top of @F@)' ''
    xcase "enable --first" "--first: first already" '@E@\n@J@\n' SAME 0 '@P@: already enabled (@E@ in @F@)' ''
    xcase "enable --first" "--first: no file" ABSENT '@E@\n' 0 '@P@: enabled (@E@ added first to @F@)' ''
    xcase "enable --first" "--first: a NUL is no reason to refuse (ld.so reads the first line)" \
        '/a\n\0\n' '@E@\n/a\n\0\n' 0 '@P@: enabled (@E@ added first to @F@)' "$(w_gone /a)"
    xcase "enable --first" "--first: a CRLF copy goes" '@J@\r\n@E@\r\n' '@E@\n@J@\r\n' 0 \
        '@P@: enabled (@E@ added first to @F@)' "$(w_ocr "$J")"
    # A hostile ELF before our entry, 65 times: a sparse 64 MiB file whose 4096 section
    # headers claim 4 MiB symbol and string tables. It is not claimed to own malloc (its
    # tables hold no malloc), and the reading is bounded (64 entries, 4 MiB a table).
    if command -v python3 >/dev/null; then
        r=$(mkroot d-hostile)
        python3 -c '
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.truncate(64 << 20)
    f.write(b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) +
            struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 4096, 0, 64, 56, 0, 64, 4096, 0))
    for i in range(4096):
        f.seek(4096 + 64 * i)
        if i % 2 == 0:
            f.write(struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, 8 << 20, (4 << 20) - 24, i + 1, 0, 8, 24))
        else:
            f.write(struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, 16 << 20, (4 << 20) - 1, 0, 0, 1, 0))
' "$r/h.so"
        { for _ in $(seq 65); do printf '/h.so '; done; printf '%s\n' "$E"; } >"$r/etc/ld.so.preload"
        out=$(timeout 20 "$TOOL" --root "$r" status 2>&1)
        is "$out" enabled "a hostile ELF before our entry, 65 times: not an owner, bounded work"
    else
        skip "a hostile ELF before our entry" "no python3"
    fi
    r=$(mkroot d-status)
    printf '%s\n%s\n' "$J" "$E" >"$r/etc/ld.so.preload"
    mkdir -p "$r/usr/lib" && cp "$tmp/libjemalloc.so.2" "$r/usr/lib/"
    "$TOOL" --root "$r" --first enable >/dev/null 2>&1 && [ "$("$TOOL" --root "$r" status 2>&1)" = enabled ]
    ok $? "after enable --first: status says enabled, nothing else"
else
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do ok 0 "behind another allocator # SKIP cannot build test libraries"; done
fi

# What ld.so itself does with such files, in a private mount namespace whose /etc holds
# only the file, our entry replaced by the library's path: status must agree.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    mkdir -p "$tmp/ns-etc"
    for spec in '@E@\n' '@E@\r\n' '\0\n@E@\n' '\0\n@E@' '@E@\0junk\n' '# a\0b\n@E@\n' \
        '/x\0y\n@E@' '@E@\n@E@\r\n'; do
        r=$(mkroot "ldso-$tap_n" nolib)
        bytes "$spec" >"$r/etc/ld.so.preload"
        st=$("$TOOL" --root "$r" status 2>/dev/null)
        printf '%b' "${spec//@E@/$LIB}" >"$tmp/ns-etc/ld.so.preload"
        if unshare -m --propagation private sh -c \
            'mount --bind "$1" /etc && exec grep -q libthpalloc /proc/self/maps' \
            sh "$tmp/ns-etc" 2>/dev/null; then ld=enabled; else ld=disabled; fi
        [ "$st" = "$ld" ]
        ok $? "status says $st, ld.so: $ld for $(printf '%s' "$spec")"
    done
else
    ok 0 "status against ld.so # SKIP needs root and unshare -m"
fi

# The CRLF repair on the system's own file (issue 34): every program of the smoke test
# reads /etc/ld.so.preload too, and ld.so complains there about the entry with its '\r';
# enable must repair the line all the same, not refuse over that complaint. In a private
# mount namespace: /etc is a scratch directory, the entry's directory holds the library.
libdir=$(dirname "$E")
if [ "$(id -u)" = 0 ] && [[ $E != *'$LIB'* ]] && [ -d "$libdir" ] && unshare -m true 2>/dev/null; then
    mkdir -p "$tmp/cr-etc" "$tmp/cr-lib"
    cp "$LIB" "$tmp/cr-lib/${E##*/}"
    printf '# local\r\n%s\r\n' "$E" >"$tmp/cr-etc/ld.so.preload"
    unshare -m --propagation private sh -c \
        'mount --bind "$2" "$3" && mount --bind "$1" /etc && exec "$4" enable' \
        sh "$tmp/cr-etc" "$tmp/cr-lib" "$libdir" "$TOOL" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    printf '# local\r\n%s\n' "$E" >"$tmp/want"
    # The tool's own start reads the broken line too: ld.so says so, once, and that is all.
    want_err="ERROR: ld.so: object '$E"$'\r'"' from /etc/ld.so.preload cannot be preloaded (cannot open shared object file): ignored."
    [ "$rc" -eq 0 ] && [ "$(cat "$tmp/err")" = "$want_err" ] &&
        [ "$(cat "$tmp/out")" = "$P: enabled (carriage return after $E in /etc/ld.so.preload removed)" ] &&
        cmp -s "$tmp/want" "$tmp/cr-etc/ld.so.preload"
    ok $? "enable repairs a CRLF line of the system's own file (rc=$rc: $(tr -d '\r' <"$tmp/err"))"
else
    ok 0 "enable repairs the system's CRLF line # SKIP needs root, unshare -m and an entry without \$LIB"
fi

# --- refusal: a library that does not load leaves the file untouched ---
# refuse NAME [WHY]: $r prepared; enable must fail, say why (exactly "refusing to enable:
# WHY" and that the file is left as it was, when WHY is given), and not touch the file.
refuse() {
    local f=$r/etc/ld.so.preload before after out rc=0 good=0
    printf '%s\n' "$A" >"$f" && chmod 600 "$f"
    before=$(stat -c '%i %a %s %Y' "$f")$(show "$f")
    out=$("$TOOL" --root "$r" $HT enable 2>&1) || rc=$?
    after=$(stat -c '%i %a %s %Y' "$f")$(show "$f")
    [ "$rc" -ne 0 ] && [ "$before" = "$after" ] && [ -n "$out" ] \
        && [ -z "$(find "$r/etc" -name '.ld.so.preload*')" ] || good=1
    [ $# -lt 2 ] || [ "$out" = "$P: refusing to enable: $2$NL$P: $f left as it was" ] || good=1
    echo "# $(echo "$out" | head -1)"
    ok "$good" "enable refused: $1 (rc=$rc, file untouched)"
}
r=$(mkroot refuse-missing nolib)
refuse "library missing"
r=$(mkroot refuse-junk nolib)
echo "not an ELF file" >"$tmp/junk.so"
place "$r" "$tmp/junk.so"
refuse "not a shared object"
# Libraries that load and run /bin/true but are not thpalloc: libm under thpalloc's name,
# and one that has thpalloc_active() but returns 0 (its malloc is not the program's).
libm=$(${CC:-cc} -print-file-name=libm.so.6 2>/dev/null)
if [ -f "$libm" ]; then
    r=$(mkroot refuse-libm nolib)
    place "$r" "$libm"
    refuse "libm.so.6 renamed" "$(loaded "$r") does not export thpalloc_active: it is not thpalloc"
else
    ok 0 "# SKIP no libm.so.6 from ${CC:-cc} -print-file-name"
fi
# With --root, a library is read before anything runs it: it must define malloc and free
# as thpalloc does. The test libraries hand them to glibc's.
FWD='#include <stddef.h>
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }'
# A library whose constructor writes to stderr (ld.so would print that in every process).
if command -v "${CC:-cc}" >/dev/null 2>&1; then
    printf '%s\n' '#include <unistd.h>' \
        '__attribute__((constructor)) static void noisy(void) { write(2, "hello\n", 6); }' \
        >"$tmp/noisy.c"
    { echo "$FWD" && echo 'int thpalloc_active(void) { return 0; }'; } >"$tmp/dormant.c"
    if "${CC:-cc}" -shared -fPIC -o "$tmp/noisy.so" "$tmp/noisy.c" 2>/dev/null &&
        "${CC:-cc}" -shared -fPIC -o "$tmp/dormant.so" "$tmp/dormant.c" 2>/dev/null; then
        r=$(mkroot refuse-noisy nolib)
        place "$r" "$tmp/noisy.so"
        refuse "a library that writes to stderr"
        r=$(mkroot refuse-dormant nolib)
        place "$r" "$tmp/dormant.so"
        refuse "thpalloc_active() returns 0" \
            "$(loaded "$r"): thpalloc_active() returned 0, not 1: its malloc is not the program's"
    else
        ok 0 "# SKIP cannot build a test library"
        ok 0 "# SKIP cannot build a test library"
    fi
else
    ok 0 "# SKIP no C compiler for the noisy-library case"
    ok 0 "# SKIP no C compiler for the dormant-library case"
fi

# A symbolic link is not followed nor replaced.
r=$(mkroot symlink)
printf '%s\n' "$A" >"$r/etc/real-preload"
ln -s real-preload "$r/etc/ld.so.preload"
"$TOOL" --root "$r" enable >/dev/null 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ -L "$r/etc/ld.so.preload" ] && [ "$(cat "$r/etc/real-preload")" = "$A" ]
ok $? "a symbolic link /etc/ld.so.preload is refused, left as it is"

# --- usage ---
# usage_ DESCRIPTION MESSAGE ARGS...: exit 2, nothing on stdout, and on stderr exactly
# "$P: MESSAGE" and the line that points to --help (util-linux style).
usage_() {
    local d=$1 msg=$2 out err rc=0
    shift 2
    out=$("$TOOL" "$@" 2>"$tmp/err") || rc=$?
    err=$(cat "$tmp/err")
    [ "$rc" -eq 2 ] && [ -z "$out" ] &&
        [ "$err" = "$P: $msg${NL}Try '$P --help' for more information." ]
    ok $? "usage, exit 2: $d (rc=$rc: ${err%%"$NL"*})"
}
r=$(mkroot usage)
usage_ "no command" "no command given (enable, disable or status)"
usage_ "bad command" "unknown command 'frobnicate'" --root "$r" frobnicate
usage_ "bad option" "unrecognized option '--frob'" --root "$r" --frob status
usage_ "bad short option" "invalid option -- 'x'" -x status
usage_ "two commands" "one command only (got enable and disable)" --root "$r" enable disable
usage_ "--root without a value" "option '--root' requires an argument" status --root
usage_ "-r without a value" "option '-r' requires an argument" status -r
usage_ "empty --root" "--root needs a directory" --root "" status
usage_ "--help with a value" "option '--help' doesn't allow an argument" --help=x
usage_ "--first with status" "--first is for enable only" --root "$r" --first status
out=$("$TOOL" --root "$tmp/does-not-exist" status 2>&1)
[ $? -eq 1 ] && [ "$out" = "$P: --root $tmp/does-not-exist: not a directory" ]
ok $? "--root that does not exist: exit 1 ($out)"
out=$("$TOOL" --help 2>"$tmp/err")
[ $? -eq 0 ] && [ ! -s "$tmp/err" ] &&
    [ "$(echo "$out" | head -2)" = "Usage:$NL $P [options] enable|disable|status" ] &&
    echo "$out" | grep -qx -- " -r, --root DIR  edit DIR/etc/ld.so.preload instead of /etc/ld.so.preload" &&
    echo "$out" | grep -qxF "entry: $E" &&
    [ "$(echo "$out" | tail -1)" = "For more details see thpalloc-preload(8)." ]
ok $? "--help: the usage on stdout, exit 0"
for v in -V --version; do
    out=$("$TOOL" $v 2>&1)
    [ $? -eq 0 ] && [[ $out =~ ^"$P from thpalloc "[0-9]+\.[0-9]+\.[0-9]+$ ]]
    ok $? "$v: $out"
done
r=$(mkroot eq)
"$TOOL" --root="$r" enable >/dev/null 2>&1 && [ "$("$TOOL" status --root "$r")" = enabled ] &&
    [ "$("$TOOL" status -r "$r")" = enabled ]
ok $? "--root=DIR, -r DIR and options after the command"

# Foreign dpkg architectures (dpkg --root DIR --print-foreign-architectures reads them from
# DIR/var/lib/dpkg/arch, written here): enable names each one whose library
# is missing at /usr/lib/<triplet>/ (its programs would print an ld.so error), and only
# when the entry goes through $LIB; the file is written all the same, exit 0.
case $E in
*'$LIB'*)
    r=$(mkroot archs)
    mkdir -p "$r/var/lib/dpkg"
    printf 'amd64\ni386\narmhf\n' >"$r/var/lib/dpkg/arch"
    mkdir -p "$r/usr/lib/arm-linux-gnueabihf" && cp "$LIB" "$r/usr/lib/arm-linux-gnueabihf/"
    rm -f "$r/usr/lib/i386-linux-gnu/libthpalloc.so.1"
    "$TOOL" --root "$r" $HT enable >"$tmp/out" 2>"$tmp/err"
    rc=$?
    want="$P: warning: dpkg architecture i386 has no /usr/lib/i386-linux-gnu/libthpalloc.so.1: its programs will print an ld.so error and run without thpalloc (apt install libthpalloc1:i386)"
    [ "$rc" -eq 0 ] && [ "$(cat "$tmp/err")" = "$want" ] && [ "$("$TOOL" --root "$r" status)" = enabled ]
    ok $? "enable with dpkg architecture i386 but no i386 library: exactly one warning, naming it ($(cat "$tmp/err"))"
    mkdir -p "$r/usr/lib/i386-linux-gnu" && cp "$LIB" "$r/usr/lib/i386-linux-gnu/"
    "$TOOL" --root "$r" $HT enable >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 0 ] && [ ! -s "$tmp/err" ]
    ok $? "with libthpalloc.so.1 for every dpkg architecture: no warning"
    ;;
*)
    ok 0 "foreign architectures: a warning # SKIP the entry has no \$LIB"
    ok 0 "foreign architectures: no warning # SKIP the entry has no \$LIB"
    ;;
esac

# --- --root: DIR's code never runs with the caller's privileges (issues 38, 46 item 5) ---
# A hostile library in DIR: it exports thpalloc_active() returning 1 (and malloc, free), and
# its constructor marks where it ran ($tmp/ran/ctor-ran: DIR's copy of that directory in a
# chroot of DIR), then tries the classic escape from a chroot (chroot into a directory below
# the working directory, climb out, chroot there) and marks the host's $tmp/esc/escaped,
# which exists only outside DIR. Root would escape; nobody, with no capability, cannot.
# Both directories are 1777, so that a run as nobody can leave its mark (owned by 65534).
mkdir -m 1777 "$tmp/ran" "$tmp/esc"
owner() { stat -c %u "$1" 2>/dev/null || echo none; }
marks() { echo "ran here: $(owner "$tmp/ran/ctor-ran"), escaped: $(owner "$tmp/esc/escaped")${1:+, ran in DIR: $(owner "$1$tmp/ran/ctor-ran")}"; }
if command -v "${CC:-cc}" >/dev/null 2>&1 &&
    { echo "$FWD" && printf '%s\n' '#include <fcntl.h>' '#include <sys/stat.h>' '#include <unistd.h>' \
        'static void mark(const char *p) { int fd = open(p, O_WRONLY | O_CREAT, 0644); if (fd >= 0) close(fd); }' \
        '__attribute__((constructor)) static void ran(void) {' \
        '    mark(RAN);' \
        '    mkdir("ctor-esc", 0755);' \
        '    if (chroot("ctor-esc") == 0) { for (int i = 0; i < 64; i++) chdir(".."); chroot("."); }' \
        '    mark(ESC);' '}' \
        'int thpalloc_active(void) { return 1; }'; } >"$tmp/ctor.c" &&
    "${CC:-cc}" -shared -fPIC -DRAN="\"$tmp/ran/ctor-ran\"" -DESC="\"$tmp/esc/escaped\"" \
        -o "$tmp/ctor.so" "$tmp/ctor.c" 2>/dev/null; then
    W_READ="$P: warning: $E was read, not run: with --root, DIR's code runs only when asked, and without privileges (--smoke-test: in a chroot of @R@)"
    r=$(mkroot ctor-nochroot nolib)
    place "$r" "$tmp/ctor.so"
    "$TOOL" --root "$r" enable >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 0 ] && [ ! -e "$tmp/ran/ctor-ran" ] && [ ! -e "$tmp/esc/escaped" ] &&
        [ "$(cat "$tmp/out")" = "$P: enabled ($E added to $r/etc/ld.so.preload)" ] &&
        [ "$(cat "$tmp/err")" = "${W_READ//@R@/$r}" ] && [ "$(cat "$r/etc/ld.so.preload")" = "$E" ]
    ok $? "--root: the library is read, not run (rc=$rc; $(marks))"
    rm -f "$tmp/ran/ctor-ran" "$tmp/esc/escaped"
    # Read, not run: what is not thpalloc is refused all the same.
    if [ -f "${libm:-}" ]; then
        r=$(mkroot ctor-libm nolib)
        place "$r" "$libm"
        printf '%s\n' "$A" >"$r/etc/ld.so.preload"
        out=$("$TOOL" --root "$r" enable 2>&1)
        [ $? -eq 1 ] && [ "$out" = "$P: refusing to enable: $(loaded "$r") does not export thpalloc_active: it is not thpalloc$NL$P: $r/etc/ld.so.preload left as it was" ]
        ok $? "--root: libm under thpalloc's name is refused unread ($out)"
    else
        ok 0 "--root: libm refused # SKIP no libm.so.6"
    fi
    # The ELF checks: the type (an executable is no shared object), the machine.
    r=$(mkroot ctor-exec nolib)
    place "$r" /bin/true
    out=$("$TOOL" --root "$r" enable 2>&1)
    [ $? -eq 1 ] && [ "$out" = "$P: refusing to enable: $(loaded "$r") does not export thpalloc_active: it is not thpalloc$NL$P: $r/etc/ld.so.preload left as it was" ] ||
        [ "$out" = "$P: refusing to enable: $(loaded "$r") is not an ELF shared object$NL$P: $r/etc/ld.so.preload left as it was" ]
    ok $? "--root: /bin/true under thpalloc's name is refused unread ($out)"
    r=$(mkroot ctor-foreign nolib)
    cp "$tmp/ctor.so" "$tmp/foreign.so" &&
        printf '\x08\x00' | dd of="$tmp/foreign.so" bs=1 seek=18 conv=notrunc 2>/dev/null # e_machine: EM_MIPS
    place "$r" "$tmp/foreign.so"
    out=$("$TOOL" --root "$r" enable 2>&1)
    [ $? -eq 1 ] && case $out in "$P: refusing to enable: $(loaded "$r") is built for another machine (ELF class "*", machine 8; this system's: "*) true ;; *) false ;; esac
    ok $? "--root: a library for another machine is refused unread ($out)"
    # A chroot: /bin/true and the probe (the plain build of this tool, at both sbin
    # directories a build may name) with what ldd says they need, at the same paths.
    copy_in() { # copy_in ROOT FILE...
        local r=$1 f d
        shift
        for f in "$@" $(ldd "$@" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
            d=$r$(dirname "$f")
            mkdir -p "$d" && cp -L "$f" "$d/"
        done
    }
    mkchroot() { # mkchroot NAME LIBRARY: prints the root
        local r
        r=$(mkroot "$1" nolib)
        place "$r" "$2"
        copy_in "$r" /bin/true
        for d in /usr/sbin /usr/local/sbin; do
            mkdir -p "$r$d" && cp "$BUILD/../tools/thpalloc-preload/thpalloc-preload" "$r$d/"
        done
        copy_in "$r" "$BUILD/../tools/thpalloc-preload/thpalloc-preload" "$LIB"
        mkdir -p "$r$tmp" && mkdir -m 1777 "$r$tmp/ran"
        echo "$r"
    }
    if [ "$(id -u)" = 0 ] && [ -x /bin/true ] && command -v ldd >/dev/null &&
        r=$(mkchroot ctor-chroot "$tmp/ctor.so") && chroot "$r" /bin/true 2>/dev/null; then
        # Root, a tree with /bin/true: by default still read, not run (it ran as root in a
        # chroot of DIR before, escaped it and marked the host's $tmp/esc as root).
        "$TOOL" --root "$r" enable >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 0 ] && [ ! -e "$tmp/esc/escaped" ] && [ ! -e "$r$tmp/ran/ctor-ran" ] &&
            [ ! -e "$tmp/ran/ctor-ran" ] && [ "$(cat "$tmp/err")" = "${W_READ//@R@/$r}" ]
        ok $? "--root as root, a tree that can be chrooted: the hostile library is read, not run (rc=$rc; $(marks "$r"))"
        rm -f "$tmp/esc/escaped" "$tmp/ran/ctor-ran" "$r$tmp/ran/ctor-ran" "$r/etc/ld.so.preload"
        # --smoke-test: it runs in the chroot, as nobody without capabilities: it cannot escape.
        "$TOOL" --root "$r" --smoke-test enable >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 0 ] && [ "$(owner "$tmp/esc/escaped")" != 0 ] && [ ! -e "$tmp/esc/escaped" ] &&
            [ "$(owner "$r$tmp/ran/ctor-ran")" = 65534 ] && [ ! -e "$tmp/ran/ctor-ran" ] &&
            [ ! -s "$tmp/err" ] && [ "$(cat "$tmp/out")" = "$P: enabled ($E added to $r/etc/ld.so.preload)" ]
        ok $? "--smoke-test: the hostile library runs in the chroot as nobody and cannot escape it (rc=$rc; $(marks "$r"); $(cat "$tmp/err"))"
        rm -f "$tmp/esc/escaped" "$tmp/ran/ctor-ran"
        r=$(mkchroot thp-chroot "$LIB")
        "$TOOL" --root "$r" --smoke-test enable >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] && [ "$("$TOOL" --root "$r" status)" = enabled ]
        ok $? "--smoke-test: thpalloc passes the smoke test in the chroot (rc=$rc $(cat "$tmp/err"))"
        # A CRLF line in DIR's file: the programs in the chroot read it too.
        r=$(mkchroot cr-chroot "$LIB")
        printf '%s\r\n' "$E" >"$r/etc/ld.so.preload"
        "$TOOL" --root "$r" --smoke-test enable >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] && [ "$(cat "$r/etc/ld.so.preload")" = "$E" ] &&
            [ "$(cat "$tmp/out")" = "$P: enabled (carriage return after $E in $r/etc/ld.so.preload removed)" ]
        ok $? "--smoke-test: a CRLF line of DIR's file is repaired (rc=$rc $(tr -d '\r' <"$tmp/err"))"
        if [ -f "$tmp/dormant.so" ]; then
            r=$(mkchroot dormant-chroot "$tmp/dormant.so")
            out=$("$TOOL" --root "$r" --smoke-test enable 2>&1)
            [ $? -eq 1 ] && [ "$out" = "$P: refusing to enable: in a chroot of $r: $(loaded ""): thpalloc_active() returned 0, not 1: its malloc is not the program's$NL$P: $r/etc/ld.so.preload left as it was" ] &&
                [ ! -e "$r/etc/ld.so.preload" ]
            ok $? "--smoke-test: the probe runs in the chroot and refuses ($out)"
        else
            ok 0 "--smoke-test: the probe refuses # SKIP no test library"
        fi
    else
        for _ in 1 2 3 4 5; do ok 0 "--root with a chroot # SKIP needs root, ldd and a chroot"; done
    fi
    # --smoke-test where DIR has no /bin/true: refused, the file untouched.
    r=$(mkroot ctor-notrue nolib)
    place "$r" "$LIB"
    out=$("$TOOL" --root "$r" --smoke-test enable 2>&1)
    [ $? -eq 1 ] && [ "$out" = "$P: refusing to enable: --smoke-test: $r has no /bin/true to run in a chroot of it, so the library was not run$NL$P: $r/etc/ld.so.preload left as it was" ] &&
        [ ! -e "$r/etc/ld.so.preload" ]
    ok $? "--smoke-test without DIR/bin/true: refused ($out)"
    # --host-test: it runs on this system, as nobody when root asks (marks owned by 65534).
    r=$(mkroot ctor-host nolib)
    place "$r" "$tmp/ctor.so"
    "$TOOL" --root "$r" --host-test enable >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$(id -u)" = 0 ]; then
        [ "$rc" -eq 0 ] && [ "$(owner "$tmp/ran/ctor-ran")" = 65534 ] && [ "$(owner "$tmp/esc/escaped")" = 65534 ]
    else
        [ "$rc" -eq 0 ] && [ "$(owner "$tmp/ran/ctor-ran")" = "$(id -u)" ]
    fi
    ok $? "--host-test: the library runs on this system, never as root (rc=$rc; $(marks); $(cat "$tmp/err"))"
    rm -f "$tmp/ran/ctor-ran" "$tmp/esc/escaped"
    out=$("$TOOL" --root "$r" --host-test --smoke-test enable 2>&1)
    [ $? -eq 2 ] && [ "$out" = "$P: --host-test and --smoke-test exclude each other${NL}Try '$P --help' for more information." ]
    ok $? "usage, exit 2: --host-test with --smoke-test ($out)"
    out=$("$TOOL" --smoke-test status 2>&1)
    [ $? -eq 2 ] && [ "$out" = "$P: --smoke-test is for --root DIR only${NL}Try '$P --help' for more information." ]
    ok $? "usage, exit 2: --smoke-test without --root ($out)"
else
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do ok 0 "--root and the library # SKIP cannot build a test library"; done
fi

# --- --root: no path leads out of DIR (issue 46, item 6) ---
# DIR/etc a symbolic link to a directory outside DIR: resolved inside DIR (as a chroot of
# DIR would), where it names nothing; the outside file is never written. With openat2
# (RESOLVE_IN_ROOT) and with the walk for kernels without it.
for how in openat2 walk; do
    envw=()
    [ $how = walk ] && envw=(env THPALLOC_TEST_NO_OPENAT2=1)
    r=$(mkroot "link-$how")
    mkdir -p "$tmp/elsewhere-$how"
    rm -rf "$r/etc" && ln -s "$tmp/elsewhere-$how" "$r/etc"
    out=$("${envw[@]}" "$TOOL" --root "$r" enable 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ ! -e "$tmp/elsewhere-$how/ld.so.preload" ] &&
        [ "$out" = "$P: cannot open $r/etc: No such file or directory (a symbolic link to $tmp/elsewhere-$how, followed inside $r as a chroot of it would)" ]
    ok $? "$how: DIR/etc -> a directory outside DIR: enable writes nothing there (rc=$rc: $out)"
    printf '%s\n' "$A" "$E" >"$tmp/elsewhere-$how/ld.so.preload"
    sum=$(sha256sum <"$tmp/elsewhere-$how/ld.so.preload")
    "${envw[@]}" "$TOOL" --root "$r" disable >/dev/null 2>&1
    rc=$?
    [ $rc -eq 1 ] && [ "$(sha256sum <"$tmp/elsewhere-$how/ld.so.preload")" = "$sum" ]
    ok $? "$how: DIR/etc -> outside: disable leaves the outside file as it was (rc=$rc)"
    # A relative link that climbs above DIR stays in DIR ("..": at DIR's top, DIR).
    rm -f "$r/etc" && ln -s ../../../../../../elsewhere "$r/etc" && mkdir -p "$r/elsewhere"
    "${envw[@]}" "$TOOL" --root "$r" enable >/dev/null 2>&1
    rc=$?
    [ $rc -eq 0 ] && [ "$(cat "$r/elsewhere/ld.so.preload" 2>/dev/null)" = "$E" ] &&
        [ "$(sha256sum <"$tmp/elsewhere-$how/ld.so.preload")" = "$sum" ]
    ok $? "$how: DIR/etc -> ../../..: resolved inside DIR, written there only (rc=$rc)"
    # The library too is looked up inside DIR: a link to a good thpalloc outside DIR is
    # not DIR's library.
    r=$(mkroot "liblink-$how" nolib)
    lp=$(loaded "$r")
    mkdir -p "$(dirname "$lp")" && ln -s "$LIB" "$lp"
    out=$("${envw[@]}" "$TOOL" --root "$r" enable 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ ! -e "$r/etc/ld.so.preload" ] && case $out in "$P: refusing to enable: $r$E: no such library (inside $r)"*) true ;; *) false ;; esac
    ok $? "$how: DIR's library a link to one outside DIR: not found inside DIR, refused (rc=$rc: $out)"
done
# DIR/etc -> /etc: in a private mount namespace whose /etc is a scratch directory, so that
# even a tool that followed the link would write the scratch file, never the host's.
host_sum=$({ sha256sum </etc/ld.so.preload; } 2>/dev/null || echo absent)
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    r=$(mkroot link-etc)
    rm -rf "$r/etc" && ln -s /etc "$r/etc"
    mkdir -p "$tmp/fake-etc"
    out=$(unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc && exec "$2" --root "$3" enable' \
        sh "$tmp/fake-etc" "$TOOL" "$r" 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ ! -e "$tmp/fake-etc/ld.so.preload" ] &&
        [ "$out" = "$P: cannot open $r/etc: Too many levels of symbolic links (a symbolic link to /etc, followed inside $r as a chroot of it would)" ]
    ok $? "DIR/etc -> /etc: refused, the (private) /etc untouched (rc=$rc: $out)"
else
    ok 0 "DIR/etc -> /etc # SKIP needs root and unshare -m"
fi
[ "$({ sha256sum </etc/ld.so.preload; } 2>/dev/null || echo absent)" = "$host_sum" ]
ok $? "the host's /etc/ld.so.preload is untouched"

# --- thp-status reads the file as ld.so does (issue 47, item 3) ---
# A CRLF file: ld.so looks for names that end in CR and loads nothing; the system view
# says no, with why, and thp_thpalloc_preload is 0 (it said "yes" and 1).
ST=$BUILD/../tools/thp-status/thp-status
if [ -x "$ST" ]; then
    r=$(mkroot status-crlf)
    printf '/usr/lib/other.so\r\n%s\r\n' "$E" >"$r/etc/ld.so.preload"
    "$ST" --root "$r" >"$tmp/out" 2>&1
    grep -qxF "  system-wide preload    no: $E ends in a carriage return (a CRLF line): ld.so loads nothing" "$tmp/out" &&
        grep -qF "! $r/etc/ld.so.preload: 1 other entry ends in a carriage return (a CRLF file), /usr/lib/other.so first: ld.so cannot load it" "$tmp/out"
    ok $? "thp-status, a CRLF file: system-wide preload no, and why ($(grep 'system-wide preload' "$tmp/out"))"
    "$ST" --root "$r" --prometheus >"$tmp/out" 2>&1
    grep -qx 'thp_thpalloc_preload 0' "$tmp/out"
    ok $? "thp-status --prometheus, a CRLF file: thp_thpalloc_preload 0 ($(grep '^thp_thpalloc_preload ' "$tmp/out"))"
    printf '/usr/lib/other.so\n%s\n' "$E" >"$r/etc/ld.so.preload"
    "$ST" --root "$r" --prometheus >"$tmp/out" 2>&1
    grep -qx 'thp_thpalloc_preload 1' "$tmp/out"
    ok $? "thp-status --prometheus, the same file with LF: thp_thpalloc_preload 1"
else
    for _ in 1 2 3; do ok 0 "thp-status and CRLF # SKIP no thp-status built"; done
fi

done_testing
