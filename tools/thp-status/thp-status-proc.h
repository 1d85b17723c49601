/* thp-status: what the process view reads about one process (thp-status-proc.c) and
 * prints (thp-status-procview.c, and thp-status-all.c for --all). */
#ifndef THP_STATUS_PROC_H
#define THP_STATUS_PROC_H

#include <limits.h>
#include <sys/types.h>

#include "thp-status.h"
#include "thpalloc.h"

struct mem {
    uint64_t rss_kb, anon_kb, huge_kb, advised_kb;
    uint64_t size_kb, charged_kb; /* address space, and the part with VmFlags "ac" */
};

struct span {
    uint64_t start, end;
    bool anon;  /* private memory of no file: what thpalloc's arenas are */
    bool named; /* [anon:thpalloc], the name thpalloc gives its arenas */
};

/* A range of the table that does not look like one of thpalloc's arenas (the table is
 * what the process says of itself): which, and why. */
struct unlike {
    uint64_t index, base, size;
    char why[96];
};
#define PROC_UNLIKE_MAX 4

struct perr {
    const char *what;
    int err;
};

/* The library's block as read, version 1 or 2: its head (head.range: the inline slots as
 * they were read) and every range slot it uses, wherever the version keeps them. */
struct intro_table {
    struct thpalloc_introspect head;
    struct thpalloc_range range[THPALLOC_RANGES_MAX];
};

/* The block has the dense counters (a library from before them has a shorter block). */
static inline bool intro_has_dense(const struct thpalloc_introspect *t)
{
    return t->magic == THPALLOC_INTROSPECT_MAGIC &&
           t->size >= offsetof(struct thpalloc_introspect, dense_splits) + sizeof t->dense_splits;
}

/* ... and the count of chunks taken ahead (a library from before it: shorter still). */
static inline bool intro_has_ahead(const struct thpalloc_introspect *t)
{
    return intro_has_dense(t) &&
           t->size >= offsetof(struct thpalloc_introspect, dense_ahead) + sizeof t->dense_ahead;
}

struct proc {
    pid_t pid;
    int dirfd;
    bool exists, vanished, kthread, zombie;
    char name[64];
    uid_t ruid, euid, fsuid;
    gid_t fsgid, groups[64];
    int ngroups;
    bool dac_caps;   /* CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH, in our user namespace */
    int thp_enabled; /* -1 unknown */
    char starttime[32];
    char exe[PATH_MAX];
    char cmd0[256]; /* basename of argv[0], when exe is unreadable */
    char unit[256];
    bool unit_read;
    bool rollup_ok;
    uint64_t rss_kb, pss_kb, anon_kb, huge_kb, shmem_pmd_kb, file_pmd_kb, swap_kb;
    bool maps_ok;
    struct span *maps; /* every mapping, ascending (kept until the arena table is read) */
    size_t nmaps;
    bool loaded;
    char lib_path[PATH_MAX];
    uint64_t lib_start, lib_end_first;
    dev_t lib_dev;
    ino_t lib_ino;
    bool intro_ok;
    /* The library's path names another file (an upgrade): the table was read through
     * /proc/PID/map_files (lib_via_map_files), or it cannot be (lib_replaced). */
    bool lib_replaced, lib_via_map_files;
    /* The path names no file from here and maps does not say the file was deleted: the
     * process sees it through another mount namespace or root (not a replacement). */
    bool lib_elsewhere;
    unsigned named_vmas; /* [anon:thpalloc...] mappings (kernels with CONFIG_ANON_VMA_NAME) */
    char intro_msg[256];
    struct intro_table *intro;
    uint64_t reserved_bytes;
    unsigned nranges;
    /* Ranges unlike thpalloc's arenas (the first PROC_UNLIKE_MAX of nunlike), and those past
     * a cut maps (nunchecked: not known either way). */
    struct unlike unlike[PROC_UNLIKE_MAX];
    unsigned nunlike, nunchecked;
    bool attr_ok;
    const char *attr_method;
    struct mem in, out;
    unsigned partial_vmas;
    bool space_ok; /* smaps read: the whole process's address space below */
    uint64_t size_kb, charged_kb;
    bool env_read;
    char **env;
    int nenv;
    int secure; /* -1 unknown */
    bool pol_ok;
    struct cfg_settings pol;
    size_t pol_problems;
    struct perr errs[8];
    int nerr;
    struct scan *scan; /* --scan (thp-status-scan.c) */
    /* Bounded reads: maps or smaps longer than their cap were read in part (the figures
     * cover the mappings read); not_read: why nothing is known ("time-out": no answer
     * within --timeout; "failed": the reader ended without one), NULL when read. */
    bool maps_cut, smaps_cut;
    const char *not_read;
};

/* What one process's reading may cost: maps and smaps are read up to these sizes (a
 * process's maps hold 65,530 mappings at most, by default, of short names). */
#define PROC_MAPS_CAP ((uint64_t)8 << 20)
#define PROC_SMAPS_CAP ((uint64_t)32 << 20)

/* A file of /proc read a line at a time in a fixed buffer, at most cap bytes (cut: the
 * file was longer). Longer lines than the buffer are cut to it. */
struct lines {
    int fd;
    uint64_t cap, total;
    bool cut, eof;
    int err;
    size_t len, pos;
    char buf[65536];
};
int lines_open(struct lines *l, int dirfd, const char *name, uint64_t cap);
char *lines_next(struct lines *l);
void lines_close(struct lines *l);

/* Reads pid into p as proc_collect does, then (when scan) runs scan_proc on it: in a child
 * process, abandoned after --timeout (p->not_read "time-out") so that a process whose
 * memory blocks readers (userfaultfd) cannot stall the caller. scan: 1 for processes that
 * exist (not kernel threads), 2 for those not exited while being read either. */
void proc_read(struct proc *p, pid_t pid, bool full, int scan);
/* Why p (or its scan) was not read, in words. */
const char *proc_not_read_text(const struct proc *p);
/* From scan_proc in the child: the rate limit allows `seconds` more for this process. */
void proc_read_extend(double seconds);

/* Reads everything about pid into p (full: also the environment and the policy). */
void proc_collect(struct proc *p, pid_t pid, bool full);
void proc_free(struct proc *p);
bool proc_permission_denied(const struct proc *p);
/* maps: whether thpalloc is loaded, where, and every mapping (p->maps). */
void proc_read_maps(struct proc *p);
/* The library's arena table (p->intro), or why not (p->intro_msg). */
void proc_read_introspect(struct proc *p);
/* The policy of the process, from the files of its root that it may read (p->pol). */
void proc_resolve_policy(struct proc *p);
/* One process as a JSON object (full: with its policy, as in the PID view). */
void proc_json(const struct proc *p, bool full);

#endif
