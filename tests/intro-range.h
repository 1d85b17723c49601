/* intro-range: range slot i of this process's thpalloc introspection block (lib/thpalloc.h,
 * version 2: the first THPALLOC_RANGES_INLINE slots in the block, the rest in the table at
 * `more`), for the tests that read the block from inside the process. */
#ifndef INTRO_RANGE_H
#define INTRO_RANGE_H

#include <stdint.h>

#include "thpalloc.h"

static inline const struct thpalloc_range *intro_range(const struct thpalloc_introspect *t,
                                                       uint64_t i)
{
    if (i < THPALLOC_RANGES_INLINE)
        return &t->range[i];
    return (const struct thpalloc_range *)(uintptr_t)t->more + (i - THPALLOC_RANGES_INLINE);
}

#endif
