/* registry: chunk address -> chunk descriptor, for every chunk of ours. The first arena's chunks
 * in a leaf of their own (registry_hot), then a two-level table over the whole user address
 * space: a root of offsets in .bss (the first region's entry in .data, registry_hot) and leaves
 * from meta.c, never freed, so a lookup is one load or two with no lock and no NULL test
 * (registry_lookup, registry.h). Writers are
 * arena-level events under the arena lock, or a large block's own resize; a leaf is installed with
 * a CAS. */
#include "registry.h"

/* Root entries are offsets from registry_empty_leaf (a leaf of NULLs in .bss, never
 * written), so that a lookup has no NULL test for a missing leaf: 0 means "empty". */
_Atomic uintptr_t registry_root[1u << REG_ROOT_BITS];
uintptr_t registry_empty_leaf[1u << REG_LEAF_BITS];
/* The root entry of one region, the first one the two-level table gets (what lies outside
 * the first arena: another arena, a block with a mapping of its own), kept in .data among
 * the globals every process writes: the root is indexed by the address's top bits and mmap
 * puts arenas near the top, so their entry was a page of its own that such a process
 * wrote. Its region goes from REG_REGION_NONE to that region once, and that region's entry
 * is here, never in the root. And the first arena's chunks apart, in a leaf of their own
 * (registry_claim_hot): most processes have that one arena, so a lookup there is a
 * subtraction, a comparison and a load, and no leaf of the two-level table is written for
 * it. */
struct registry_hot registry_hot = {.region = REG_REGION_NONE};

/* Makes [base, base + nchunks chunks) the first arena's range, once (the arena lock held);
 * false when claimed already or there is no memory for its leaf. */
bool registry_claim_hot(uint8_t *base, size_t nchunks)
{
    if (atomic_load_explicit(&registry_hot.span, memory_order_relaxed))
        return false;
    uintptr_t *leaf = meta_alloc(nchunks * sizeof *leaf); /* zero: not ours */
    if (!leaf)
        return false;
    atomic_store_explicit(&registry_hot.base, (uintptr_t)base, memory_order_relaxed);
    atomic_store_explicit(&registry_hot.leaf, leaf, memory_order_relaxed);
    atomic_store_explicit(&registry_hot.span, nchunks << CHUNK_SHIFT, memory_order_release);
    return true;
}

/* The root entry of region: the hot one's, taken for the first region registered. */
static _Atomic uintptr_t *region_slot(uintptr_t region)
{
    uintptr_t hot = atomic_load_explicit(&registry_hot.region, memory_order_acquire);
    while (hot == REG_REGION_NONE &&
           !atomic_compare_exchange_weak_explicit(&registry_hot.region, &hot, region,
                                                  memory_order_acq_rel, memory_order_acquire))
        ;
    return hot == REG_REGION_NONE || hot == region ? &registry_hot.off : &registry_root[region];
}

/* What the registry holds for a chunk of an arena that is not in use (registry_unused): a
 * marker, so that a double free or a stray pointer into our address space is caught instead
 * of being handed to glibc; mappings of their own are unmapped on free and leave nothing
 * (the space may be reused). Read-only: never written, so it costs no process a private page
 * (and a stray write through it faults); with the rare text, never read on a normal path. */
__attribute__((section(".rodata.thp_rare")))
const chunk_t chunk_unused = {.kind = CHUNK_FREE, .page_shift = PAGE_SHIFT_NONE};

bool registry_set(uint8_t *base, size_t nchunks, chunk_t *desc)
{
    LIB_ASSERT(((uintptr_t)desc & REG_TAG_MASK) == 0);
    /* its page_shift is set, and stays while registered; the marker's is known without a
     * read: chunk_unused lies with the rare text, which no small process touches (build-layout) */
    uintptr_t e = desc == &chunk_unused
                      ? (uintptr_t)&chunk_unused | ((PAGE_SHIFT_NONE - 7u) & REG_SHIFT_BITS)
                      : registry_tag(desc);
    for (size_t i = 0; i < nchunks; i++) {
        uintptr_t a = (uintptr_t)(base + (i << CHUNK_SHIFT));
        uintptr_t span = atomic_load_explicit(&registry_hot.span, memory_order_acquire);
        uintptr_t in = a - atomic_load_explicit(&registry_hot.base, memory_order_relaxed);
        if (in < span) {
            /* Release: a thread that gets a pointer into this chunk sees the descriptor. */
            __atomic_store_n(
                &atomic_load_explicit(&registry_hot.leaf, memory_order_relaxed)[in >> CHUNK_SHIFT],
                e, __ATOMIC_RELEASE);
            LIB_ASSERT(registry_lookup((void *)a) == desc &&
                       registry_lookup((void *)(a + CHUNK_SIZE - 1)) == desc);
            continue;
        }
        if (REG_OUT_OF_RANGE(a))
            return false; /* never: mmap stays below 2^48 unless asked for more */
        _Atomic uintptr_t *slot = region_slot(a >> REG_REGION_SHIFT);
        uintptr_t off = atomic_load_explicit(slot, memory_order_acquire);
        if (!off) {
            uintptr_t *fresh = meta_alloc(sizeof(uintptr_t) << REG_LEAF_BITS);
            if (!fresh)
                return false;
            uintptr_t want = (uintptr_t)fresh - (uintptr_t)registry_empty_leaf;
            /* A lost race leaks one 64 KiB leaf: harmless and rare. */
            if (atomic_compare_exchange_strong_explicit(slot, &off, want, memory_order_acq_rel,
                                                        memory_order_acquire))
                off = want;
        }
        uintptr_t *leaf = (uintptr_t *)((uintptr_t)registry_empty_leaf + off);
        /* Release: a thread that gets a pointer into this chunk sees the descriptor. */
        __atomic_store_n(&leaf[(a >> CHUNK_SHIFT) & ((1u << REG_LEAF_BITS) - 1)], e,
                         __ATOMIC_RELEASE);
        LIB_ASSERT(registry_lookup((void *)a) == desc &&
                   registry_lookup((void *)(a + CHUNK_SIZE - 1)) == desc);
    }
    return true;
}
