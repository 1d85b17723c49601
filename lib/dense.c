/* dense: huge pages for small objects where they are (nearly) full. A small-object chunk (2 MiB
 * of 16 or 64 KiB pages, one heap's) is kept on 4 KiB pages: a huge page faulted in at its
 * first touch would be resident whole while the chunk fills, and a sparse chunk is most of a
 * process's small-object memory at its start (a heap that has filled chunk after chunk takes
 * its next one huge at the first touch instead: chunk.c, chunk_growing; it is noted here too
 * once it fills, and its collapse finds the huge page there). Once a chunk's slots are nearly
 * all taken (thp_dense, 90 % by default, of its slots), its owner notes it here: a heap that
 * fills a chunk is using it now. The next purge pass (the purger thread, woken for it, or the
 * inline pass of a process without it) counts what of it is resident (carved blocks, dirty
 * slots) and, when that is at least thp_dense of the chunk (else it looks again a few times,
 * DENSE_RETRY_MS apart), collapses it into a huge page (MADV_COLLAPSE, at the pass's CPU cost,
 * never on a malloc's or a free's). RSS grows by what was not resident yet: at most 100 -
 * thp_dense percent of the chunk. The chunk goes back to 4 KiB pages by itself: the first purge
 * inside it (a slot given back after purge_delay, a trim, a reclaim) splits the huge page
 * (chunk_dense_lost), and its owner notes it again once it fills. Mode large only: in always
 * every chunk is huge-advised already, never and system leave it alone.
 *
 * The collapses are the background purge's: the purger thread, which 16 MiB noted start as
 * 16 MiB of memory that waits do, else the inline pass of the process's own calls, one chunk
 * a pass: an idle small process collapses nothing until it runs again, when the pages
 * matter.
 *
 * The notes are a ring of slots that owners fill by CAS and the pass (under the purge pass
 * lock: one at a time) empties; a full ring drops the note (the chunk is noted again at its
 * next new page). A chunk noted, then given back before the pass looks, is recognised by
 * its base and kind; the descriptor itself is never unmapped. The pass checks the chunk just
 * before the collapse, not under its owner: an owner that gives the chunk back to the arena
 * in between (a few instructions) leaves a huge page of zeros in a free chunk until the
 * arena reuses it; memory, never a block's contents. */
#include "chunk.h"

#include <errno.h>

#define DENSE_RING 64
#define DENSE_LOOKS 8       /* looks at a chunk not resident enough before its note is dropped */
#define DENSE_RETRY_MS 100u /* between two of them */
/* Noted chunks that ask for the purger thread: as much as starts it for memory that waits
 * (PURGER_MIN_PENDING, 16 MiB); fewer are collapsed by the process's inline passes. */
#define DENSE_THREAD_MIN 8

enum { SLOT_EMPTY = 0, SLOT_FILLING, SLOT_FULL };
static struct dense_slot {
    _Atomic int state;
    chunk_t *c;
    uint8_t *base;
    uint32_t at; /* ms clock of the note, or of the last look */
    uint8_t looks;
} ring[DENSE_RING];
_Atomic unsigned dense_noted;         /* slots FULL or FILLING */
static _Atomic bool collapse_refused; /* this kernel has no MADV_COLLAPSE: never again */

TEXT_BUSY
void dense_note(chunk_t *c)
{
    uint8_t none = CHUNK_DENSE_NONE;
    if (atomic_load_explicit(&collapse_refused, memory_order_relaxed) ||
        !atomic_compare_exchange_strong_explicit(&c->dense, &none, CHUNK_DENSE_CANDIDATE,
                                                 memory_order_relaxed, memory_order_relaxed))
        return;
    for (unsigned i = 0; i < DENSE_RING; i++) {
        int empty = SLOT_EMPTY;
        if (!atomic_compare_exchange_strong_explicit(&ring[i].state, &empty, SLOT_FILLING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        ring[i].c = c;
        ring[i].base = c->base;
        ring[i].at = now_ms();
        ring[i].looks = 0;
        atomic_store_explicit(&ring[i].state, SLOT_FULL, memory_order_release);
        unsigned n = atomic_fetch_add_explicit(&dense_noted, 1, memory_order_relaxed) + 1;
        purge_note_dense(n >= DENSE_THREAD_MIN);
        return;
    }
    atomic_store_explicit(&c->dense, CHUNK_DENSE_NONE, memory_order_relaxed); /* ring full */
}

/* Percent of c's 2 MiB that is resident by its descriptors (read without its owner: an
 * estimate): the carved blocks of each page in use, a dirty slot's bytes, a split slot whole. */
TEXT_WARM
static unsigned resident_percent(chunk_t *c)
{
    size_t bytes = 0, psize = page_size_of(c);
    for (unsigned i = 0; i < c->npages; i++) {
        page_t *p = &c->pages[i];
        uint8_t state = atomic_load_explicit(&p->in_use, memory_order_relaxed);
        size_t b = 0;
        if (state == PAGE_DIRTY) {
            b = __atomic_load_n(&p->dirty_bytes, __ATOMIC_RELAXED);
        } else if (state == PAGE_USED) {
            if ((p->flags & PAGE_SPLIT) || p->tail_resident) {
                b = psize;
            } else {
                b = (size_t)__atomic_load_n(&p->capacity, __ATOMIC_RELAXED) * p->block_size;
                b = (b + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
            }
        }
        bytes += b < psize ? b : psize;
    }
    return (unsigned)(bytes * 100 / CHUNK_SIZE);
}

/* Collapses c (still a small-object chunk at base, its resident share checked): true when
 * it is a huge page now. */
TEXT_WARM
static bool dense_collapse(chunk_t *c, uint8_t *base)
{
    int rc = os_collapse(base, CHUNK_SIZE);
    if (rc == EINVAL) {
        /* VM_NOHUGEPAGE (small chunks under system always, a chunk split before): advised
         * for the collapse, until a purge inside splits it again (chunk_dense_lost) */
        arena_advise_dense(c->arena, base);
        atomic_store_explicit(&c->dense_advised, 1, memory_order_relaxed);
        rc = os_collapse(base, CHUNK_SIZE);
    }
    if (rc == EINVAL) /* no MADV_COLLAPSE in this kernel (before 6.1) */
        atomic_store_explicit(&collapse_refused, true, memory_order_relaxed);
    uint8_t cand = CHUNK_DENSE_CANDIDATE;
    if (rc != 0 ||
        !atomic_compare_exchange_strong_explicit(&c->dense, &cand, CHUNK_DENSE_HUGE,
                                                 memory_order_relaxed, memory_order_relaxed))
        return false;
    atomic_fetch_add_explicit(&stat_dense_huge, CHUNK_SIZE, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_dense_collapses, 1, memory_order_relaxed);
    introspect_set_dense();
    return true;
}

/* Empties slot s; its chunk, if still the one noted and not collapsed, may be noted again. */
TEXT_WARM
static void slot_drop(struct dense_slot *s)
{
    chunk_t *c = s->c;
    if (c->base == s->base) {
        uint8_t cand = CHUNK_DENSE_CANDIDATE;
        atomic_compare_exchange_strong_explicit(&c->dense, &cand, CHUNK_DENSE_NONE,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&dense_noted, 1, memory_order_relaxed);
    atomic_store_explicit(&s->state, SLOT_EMPTY, memory_order_release);
}

static void next_min(uint32_t *next, uint32_t t)
{
    if (*next == 0 || (int32_t)(t - *next) < 0)
        *next = t;
}

TEXT_WARM
uint32_t dense_pass_ring(uint32_t now, unsigned max_collapses)
{
    unsigned percent = dense_percent();
    uint32_t next = 0;
    for (unsigned i = 0; i < DENSE_RING; i++) {
        struct dense_slot *s = &ring[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FULL)
            continue;
        chunk_t *c = s->c;
        uint8_t kind = c->kind;
        if (!percent || c->base != s->base || (kind != CHUNK_SMALL && kind != CHUNK_MEDIUM) ||
            atomic_load_explicit(&c->dense, memory_order_relaxed) != CHUNK_DENSE_CANDIDATE) {
            slot_drop(s); /* given back meanwhile, or the policy says no */
            continue;
        }
        if (!max_collapses || (s->looks && !clock_passed(now, s->at, DENSE_RETRY_MS))) {
            next_min(&next, max_collapses ? s->at + DENSE_RETRY_MS : now + 1);
            continue;
        }
        if (resident_percent(c) >= percent) {
            if (dense_collapse(c, s->base))
                max_collapses--;
            slot_drop(s);
            continue;
        }
        if (++s->looks >= DENSE_LOOKS) {
            slot_drop(s);
            continue;
        }
        s->at = now; /* not resident enough yet: look again later */
        next_min(&next, now + DENSE_RETRY_MS);
    }
    return next;
}
