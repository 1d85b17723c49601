/* stress-fork: thousands of fork()s and posix_spawn()s from a process whose other threads
 * allocate, free across threads and exit, with the purger busy; a watchdog turns a stall
 * into a failure with every thread's stack (issue 38: a CPython test worker once sat with
 * every thread blocked). Run by tests/stress-fork.sh under LD_PRELOAD=$THPALLOC_LIB.
 *
 *   stress-fork [-g] [-n FORKS] [-w STALL_SECONDS]
 *
 * The first process is the watchdog: it forks the soak (the worker) before any thread
 * exists, then reads the worker's progress counters from shared memory. When one of them
 * (forks done, spawns done, threads churned) has not moved for STALL seconds, it prints
 * every thread's stack of the worker and of each of its descendants (gdb -batch
 * 'thread apply all bt'; each thread's state and wchan when gdb is missing or refused) as
 * TAP diagnostics, kills them and fails.
 *
 * The worker: churn threads, each a chain of short-lived threads that allocate blocks of
 * every kind (small, medium, extent, large), free half of them themselves and hand the rest
 * to a ring that other threads free, then exit; now and then one calls malloc_trim, which
 * takes the purge pass lock. Two forker threads: one fork()s, one posix_spawn()s this
 * program as "--child" (glibc's posix_spawn is a vfork-like clone that runs no fork
 * handlers: the new image allocates on its own). A fork child allocates and frees blocks of
 * every kind, frees a block inherited from the forking thread and one churned by another
 * thread, sometimes starts a thread of its own (which frees 20 MiB in its last destructor
 * pass) and joins it, then exec()s "--child" or _exit()s. The
 * parent has a SIGCHLD handler without SA_RESTART (async-signal-safe: it counts), so the
 * library's waits see EINTR. The library does not document malloc or free as
 * async-signal-safe (glibc's are not either): no handler calls them.
 *
 * SOAK=N multiplies the counts (long runs); -g runs under any malloc (the control).
 * SOAK_FORK_SELFTEST=deadlock makes the 4th fork child (n = 3: early, so that a real stall
 * further on cannot hide it) block on a mutex a parent thread holds across the fork (the
 * watchdog's own test: it must report the stall and fail). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "late-free.h"
#include "relay-report.h"

extern char **environ;

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)
#define CHURNERS 3
#define RING 256

enum { P_FORKS, P_SPAWNS, P_THREADS, P_COUNT };
static const char *const p_names[P_COUNT] = {"forks", "spawns", "churned threads"};

/* Shared with the watchdog (MAP_SHARED, mapped before the worker is forked). */
struct shared {
    _Atomic long progress[P_COUNT];
    _Atomic int done[P_COUNT];
    _Atomic long child_failures, inherited_freed, sigchld;
    _Atomic int purger_seen;
};
static struct shared *sh;
static const char *self_path;
static long forks_wanted = 600, spawns_wanted;
static int glibc_mode, selftest_deadlock;
static _Atomic int stop_churn;
static pthread_mutex_t held_across_fork = PTHREAD_MUTEX_INITIALIZER;

/* ---- blocks ------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Sizes of every kind: small, medium (8-64 KiB), extent (to 1 MiB), large (above). */
static size_t pick_size(uint64_t *s)
{
    uint64_t r = rnd(s);
    switch (r % 32) {
    case 0:
        return 1 * MiB + (r >> 8) % (3 * MiB);
    case 6:
    case 7:
    case 8:
    case 9:
        return 8 * KiB + (r >> 8) % (56 * KiB);
    case 1:
    case 2:
    case 10:
        return 64 * KiB + (r >> 8) % (960 * KiB);
    case 3:
    case 4:
    case 5:
        return 8 * KiB + (r >> 8) % (56 * KiB);
    default:
        return 2 + (r >> 8) % 2048; /* 2 at least: the stamps are two bytes */
    }
}

struct block {
    unsigned char *p;
    size_t size;
};

/* A block whose first and last bytes say its size: checked before it is freed. */
static struct block stamped(size_t size)
{
    struct block b = {malloc(size), size};
    if (!b.p)
        abort();
    b.p[0] = (unsigned char)size;
    b.p[size - 1] = (unsigned char)(size >> 8);
    if (size > 4096)
        memset(b.p + size / 2, 0x5a, 64 < size / 2 ? 64 : size / 2);
    return b;
}

static int intact(struct block b)
{
    return b.p[0] == (unsigned char)b.size && b.p[b.size - 1] == (unsigned char)(b.size >> 8);
}

/* ---- the worker's churn threads ------------------------------------------------------ */

static struct block ring[RING];
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned ring_pos;

/* Puts b in the ring; frees what it displaces (most likely another thread's block). */
static void ring_swap(struct block b)
{
    unsigned i = atomic_fetch_add(&ring_pos, 1) % RING;
    pthread_mutex_lock(&ring_lock);
    struct block old = ring[i];
    ring[i] = b;
    pthread_mutex_unlock(&ring_lock);
    if (old.p) {
        if (!intact(old))
            atomic_fetch_add(&sh->child_failures, 1);
        free(old.p);
    }
}

static void *churn_one(void *arg)
{
    uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    struct block own[24];
    for (int i = 0; i < 24; i++) {
        size_t size = pick_size(&s);
        /* fewer large blocks than the children take: each is a fresh huge page to zero
         * once purge_delay=5ms has given the last one back */
        own[i] = stamped(size > MiB && rnd(&s) % 4 ? size / 8 : size);
    }
    for (int i = 0; i < 24; i++) {
        if (i % 2)
            ring_swap(own[i]);
        else
            free(own[i].p);
    }
    if (rnd(&s) % 64 == 0)
        malloc_trim(0); /* a purge pass of its own: the pass lock, which fork takes first */
    return NULL;
}

static void *churner(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    for (uintptr_t n = 0; !atomic_load(&stop_churn); n++) {
        pthread_t t;
        if (pthread_create(&t, NULL, churn_one, (void *)(id * 1000003 + n)) == 0)
            pthread_join(t, NULL);
        atomic_fetch_add(&sh->progress[P_THREADS], 1);
        /* paced: the forks, not the churn, should have most of the CPU */
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---- children ---------------------------------------------------------------------- */

/* What every child does before exec or _exit: blocks of every kind, a realloc chain. */
static int child_work(uint64_t seed)
{
    int bad = 0;
    struct block b[32];
    for (int i = 0; i < 32; i++)
        b[i] = stamped(pick_size(&seed));
    unsigned char *big = malloc(3 * MiB);
    if (!big)
        return 1;
    memset(big, 1, 3 * MiB);
    unsigned char *r = malloc(100);
    for (size_t n = 200; r && n < 2 * MiB; n *= 3) {
        r[0] = 7;
        r = realloc(r, n);
        bad |= !r || r[0] != 7;
    }
    free(r);
    free(big);
    for (int i = 0; i < 32; i++) {
        bad |= !intact(b[i]);
        free(b[i].p);
    }
    return bad;
}

/* A thread's last frees, in glibc's second destructor pass (after the library's own key
 * destructor retired its heap), where no safe point of the thread may start the purger:
 * the request waits, and the joiner's next free was the one that started it, inside
 * pthread_join with glibc's stack-cache lock held (tests/stress-joinfree): late-free.h. */
static void *child_thread(void *arg)
{
    intptr_t bad = child_work((uintptr_t)arg);
    unsigned char *late = malloc(20 * MiB); /* more than the 16 MiB that ask for a purger */
    if (late)
        late[0] = late[20 * MiB - 1] = 1;
    pthread_setspecific(late_key, late);
    return (void *)bad;
}

static void fork_child(long n, struct block inherited)
{
    /* gdb from the watchdog may attach under Yama's ptrace_scope 1 */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    if (selftest_deadlock && n == 3)
        pthread_mutex_lock(&held_across_fork); /* held by a parent thread: never returns */
    int bad = child_work((uint64_t)n * 7919 + 1);
    bad |= !intact(inherited);
    free(inherited.p);
    /* a block another thread allocated: its heap is frozen in the child */
    struct block other = {NULL, 0};
    if (pthread_mutex_trylock(&ring_lock) == 0) { /* a churner may have held it at the fork */
        other = ring[n % RING];
        ring[n % RING].p = NULL;
        pthread_mutex_unlock(&ring_lock);
    }
    if (other.p) {
        bad |= !intact(other);
        free(other.p);
    }
    if (n % 8 == 0) {
        pthread_t t;
        void *res = NULL;
        if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)n) == 0) {
            pthread_join(t, &res);
            bad |= res != NULL;
        }
    }
    if (bad)
        _exit(3);
    if (n % 4 == 0) {
        char *argv[] = {(char *)self_path, "--child", NULL};
        execve(self_path, argv, environ);
        _exit(4);
    }
    _exit(0);
}

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void *forker(void *arg)
{
    (void)arg;
    for (long n = 0; n < forks_wanted; n++) {
        struct block inherited = stamped(100 + (size_t)(n * 977) % (200 * KiB));
        pid_t pid = fork();
        if (pid == 0)
            fork_child(n, inherited);
        if (pid < 0 || wait_child(pid) != 0)
            atomic_fetch_add(&sh->child_failures, 1);
        if (!intact(inherited))
            atomic_fetch_add(&sh->child_failures, 1);
        else
            atomic_fetch_add(&sh->inherited_freed, 1);
        free(inherited.p);
        atomic_fetch_add(&sh->progress[P_FORKS], 1);
    }
    atomic_store(&sh->done[P_FORKS], 1);
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    for (long n = 0; n < spawns_wanted; n++) {
        struct block mine = stamped(50 + (size_t)n % 30000); /* allocating meanwhile */
        char *argv[] = {(char *)self_path, "--child", NULL};
        pid_t pid;
        if (posix_spawn(&pid, self_path, NULL, NULL, argv, environ) != 0 || wait_child(pid) != 0)
            atomic_fetch_add(&sh->child_failures, 1);
        free(mine.p);
        atomic_fetch_add(&sh->progress[P_SPAWNS], 1);
    }
    atomic_store(&sh->done[P_SPAWNS], 1);
    return NULL;
}

static void on_sigchld(int sig)
{
    (void)sig;
    atomic_fetch_add(&sh->sigchld, 1); /* async-signal-safe only: no malloc, no free */
}

/* Whether the library's purger thread runs (its name is thpalloc-purge). */
static int purger_running(void)
{
    DIR *d = opendir("/proc/self/task");
    int seen = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && !seen) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            seen = fgets(comm, sizeof comm, f) && strncmp(comm, "thpalloc-purge", 14) == 0;
            fclose(f);
        }
    }
    if (d)
        closedir(d);
    return seen;
}

static int worker(void)
{
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld; /* no SA_RESTART: waits see EINTR */
    sigaction(SIGCHLD, &sa, NULL);
    pthread_key_create(&late_key, late_free);
    /* 24 MiB freed at once: enough waiting for the library to start its purger thread */
    struct block big[12];
    for (int i = 0; i < 12; i++) {
        big[i] = stamped(2 * MiB);
        memset(big[i].p, 3, 2 * MiB);
    }
    for (int i = 0; i < 12; i++)
        free(big[i].p);
    free(malloc(64)); /* a safe point: the purger starts here */
    pthread_t ch[CHURNERS], fk, sp;
    if (selftest_deadlock)
        pthread_mutex_lock(&held_across_fork); /* held by this thread across every fork */
    for (uintptr_t i = 0; i < CHURNERS; i++)
        pthread_create(&ch[i], NULL, churner, (void *)(i + 1));
    pthread_create(&fk, NULL, forker, NULL);
    pthread_create(&sp, NULL, spawner, NULL);
    atomic_store(&sh->purger_seen, purger_running());
    pthread_join(fk, NULL);
    pthread_join(sp, NULL);
    atomic_store(&sh->purger_seen, atomic_load(&sh->purger_seen) | purger_running() << 1);
    atomic_store(&stop_churn, 1);
    for (int i = 0; i < CHURNERS; i++)
        pthread_join(ch[i], NULL);
    atomic_store(&sh->done[P_THREADS], 1);
    return 0;
}

/* ---- the watchdog ------------------------------------------------------------------ */

/* PID and every process below it, found through /proc (ppid links); returns the count. */
static int family(pid_t root, pid_t *out, int max)
{
    int n = 0;
    out[n++] = root;
    for (int i = 0; i < n; i++) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) && n < max) {
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            size_t len = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[len] = 0;
            char *rp = strrchr(buf, ')');
            int ppid;
            if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == out[i])
                out[n++] = atoi(e->d_name);
        }
        if (d)
            closedir(d);
    }
    return n;
}

/* Prints each line of CMD's output as a TAP diagnostic. */
static void diag_cmd(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    char line[1024];
    while (p && fgets(line, sizeof line, p))
        printf("#   %s", line);
    if (p)
        pclose(p);
}

static void dump_stacks(pid_t pid)
{
    char cmd[512];
    printf("# pid %d, its threads (tid, name, state, wchan):\n", (int)pid);
    snprintf(cmd, sizeof cmd,
             "cd /proc/%d/task 2>/dev/null && for t in *; do echo \"$t $(cat $t/comm) "
             "$(cut -d')' -f2 $t/stat | cut -c2) $(cat $t/wchan)\"; done 2>/dev/null",
             (int)pid);
    diag_cmd(cmd);
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && timeout 60 gdb -p %d -batch -nx "
             "-ex 'set pagination off' -ex 'thread apply all bt' 2>&1 | "
             "grep -v '^\\[New LWP\\|^$' || echo 'gdb not found: no stacks'",
             (int)pid);
    diag_cmd(cmd);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int watchdog(pid_t pid, double stall_s)
{
    long last[P_COUNT];
    double moved[P_COUNT], start = now_s();
    for (int i = 0; i < P_COUNT; i++) {
        last[i] = -1;
        moved[i] = start;
    }
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double t = now_s();
        for (int i = 0; i < P_COUNT; i++) {
            long v = atomic_load(&sh->progress[i]);
            if (v != last[i] || atomic_load(&sh->done[i])) {
                last[i] = v;
                moved[i] = t;
            } else if (t - moved[i] >= stall_s) {
                printf("# STALL: %s stuck at %ld for %.0f s (forks %ld, spawns %ld, threads "
                       "%ld); every thread of the soak and of its children:\n",
                       p_names[i], v, t - moved[i], atomic_load(&sh->progress[P_FORKS]),
                       atomic_load(&sh->progress[P_SPAWNS]), atomic_load(&sh->progress[P_THREADS]));
                fflush(stdout);
                unsetenv("LD_PRELOAD"); /* gdb itself under glibc's malloc */
                pid_t fam[256];
                int n = family(pid, fam, 256);
                for (int k = 0; k < n; k++)
                    dump_stacks(fam[k]);
                for (int k = n - 1; k >= 0; k--)
                    kill(fam[k], SIGKILL);
                waitpid(pid, &status, 0);
                report(0, "no stall: progress never stopped for %.0f s", stall_s);
                return 1;
            }
        }
    }
    double secs = now_s() - start;
    int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("# %.1f s: %ld forks, %ld spawns, %ld threads churned, %ld SIGCHLD taken\n", secs,
           atomic_load(&sh->progress[P_FORKS]), atomic_load(&sh->progress[P_SPAWNS]),
           atomic_load(&sh->progress[P_THREADS]), atomic_load(&sh->sigchld));
    report(clean, "no stall: every count moved within %.0f s until done", stall_s);
    report(atomic_load(&sh->child_failures) == 0 && clean,
           "%ld forks and %ld spawns: every child allocated, freed and exited 0", forks_wanted,
           spawns_wanted);
    report(atomic_load(&sh->inherited_freed) == forks_wanted,
           "the forking thread freed its %ld pre-fork blocks intact", forks_wanted);
    if (!glibc_mode) {
        fputs("thp-only - ", stdout);
        report(atomic_load(&sh->purger_seen) == 3,
               "the purger thread ran while the forks began and ended (%d)",
               atomic_load(&sh->purger_seen));
    }
    printf("end\n");
    return clean && atomic_load(&sh->child_failures) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child_work((uint64_t)getpid() * 31 + 1); /* an exec'd or spawned child */
    self_path = "/proc/self/exe";
    double stall_s = 10;
    int opt;
    while ((opt = getopt(argc, argv, "gn:w:")) != -1) {
        switch (opt) {
        case 'g':
            glibc_mode = 1;
            break;
        case 'n':
            forks_wanted = atol(optarg);
            break;
        case 'w':
            stall_s = atof(optarg);
            break;
        default:
            fprintf(stderr, "usage: stress-fork [-g] [-n FORKS] [-w STALL_SECONDS]\n");
            return 2;
        }
    }
    const char *soak = getenv("SOAK");
    if (soak && atol(soak) > 1)
        forks_wanted *= atol(soak);
    spawns_wanted = forks_wanted / 3;
    const char *st = getenv("SOAK_FORK_SELFTEST");
    selftest_deadlock = st && strcmp(st, "deadlock") == 0;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    fflush(NULL);
    pid_t pid = fork(); /* before any thread: the watchdog is a plain single-threaded process */
    if (pid == 0)
        _exit(worker());
    if (pid < 0)
        return 2;
    return watchdog(pid, stall_s);
}
