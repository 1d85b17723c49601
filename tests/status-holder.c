/* status-holder: a process for thp-status's process-view tests. Run it under
 * LD_PRELOAD=$THPALLOC_LIB: it holds 4 blocks of 64 MiB (every page touched) and some
 * small objects, prints "block ADDRESS SIZE" for each block, the policy the library says
 * it is using ("policy KEY VALUE ORIGIN", from thpalloc_policy() when the library is
 * there), then "ready PID", and sleeps until killed. With an argument N it holds N blocks
 * instead. It is not linked with thpalloc: without the preload it runs on glibc. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK ((size_t)64 << 20)

/* lib/thpalloc.h's struct thpalloc_setting, looked up at run time. */
struct setting {
    const char *key, *value, *origin;
};

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    for (int i = 0; i < n; i++) {
        char *p = malloc(BLOCK);
        if (!p) {
            fprintf(stderr, "status-holder: malloc(64 MiB) failed\n");
            return 1;
        }
        memset(p, 0x5a, BLOCK);
        printf("block %p %zu\n", (void *)p, BLOCK);
    }
    for (int i = 0; i < 1000; i++) {
        char *s = malloc(48);
        if (s)
            memset(s, 1, 48); /* kept: small-object pages stay resident */
    }
    int (*policy)(struct setting *, size_t) =
        (int (*)(struct setting *, size_t))dlsym(RTLD_DEFAULT, "thpalloc_policy");
    if (policy) {
        struct setting set[16];
        int k = policy(set, 16);
        for (int i = 0; i < k && i < 16; i++)
            printf("policy %s %s %s\n", set[i].key, set[i].value, set[i].origin);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
