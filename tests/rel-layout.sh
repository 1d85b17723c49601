#!/bin/sh
# rel-layout: the library's text layout (lib/layout.ld, lib/README.md "The library's own
# pages"). The kernel maps a file's pages 64 KiB around each one a process touches, within
# the mapping: the code a small process runs is one executable segment, the rest
# (TEXT_WARM, TEXT_COLD, gcc's cold parts) another behind .rodata, and .eh_frame with
# chunk_unused a read-only segment of their own. Checked on the ELF file (segments, where
# exported functions lie), then in /proc/PID/smaps of small processes under the preload:
# the rare text and the segment after it have no page resident (exact: a mapping nothing
# touches has none), the hot text has.
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
: "${THPALLOC_LIB:?}"
command -v readelf >/dev/null && command -v nm >/dev/null || skip_all "needs readelf and nm"

# "R E" segments, as "vaddr end" lines (0x hex)
rx=$(readelf -lW "$THPALLOC_LIB" | awk '$1 == "LOAD" && $7 == "R" && $8 == "E" { print $3, $6 }' |
    while read -r a s; do printf '%s 0x%x\n' "$a" $((a + s)); done)
is "$(printf '%s\n' "$rx" | wc -l | tr -d ' ')" 2 "two executable segments: the code every process runs, and the rest"

# segment index (1: hot, 2: rare) of a dynamic symbol
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
    is "$(seg_of $f)" 1 "$f is in the hot text"
done
for f in mallinfo2 malloc_trim thpalloc_get_stats thpalloc_policy; do
    is "$(seg_of $f)" 2 "$f is in the rare text"
done
order=$(readelf -SW "$THPALLOC_LIB" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\.(text|rodata|text\.thp_rare|eh_frame|rodata\.thp_rare)$/) printf "%s ", $i }')
is "$order" ".text .rodata .text.thp_rare .eh_frame .rodata.thp_rare " "section order: hot text, rodata, rare text, eh_frame, chunk_unused"

# Rss (kB) of the library's mappings in a process's smaps, in address order: "perm:rss ..."
lib_maps() {
    awk -v lib="$(basename "$(readlink -f "$THPALLOC_LIB")")" '
        /^[0-9a-f]+-[0-9a-f]+ / { cur = (index($0, lib) ? $2 : ""); next }
        /^Rss:/ && cur != "" { printf "%s:%s ", cur, $2 }' "$1"
}
# mapping fields: 1 headers, 2 hot text, 3 rodata, 4 rare text, 5 eh_frame + chunk_unused
check_small() {
    m=$(lib_maps "$2")
    set -- "$1" $m
    desc=$1
    case "$3" in r-xp:0 | "") fail "$desc: hot text resident (got '$m')" ;; *) pass "$desc: hot text resident" ;; esac
    is "$5" "r-xp:0" "$desc: no page of the rare text resident"
    is "$6" "r--p:0" "$desc: no page of .eh_frame and chunk_unused resident"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LD_PRELOAD=$THPALLOC_LIB cat /proc/self/smaps >"$tmp/cat"
check_small "cat" "$tmp/cat"
# a shell that allocated, forked and waited, read by its child
LD_PRELOAD=$THPALLOC_LIB sh -c 'x=$(echo a b c | tr a-z A-Z); cat /proc/$$/smaps' >"$tmp/sh"
check_small "sh, after a fork" "$tmp/sh"
done_testing
