/* list: the one doubly-linked list of lib/, for any node with `next` and `prev` and any
 * queue with `first` and `last` (page queues, a heap's chunks, the abandoned chunks), as
 * musl's mallocng keeps one queue/dequeue pair. Macros, so that each list keeps its own
 * types; every use is under the lock or ownership that guards that list. */
#ifndef THPALLOC_LIST_H
#define THPALLOC_LIST_H

/* Takes node n off queue q; its links are cleared. */
#define DLIST_REMOVE(q, n)                                                                         \
    do {                                                                                           \
        if ((n)->prev)                                                                             \
            (n)->prev->next = (n)->next;                                                           \
        else                                                                                       \
            (q)->first = (n)->next;                                                                \
        if ((n)->next)                                                                             \
            (n)->next->prev = (n)->prev;                                                           \
        else                                                                                       \
            (q)->last = (n)->prev;                                                                 \
        (n)->next = (n)->prev = NULL;                                                              \
    } while (0)

#define DLIST_PUSH_FRONT(q, n)                                                                     \
    do {                                                                                           \
        (n)->prev = NULL;                                                                          \
        (n)->next = (q)->first;                                                                    \
        if ((q)->first)                                                                            \
            (q)->first->prev = (n);                                                                \
        else                                                                                       \
            (q)->last = (n);                                                                       \
        (q)->first = (n);                                                                          \
    } while (0)

#define DLIST_PUSH_BACK(q, n)                                                                      \
    do {                                                                                           \
        (n)->next = NULL;                                                                          \
        (n)->prev = (q)->last;                                                                     \
        if ((q)->last)                                                                             \
            (q)->last->next = (n);                                                                 \
        else                                                                                       \
            (q)->first = (n);                                                                      \
        (q)->last = (n);                                                                           \
    } while (0)

#endif
