/* init: first use (dormancy, pass-through, the thread-exit key) and fork. Process start costs no
 * system call: the first arena is mapped by the first allocation, and the THP setting is
 * read by the first decision that needs it. */
#include "init.h"
/* Above init's layer, for the dormancy probe alone (lib_malloc_self: docs/design.md's one
 * upward use, allowed by tools/dev/lib-layers with this include). */
#include "alloc.h"
/* The definition of thpalloc_owns() passes the address on to functions that take a
 * pointer; the attribute that tells callers it reads no memory would make gcc take those
 * calls for reads of the caller's block. */
#define THPALLOC_ADDRESS_ONLY(i)
#include "thpalloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { INIT_NONE = 0, INIT_RUNNING, INIT_DONE };
static _Atomic int init_state;
static pthread_t init_thread;
static bool dormant;
bool passthrough;

/* The lock order of the whole library, in one place: the order the locks nest in, outermost
 * first. prepare takes them in this order; the parent releases and the child makes them anew
 * in the reverse order. */
static void (*const fork_hooks[])(enum fork_phase) = {
    purger_fork,       /* purger.c's pass lock: no purge pass is cut off by fork */
    reclaim_fork,      /* reclaim_lock: no heap claim held across fork */
    thread_fork,       /* the late heap's lock, then the heaps lock */
    abandon_fork,      /* the abandoned chunks */
    extent_fork,       /* the extents */
    arena_fork,        /* the arena */
    purge_signal_fork, /* the purge signal (after the arena's: the arena notes under it) */
    policy_fork,       /* the introspection ranges */
    meta_fork,         /* the descriptor pool */
};
#define FORK_HOOKS (sizeof fork_hooks / sizeof fork_hooks[0])

TEXT_BUSY
static void fork_prepare(void)
{
    for (size_t i = 0; i < FORK_HOOKS; i++)
        fork_hooks[i](FORK_PREPARE);
}

TEXT_BUSY
static void fork_parent(void)
{
    for (size_t i = FORK_HOOKS; i-- > 0;)
        fork_hooks[i](FORK_PARENT);
}

TEXT_BUSY
static void fork_child(void)
{
    for (size_t i = FORK_HOOKS; i-- > 0;)
        fork_hooks[i](FORK_CHILD);
}

/* Who answers a call to malloc? Our references to malloc resolve to the process's malloc
 * (through our GOT, or a non-PIE executable's canonical PLT entry, so comparing addresses
 * is not enough): call it once, marked, and see whether our slow path gets the call. */
_Atomic int probe_active;
pthread_t probe_thread;
_Atomic int probe_hit;

static bool other_allocator_in_charge(void)
{
    void *(*volatile resolved)(size_t) = malloc;
    if ((void *)resolved == (void *)lib_malloc_self)
        return false; /* the common case: no call needed */
    int saved = errno;
    probe_thread = pthread_self();
    atomic_store(&probe_active, 1);
    void *p = resolved(0);
    atomic_store(&probe_active, 0);
    bool ours = atomic_load(&probe_hit);
    if (p && !ours) {
        void (*volatile resolved_free)(void *) = free;
        resolved_free(p); /* the winner's block, back to the winner */
    }
    errno = saved;
    return !ours;
}

void lib_init(void)
{
    if (likely(atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE))
        return;
    int expected = INIT_NONE;
    if (!atomic_compare_exchange_strong(&init_state, &expected, INIT_RUNNING)) {
        /* Re-entered by the initialising thread itself (pthread_key_create or
         * pthread_atfork allocating once glibc's static slots are used up): go on. */
        if (pthread_equal(pthread_self(), init_thread))
            return;
        while (atomic_load_explicit(&init_state, memory_order_acquire) != INIT_DONE)
            sched_yield();
        return;
    }
    init_thread = pthread_self();
    block_secret_init(); /* before the first block exists */
    size_t pagesize = os_page_size();
    passthrough = pagesize != OS_PAGE_SIZE;
    if (passthrough && !__libc_malloc) {
        /* with the rare data: as a literal its 88 bytes took .rodata a page over 4 KiB */
        static const char no_malloc[] __attribute__((section(".rodata.thp_rare"))) =
            "the kernel's page size is not 4 KiB, and a static program has no other malloc to "
            "run on";
        lib_fatal(no_malloc, NULL);
    }
    if (passthrough)
        policy_say_passthrough(pagesize);
    dormant = passthrough || other_allocator_in_charge();
    introspect_set_active(!dormant);
    if (!dormant) {
        /* Neither call allocates: glibc keeps the first keys and fork handlers in static
         * storage. */
        thread_key_init();
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        chunk_new_prepare = reclaim_emptied_chunks;
    }
    atomic_store_explicit(&lib_ready_native, !passthrough, memory_order_release);
    atomic_store_explicit(&init_state, INIT_DONE, memory_order_release);
}

/* Set once init is done and the process is not in pass-through: what lib_passthrough reads
 * inline, so that every extent and large block does not pay a call. */
_Atomic bool lib_ready_native;

/* True when the kernel's page size is not OS_PAGE_SIZE (64 KiB pages on ppc64el, 16 KiB on
 * loong64 or some arm64 kernels): every purge here would round to the kernel's page and
 * could drop live data, so the process runs on glibc's malloc instead (pass-through):
 * new blocks come from glibc, and frees and reallocs of them go back to it as for any
 * pointer that is not ours. */
TEXT_COLD
bool lib_passthrough_init(void)
{
    lib_init();
    return passthrough;
}

TEXT_COLD
void *passthrough_alloc(size_t size, size_t align, bool zero)
{
    if (align > 16) {
        void *p = __libc_memalign(align, size);
        if (p && zero)
            memset(p, 0, size);
        return p;
    }
    return zero ? __libc_calloc(1, size) : __libc_malloc(size);
}

/* glibc's own definition of an API function we also define (dlsym RTLD_NEXT; only in
 * pass-through, never on an allocation path), or NULL. */
TEXT_COLD
void *passthrough_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

TEXT_COLD
bool lib_dormant(void)
{
    lib_init();
    return dormant;
}

__attribute__((constructor)) static void lib_constructor(void)
{
    lib_init();
}

TEXT_COLD
API int thpalloc_active(void)
{
    return !lib_dormant();
}

TEXT_COLD
API int thpalloc_owns(const void *p)
{
    chunk_t *c = registry_lookup(p);
    if (!c)
        return 0;
    if (c->kind == CHUNK_LARGE)
        return (const uint8_t *)p == c->large_start;
    if (c->kind == CHUNK_EXTENT)
        return extent_owns(c, p);
    page_t *page = page_of_block(c, p);
    if (atomic_load_explicit(&page->in_use, memory_order_relaxed) != PAGE_USED)
        return 0;
    size_t off = (size_t)((const uint8_t *)p - page->start);
    return off < (size_t)page->capacity * page->block_size &&
           ((page->flags & PAGE_HAS_ALIGNED) ? page_block_named(page, (void *)p) != NULL
                                             : off % page->block_size == 0);
}

TEXT_COLD
API const char *thpalloc_version(void)
{
    return THPALLOC_VERSION_STRING;
}
