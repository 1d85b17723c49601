/* stress-joinfree: the purger thread is never started from a free that ld.so makes with
 * glibc's stack-cache lock held. pthread_join frees the finished thread's TLS (its dtv)
 * through ld.so's _dl_deallocate_tls under that lock: with a user-supplied stack every time,
 * with glibc's stacks once its cache of them passes 40 MiB. When that free took thpalloc's
 * slow path (the dtv was allocated by another thread) while the purger was wanted, the
 * library called pthread_create there, which takes the same lock: the joiner waited for
 * itself forever, every signal blocked (tests/stress-fork found it in a fork child).
 *
 * The request is made where no safe point follows: a thread frees 20 MiB in glibc's second
 * destructor pass, after the library's own key destructor has retired its heap. Each case
 * runs in a child process that must finish within 10 s; then the purger must start at the
 * next malloc/free of the program. Output: relay() lines (tests/relay-report.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "late-free.h"
#include "purger-running.h"
#include "relay-report.h"

#define MiB ((size_t)1 << 20)
#define GLIBC_STACKS 8 /* 8 MiB each: glibc's cache of stacks holds 40 MiB */

static pthread_t joinee[GLIBC_STACKS];
static int user_stack;

static void *joinee_main(void *arg)
{
    char *volatile small = malloc(16); /* a heap of its own, which the library retires */
    free(small);
    if (arg) {
        char *p = malloc(20 * MiB);
        if (p)
            memset(p, 1, 20 * MiB);
        pthread_setspecific(late_key, p);
    }
    return NULL;
}

/* Creates the joinees, so that their dtvs are this thread's blocks: the joiner's free of
 * them takes the cross-thread slow path. */
static void *creator_main(void *arg)
{
    (void)arg;
    pthread_attr_t at;
    pthread_attr_init(&at);
    int n = 1;
    if (user_stack) {
        void *stack = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (stack == MAP_FAILED)
            return NULL;
        pthread_attr_setstack(&at, stack, MiB);
    } else {
        pthread_attr_setstacksize(&at, 8 * MiB);
        n = GLIBC_STACKS;
    }
    for (int i = 0; i < n; i++)
        pthread_create(&joinee[i], &at, joinee_main, i == 0 ? (void *)1 : NULL);
    pthread_attr_destroy(&at);
    return NULL;
}

static int scenario(void)
{
    alarm(20); /* a last resort: the parent kills at 10 s */
    free(malloc(64));
    pthread_key_create(&late_key, late_free);
    pthread_t creator;
    pthread_create(&creator, NULL, creator_main, NULL);
    pthread_join(creator, NULL);
    for (int i = 0; i < (user_stack ? 1 : GLIBC_STACKS); i++)
        pthread_join(joinee[i], NULL);
    /* the request is still there: the program's next calls start the purger */
    for (int i = 0; i < 40 && !purger_running(); i++) {
        char *volatile q = malloc(100000);
        free(q);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return purger_running() ? 0 : 2;
}

static void run(const char *what)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(scenario());
    int st = 0, waited = 0;
    while (pid > 0 && waitpid(pid, &st, WNOHANG) == 0 && waited < 200) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        waited++;
    }
    if (pid > 0 && waited == 200) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        report(0, "%s: the joiner finished within 10 s (it hung: deadlock)", what);
        return;
    }
    report(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "%s: the joiner finished, and the purger started at the program's next calls (exit "
           "status %d)",
           what, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

int main(void)
{
    user_stack = 1;
    run("pthread_join of a thread on a user stack, 20 MiB freed in its last destructor");
    user_stack = 0;
    run("pthread_join of 8 threads on glibc's stacks (its stack cache over 40 MiB), 20 MiB "
        "freed in a last destructor");
    printf("end\n");
    return 0;
}
