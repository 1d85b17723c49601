#!/bin/sh
# thp-status PID for a process in another root: the policy is read inside that root, as
# the library inside the process reads it, and root reads only what the process may.
# A user with a user namespace chroots into a tree of their own (unshare -Urm, as uid
# 65534; as root where user namespaces are not allowed) whose drop-in directory holds:
#   - a good drop-in (thp = never): applied;
#   - an absolute symbolic link to a root-only 0600 file outside the tree: resolved inside
#     the tree, where it leads nowhere, so the secret value is not shown (without openat2,
#     the link is refused);
#   - a root-only 0600 drop-in inside the tree: the process cannot read it, so it is not
#     applied (only with the user namespace: a root process could read it);
# and a second such process has THPALLOC_CONF pointing at the secret file.
. "$TESTS_SRCDIR/status-lib.sh"

if [ "$(id -u)" -ne 0 ] || ! [ -x /usr/bin/python3 ]; then
    skip "another root" "needs root and /usr/bin/python3"
    done_testing
fi
set -- $TOOLS
SYSCONF=$("$1" --check --json | "$PYTHON" -c 'import json,sys,os; print(os.path.dirname(json.load(sys.stdin)["check"]["files"][0]))')
TREE=$SCRATCH/tree
mkdir -p "$TREE$SYSCONF/thpalloc.d"
chmod -R 755 "$TREE"
printf '[global]\npurge_delay = 4242ms\nthp_threshold = 6M\n' >"$SCRATCH/secret.conf"
chmod 600 "$SCRATCH/secret.conf"
D=$TREE$SYSCONF/thpalloc.d
printf '[global]\nthp = never\n' >"$D/10-good.conf"
chmod 644 "$D/10-good.conf"
ln -s "$SCRATCH/secret.conf" "$D/50-link.conf"
printf '[global]\nthp_threshold = 8M\n' >"$D/60-private.conf"
chmod 600 "$D/60-private.conf"

# chrooted [ENV...]: a process chrooted into the tree; sets CPID.
USERNS=yes
setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urm true 2>/dev/null || USERNS=
chrooted() {
    f=$SCRATCH/chrooted.$#.$$
    rm -f "$f"
    code='import os, sys, time; os.chroot(sys.argv[1]); os.chdir("/"); print("ready", flush=True); time.sleep(600)'
    if [ -n "$USERNS" ]; then
        env "$@" setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urm /usr/bin/python3 -c "$code" "$TREE" >"$f" 2>&1 &
    else
        env "$@" /usr/bin/python3 -c "$code" "$TREE" >"$f" 2>&1 &
    fi
    CPID=$!
    CLEANUP_PIDS="$CLEANUP_PIDS $CPID"
    i=0
    while ! grep -q ready "$f" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    # the python3 process itself (setpriv and unshare exec it)
}
chrooted
A=$CPID
chrooted THPALLOC_CONF="$SCRATCH/secret.conf"
B=$CPID
diag "chrooted processes $A, $B (user namespace: ${USERNS:-no})"
# policy FILE KEY: the "value origin" of KEY in a PID view's policy table
policy() { sed -n "s/^    $2  *\\([^ ]*\\)  *\\(.*\\)\$/\\1 \\2/p" "$1"; }

for T in $TOOLS; do
    t=$(basename "$T")
    for no2 in 0 1; do
        THP_STATUS_TEST_NO_OPENAT2=$no2 run "$T" "$A"
        w="$t (THP_STATUS_TEST_NO_OPENAT2=$no2)"
        is "$(policy "$OUT" thp)" "never /proc/$A/root$SYSCONF/thpalloc.d/10-good.conf:2 [global]" \
            "$w: the drop-in inside the process's root applies"
        is "$(policy "$OUT" purge_delay)" "1s default" \
            "$w: a link to a 0600 file outside the root does not leak its value"
        if [ -n "$USERNS" ]; then
            is "$(policy "$OUT" thp_threshold)" "2M default" \
                "$w: a 0600 drop-in the process (uid 65534) cannot read is not applied"
            want=1 # the file it cannot read (the link leads nowhere in its root: silent)
        else
            skip "$w: a drop-in the process cannot read" "no unprivileged user namespaces here"
            want=0
        fi
        [ $no2 = 1 ] && want=$((want + 1)) # the link is refused, not followed
        s=s
        [ $want = 1 ] && s=
        is "$(grep '(the configuration has' "$OUT")" \
            "$([ $want = 0 ] || echo "    (the configuration has $want problem$s: run thp-status --check)")" \
            "$w: $want problems counted"
    done
    run "$T" "$B"
    is "$(policy "$OUT" purge_delay) / $(policy "$OUT" thp_threshold)" "1s default / 2M default" \
        "$t: THPALLOC_CONF is opened inside the process's root, not in the caller's"
    run "$T" --json "$A" "$B"
    ok $(json_valid "$OUT" && ! grep -q 4242 "$OUT"; echo $?) "$t: nothing of the secret file in JSON"
    sanitizer_clean "$t"
done
done_testing
