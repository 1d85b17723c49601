/* os: the only layer that talks to the kernel about memory (mmap, munmap, madvise, prctl).
 * Every function reports failure to its caller; none of them aborts or prints. */
#ifndef THPALLOC_OS_H
#define THPALLOC_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

/* Where a function's code goes (lib/layout.ld, lib/README.md "The library's own pages"): the
 * kernel maps a file's pages 64 KiB around each one executed (fault-around), within the
 * mapping, so code is in three executable segments by who runs it. Unmarked: what every
 * process runs (the fast and slow paths of small blocks, init, the policy, thread exit, remote
 * frees). TEXT_BUSY: what most real programs run too (extents, realloc, fork, the aligned
 * API, large blocks, chunks given back). TEXT_WARM: what busy or long-lived processes run
 * (the purger and its signals, the policy's key parsers), first in the last segment;
 * TEXT_COLD: errors, the statistics and introspection API, pass-through, strict overcommit. */
#define TEXT_BUSY __attribute__((section(".text.thp_busy")))
#define TEXT_WARM __attribute__((section(".text.thp_warm")))
#define TEXT_COLD __attribute__((section(".text.thp_cold")))

enum os_advice { OS_ADVICE_NONE = 0, OS_ADVICE_HUGE = 1, OS_ADVICE_NOHUGE = 2 };
enum os_purge { OS_PURGE_DONTNEED = 0, OS_PURGE_FREE = 1 };

/* How a reservation is mapped (see docs/design.md, "Commit charge"):
 * - NORESERVE: read/write, MAP_NORESERVE: never charged to the commit limit under
 *   vm.overcommit_memory 0 or 1 (mode 2 ignores the flag and charges it all);
 * - UNCOMMITTED: PROT_NONE, never charged in any mode; os_commit makes parts usable;
 * - ACCOUNTED: read/write and charged, as glibc's own mmap: the kernel's overcommit
 *   heuristic refuses what cannot possibly be backed (a 1 TiB block on a small machine). */
enum os_reserve { OS_RESERVE_NORESERVE = 0, OS_RESERVE_UNCOMMITTED, OS_RESERVE_ACCOUNTED };
/* Reserves size bytes of anonymous memory aligned to align (a power of two >= the page
 * size). NULL with errno = ENOMEM on failure. */
void *os_reserve_aligned(size_t size, size_t align, enum os_reserve how);
/* Makes part of an UNCOMMITTED reservation read/write (charged to the commit limit);
 * false (ENOMEM) when the kernel refuses the charge. */
bool os_commit(void *addr, size_t size);
/* Gives a committed range back: its pages and its charge (mmap MAP_FIXED of PROT_NONE over
 * it: mprotect alone would keep the charge). The range reads as nothing until committed
 * again, and is named `name` again. */
bool os_decommit(void *addr, size_t size, const char *name);
/* vm.overcommit_memory (0 heuristic, 1 always, 2 strict), read once on first use. */
int os_overcommit_mode(void);
/* For unit tests: the value os_overcommit_mode() returns from now on. */
void os_overcommit_override(int mode);
/* Resizes the mapping at addr (one mapping of old bytes) to new bytes where it stands;
 * false when the space after it is taken. */
bool os_remap_in_place(void *addr, size_t old, size_t new);
/* Moves the pages of the mapping at addr to dst (an UNCOMMITTED reservation of new bytes,
 * which it replaces), grown to new bytes, without copying; false (ENOMEM) leaves both. */
bool os_remap_to(void *addr, size_t old, size_t new, void *dst);
/* Returns a reservation to the OS. */
void os_release(void *addr, size_t size);
/* Gives the physical pages back; the range stays reserved and reads as zero (dontneed)
 * or as old-or-zero (free). Returns false when the kernel refused. */
bool os_purge(void *addr, size_t size, enum os_purge how);
/* Ranges to give back together (the purger's holes in a heap's pages): one
 * process_madvise(2) on the calling process for up to OS_PURGE_BATCH of them, whose TLB
 * flush the kernel does once for all, where the kernel takes it for this process (Linux
 * 6.15: the PIDFD_SELF sentinel, DONTNEED and FREE on one's own memory) and no seccomp
 * filter is in force (a filter that kills on a call it does not know would kill the
 * process); else one madvise each, as os_purge. Nothing is given back before
 * os_purge_batch_flush (or an add that finds the batch full): the caller keeps the ranges
 * off limits until then. */
#define OS_PURGE_BATCH 64
struct os_purge_batch {
    enum os_purge how;
    unsigned n;
    signed char vector_ok; /* this batch's look at the process (seccomp): -1 not yet, 0 no, 1 yes */
    size_t bytes;          /* given back by its flushes so far */
    struct iovec r[OS_PURGE_BATCH]; /* the call's own vector: no copy on the caller's stack */
};
void os_purge_batch_init(struct os_purge_batch *b, enum os_purge how);
/* Queues [addr, addr + len) (page-aligned), joined to the last range when they touch. */
void os_purge_batch_add(struct os_purge_batch *b, void *addr, size_t len);
/* Gives back what is queued; returns the bytes given back by this batch in all. */
size_t os_purge_batch_flush(struct os_purge_batch *b);
/* For tests: 1 forces one madvise a range from now on, 0 lets the process decide again. */
void os_purge_batch_force_single(int on);
/* Calls of process_madvise that gave back memory, and ranges they took (statistics). */
extern _Atomic uint64_t os_purge_vector_calls, os_purge_vector_ranges;
/* MADV_HUGEPAGE / MADV_NOHUGEPAGE; false when the kernel refused. */
bool os_advise(void *addr, size_t size, enum os_advice advice);
/* MADV_COLLAPSE (Linux 6.1): the range made huge pages now, at the caller's CPU cost. 0, or
 * the errno (EINVAL: no such advice here, or the range is VM_NOHUGEPAGE; EAGAIN/ENOMEM: no
 * huge page could be had). errno is left as it was. */
int os_collapse(void *addr, size_t size);
/* Names an anonymous mapping "[anon:NAME]"; best effort (EINVAL without
 * CONFIG_ANON_VMA_NAME). */
void os_name(void *addr, size_t size, const char *name);
/* A process-wide memory barrier: every thread of the process that is running passes a full
 * barrier before os_barrier returns (membarrier, private expedited). os_barrier_register
 * must succeed once first; false where the kernel or a seccomp filter refuses. */
bool os_barrier_register(void);
bool os_barrier(void);
/* Sleeps while *addr == val (futex; returns at once when it differs, and may return
 * spuriously); os_wake_all wakes every thread sleeping on addr, os_wake_one one of them. */
void os_wait_while(_Atomic int *addr, int val);
void os_wake_all(_Atomic int *addr);
void os_wake_one(_Atomic int *addr); /* one of them (a lock's next owner) */
/* Reads at most cap-1 bytes of a small file (sysfs, procfs) into buf, NUL-terminated,
 * with open/read/close only. Returns the length or -1. */
long os_read_small_file(const char *path, char *buf, size_t cap);
/* Reads an open file to its end or cap-1 bytes into buf, NUL-terminated; returns the
 * length. */
size_t os_read_fd(int fd, char *buf, size_t cap);
/* 16 bytes the kernel gave the process at exec for seeding (AT_RANDOM, the auxiliary vector:
 * no system call, no wait for entropy at boot); a mix of the clock and ASLR-placed
 * addresses where it is missing. */
void os_startup_random(uint64_t out[2]);
/* Monotonic milliseconds from the coarse clock (vDSO: no system call). */
uint32_t now_ms(void);

/* The ms clock wraps every 49.7 days, and every time compared with it is a stamp (when
 * something was freed) or a due time (a stamp plus purge_delay, at most 24 h). A time less
 * than CLOCK_AHEAD_MS ahead of now has not been reached: a due time, or a stamp that another
 * thread took from a later read of the clock. Any other is in the past, however old: a
 * process idle for weeks reads the stamps of then as old, where an int32_t difference read
 * those of more than 24.8 days as ones in the future (and kept their memory as long again).
 * Only past 48.7 days idle does a stamp read as recent, and then at most 25 h too late. */
#define CLOCK_AHEAD_MS ((uint32_t)25 * 3600 * 1000)

/* Whether now has reached time t. */
static inline bool clock_reached(uint32_t now, uint32_t t)
{
    return (uint32_t)(now - t) <= UINT32_MAX - CLOCK_AHEAD_MS;
}

/* Whether delay ms (0 .. 24 h) have passed since stamp. */
static inline bool clock_passed(uint32_t now, uint32_t stamp, long delay)
{
    return clock_reached(now, stamp + (uint32_t)delay);
}
/* The kernel's base page size (the auxiliary vector: no system call). */
size_t os_page_size(void);
/* Whether the OS page at addr (page-aligned) is mapped (mincore: one system call). */
bool os_page_mapped(const void *addr);
/* Whether addr is in the dynamic loader's code (ld.so, found through AT_BASE and its program
 * headers in memory: no system call, no lock). False in a static program. */
bool os_in_loader(const void *addr);
/* Sends one datagram to the AF_UNIX socket at path (the system log's /dev/log): a socket
 * made and closed for it (SOCK_CLOEXEC), never waiting (MSG_DONTWAIT: a full socket buffer
 * drops the message), no SIGPIPE. False when it was not sent. */
bool os_send_datagram(const char *path, const void *buf, size_t len);
/* Writes a whole string to fd 2 (never through stdio). */
void os_write_stderr(const char *s);
/* Formats v in decimal into buf (at least 21 bytes) without stdio; returns buf. */
char *os_format_u64(char *buf, uint64_t v);

#endif
