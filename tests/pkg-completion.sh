#!/bin/bash
# tools/completion/thpalloc, the bash completion of thp-status, thpalloc-run and
# thpalloc-preload: each command's completion function, fed the words of a command line,
# gives exactly the expected candidates (options, option values, PIDs, programs,
# directories, subcommands).
set -u
SRC=${TESTS_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
COMP=$SRC/../tools/completion/thpalloc

. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
# comp WORDS...: the candidates for the last word (one a line, sorted) of the command line
# WORDS, from the function the file registers for the command WORDS[0].
comp() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    bash --norc --noprofile -c '
        . "$0" || exit 1
        COMP_WORDS=("$@")
        COMP_CWORD=$(($# - 1))
        f=$(complete -p "$1" | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
        "$f"
        printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort' "$COMP" "$@"
}
is() { # is GOT WANT DESCRIPTION
    [ "$1" = "$2" ]
    ok $? "$3"
    [ "$1" = "$2" ] || printf '#   got:  %s\n#   want: %s\n' "$(echo $1)" "$(echo $2)"
}
bash --norc --noprofile -n "$COMP"
ok $? "the file is valid bash"
reg=$(bash --norc --noprofile -c '. "$0"; complete -p thp-status thpalloc-run thpalloc-preload' "$COMP")
is "$reg" "complete -F _thp_status thp-status
complete -F _thpalloc_run thpalloc-run
complete -F _thpalloc_preload thpalloc-preload" "it registers a function for each of the three commands"

is "$(comp thpalloc-run --thp '')" "$(printf '%s\n' always large never system)" \
    "thpalloc-run --thp <TAB>: the four modes"
is "$(comp thpalloc-run --purge '')" "$(printf '%s\n' dontneed free)" "thpalloc-run --purge <TAB>"
is "$(comp thpalloc-run --purge-d)" "--purge-delay" "thpalloc-run --purge-d<TAB>: --purge-delay"
is "$(comp thpalloc-run --thp never pytho | grep -cx python3)" 1 \
    "thpalloc-run --thp never pytho<TAB>: the program (python3)"
is "$(comp thpalloc-run --stats -- --th | grep -c .)" 0 \
    "thpalloc-run --stats -- --th<TAB>: a command, not an option, after --"
is "$(comp thpalloc-preload '')" "$(printf '%s\n' disable enable status)" \
    "thpalloc-preload <TAB>: enable, disable, status"
is "$(comp thpalloc-preload enable '')" "" "thpalloc-preload enable <TAB>: nothing more"
is "$(comp thpalloc-preload --r)" "--root" "thpalloc-preload --r<TAB>"
is "$(comp thp-status $$ | grep -cx "$$")" 1 "thp-status <PID prefix><TAB>: the PID ($$)"
is "$(comp thp-status --ex)" "--explain" "thp-status --ex<TAB>: --explain"
is "$(comp thp-status --check-value pur)" "$(printf '%s\n' purge= purge_delay=)" \
    "thp-status --check-value pur<TAB>: the keys"
is "$(comp thp-status --root /e | grep -cx /etc)" 1 "thp-status --root /e<TAB>: a directory"
is "$(comp thp-status --per)" "--per-process" "thp-status --per<TAB>"
is "$(comp thp-status --sc)" "$(printf '%s\n' --scan --scan-max --scan-rate)" "thp-status --sc<TAB>: --scan and its limits"

done_testing
