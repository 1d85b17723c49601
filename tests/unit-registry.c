/* unit-registry: the chunk registry (lib/registry.c) over the whole address range it
 * covers. Entries are only recorded, never dereferenced, so addresses no mapping of this
 * machine can have are tested as well: the top of arm64's 48-bit user space (where its
 * mmap hands out memory), both sides of 2^47, and on 32-bit the top of the 4 GiB. */
#include "registry.h"
#include "tap.h"

#include <stdint.h>

_Atomic uint64_t stat_reserved; /* meta.c counts its segments here */

static chunk_t descs[8];

static int set_get(uintptr_t a, chunk_t *d)
{
    return registry_set((uint8_t *)a, 1, d) && registry_lookup((void *)a) == d &&
           registry_lookup((void *)(a + CHUNK_SIZE - 1)) == d &&
           registry_lookup((void *)(a + CHUNK_SIZE / 2)) == d;
}

/* The page of each offset from the entry alone (page_of_entry, free's fast path), for a
 * chunk of page size 1 << shift (PAGE_SHIFT_NONE: page 0), and the descriptor untagged. */
static chunk_t kinds[4];
static int pages_ok(uintptr_t a, chunk_t *d, unsigned shift)
{
    static const uintptr_t offs[] = {0,     16,    16383, 16384,         3 * 16384 + 5,
                                     65535, 65536, 98304, 5 * 65536 + 7, CHUNK_SIZE - 1};
    d->page_shift = (uint8_t)shift;
    if (!registry_set((uint8_t *)a, 1, d))
        return 0;
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        void *p = (void *)(a + offs[i]);
        page_t *want = &d->pages[shift < CHUNK_SHIFT ? offs[i] >> shift : 0];
        if (page_of_entry(registry_entry(p), p) != want || registry_lookup(p) != d)
            return 0;
    }
    return 1;
}

int main(void)
{
    tap_ok(registry_lookup(NULL) == NULL, "NULL is not ours");
    tap_ok(registry_lookup((void *)(uintptr_t)0x1234) == NULL, "an address never set: NULL");

    uintptr_t low = (uintptr_t)16 << CHUNK_SHIFT;
    tap_ok(set_get(low, &descs[0]),
           "a low chunk: set, then found from its first, middle and last byte");
    tap_ok(atomic_load(&registry_hot.region) == low >> REG_REGION_SHIFT &&
               atomic_load(&registry_hot.off) != 0 &&
               atomic_load(&registry_root[low >> REG_REGION_SHIFT]) == 0,
           "the first region registered is the hot one: its entry is not in the root");
    tap_ok(registry_lookup((void *)(low - 1)) == NULL &&
               registry_lookup((void *)(low + CHUNK_SIZE)) == NULL,
           "the bytes just before and after it are not ours");
    tap_ok(
        registry_set((uint8_t *)(low + CHUNK_SIZE), 3, &descs[1]) &&
            registry_lookup((void *)(low + 3 * CHUNK_SIZE + 5)) == &descs[1] &&
            registry_lookup((void *)low) == &descs[0],
        "a run of 3 chunks after it: each maps to the run's descriptor, the first keeps its own");
    /* A run that crosses from one leaf to the next. */
    uintptr_t leaf_span = (uintptr_t)CHUNK_SIZE << REG_LEAF_BITS;
    uintptr_t cross = 3 * leaf_span - CHUNK_SIZE;
    tap_ok(registry_set((uint8_t *)cross, 2, &descs[2]) &&
               registry_lookup((void *)cross) == &descs[2] &&
               registry_lookup((void *)(cross + CHUNK_SIZE)) == &descs[2],
           "a run across a leaf boundary is found on both sides");
    tap_ok(atomic_load(&registry_root[cross >> REG_REGION_SHIFT]) != 0 &&
               atomic_load(&registry_root[(cross + CHUNK_SIZE) >> REG_REGION_SHIFT]) != 0 &&
               atomic_load(&registry_hot.region) == low >> REG_REGION_SHIFT,
           "other regions' entries are in the root, and the hot region stays the first");
    tap_ok(registry_set((uint8_t *)cross, 2, NULL) && registry_lookup((void *)cross) == NULL &&
               registry_lookup((void *)(cross + CHUNK_SIZE)) == NULL,
           "cleared again: not ours");
#if UINTPTR_MAX > 0xffffffffu
    uintptr_t top48 = ((uintptr_t)1 << 48) - CHUNK_SIZE;
    tap_ok(set_get(top48, &descs[3]), "the last chunk below 2^48 (arm64's mmap area)");
    tap_ok(set_get(((uintptr_t)1 << 47) - CHUNK_SIZE, &descs[4]), "the last chunk below 2^47");
    tap_ok(set_get((uintptr_t)1 << 47, &descs[5]), "the first chunk at 2^47");
    tap_ok(!registry_set((uint8_t *)((uintptr_t)1 << 48), 1, &descs[6]) &&
               registry_lookup((void *)((uintptr_t)1 << 48)) == NULL,
           "2^48 and above: refused, and not ours");
    tap_ok(registry_lookup((void *)~(uintptr_t)0) == NULL,
           "the top of the address space: not ours");
#else
    uintptr_t top32 = (uintptr_t)0 - CHUNK_SIZE;
    tap_ok(set_get(top32, &descs[3]), "the last chunk of the 4 GiB");
    tap_ok(set_get((uintptr_t)1 << 31, &descs[4]), "the chunk at 2 GiB");
#endif
    tap_ok(registry_lookup((void *)low) == &descs[0], "the first entry survives all of it");

    /* The first arena's range, in a leaf of its own: 4 chunks at the start of region 5,
     * which nothing above used. */
    uintptr_t hot = (uintptr_t)5 << REG_REGION_SHIFT;
    tap_ok(registry_claim_hot((uint8_t *)hot, 4) && !registry_claim_hot((uint8_t *)low, 4),
           "the first arena's range is claimed once");
    tap_ok(registry_lookup((void *)hot) == NULL && set_get(hot, &descs[6]) &&
               set_get(hot + 3 * CHUNK_SIZE, &descs[7]) &&
               registry_lookup((void *)(hot + CHUNK_SIZE)) == NULL &&
               atomic_load(&registry_root[hot >> REG_REGION_SHIFT]) == 0,
           "its chunks are found, and the two-level table is not written for them");
    tap_ok(registry_lookup((void *)(hot - 1)) == NULL &&
               registry_lookup((void *)(hot + 4 * CHUNK_SIZE)) == NULL,
           "the bytes just before and after the range are not ours");
    tap_ok(set_get(hot + 4 * CHUNK_SIZE, &descs[5]) &&
               atomic_load(&registry_root[hot >> REG_REGION_SHIFT]) != 0 &&
               registry_lookup((void *)(hot + 3 * CHUNK_SIZE)) == &descs[7],
           "the chunk after the range goes to the two-level table, the range keeps its own");
    tap_ok(pages_ok(hot + CHUNK_SIZE, &kinds[0], SMALL_PAGE_SHIFT) &&
               pages_ok(hot + 2 * CHUNK_SIZE, &kinds[1], MEDIUM_PAGE_SHIFT),
           "a block's page from the entry's tag: 16 and 64 KiB pages in the first arena's range");
    uintptr_t far = ((uintptr_t)7 << REG_REGION_SHIFT) + 3 * CHUNK_SIZE;
    tap_ok(pages_ok(far, &kinds[2], MEDIUM_PAGE_SHIFT) &&
               pages_ok(far + CHUNK_SIZE, &kinds[3], PAGE_SHIFT_NONE),
           "and in the two-level table, a chunk without pages at page 0");
    int unused_ok = registry_set((uint8_t *)far + 2 * CHUNK_SIZE, 1, (chunk_t *)&chunk_unused);
    for (uintptr_t off = 0; unused_ok && off < CHUNK_SIZE; off += 3 * 16384 + 5) {
        void *p = (void *)(far + 2 * CHUNK_SIZE + off);
        unused_ok = registry_lookup(p) == &chunk_unused &&
                    page_of_entry(registry_entry(p), p) == &chunk_unused.pages[0];
    }
    tap_ok(unused_ok,
           "the unused-chunk marker: tagged as a chunk without pages (page 0 at every offset)");
    tap_ok(registry_set((uint8_t *)hot, 4, NULL) && registry_lookup((void *)hot) == NULL &&
               registry_lookup((void *)(hot + 3 * CHUNK_SIZE)) == NULL &&
               registry_lookup((void *)(hot + 4 * CHUNK_SIZE)) == &descs[5],
           "the range cleared (its arena unmapped): not ours");
    return tap_done();
}
