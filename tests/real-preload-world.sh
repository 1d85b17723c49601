#!/bin/bash
# real-preload-world: what a system-wide preload meets. In a private mount namespace over
# a copy of /etc whose ld.so.preload holds "$DIR/$LIB/libthpalloc.so.1" (the Debian
# package's layout: the library only at the $LIB path of its architecture; the machine's
# own /etc is never touched), every program below runs once outside (plain glibc) and
# once inside, and must give the same stdout and exit status:
#   - a dynamic program really gets thpalloc through ld.so.preload ($LIB expanded);
#   - a static binary (tests/real-static, busybox) runs untouched: thpalloc not mapped;
#   - a 32-bit program (when gcc -m32 works): runs, and ld.so says at most that the
#     preload "cannot be preloaded ... ignored" (there is no 32-bit library here; with
#     one, tests/m32-suites.sh checks that ld.so says nothing and the program gets it);
#   - man -P cat under man-db's seccomp filter (MAN_DISABLE_SECCOMP unset);
#   - sudo -V as root and as nobody (setuid root: secure execution);
#   - python3 -c "import ctypes", and thpalloc_active() = 1 inside python3;
#   - tests/real-dlopen: every regular lib*.so.* of /usr/lib/x86_64-linux-gnu (but
#     allocators, sanitizers, interposers) dlopen'ed into one process;
#   - python3 importing every C extension module of lib-dynload.
set -u
. "${TESTS_SRCDIR:-$(dirname "$0")}/tap.sh"
: "${THPALLOC_LIB:?}" "${TESTS_BUILDDIR:?}"
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    skip_all "needs root and unshare -m"
fi
tmp=$(mktemp -d /var/tmp/thpalloc-world.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
libdir=$(ldd /bin/true | sed -n 's|.*=> /\(usr/\)\{0,1\}\(lib[^ ]*\)/libc\.so\.6.*|\2|p')
: "${libdir:=lib/x86_64-linux-gnu}"
mkdir -p "$tmp/$libdir"
cp "$THPALLOC_LIB" "$tmp/$libdir/libthpalloc.so.1"
mkdir "$tmp/etc"
cp -a /etc/. "$tmp/etc/" 2>/dev/null
printf '%s/$LIB/libthpalloc.so.1\n' "$tmp" >"$tmp/etc/ld.so.preload"
chmod 644 "$tmp/etc/ld.so.preload"
PY=/usr/bin/python3
export LC_ALL=C TZ=UTC PYTHONDONTWRITEBYTECODE=1
unset MAN_DISABLE_SECCOMP LD_PRELOAD

inns() { # CMD...: inside the namespace with the preload
    unshare -m --propagation private sh -c "mount --bind '$tmp/etc' /etc && exec \"\$@\"" sh "$@"
}
# both NAME CMD...: runs CMD outside and inside; $NAME.{out,err,rc}.{plain,ns}
both() {
    local name=$1
    shift
    timeout -k 5 120 "$@" >"$tmp/$name.out.plain" 2>"$tmp/$name.err.plain"
    echo $? >"$tmp/$name.rc.plain"
    timeout -k 5 120 unshare -m --propagation private sh -c \
        "mount --bind '$tmp/etc' /etc && exec \"\$@\"" sh "$@" \
        >"$tmp/$name.out.ns" 2>"$tmp/$name.err.ns"
    echo $? >"$tmp/$name.rc.ns"
}
same() { # NAME DESC: same stdout, exit 0 both
    local name=$1 rcp rcn
    rcp=$(cat "$tmp/$name.rc.plain") rcn=$(cat "$tmp/$name.rc.ns")
    if [ "$rcp" = 0 ] && [ "$rcn" = 0 ] && [ -s "$tmp/$name.out.plain" ] &&
        cmp -s "$tmp/$name.out.plain" "$tmp/$name.out.ns"; then
        ok 0 "$2"
    else
        ok 1 "$2"
        echo "exit plain $rcp, preloaded $rcn" | diag
        diff "$tmp/$name.out.plain" "$tmp/$name.out.ns" | head -n 10 | diag
        head -n 5 "$tmp/$name.err.ns" | diag
    fi
}
quiet() { # NAME DESC: nothing on stderr under the preload that was not there without it
    if cmp -s "$tmp/$1.err.plain" "$tmp/$1.err.ns" 2>/dev/null || [ ! -s "$tmp/$1.err.ns" ]; then
        ok 0 "$2"
    else
        ok 1 "$2"
        head -n 5 "$tmp/$1.err.ns" | diag
    fi
}

# 1. the preload works at all
maps=$(inns grep -c libthpalloc /proc/self/maps)
ok $([ "${maps:-0}" -gt 0 ]; echo $?) "a dynamic program gets thpalloc through ld.so.preload (\$LIB = $libdir)"
active=$(inns "$PY" -c 'import ctypes; print(ctypes.CDLL(None).thpalloc_active())' 2>&1)
ok $([ "$active" = 1 ]; echo $?) "thpalloc is in charge inside python3 (thpalloc_active() = $active)"

# 2. static binaries
both static "$TESTS_BUILDDIR/real-static"
same static "a static binary (tests/real-static) runs the same under the preload"
ok $(! grep -q 'thpalloc mapped' "$tmp/static.out.ns"; echo $?) "the static binary is untouched (thpalloc not mapped)"
quiet static "the static binary: nothing on stderr"
if [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; then
    both busybox /bin/busybox sh -c 'echo busybox ok; grep -c libthpalloc /proc/self/maps; exit 0'
    same busybox "static busybox runs the same ($(head -n 1 "$tmp/busybox.out.ns"))"
    ok $([ "$(sed -n 2p "$tmp/busybox.out.ns")" = 0 ]; echo $?) "static busybox: thpalloc not mapped"
else
    skip "static busybox" "busybox-static not installed"
    skip "static busybox: not mapped" "busybox-static not installed"
fi

# 3. a 32-bit program
. "$TESTS_SRCDIR/m32-probe.sh"
m32_probe "$tmp"
if test -z "$M32_WHY"; then
    gcc -m32 -O2 -o "$tmp/m32-suites" "$TESTS_SRCDIR/real-static.c" 2>"$tmp/m32.cc"
    both m32 "$tmp/m32-suites"
    same m32 "a 32-bit program runs the same under the 64-bit preload ($(cat "$tmp/m32.out.ns" | head -n 1))"
    other=$(grep -v "^ERROR: ld.so: object '.*' from /etc/ld.so.preload cannot be preloaded (.*): ignored.$" \
        "$tmp/m32.err.ns")
    cat "$tmp/m32.err.ns" | diag
    ok $([ -z "$other" ]; echo $?) "the 32-bit program: ld.so says at most 'cannot be preloaded ... ignored'"
else
    skip "a 32-bit program" "$M32_WHY"
    skip "the 32-bit program's stderr" "$M32_WHY"
fi

# 4. man under its seccomp filter
if command -v man >/dev/null && man -w ls >/dev/null 2>&1; then
    both man env MANWIDTH=80 MAN_KEEP_FORMATTING= man -P cat ls
    same man "man -P cat ls (seccomp sandbox) gives the same page ($(wc -l <"$tmp/man.out.ns") lines)"
    ok $(! grep -qiE 'seccomp|bad system call|SIGSYS|thpalloc' "$tmp/man.err.ns"; echo $?) \
        "man: no seccomp violation or allocator message on stderr"
else
    skip "man -P cat ls" "man-db or the ls page is missing"
    skip "man: stderr" "man-db or the ls page is missing"
fi

# 5. sudo -V (setuid root; as nobody it runs in secure execution)
if command -v sudo >/dev/null; then
    both sudo sudo -V
    same sudo "sudo -V as root gives the same output"
    su=$(command -v sudo)
    if [ -u "$su" ] && command -v setpriv >/dev/null; then
        both sudo-nobody setpriv --reuid=65534 --regid=65534 --clear-groups "$su" -V
        same sudo-nobody "sudo -V as nobody (setuid root, AT_SECURE) gives the same output"
        quiet sudo-nobody "sudo -V as nobody: nothing new on stderr"
    else
        skip "sudo -V as nobody" "sudo is not setuid or setpriv is missing"
        skip "sudo -V as nobody: stderr" "sudo is not setuid or setpriv is missing"
    fi
else
    for i in 1 2 3; do skip "sudo -V" "sudo not installed"; done
fi

# 6. python3 and ctypes
both ctypes "$PY" -c 'import ctypes, ctypes.util; print("ctypes ok", ctypes.sizeof(ctypes.c_void_p))'
same ctypes "python3 -c 'import ctypes' works the same"
quiet ctypes "python3 -c 'import ctypes': nothing on stderr"

# 7. many libraries dlopen'ed into one process
both dlopen "$TESTS_BUILDDIR/real-dlopen" "/usr/$libdir" 2000
same dlopen "tests/real-dlopen: the same $(grep -c '^opened' "$tmp/dlopen.out.ns") of $(wc -l <"$tmp/dlopen.out.ns") libraries opened and closed"
ok $([ "$(grep -c '^opened' "$tmp/dlopen.out.ns")" -ge 50 ]; echo $?) "at least 50 libraries were loaded"
quiet dlopen "tests/real-dlopen: nothing new on stderr"

# 8. every C extension module of python3's lib-dynload
cat >"$tmp/imp.py" <<'PYEOF'
import glob, importlib, os, sys
ok = 0
for f in sorted(glob.glob(os.path.join(sys.base_prefix, "lib", "python3*", "lib-dynload", "*.so"))):
    name = os.path.basename(f).split(".")[0]
    try:
        importlib.import_module(name)
        print("imported", name)
        ok += 1
    except Exception as e:
        print("failed", name, type(e).__name__)
print("total", ok)
PYEOF
both dynload "$PY" "$tmp/imp.py"
same dynload "python3 imports the same $(sed -n 's/^total //p' "$tmp/dynload.out.ns") C extension modules"
done_testing
