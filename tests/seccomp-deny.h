/* A seccomp filter on the calling thread (and the threads it creates after) that answers one
 * system call with action (SECCOMP_RET_KILL_PROCESS, or SECCOMP_RET_ERRNO | errno) and lets
 * every other one through: how an allow-list that does not know a call, or a sandbox that
 * refuses it, meets the library. 0, or -1 where filters cannot be installed. */
#ifndef THPALLOC_TESTS_SECCOMP_DENY_H
#define THPALLOC_TESTS_SECCOMP_DENY_H
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

static int seccomp_deny(long nr, unsigned action)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, action),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}
#endif
