/* thp-status: keep only the capabilities that reading other processes needs (libcap).
 *
 * Kept, where the process has them: CAP_SYS_PTRACE (smaps, environ, exe, process_vm_readv
 * of processes of other users or with more privileges), CAP_DAC_READ_SEARCH (files and
 * /proc entries whose modes would refuse us), CAP_PERFMON on kernels that know it (newer
 * kernels accept it for some reads that used to need CAP_SYS_PTRACE), CAP_CHECKPOINT_RESTORE
 * on kernels that know it (following /proc/PID/map_files: the library a process still maps
 * after an upgrade replaced its file, to read its arena table). CAP_SYS_ADMIN stays in the
 * permitted set only, made effective just for opening /proc/PID/pagemap (ts_open_pagemap:
 * the kernel shows page frame numbers to an opener with it, which --scan needs to count a
 * page that several processes share once). Everything else
 * goes from the permitted, effective and inheritable sets and the ambient set, and from
 * the bounding set where CAP_SETPCAP allows it. The tool is never installed with file
 * capabilities: it has what its caller (root, usually) gives it. */
#include "thp-status.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

struct ts_caps ts_caps;

static bool cap_has(cap_t c, cap_value_t v, cap_flag_t f)
{
    cap_flag_value_t on = CAP_CLEAR;
    return cap_get_flag(c, v, f, &on) == 0 && on == CAP_SET;
}

void ts_caps_drop(void)
{
    cap_value_t max = cap_max_bits(); /* number of capabilities the kernel knows */
    ts_caps.perfmon_known = CAP_PERFMON < max;
    cap_value_t keep[5];
    int nkeep = 0;
    keep[nkeep++] = CAP_SYS_ADMIN; /* first: permitted, not effective (below) */
    keep[nkeep++] = CAP_SYS_PTRACE;
    keep[nkeep++] = CAP_DAC_READ_SEARCH;
    if (ts_caps.perfmon_known)
        keep[nkeep++] = CAP_PERFMON;
    if (CAP_CHECKPOINT_RESTORE < max)
        keep[nkeep++] = CAP_CHECKPOINT_RESTORE;

    cap_t cur = cap_get_proc();
    if (!cur) {
        snprintf(ts_caps.note, sizeof ts_caps.note, "cap_get_proc: %s", strerror(errno));
        return;
    }
    /* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
    if (cap_has(cur, CAP_SETPCAP, CAP_EFFECTIVE)) {
        bool all = true;
        for (cap_value_t v = 0; v < max; v++) {
            bool k = false;
            for (int i = 0; i < nkeep; i++)
                k |= keep[i] == v;
            if (!k && CAP_IS_SUPPORTED(v) && cap_get_bound(v) > 0 && cap_drop_bound(v) != 0)
                all = false;
        }
        ts_caps.bound_dropped = all;
    }
    cap_reset_ambient();

    cap_t want = cap_init(); /* all clear */
    if (want) {
        for (int i = 0; i < nkeep; i++) {
            if (cap_has(cur, keep[i], CAP_PERMITTED)) {
                cap_set_flag(want, CAP_PERMITTED, 1, &keep[i], CAP_SET);
                if (keep[i] != CAP_SYS_ADMIN)
                    cap_set_flag(want, CAP_EFFECTIVE, 1, &keep[i], CAP_SET);
            }
        }
        if (cap_set_proc(want) != 0)
            snprintf(ts_caps.note, sizeof ts_caps.note, "cap_set_proc: %s", strerror(errno));
        cap_free(want);
    }
    cap_free(cur);

    cap_t now = cap_get_proc();
    if (now) {
        ts_caps.sys_ptrace = cap_has(now, CAP_SYS_PTRACE, CAP_EFFECTIVE);
        ts_caps.dac_read_search = cap_has(now, CAP_DAC_READ_SEARCH, CAP_EFFECTIVE);
        ts_caps.perfmon = ts_caps.perfmon_known && cap_has(now, CAP_PERFMON, CAP_EFFECTIVE);
        cap_free(now);
    }
    /* The tool never executes anything; make sure nothing could regain privileges. */
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* CAP_SYS_ADMIN effective (when permitted) or not. */
static bool sys_admin(bool on)
{
    cap_t c = cap_get_proc();
    cap_value_t v = CAP_SYS_ADMIN;
    bool ok = c && cap_has(c, v, CAP_PERMITTED) &&
              cap_set_flag(c, CAP_EFFECTIVE, 1, &v, on ? CAP_SET : CAP_CLEAR) == 0 &&
              cap_set_proc(c) == 0;
    cap_free(c);
    return ok;
}

int ts_open_pagemap(int dirfd)
{
    bool raised = sys_admin(true);
    int fd = openat(dirfd, "pagemap", O_RDONLY | O_CLOEXEC);
    int e = errno;
    if (raised)
        sys_admin(false);
    errno = e;
    return fd;
}

void ts_caps_advice(int err, uid_t owner, char *buf, size_t cap)
{
    if (err == ENOENT || err == ESRCH) {
        snprintf(buf, cap, "the process exited");
        return;
    }
    if (err != EACCES && err != EPERM) {
        snprintf(buf, cap, "%s", strerror(err));
        return;
    }
    if (ts_caps.sys_ptrace)
        snprintf(buf, cap,
                 "permission denied even with CAP_SYS_PTRACE (a security module such as "
                 "Yama or an LSM policy refuses it, or the process is in another user "
                 "namespace)");
    else if (geteuid() == 0)
        snprintf(buf, cap,
                 "permission denied: thp-status runs as root but without CAP_SYS_PTRACE "
                 "(the caller dropped it from the bounding or permitted set), which reading "
                 "the processes of other users needs");
    else if (owner == (uid_t)-1)
        snprintf(buf, cap,
                 "permission denied: the processes of other users need root or "
                 "CAP_SYS_PTRACE (run as root, e.g. sudo thp-status --all)");
    else
        snprintf(buf, cap,
                 "permission denied: the process belongs to uid %u; reading its memory map "
                 "needs the same user (and no privileges it lacks), root, or CAP_SYS_PTRACE "
                 "(run as root, e.g. sudo thp-status)",
                 (unsigned)owner);
}
