/* thpalloc internals, layer 10: the heaps' lives (base.h says how the headers go). */
#ifndef THPALLOC_THREAD_H
#define THPALLOC_THREAD_H

#include "heap.h"

/* ---- thread.c: the heaps' lives ---------------------------------------------------------- */
HIDDEN heap_t *thread_heap_create(void);
HIDDEN void *thread_late_malloc(size_t size, bool zero);
HIDDEN void thread_page_set_aligned(page_t *page);
HIDDEN void thread_heap_exit(void *heap);
HIDDEN void thread_key_init(void);
HIDDEN size_t thread_heap_count(bool with_parked);
HIDDEN uint32_t thread_unpark_due(uint32_t now, bool force);
HIDDEN void thread_collect_parked(void);
HIDDEN void thread_foreach_heap(void (*fn)(heap_t *heap, void *arg), void *arg);
HIDDEN void thread_fork(enum fork_phase phase);

#endif
