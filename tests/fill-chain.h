/* Memory taken until malloc says no, and given back (oom-aspace, policy-commit-strict): blocks
 * chained through their first word, so that the program needs no table of its own. */
#ifndef THPALLOC_TESTS_FILL_CHAIN_H
#define THPALLOC_TESTS_FILL_CHAIN_H
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Blocks of size bytes until malloc returns NULL (*err: its errno; 0 when it never did) or
 * more than max are held, each written (whole, or its last byte: committed either way):
 * their chain, *count of them. */
static void *fill_chain(size_t size, size_t max, bool whole, size_t *count, int *err)
{
    void *head = NULL;
    *count = 0;
    *err = 0;
    for (;;) {
        void *p = malloc(size);
        if (!p) {
            *err = errno;
            break;
        }
        if (whole)
            memset(p, 1, size);
        else
            ((unsigned char *)p)[size - 1] = 0x5a;
        *(void **)p = head;
        head = p;
        if (++*count > max)
            break;
    }
    return head;
}

static void free_chain(void *head)
{
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
}
#endif
