/* api-header: every declaration of <thpalloc.h>, used as a program would use it. Compiled
 * by tests/api-header.sh with -Wall -Wextra -Werror by gcc and clang, as C and as C++, at
 * -O0 and -O2: the header must not make a correct program warn (gcc 12 said "'p' may be
 * used uninitialized" for thpalloc_owns(malloc(64))). Under the preload it prints one line
 * of what the calls answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thpalloc.h>

int main(void)
{
    void *p = malloc(64);
    int owns = thpalloc_owns(p);
    struct thpalloc_stats st;
    int stats = thpalloc_get_stats(&st, sizeof st);
    struct thpalloc_setting set[8];
    int keys = thpalloc_policy(set, sizeof set / sizeof set[0]);
    size_t purged = thpalloc_purge();
    free(p);
    printf("active=%d owns=%d stats=%d in_use>0=%d keys=%d first=%s purge=%s version=%s\n",
           thpalloc_active(), owns, stats, st.in_use > 0, keys, keys > 0 ? set[0].key : "-",
           purged == (size_t)-1 ? "failed" : "ok",
           strcmp(thpalloc_version(), THPALLOC_VERSION_STRING) == 0 ? "same" : "differs");
    return 0;
}
