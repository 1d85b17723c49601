#!/bin/sh
# build-layout: the library's read-only layout (lib/layout.ld, lib/README.md "The library's own
# pages"). The kernel maps a file's pages 64 KiB around each one a process touches, within
# the mapping: the code every process runs is one executable segment, what most real
# programs run too (TEXT_BUSY) a second behind .rodata, the rest (TEXT_WARM, TEXT_COLD, gcc's
# cold parts) a third behind .eh_frame and chunk_unused. Checked on the ELF file (segments,
# where exported functions lie), then in /proc/PID/smaps of small processes under the
# preload: the segments they never run have no page resident (exact: a mapping nothing
# touches has none), the first has.
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
: "${THPALLOC_LIB:?}"
command -v readelf >/dev/null && command -v nm >/dev/null || skip_all "needs readelf and nm"
# configure found a linker without INSERT (gold): the library has the default layout
[ "${THPALLOC_LAYOUT:-yes}" = no ] && skip_all "configure: the linker does not take lib/layout.ld"

# "R E" segments, as "vaddr end" lines (0x hex)
rx=$(readelf -lW "$THPALLOC_LIB" | awk '$1 == "LOAD" && $7 == "R" && $8 == "E" { print $3, $6 }' |
    while read -r a s; do printf '%s 0x%x\n' "$a" $((a + s)); done)
is "$(printf '%s\n' "$rx" | wc -l | tr -d ' ')" 3 "three executable segments: every process's code, busy programs', the rest"

# segment index (1: every process's, 2: busy, 3: rare) of a dynamic symbol
seg_of() {
    addr=$(nm -D --defined-only "$THPALLOC_LIB" | awk -v s="$1" '$3 == s { print $1; exit }')
    [ -n "$addr" ] || { echo none; return; }
    i=0
    printf '%s\n' "$rx" | while read -r lo hi; do
        i=$((i + 1))
        if [ $((0x$addr)) -ge $((lo)) ] && [ $((0x$addr)) -lt $((hi)) ]; then echo $i; fi
    done
}
for f in malloc free calloc realloc; do
    is "$(seg_of $f)" 1 "$f is in the first text segment"
done
for f in posix_memalign aligned_alloc malloc_usable_size; do
    is "$(seg_of $f)" 2 "$f is in the busy text"
done
for f in mallinfo2 malloc_trim thpalloc_get_stats thpalloc_policy; do
    is "$(seg_of $f)" 3 "$f is in the rare text"
done
order=$(readelf -SW "$THPALLOC_LIB" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\.(text|rodata|text\.thp_busy|eh_frame|rodata\.thp_rare|text\.thp_rare)$/) printf "%s ", $i }')
is "$order" ".text .rodata .text.thp_busy .eh_frame .rodata.thp_rare .text.thp_rare " \
    "section order: text, rodata, busy text, eh_frame, chunk_unused, rare text"

# Rss (kB) of the library's mappings in a process's smaps, in address order: "perm:rss ..."
lib_maps() {
    awk -v lib="$(basename "$(readlink -f "$THPALLOC_LIB")")" '
        /^[0-9a-f]+-[0-9a-f]+ / { cur = (index($0, lib) ? $2 : ""); next }
        /^Rss:/ && cur != "" { printf "%s:%s ", cur, $2 }' "$1"
}
# mappings: 1 headers, 2 text, 3 rodata, 4 busy text, 5 eh_frame and chunk_unused, 6 rare
# text; BUSY: whether the process may run busy code (then only the rare text is checked)
check_small() {
    desc=$1 busy=$2
    m=$(lib_maps "$3")
    set -- $m
    case "$2" in r-xp:0 | "") fail "$desc: text resident (got '$m')" ;; *) pass "$desc: text resident" ;; esac
    [ "$busy" = busy ] || is "$4" "r-xp:0" "$desc: no page of the busy text resident"
    is "$5" "r--p:0" "$desc: no page of .eh_frame and chunk_unused resident"
    is "$6" "r-xp:0" "$desc: no page of the rare text resident"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# coreutils' cat takes its buffer from aligned_alloc (busy)
LD_PRELOAD=$THPALLOC_LIB cat /proc/self/smaps >"$tmp/cat"
check_small "cat" busy "$tmp/cat"
# a shell that allocated, forked and waited, read by its child
LD_PRELOAD=$THPALLOC_LIB sh -c 'x=$(echo a b c | tr a-z A-Z); cat /proc/$$/smaps' >"$tmp/sh"
check_small "sh, after a fork" busy "$tmp/sh"
# a thread's loop of small blocks, its exit, then the main thread (tests/build-layout-probe)
LD_PRELOAD=$THPALLOC_LIB "${TESTS_BUILDDIR:-tests}/build-layout-probe" >"$tmp/probe"
check_small "a thread's small blocks" small "$tmp/probe"
# Every process maps the first text segment and .rodata whole (fault-around): their pages
# are a cost of every process, so they are budgets (lib/README.md): at most 11 pages of text
# and one of .rodata. A function only busy programs run is TEXT_BUSY; a string only rare code
# reads lies in .rodata.thp_rare.
set -- $(lib_maps "$tmp/probe")
text_kb=${2#r-xp:} rodata_kb=${3#r--p:}
check "a thread's small blocks: at most 44 KiB of the library's text resident (got $text_kb)" \
    [ "$text_kb" -le 44 ]
check "a thread's small blocks: at most 4 KiB of its .rodata resident (got $rodata_kb)" \
    [ "$rodata_kb" -le 4 ]
done_testing
