/* thpalloc-preload [--root DIR] enable|disable|status: the system-wide entry for thpalloc in
 * DIR/etc/ld.so.preload (thpalloc-preload(8)).
 *
 * The file is parsed as glibc's ld.so parses it (elf/rtld.c): '#' starts a comment that runs
 * to the end of the line, entries are separated by ' ', '\t', '\n' and ':', and nothing
 * after a NUL byte is read. Our entry is matched as an exact token (with a CRLF line's '\r',
 * a copy that ld.so cannot load); every other byte of the file (other entries, comments,
 * blank lines, NUL bytes, a missing final newline) is kept as it was. Writes are atomic: a
 * temporary file in the same directory, mode 0644 whatever the old mode was, fsync, rename,
 * fsync of the directory. The file is removed only when our entry was all it held. `enable`
 * first proves that the library loads and runs (LD_PRELOAD=LIB /bin/true exits 0 and prints
 * nothing on stderr) and is thpalloc, and otherwise refuses, saying why, without touching
 * the file. The file's parsing and editing are in tools/thpalloc-preload/preload-file.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <grp.h>
#include <link.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload-file.h"
#include "preload-owner.h"

/* The entry: /usr/$LIB/libthpalloc.so.1 when the library is installed in the system's
 * multiarch directory (ld.so expands $LIB to lib/<triplet> on Debian, so one line serves
 * every architecture), else the literal install path. THPALLOC_LIBDIR and THPALLOC_MULTIARCH
 * come from the build (tools/thpalloc-preload/thpalloc-preload.am). */
#ifndef THPALLOC_LIBDIR
#define THPALLOC_LIBDIR "/usr/lib"
#endif
#ifndef THPALLOC_MULTIARCH
#define THPALLOC_MULTIARCH ""
#endif
#ifndef THPALLOC_SBINDIR
#define THPALLOC_SBINDIR "/usr/sbin"
#endif
#define LIBNAME "libthpalloc.so.1"

/* Messages start with the program's name, as err(3) writes it. */
#define PROG program_invocation_short_name

static void usage(void)
{
    printf("Usage:\n"
           " %s [options] enable|disable|status\n"
           "\nAdd thpalloc to /etc/ld.so.preload, so that every process runs on it, or take\n"
           "it out again.\n"
           "\nCommands:\n"
           " enable     add the entry, once the library has proved that it loads and runs\n"
           " disable    take the entry out (the file goes when nothing else is in it)\n"
           " status     print \"enabled\", \"disabled\", or \"dormant\" (preloaded after\n"
           "            another library that owns malloc)\n"
           "\nOptions:\n"
           " -r, --root DIR  edit DIR/etc/ld.so.preload instead of /etc/ld.so.preload\n"
           " -f, --first     enable: put the entry first, before any other preload\n"
           "     --smoke-test  with --root, enable: run DIR's library in a chroot of DIR,\n"
           "                   without privileges (by default it is read, not run)\n"
           "     --host-test   with --root, enable: run DIR's library on this system,\n"
           "                   without privileges\n"
           " -h, --help      display this help\n"
           " -V, --version   display version\n"
           "\nentry: %s\n"
           "\nFor more details see thpalloc-preload(8).\n",
           PROG, entry);
}

/* A bad command line: what is wrong, where to look, exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarnx(fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try '%s --help' for more information.\n", PROG);
    exit(2);
}
static void set_entry(void)
{
    const char *ma = THPALLOC_MULTIARCH;
    char sys[PATH_MAX];
    snprintf(sys, sizeof sys, "/usr/lib/%s", ma);
    if (ma[0] != '\0' && strcmp(THPALLOC_LIBDIR, sys) == 0)
        snprintf(entry, sizeof entry, "/usr/$LIB/%s", LIBNAME);
    else
        snprintf(entry, sizeof entry, "%s/%s", THPALLOC_LIBDIR, LIBNAME);
    entry_len = strlen(entry);
}

/* --- the smoke test --- */

/* The exit status of a child that could not give up its privileges (its reason on the
 * captured output): the program was not run. */
#define SANDBOX_FAILED 125
#define NOBODY 65534

/* In the child, before it runs DIR's code (a library under --root, with --smoke-test or
 * --host-test): a chroot of `in` (NULL: none) and no privileges. As root: a private mount
 * namespace, the chroot, then uid and gid 65534 (nobody) with no supplementary groups, an
 * empty capability bounding set, so that a constructor can neither chroot out nor write
 * what root may. As another user: a user and mount namespace, where the kernel gives an
 * unprivileged user one, for the chroot (the uid stays the caller's: mapped to itself, it
 * loses every capability at execve). Then, for both: no capabilities (effective,
 * permitted, inheritable, ambient) and PR_SET_NO_NEW_PRIVS (no setuid program or file
 * capability gives any back). 0, or -1 with msg[] saying what failed. */
static int drop_privileges(const char *in, char *msg, size_t cap)
{
    const char *what;
    if (geteuid() == 0 || getuid() == 0) {
        what = "unshare(CLONE_NEWNS)";
        if (unshare(CLONE_NEWNS) != 0 || (what = "mount --make-rprivate /",
                                          mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0))
            goto fail;
        what = "chroot";
        if (in && (chroot(in) != 0 || chdir("/") != 0))
            goto fail;
        what = "PR_CAPBSET_DROP";
        for (int c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0)
                goto fail;
        what = "setgroups";
        if (setgroups(0, NULL) != 0)
            goto fail;
        what = "setresgid(nobody)";
        if (setresgid(NOBODY, NOBODY, NOBODY) != 0)
            goto fail;
        what = "setresuid(nobody)";
        if (setresuid(NOBODY, NOBODY, NOBODY) != 0)
            goto fail;
    } else if (in) {
        uid_t u = getuid();
        gid_t g = getgid();
        what = "unshare(CLONE_NEWUSER | CLONE_NEWNS) (a chroot without root needs a user "
               "namespace)";
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
            goto fail;
        char map[64];
        struct {
            const char *file, *text;
        } w[] = {{"/proc/self/setgroups", "deny"},
                 {"/proc/self/uid_map", map},
                 {"/proc/self/gid_map", NULL}};
        char gmap[64];
        snprintf(map, sizeof map, "%u %u 1", (unsigned)u, (unsigned)u);
        snprintf(gmap, sizeof gmap, "%u %u 1", (unsigned)g, (unsigned)g);
        w[2].text = gmap;
        for (size_t i = 0; i < 3; i++) {
            what = w[i].file;
            int f = open(w[i].file, O_WRONLY | O_CLOEXEC);
            if (f < 0 || write(f, w[i].text, strlen(w[i].text)) < 0) {
                if (f >= 0)
                    close(f);
                goto fail;
            }
            close(f);
        }
        what = "chroot";
        if (chroot(in) != 0 || chdir("/") != 0)
            goto fail;
    }
    what = "PR_CAP_AMBIENT_CLEAR_ALL";
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        goto fail;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    what = "capset";
    if (syscall(SYS_capset, &h, d) != 0)
        goto fail;
    what = "PR_SET_NO_NEW_PRIVS";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        goto fail;
    /* Checked, not assumed: no uid 0 and no capability left. */
    uid_t r, e, sv;
    what = "a check of the uid and capabilities";
    if (syscall(SYS_capget, &h, d) != 0 || d[0].effective || d[0].permitted || d[1].effective ||
        d[1].permitted || getresuid(&r, &e, &sv) != 0 || r == 0 || e == 0 || sv == 0) {
        errno = EPERM;
        goto fail;
    }
    return 0;
fail:
    snprintf(msg, cap, "%s: %s", what, strerror(errno));
    return -1;
}

/* Runs argv[0] (a full path; inside `in` when that is not NULL: a chroot of it) with envp,
 * stdin and the other output on /dev/null, and output `fd` (1 or 2) read into out[cap]
 * (NUL-terminated, trailing newlines and blanks cut, *len bytes; the rest of a longer output
 * is read and dropped). With `sandbox`, without privileges (drop_privileges). Returns the
 * wait status, or -1 with why[] saying what failed. */
static int run_capture(const char *in, bool sandbox, char *const argv[], char *const envp[], int fd,
                       char *out, size_t cap, size_t *len, char *why, size_t wcap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(why, wcap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, wcap, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        /* The pipe's end above 2 first: started with 0-2 closed, it may be one of them. */
        int w = pfd[1] > 2 ? pfd[1] : fcntl(pfd[1], F_DUPFD_CLOEXEC, 3);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        dup2(w, fd);
        /* Nothing of ours stays open in the program: a directory would lead out of a chroot. */
        syscall(SYS_close_range, 3U, ~0U, 0U);
        if (sandbox) {
            char msg[512];
            if (drop_privileges(in, msg, sizeof msg) != 0) {
                dprintf(fd, "%s", msg);
                _exit(SANDBOX_FAILED);
            }
        } else if (in && (chroot(in) != 0 || chdir("/") != 0)) {
            dprintf(fd, "cannot chroot to %s: %s", in, strerror(errno));
            _exit(127);
        }
        signal(SIGALRM, SIG_DFL);
        alarm(30); /* a program that hangs fails the check instead of the install */
        execve(argv[0], argv, envp);
        dprintf(fd, "cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    for (;;) {
        char tmp[512];
        ssize_t r = read(pfd[0], tmp, sizeof tmp);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t c = (size_t)r;
        if (c > cap - 1 - n)
            c = cap - 1 - n;
        memcpy(out + n, tmp, c);
        n += c;
    }
    close(pfd[0]);
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    *len = n; /* bytes read: a NUL among them still counts */
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, wcap, "waitpid: %s", strerror(errno));
            return -1;
        }
    return st;
}

/* The smoke test's last program is this tool again, run with LD_PRELOAD=LIB as
 * `thpalloc-preload --probe-preload LIB` (for the smoke test only, not for people): any
 * library loads and runs /bin/true, so the probe proves that LIB is thpalloc and that its
 * malloc is the program's. It exits PROBE_NOT_THPALLOC with the reason on stderr when not. */
#define PROBE_ARG "--probe-preload"
#define PROBE_NOT_THPALLOC 3

/* The program to run as the probe: this one, unless the build names another (the tests'
 * ASan build cannot run with another malloc preloaded). Without /proc, the installed tool. */
static const char *probe_exe(void)
{
#ifdef THPALLOC_PRELOAD_PROBE
    return THPALLOC_PRELOAD_PROBE;
#else
    return access("/proc/self/exe", X_OK) == 0 ? "/proc/self/exe"
                                               : THPALLOC_SBINDIR "/thpalloc-preload";
#endif
}

/* LIB as ld.so expanded it: LIB itself, or with any directory in place of "$LIB". */
struct loaded {
    const char *pre, *suf; /* LIB before and after "$LIB" (suf NULL: no "$LIB") */
    const char *name;      /* the loaded object's path, once found */
};

static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct loaded *l = data;
    const char *nm = info->dlpi_name;
    size_t n = strlen(nm), np = strlen(l->pre), ns = l->suf ? strlen(l->suf) : 0;
    bool match =
        l->suf ? n > np + ns && memcmp(nm, l->pre, np) == 0 && strcmp(nm + n - ns, l->suf) == 0
               : strcmp(nm, l->pre) == 0;
    if (match)
        l->name = nm;
    return match;
}

static int probe(const char *lib)
{
    char pre[2 * PATH_MAX];
    snprintf(pre, sizeof pre, "%s", lib);
    char *dollar = strstr(pre, "$LIB");
    struct loaded l = {pre, dollar ? lib + (dollar - pre) + 4 : NULL, NULL};
    if (dollar)
        *dollar = '\0';
    dl_iterate_phdr(find_loaded, &l);
    /* Plain stderr: the parent quotes it after "refusing to enable: ". */
    if (!l.name) {
        fprintf(stderr, "%s is not loaded", lib);
        return PROBE_NOT_THPALLOC;
    }
    void *h = dlopen(l.name, RTLD_LAZY | RTLD_NOLOAD);
    void *sym = h ? dlsym(h, "thpalloc_active") : NULL;
    Dl_info di;
    /* dlsym also searches what the library depends on: the symbol must be its own */
    if (!sym || !dladdr(sym, &di) || !di.dli_fname || strcmp(di.dli_fname, l.name) != 0) {
        fprintf(stderr, "%s does not export thpalloc_active: it is not thpalloc", l.name);
        return PROBE_NOT_THPALLOC;
    }
    int active = ((int (*)(void))sym)();
    if (active != 1) {
        fprintf(stderr,
                "%s: thpalloc_active() returned %d, not 1: its malloc is not the "
                "program's",
                l.name, active);
        return PROBE_NOT_THPALLOC;
    }
    return 0;
}

/* Every program the smoke test runs reads /etc/ld.so.preload too (the system's, or DIR's in
 * a chroot of DIR), and ld.so complains there about each entry it cannot load: a stale one
 * (a library since removed), a CRLF line's (a name that ends in '\r', ours included, which
 * enable repairs). Those complaints are no failure of our library (enable names the
 * entries itself, see warn_other_entries); one about our entry as it is stays. Cuts them
 * out of err[0..*n). */
static void drop_file_complaints(char *err, size_t *n)
{
    static const char head[] = "ERROR: ld.so: object '";
    char tail[128];
    int tl = snprintf(tail, sizeof tail, "' from %s cannot be preloaded", PRELOAD_FILE);
    size_t hl = sizeof head - 1;
    size_t o = 0;
    for (size_t i = 0; i < *n;) {
        size_t e = i;
        while (e < *n && err[e] != '\n')
            e++;
        bool drop = false;
        if (e - i > hl && memcmp(err + i, head, hl) == 0) {
            const char *obj = err + i + hl;
            const char *t = memmem(obj, e - i - hl, tail, (size_t)tl);
            drop = t && !((size_t)(t - obj) == entry_len && memcmp(obj, entry, entry_len) == 0);
        }
        if (e < *n)
            e++; /* with its newline */
        if (!drop) {
            memmove(err + o, err + i, e - i);
            o += e - i;
        }
        i = e;
    }
    while (o > 0 && (err[o - 1] == '\n' || err[o - 1] == ' '))
        o--;
    err[o] = '\0';
    *n = o;
}

/* The other entries of the file that ld.so reads but cannot load: one with a carriage
 * return (a CRLF line), and (all: enable) one whose library does not exist. Each costs an
 * error message in every program, not thpalloc's entry: a warning that says what to do, at
 * most PRELOAD_OWNER_MAX_ENTRIES entries read. True when it warned. */
static bool warn_other_entries(const struct current *c, bool all)
{
    size_t n = 0;
    bool warned = false;
    for (size_t k = 0; k < c->p.ntok && n < PRELOAD_OWNER_MAX_ENTRIES; k++) {
        const struct token *t = &c->p.tok[k];
        if (t->ours || !t->seen)
            continue;
        n++;
        const char *tok = c->buf + t->start;
        size_t len = t->end - t->start;
        const char *cr = memchr(tok, '\r', len);
        char file[2 * PATH_MAX];
        if (cr || (all && !preload_resolve(root, tok, len, file, sizeof file)))
            warned = true;
        if (cr)
            warnx("warning: %s: %.*s %s: ld.so looks for a file of that name, loads nothing "
                  "for it and prints an error in every program; convert the file to LF line "
                  "ends",
                  path, (int)(cr - tok), tok,
                  cr == tok + len - 1 ? "ends in a carriage return (a CRLF line)"
                                      : "and more after a carriage return are one entry");
        else if (all && !preload_resolve(root, tok, len, file, sizeof file))
            warnx("warning: %s: %.*s does not exist: ld.so prints an error for it in every "
                  "program; take the entry out",
                  path, (int)len, tok);
    }
    return warned;
}

/* Runs argv with LD_PRELOAD=lib and a small fixed environment (inside a chroot of `in`
 * unless NULL); true when it exits 0 and writes nothing to stderr. On failure, why[] says
 * what happened. */
static bool smoke_one(const char *in, bool sandbox, const char *lib, char *const argv[], char *why,
                      size_t cap)
{
    char pre[2 * PATH_MAX + 16];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib);
    char *envp[] = {pre, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    char err[1024];
    size_t n = 0;
    int st = run_capture(in, sandbox, argv, envp, 2, err, sizeof err, &n, why, cap);
    if (st < 0)
        return false;
    if (sandbox && WIFEXITED(st) && WEXITSTATUS(st) == SANDBOX_FAILED) {
        snprintf(why, cap, "cannot run %s without privileges, so it was not run: %s", argv[0], err);
        return false;
    }
    drop_file_complaints(err, &n);
    if (WIFSIGNALED(st)) {
        snprintf(why, cap, "LD_PRELOAD=%s %s was killed by signal %d%s%s", lib, argv[0],
                 WTERMSIG(st), n ? ": " : "", err);
        return false;
    }
    if (WEXITSTATUS(st) == PROBE_NOT_THPALLOC && argv[1] && strcmp(argv[1], PROBE_ARG) == 0 &&
        n > 0) {
        snprintf(why, cap, "%s", err);
        return false;
    }
    if (WEXITSTATUS(st) != 0) {
        snprintf(why, cap, "LD_PRELOAD=%s %s exited with status %d%s%s", lib, argv[0],
                 WEXITSTATUS(st), n ? ": " : "", err);
        return false;
    }
    if (n > 0) {
        snprintf(why, cap, "LD_PRELOAD=%s %s wrote to stderr: %s", lib, argv[0], err);
        return false;
    }
    return true;
}

/* With --root, the library is DIR's: it must never run with the caller's privileges (its
 * constructors would, and a chroot does not contain root). By default it is read, not run:
 * an ELF shared object for this machine that defines thpalloc_active, malloc and free.
 * --smoke-test runs it in a chroot of DIR, --host-test on this system, both without
 * privileges (drop_privileges), or not at all. */
static bool host_test;  /* --host-test */
static bool smoke_test; /* --smoke-test */
static bool not_run;    /* set by smoke(): the library was read, not run */

/* This build's ELF class, byte order and machine (0: not checked). */
#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#elif defined(__i386__)
#define OWN_MACHINE EM_386
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#elif defined(__arm__)
#define OWN_MACHINE EM_ARM
#elif defined(__powerpc64__)
#define OWN_MACHINE EM_PPC64
#elif defined(__powerpc__)
#define OWN_MACHINE EM_PPC
#elif defined(__s390__)
#define OWN_MACHINE EM_S390
#elif defined(__riscv)
#define OWN_MACHINE EM_RISCV
#elif defined(__mips__)
#define OWN_MACHINE EM_MIPS
#elif defined(__loongarch__)
#define OWN_MACHINE 258 /* EM_LOONGARCH */
#else
#define OWN_MACHINE 0
#endif
#define OWN_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define OWN_DATA (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)

static bool read_library(char *why, size_t cap)
{
    char file[2 * PATH_MAX];
    int fd = preload_open(root, entry, entry_len, file, sizeof file);
    if (fd < 0) {
        snprintf(why, cap, "%.600s%.600s: no such library (inside %.600s)", root, entry, root);
        return false;
    }
    static const char *const want[] = {"thpalloc_active", "malloc", "free"};
    int found[3];
    struct elf_facts f;
    int r = elf_inspect(fd, &f, want, 3, found);
    close(fd);
    if (r < 0 || f.type != ET_DYN)
        snprintf(why, cap, "%.1800s is not an ELF shared object", file);
    else if (f.elfclass != OWN_CLASS || f.data != OWN_DATA ||
             (OWN_MACHINE != 0 && f.machine != OWN_MACHINE))
        snprintf(why, cap,
                 "%.1800s is built for another machine (ELF class %u, byte order %u, machine "
                 "%u; this system's: %u, %u, %u)",
                 file, f.elfclass, f.data, f.machine, (unsigned)OWN_CLASS, (unsigned)OWN_DATA,
                 (unsigned)OWN_MACHINE);
    else if (!found[0])
        snprintf(why, cap, "%.1800s does not export thpalloc_active: it is not thpalloc", file);
    else if (!found[1] || !found[2])
        snprintf(why, cap, "%.1800s does not define malloc and free: it is not thpalloc", file);
    else
        return true;
    return false;
}

/* Whether rel exists inside DIR (resolved as a chroot of DIR would). */
static bool in_root(const char *rel)
{
    int fd = open_beneath(preload_rootfd, rel, O_PATH, 0);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* Whether prog (absolute) exists inside DIR; on_host: whether this system can run it. */
static bool in_root_abs(const char *prog)
{
    return in_root(prog + 1);
}

static bool on_host(const char *prog)
{
    return access(prog, X_OK) == 0;
}

/* The smoke test's programs with smoke_one(in, sandbox, lib): /bin/true; /bin/ls, a real
 * program that allocates, where has() finds it; then the probe, unless NULL. */
static bool smoke_programs(const char *in, bool sandbox, const char *lib,
                           bool (*has)(const char *prog), const char *probe, char *why, size_t cap)
{
    char *t[] = {"/bin/true", NULL};
    if (!smoke_one(in, sandbox, lib, t, why, cap))
        return false;
    if (has("/bin/ls")) {
        char *l[] = {"/bin/ls", "-la", "/", NULL};
        if (!smoke_one(in, sandbox, lib, l, why, cap))
            return false;
    }
    if (!probe)
        return true;
    char *p[] = {(char *)probe, PROBE_ARG, (char *)lib, NULL};
    return smoke_one(in, sandbox, lib, p, why, cap);
}

/* The smoke test inside a chroot of DIR, without privileges: its programs, its ld.so, its
 * library; the probe is DIR's own thpalloc-preload when it has one. */
static bool smoke_in_root(char *why, size_t cap)
{
    if (!in_root("bin/true")) {
        snprintf(why, cap,
                 "--smoke-test: %.900s has no /bin/true to run in a chroot of it, so the "
                 "library was not run",
                 root);
        return false;
    }
    const char *probe = THPALLOC_SBINDIR "/thpalloc-preload";
    bool ok =
        smoke_programs(root, true, entry, in_root_abs, in_root_abs(probe) ? probe : NULL, why, cap);
    if (!ok) {
        char tmp[2048];
        snprintf(tmp, sizeof tmp, "in a chroot of %.500s: %.1500s", root, why);
        snprintf(why, cap, "%s", tmp);
    }
    return ok;
}

static bool smoke(char *why, size_t cap)
{
    bool sandbox = root[0] != '\0';
    if (sandbox) {
        if (!read_library(why, cap))
            return false;
        if (smoke_test)
            return smoke_in_root(why, cap);
        if (!host_test) {
            not_run = true;
            return true;
        }
    }
    char lib[2 * PATH_MAX];
    if (snprintf(lib, sizeof lib, "%s%s", root, entry) >= (int)sizeof lib) {
        snprintf(why, cap, "path too long");
        return false;
    }
    /* LD_PRELOAD splits at blanks and ':'; such a root cannot be tested, so refuse it. */
    if (strpbrk(root, " \t\n:")) {
        snprintf(why, cap,
                 "the root %.256s contains a blank or ':', so the library cannot be "
                 "tried with LD_PRELOAD",
                 root);
        return false;
    }
    return smoke_programs(NULL, sandbox, lib, on_host, probe_exe(), why, cap);
}

/* dpkg architectures and where their libraries go (the $LIB of their ld.so). */
static const struct {
    const char *arch, *triplet;
} arch_dirs[] = {
    {"amd64", "x86_64-linux-gnu"},        {"i386", "i386-linux-gnu"},
    {"arm64", "aarch64-linux-gnu"},       {"armhf", "arm-linux-gnueabihf"},
    {"armel", "arm-linux-gnueabi"},       {"ppc64el", "powerpc64le-linux-gnu"},
    {"s390x", "s390x-linux-gnu"},         {"mips64el", "mips64el-linux-gnuabi64"},
    {"riscv64", "riscv64-linux-gnu"},     {"x32", "x86_64-linux-gnux32"},
    {"loong64", "loongarch64-linux-gnu"},
};

/* The entry reaches every architecture through $LIB, but ld.so prints an error in each
 * program of an architecture whose library is missing: name the root's foreign dpkg
 * architectures (dpkg --root DIR --print-foreign-architectures) that lack libthpalloc1.
 * Says nothing otherwise, nor where there is no dpkg. */
static void warn_missing_archs(void)
{
    if (!strstr(entry, "$LIB") || access("/usr/bin/dpkg", X_OK) != 0)
        return;
    char *argv[] = {"/usr/bin/dpkg", "--root", root, "--print-foreign-architectures", NULL};
    if (root[0] == '\0') {
        argv[1] = "--print-foreign-architectures";
        argv[2] = NULL;
    }
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    char out[1024], why[256];
    size_t n = 0;
    int st = run_capture(NULL, false, argv, envp, 1, out, sizeof out, &n, why, sizeof why);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return;
    for (char *save = NULL, *arch = strtok_r(out, " \t\n", &save); arch;
         arch = strtok_r(NULL, " \t\n", &save))
        for (size_t i = 0; i < sizeof arch_dirs / sizeof *arch_dirs; i++) {
            if (strcmp(arch, arch_dirs[i].arch) != 0 ||
                strcmp(arch_dirs[i].triplet, THPALLOC_MULTIARCH) == 0)
                continue;
            char lib[2 * PATH_MAX];
            snprintf(lib, sizeof lib, "/usr/lib/%s/%s", arch_dirs[i].triplet, LIBNAME);
            bool there = preload_rootfd >= 0 ? in_root(lib + 1) : access(lib, F_OK) == 0;
            if (!there)
                warnx("warning: dpkg architecture %s has no %s: its programs will print an "
                      "ld.so error and run without thpalloc (apt install libthpalloc1:%s)",
                      arch, lib, arch);
        }
}

/* --- verbs --- */

/* An entry that ld.so reads before token `limit` and that defines malloc: ld.so binds every
 * program's malloc to it, and thpalloc, preloaded after it, stays dormant. Its index, with
 * owner[] set to the entry as written, or NONE. */
static size_t malloc_owner(const struct current *c, size_t limit, char *owner, size_t cap)
{
    size_t others = 0;
    for (size_t k = 0; k < limit && k < c->p.ntok; k++) {
        const struct token *t = &c->p.tok[k];
        if (!t->ours && t->seen && others++ >= PRELOAD_OWNER_MAX_ENTRIES)
            break;
        char file[2 * PATH_MAX];
        if (t->ours || !t->seen ||
            !preload_owns_malloc(root, c->buf + t->start, t->end - t->start, file, sizeof file))
            continue;
        snprintf(owner, cap, "%.*s", (int)(t->end - t->start), c->buf + t->start);
        return k;
    }
    return NONE;
}

static void warn_dormant(const char *owner)
{
    warnx("warning: %s: %s comes before %s and owns malloc: thpalloc is preloaded but dormant "
          "in every process (thpalloc-preload enable --first puts it first)",
          path, owner, entry);
}

/* The first token ld.so reads; NONE if none. */
static size_t first_token(const struct parsed *p)
{
    for (size_t k = 0; k < p->ntok; k++)
        if (p->tok[k].seen)
            return k;
    return NONE;
}

static int cmd_status(void)
{
    struct current c;
    if (load(&c) < 0)
        return 1;
    size_t live = first_seen(&c.p, false);
    char owner[PATH_MAX];
    bool dormant = live != NONE && malloc_owner(&c, live, owner, sizeof owner) != NONE;
    puts(live == NONE ? "disabled" : dormant ? "dormant" : "enabled");
    /* For monitoring (as thp-status's system view): 1 when something is wrong. */
    int rc = 0;
    if (dormant) {
        warn_dormant(owner);
        rc = 1;
    }
    /* The copies of the entry that ld.so does not load, once each kind. */
    for (size_t k = 0; k < c.p.ntok; k++)
        if (c.p.tok[k].ours && !c.p.tok[k].seen) {
            warnx("warning: %s: %s comes after a NUL byte (offset %zu), where ld.so stops "
                  "reading: it is not loaded",
                  path, entry, c.p.nul);
            rc = 1;
            break;
        }
    if (first_seen(&c.p, true) != NONE) {
        warnx("warning: %s: %s ends in a carriage return (a CRLF line): ld.so cannot load "
              "it and says so in every program; thpalloc-preload enable repairs it",
              path, entry);
        rc = 1;
    }
    if (c.exists && warn_other_entries(&c, false))
        rc = 1;
    unload(&c);
    return rc;
}

/* The file with our entry on a first line of its own, every other copy of it gone. */
static char *entry_first(const struct current *c, size_t *n)
{
    size_t rest = 0;
    char *without = c->exists ? without_ours(c, NONE, false, &rest) : NULL;
    char *out = xrealloc(NULL, entry_len + 1 + rest);
    memcpy(out, entry, entry_len);
    out[entry_len] = '\n';
    if (rest)
        memcpy(out + entry_len + 1, without, rest);
    free(without);
    *n = entry_len + 1 + rest;
    return out;
}

/* enable's exit status when the file, not the library, stops it (a NUL byte, a symbolic
 * link, not a regular file, unreadable): the package's postinst warns and goes on. */
#define FILE_REFUSED 3

static int cmd_enable(bool first)
{
    struct current c;
    if (load(&c) < 0)
        return FILE_REFUSED;
    int rc = 0;
    char *out = NULL;
    size_t n = 0;
    char owner[PATH_MAX];
    size_t live = first_seen(&c.p, false), fix = NONE;
    bool move = first && live != NONE && live != first_token(&c.p);
    if (live != NONE && !move) {
        /* Already there: only duplicates go (copies ld.so does not load too), and a mode
         * other than 0644 is repaired (a 0600 file silently disables every preload for
         * users other than root). */
        bool fix_mode = (c.st.st_mode & 07777) != 0644;
        if (c.p.ours == 1 && !fix_mode) {
            printf("%s: already enabled (%s in %s)\n", PROG, entry, path);
            goto out;
        }
        out = without_ours(&c, live, false, &n);
        rc = write_file(out, n) == 0 ? 0 : 1;
        if (rc == 0)
            printf("%s: already enabled (%s in %s)%s%s\n", PROG, entry, path,
                   c.p.ours > 1 ? "; duplicates removed" : "",
                   fix_mode ? "; mode set to 0644" : "");
        goto out;
    }
    /* A CRLF line's copy is repaired where it is; a NUL would hide an entry added after it
     * (not one put first). */
    if (!first)
        fix = first_seen(&c.p, true);
    if (!first && fix == NONE && c.p.nul < c.len) {
        warnx("refusing to enable: %s has a NUL byte (offset %zu): ld.so reads no entry "
              "after it; take it out by hand",
              path, c.p.nul);
        warnx("%s left as it was", path);
        rc = FILE_REFUSED;
        goto out;
    }
    char why[2048];
    if (!smoke(why, sizeof why)) {
        warnx("refusing to enable: %s", why);
        warnx("%s left as it was", path);
        rc = 1;
        goto out;
    }
    if (first) {
        out = entry_first(&c, &n);
        rc = write_file(out, n) == 0 ? 0 : 1;
        if (rc == 0)
            printf("%s: enabled (%s %s %s)\n", PROG, entry,
                   move ? "moved to the top of" : "added first to", path);
        goto out;
    }
    if (fix != NONE) {
        out = without_ours(&c, fix, true, &n);
        rc = write_file(out, n) == 0 ? 0 : 1;
        if (rc == 0)
            printf("%s: enabled (carriage return after %s in %s removed)\n", PROG, entry, path);
        goto out;
    }
    /* Append on a line of its own; a file without a final newline keeps not having one. */
    out = xrealloc(NULL, c.len + entry_len + 2);
    if (c.exists) {
        memcpy(out, c.buf, c.len);
        n = c.len;
    }
    if (n == 0 || out[n - 1] == '\n') {
        memcpy(out + n, entry, entry_len);
        n += entry_len;
        out[n++] = '\n';
    } else {
        out[n++] = '\n';
        memcpy(out + n, entry, entry_len);
        n += entry_len;
    }
    rc = write_file(out, n) == 0 ? 0 : 1;
    if (rc == 0)
        printf("%s: enabled (%s added to %s)\n", PROG, entry, path);
out:
    /* Where the entry is now: after an allocator, it is dormant (not after --first). */
    if (rc == 0 && !first && c.exists &&
        malloc_owner(&c,
                     live != NONE  ? live
                     : fix != NONE ? fix
                                   : c.p.ntok,
                     owner, sizeof owner) != NONE)
        warn_dormant(owner);
    if (rc == 0 && not_run)
        warnx("warning: %s was read, not run: with --root, DIR's code runs only when asked, "
              "and without privileges (--smoke-test: in a chroot of %s)",
              entry, root);
    if (rc == 0) {
        warn_missing_archs();
        warn_other_entries(&c, true);
    }
    free(out);
    unload(&c);
    return rc;
}

static int cmd_disable(void)
{
    struct current c;
    if (load(&c) < 0)
        return 1;
    int rc = 0;
    if (!c.exists) {
        printf("%s: already disabled (no %s)\n", PROG, path);
    } else if (c.p.ours == 0) {
        printf("%s: already disabled (%s not in %s)\n", PROG, entry, path);
    } else {
        size_t n = 0;
        char *out = without_ours(&c, NONE, false, &n);
        if (only_separators(out, n)) {
            rc = remove_file() == 0 ? 0 : 1;
            if (rc == 0)
                printf("%s: disabled (%s removed: the entry was all it held)\n", PROG, path);
        } else {
            rc = write_file(out, n) == 0 ? 0 : 1;
            if (rc == 0)
                printf("%s: disabled (%s taken out of %s)\n", PROG, entry, path);
        }
        free(out);
    }
    unload(&c);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], PROBE_ARG) == 0)
        return probe(argv[2]);
    set_entry();
    static const struct option longopts[] = {
        {"root", required_argument, NULL, 'r'},
        {"first", no_argument, NULL, 'f'},
        {"host-test", no_argument, NULL, 'H'},
        {"smoke-test", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *rootarg = NULL;
    bool first = false;
    int c;
    opterr = 0; /* our own messages, with the short name and the --help hint */
    while ((c = getopt_long(argc, argv, ":r:fhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            rootarg = optarg;
            break;
        case 'f':
            first = true;
            break;
        case 'H':
            host_test = true;
            break;
        case 'S':
            smoke_test = true;
            break;
        case 'h':
            usage();
            return 0;
        case 'V':
            printf("%s from thpalloc %s\n", PROG, PACKAGE_VERSION);
            return 0;
        case ':':
            bad_usage("option '%s' requires an argument", argv[optind - 1]);
        default:
            /* -h and -V are never wrong: with their value, it is --help=X or --version=X */
            if (optopt == 'h' || optopt == 'V')
                bad_usage("option '%.*s' doesn't allow an argument",
                          (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
            if (optopt)
                bad_usage("invalid option -- '%c'", optopt);
            bad_usage("unrecognized option '%s'", argv[optind - 1]);
        }
    }
    /* getopt_long moved the operands behind the options: the command is the one left. */
    if (optind == argc)
        bad_usage("no command given (enable, disable or status)");
    const char *verb = argv[optind];
    if (argc - optind > 1)
        bad_usage("one command only (got %s and %s)", verb, argv[optind + 1]);
    if (strcmp(verb, "enable") != 0 && strcmp(verb, "disable") != 0 && strcmp(verb, "status") != 0)
        bad_usage("unknown command '%s'", verb);
    if (first && strcmp(verb, "enable") != 0)
        bad_usage("--first is for enable only");
    if (host_test && smoke_test)
        bad_usage("--host-test and --smoke-test exclude each other");
    if ((host_test || smoke_test) && rootarg == NULL)
        bad_usage("--%s is for --root DIR only", host_test ? "host-test" : "smoke-test");
    if (rootarg != NULL && rootarg[0] == '\0')
        bad_usage("--root needs a directory");
    if (rootarg != NULL) {
        char *rp = realpath(rootarg, NULL);
        struct stat st;
        bool is_dir = rp && stat(rp, &st) == 0 && S_ISDIR(st.st_mode);
        bool fits = is_dir && (strcmp(rp, "/") == 0 ||
                               snprintf(root, sizeof root, "%s", rp) < (int)sizeof root);
        free(rp);
        if (!is_dir)
            errx(1, "--root %s: not a directory", rootarg);
        if (!fits)
            errx(1, "--root %s: the path is too long", rootarg);
    }
    snprintf(dir, sizeof dir, "%s/etc", root);
    snprintf(path, sizeof path, "%s" PRELOAD_FILE, root);

    /* With --root, every path under DIR is resolved inside it, as a chroot of DIR would
     * resolve it: DIR/etc -> /etc edits DIR's file or none, never the host's. */
    if (root[0] != '\0') {
        preload_rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (preload_rootfd < 0)
            err(1, "%s", root);
        etcfd = open_beneath(preload_rootfd, "etc", O_RDONLY | O_DIRECTORY, 0);
    } else {
        etcfd = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (etcfd < 0) {
        int e = errno;
        char to[PATH_MAX];
        ssize_t l = root[0] ? readlink(dir, to, sizeof to - 1) : -1;
        if (strcmp(verb, "status") == 0 && e == ENOENT && l < 0)
            return cmd_status(); /* no DIR/etc: no file */
        if (l >= 0)
            errx(1,
                 "cannot open %s: %s (a symbolic link to %.*s, followed inside %s as a "
                 "chroot of it would)",
                 dir, strerror(e), (int)l, to, root);
        errno = e;
        err(1, "%s", dir);
    }
    if (strcmp(verb, "status") == 0)
        return cmd_status();

    /* One writer at a time: an exclusive lock on the directory itself. */
    if (flock(etcfd, LOCK_EX) != 0)
        err(1, "cannot lock %s", dir);
    int rc = strcmp(verb, "enable") == 0 ? cmd_enable(first) : cmd_disable();
    fflush(stdout);
    close(etcfd);
    return rc;
}
