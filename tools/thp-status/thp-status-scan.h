/* thp-status --scan: how much of each process's anonymous huge pages is zero-filled
 * (thp-status-scan.c). */
#ifndef THP_STATUS_SCAN_H
#define THP_STATUS_SCAN_H

#include "thp-status-proc.h"

/* The huge pages of one owner: thpalloc's arenas (0) or the rest of the process (1). */
struct scan_owner {
    uint64_t pages;      /* PMD-mapped huge pages read in full */
    uint64_t zero_bytes; /* of which 4 KiB pieces that hold only zeros */
    uint64_t splittable; /* huge pages with more than max_ptes_none zero pieces */
};

struct scan {
    const char *method; /* how huge pages were found (NULL: not scanned) */
    struct scan_owner own[2];
    bool skipped;         /* more huge pages than --scan-max */
    bool owners_unknown;  /* thpalloc loaded, its arenas unknown: every page under rest */
    bool exited;          /* the process exited during the scan: the figures are partial */
    uint64_t changed;     /* huge pages unmapped or moved while being read (not counted) */
    int err;              /* why it could not be scanned (errno), 0 if it could */
    const char *err_what; /* "pagemap", "smaps" or "memory" (process_vm_readv) */
    double seconds;
    /* Unknown is never zero: why nothing was read ("skipped", "refused", "unreadable",
     * "time-out", "failed"), NULL when the figures stand. */
    const char *not_read;
    bool cut; /* smaps longer than its cap: huge pages past it not found */
    /* Copy-on-write: shared, the huge pages mapped by other processes too (pagemap's
     * exclusive bit); dup, those already counted for a process read before (same frame:
     * pfns, frames visible), which the totals leave out so that each counts once. */
    uint64_t shared;
    bool pfns;
    struct scan_owner dup[2];
};

enum { SCAN_ARENAS = 0, SCAN_REST = 1 };

/* Reads p's huge pages (p->dirfd still open) into p->scan, rate-limited. */
void scan_proc(struct proc *p);
/* The PID view's part: text lines, or the "scan" member of the process's JSON object. */
void scan_text(const struct proc *p);
void scan_json(const struct proc *p);
/* --all: the machine's totals and the top processes by zero-filled huge-page memory. */
void scan_all_text(const struct proc *v, size_t n);
void scan_all_json(const struct proc *v, size_t n);
void scan_all_prom(const struct proc *v, size_t n, const char *(*group)(const struct proc *));
/* --scan --prometheus PID...: the scan's series per process; the exit status. */
int scan_procs_prom(char **pids, int npids);
/* The child of proc_read sends what the parent's next readers need (the rate limit's
 * account, the frames counted), the parent takes it in. */
const void *scan_child_data(size_t *len);
void scan_parent_data(const void *data, size_t len);

#endif
