/* A thread's last free, made in glibc's second pass of thread-specific destructors: after
 * the library's own key destructor retired the thread's heap (stress-fork, stress-joinfree).
 * pthread_key_create(&late_key, late_free) once; a thread then hands its block over with
 * pthread_setspecific(late_key, p). */
#ifndef THPALLOC_TESTS_LATE_FREE_H
#define THPALLOC_TESTS_LATE_FREE_H
#include <pthread.h>
#include <stdlib.h>

static pthread_key_t late_key;
static __thread int late_passes;

/* The first pass sets the value again, so glibc calls this once more in its second pass:
 * by then the library's destructor has run, and this free asks for the purger where no
 * safe point of the thread may start it. */
static void late_free(void *p)
{
    if (late_passes++ == 0)
        pthread_setspecific(late_key, p);
    else
        free(p);
}
#endif
