#!/bin/bash
# thp-status PID for a program linked with -lthpalloc (not preloaded) that declares and
# reads thpalloc_introspect itself, so that it gets a copy of the object (R_X86_64_COPY on
# amd64): the library writes its own table, not the exported name, so thp-status sees it
# in charge with its arena ranges, whatever the program's stale copy says. thpalloc.h
# declares no such object.
. "${TESTS_SRCDIR:-$(dirname "$0")}/status-lib.sh"
PROG=$TESTS_BUILDDIR/status-linked

printf '#include "thpalloc.h"\nint main(void) { return (int)thpalloc_introspect.size; }\n' \
    >"$SCRATCH/uses.c"
! ${CC:-cc} -fsyntax-only -I"$TOP_BUILDDIR/lib" "$SCRATCH/uses.c" 2>/dev/null
ok $? "thpalloc.h declares no thpalloc_introspect object"
${CC:-cc} -fsyntax-only -I"$TOP_BUILDDIR/lib" -x c - <<<'#include "thpalloc.h"
int main(void) { struct thpalloc_introspect t = {.magic = THPALLOC_INTROSPECT_MAGIC}; return (int)t.size; }'
ok $? "thpalloc.h still has the table's layout (struct thpalloc_introspect)"

if [ "$(uname -m)" = x86_64 ]; then
    LC_ALL=C readelf -rW "$PROG" | grep -q 'R_X86_64_COPY .* thpalloc_introspect'
    ok $? "the program has a copy relocation for thpalloc_introspect"
fi
out=$SCRATCH/linked.out
env -u LD_PRELOAD THPALLOC_CONF=/dev/null "$PROG" >"$out" 2>&1 &
P=$!
CLEANUP_PIDS="$CLEANUP_PIDS $P"
i=0
while ! grep -q '^ready' "$out" 2>/dev/null && [ $i -lt 200 ] && kill -0 "$P" 2>/dev/null; do
    i=$((i + 1))
    sleep 0.05
done
grep -q '^active=1 ' "$out"
ok $? "the program runs on thpalloc ($(grep '^active' "$out"))"
for T in $TOOLS; do
    t=${T##*/}
    run "$T" --json "$P"
    cp "$OUT" "$SCRATCH/j"
    rc=$RC
    got=$("$PYTHON" -c 'import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]["thpalloc"]
i = p["introspect"] or {}
print(p["loaded"], i.get("state"), i.get("policy_loaded"), i.get("ranges", 0) >= 1,
      i.get("reserved_bytes", 0) >= 16 << 20, p["attribution"]["method"])' "$SCRATCH/j" 2>&1)
    is "$rc $got" "0 True active True True True introspect" \
        "$t --json PID: in charge, policy loaded, its ranges (at least 16 MiB) read from the library's table"
    run "$T" "$P"
    cp "$OUT" "$SCRATCH/t"
    grep -qE '^    state +in charge$' "$SCRATCH/t" && grep -qE '^    arenas +[1-9][0-9]* ranges?, ' "$SCRATCH/t"
    ok $? "$t PID: state in charge, its arenas listed"
done
kill "$P" 2>/dev/null
sanitizer_clean status-linked
done_testing
