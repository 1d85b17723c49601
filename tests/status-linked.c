/* status-linked: a program linked with -lthpalloc (not preloaded) that declares and reads
 * thpalloc_introspect itself, as thpalloc.h once let it, so that the linker gives it a copy
 * of the object (a copy relocation) (tests/status-linked.sh). It allocates two 8 MiB
 * blocks, prints what its own copy says ("copy active=N ranges=N") and "ready", and holds
 * the memory until it is killed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thpalloc.h"

extern struct thpalloc_introspect thpalloc_introspect;

int main(void)
{
    char *a = malloc(8 << 20), *b = malloc(8 << 20);
    if (!a || !b)
        return 1;
    memset(a, 1, 8 << 20);
    memset(b, 2, 8 << 20);
    printf("touched=%d\n", a[100] + b[100]); /* the blocks are used: no store is dropped */
    printf("active=%d copy active=%u ranges=%llu\nready\n", thpalloc_active(),
           (unsigned)thpalloc_introspect.active,
           (unsigned long long)thpalloc_introspect.ranges_used);
    fflush(stdout);
    for (;;)
        pause();
}
