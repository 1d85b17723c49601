/* introspect: the block thp-status reads from another process (struct thpalloc_introspect,
 * thpalloc.h): whether the library is in charge, the policy in force, and the address ranges
 * it reserved. Written here only: init.c says whether the library is in charge, policy.c
 * publishes the policy once it is resolved, arena.c reports each range it maps and gives
 * back, dense.c and page.h's chunk_dense_lost the dense counters. thp-status reads it with
 * process_vm_readv (tools/thp-status-introspect.c), so its layout is an interface: within a version
 * it only grows at its end. */
#include "policy.h"
#include "thpalloc.h"

#include <string.h>

/* The table thp-status reads at the address of the exported name thpalloc_introspect, an
 * alias (below) that no header declares. The library writes it through this local name: were
 * a program to declare the exported name itself and read it, its copy relocation would bind
 * every reference to that name, the library's own included, to the program's copy, and
 * thp-status, which reads the library's object, would see a table never written. Its policy
 * is the defaults' until policy.c publishes the resolved one (policy_loaded). */
static struct thpalloc_introspect introspect_state = {
    .magic = THPALLOC_INTROSPECT_MAGIC,
    .version = 2,
    .size = sizeof(struct thpalloc_introspect),
    .active = 2,
    .thp_mode = CFG_DEFAULT_THP,
    .thp_threshold = CFG_DEFAULT_THP_THRESHOLD,
    .arena_size = CFG_DEFAULT_ARENA_SIZE,
    .purge_delay_ms = CFG_DEFAULT_PURGE_DELAY_MS,
    .purge = CFG_DEFAULT_PURGE,
};
extern API struct thpalloc_introspect thpalloc_introspect
    __attribute__((alias("introspect_state")));

static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;

void introspect_set_active(bool active)
{
    introspect_state.active = active ? 1 : 0;
}

/* introspect_set_active(true) was called. */
TEXT_COLD
bool introspect_in_charge(void)
{
    return introspect_state.active == 1;
}

/* The block's copy of one of counters.c's figures (a reader sees each word whole). */
static void publish(uint64_t *field, _Atomic uint64_t *stat)
{
    __atomic_store_n(field, atomic_load_explicit(stat, memory_order_relaxed), __ATOMIC_RELAXED);
}

TEXT_WARM
void introspect_set_dense(void)
{
    publish(&introspect_state.dense_huge, &stat_dense_huge);
    publish(&introspect_state.dense_collapses, &stat_dense_collapses);
    publish(&introspect_state.dense_splits, &stat_dense_splits);
    publish(&introspect_state.dense_ahead, &stat_dense_ahead);
}

/* The resolved policy into the block: each key the block publishes (the key table's block
 * column, config-keys.c) at its field, as wide as the field is; then policy_loaded. */
void introspect_set_policy(const struct cfg_values *v)
{
    for (int k = 0; k < CFG_NKEYS; k++) {
        const struct cfg_key_info *key = &cfg_keys[k];
        int64_t value = cfg_field_get(v, (enum cfg_key)k);
        char *field = (char *)&introspect_state + key->block;
        if (key->block_size == sizeof(uint64_t)) {
            uint64_t u = (uint64_t)value;
            memcpy(field, &u, sizeof u);
        } else if (key->block_size == sizeof(uint32_t)) {
            uint32_t u = (uint32_t)value;
            memcpy(field, &u, sizeof u);
        }
    }
    introspect_state.policy_loaded = 1;
}

/* ---- the ranges ------------------------------------------------------------------------ */

/* The library's own count of range slots used and its table beyond the block: the block is
 * writable by any code in the process, so what it says is published, never read back. */
static uint64_t ranges_used;
static struct thpalloc_range *ranges_more;

/* Range slot i < THPALLOC_RANGES_MAX: the first few in the block, the rest in the table
 * mapped on first need (NULL if it could not be). ranges_lock held. */
static struct thpalloc_range *range_slot(uint64_t i)
{
    if (i < THPALLOC_RANGES_INLINE)
        return &introspect_state.range[i];
    if (!ranges_more) {
        ranges_more = meta_alloc((THPALLOC_RANGES_MAX - THPALLOC_RANGES_INLINE) *
                                 sizeof(struct thpalloc_range));
        introspect_state.more = (uintptr_t)ranges_more;
    }
    return ranges_more ? ranges_more + (i - THPALLOC_RANGES_INLINE) : NULL;
}

void introspect_add_range(void *base, size_t size)
{
    pthread_mutex_lock(&ranges_lock);
    uint64_t i;
    for (i = 0; i < ranges_used; i++)
        if (range_slot(i)->size == 0)
            break;
    struct thpalloc_range *r = i < THPALLOC_RANGES_MAX ? range_slot(i) : NULL;
    if (r) {
        r->base = (uintptr_t)base;
        r->size = size;
        if (i == ranges_used)
            introspect_state.ranges_used = ++ranges_used;
    } else {
        introspect_state.ranges_overflow++;
    }
    pthread_mutex_unlock(&ranges_lock);
}

TEXT_COLD
void introspect_remove_range(void *base)
{
    pthread_mutex_lock(&ranges_lock);
    for (uint64_t i = 0; i < ranges_used; i++) {
        struct thpalloc_range *r = range_slot(i);
        if (r->base == (uintptr_t)base && r->size) {
            r->size = 0;
            r->base = 0;
            break;
        }
    }
    pthread_mutex_unlock(&ranges_lock);
}

TEXT_BUSY
void introspect_fork(enum fork_phase phase)
{
    fork_mutex(&ranges_lock, phase);
}
