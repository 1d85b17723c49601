/* pkg-static: a program linked with -static and libthpalloc.a (tests/pkg-static.sh). It
 * prints whether thpalloc is its malloc (thpalloc_active(), thpalloc_owns() of blocks from
 * malloc, calloc, realloc, posix_memalign and one from another thread), and whether it is
 * statically linked. Its own ini_parse and lib_init would collide with the archive's if
 * those were not private. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "thpalloc.h"

int ini_parse(const char *name);
void lib_init(void);

int ini_parse(const char *name)
{
    return name ? 7 : 0;
}

void lib_init(void) {}

static void *thread_block(void *arg)
{
    (void)arg;
    return malloc(100);
}

int main(void)
{
    lib_init();
    void *a = malloc(24);
    void *b = calloc(1000, 1000);
    void *c = realloc(malloc(10), 300000);
    void *d = NULL;
    void *t = NULL;
    pthread_t th;
    if (!a || !b || !c || posix_memalign(&d, 4096, 5 << 20) != 0 ||
        pthread_create(&th, NULL, thread_block, NULL) != 0 || pthread_join(th, &t) != 0 || !t)
        return 1;
    memset(d, 1, 5 << 20);
    printf("active=%d owns=%d%d%d%d%d static=%s ini_parse=%d\n", thpalloc_active(),
           thpalloc_owns(a), thpalloc_owns(b), thpalloc_owns(c), thpalloc_owns(d), thpalloc_owns(t),
           getauxval(AT_BASE) == 0 ? "yes" : "no", ini_parse("x"));
    free(a);
    free(b);
    free(c);
    free(d);
    free(t);
    return 0;
}
