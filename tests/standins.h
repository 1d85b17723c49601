/* The layers above the policy's loading, stood in for, in tests that link only the layers
 * they test and those below (unit-extent-env.h, build-tsan-signal.c): the policy is loaded
 * already (each test defines its policy_in_force), the introspection block keeps no ranges,
 * and the fatal paths print thpalloc's message and abort. Included by one source of each
 * program. */
#ifndef THPALLOC_TESTS_STANDINS_H
#define THPALLOC_TESTS_STANDINS_H
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>

void policy_ensure_loaded(void) {}
void introspect_add_range(void *base, size_t size)
{
    (void)base;
    (void)size;
}
void introspect_remove_range(void *base)
{
    (void)base;
}
void introspect_set_dense(void) {}
void lib_fatal(const char *msg, const void *p)
{
    fprintf(stderr, "thpalloc: %s (%p)\n", msg, p);
    abort();
}
void lib_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "thpalloc: invariant failed: %s at %s:%d\n", expr, file, line);
    abort();
}
#endif
