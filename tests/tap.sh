# The one TAP vocabulary of the shell tests (sourced; POSIX sh, so dash and bash alike).
# tests/README.md says how a test uses it. Every assertion goes through these functions, so
# numbering, the failure count and the plan line are the same in every script.
#
#   ok STATUS DESC      one assertion: passes when STATUS is 0 (ok $? "..." after a command)
#   pass DESC           an assertion that passed (the script decided)
#   fail DESC           an assertion that failed
#   check DESC CMD...   runs CMD; passes when it exits 0
#   is GOT WANT DESC    passes when the strings are equal; shows both when not
#   skip DESC [REASON]  an assertion not made here, with the reason (TAP "# SKIP")
#   diag [TEXT...]      diagnostics: each line of TEXT, or of standard input without TEXT
#   done_testing        the plan line; exit status 1 when an assertion failed, else 0
#   bail REASON         "Bail out!": nothing further can be tested (exit 99)
#   skip_all REASON     the whole script does not apply here: "1..0 # SKIP REASON", exit 0

tap_n=0
tap_failed=0

ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ] 2>/dev/null; then
        printf 'ok %d - %s\n' "$tap_n" "$2"
    else
        printf 'not ok %d - %s\n' "$tap_n" "$2"
        tap_failed=$((tap_failed + 1))
    fi
}
pass() { ok 0 "$*"; }
fail() { ok 1 "$*"; }
check() {
    _tap_d=$1
    shift
    if "$@"; then ok 0 "$_tap_d"; else ok 1 "$_tap_d"; fi
}
is() {
    if [ "$1" = "$2" ]; then ok 0 "$3"; else
        ok 1 "$3"
        printf '#   got:  %s\n#   want: %s\n' "'$1'" "'$2'"
    fi
}
skip() {
    tap_n=$((tap_n + 1))
    printf 'ok %d - %s # SKIP%s\n' "$tap_n" "$1" "${2:+ $2}"
}
diag() {
    if [ $# -eq 0 ]; then sed 's/^/# /'; else printf '%s\n' "$@" | sed 's/^/# /'; fi
}
done_testing() {
    printf '1..%d\n' "$tap_n"
    [ "$tap_failed" -eq 0 ] && exit 0
    exit 1
}
bail() {
    printf 'Bail out! %s\n' "$*"
    exit 99
}
skip_all() {
    printf '1..0 # SKIP %s\n' "$*"
    exit 0
}
