/* real-static: a statically linked program (tests/real-preload-world.sh): allocates with its
 * own (glibc's static) malloc, prints "static ok", and "thpalloc mapped" when
 * libthpalloc appears in its own /proc/self/maps (it must not: ld.so.preload is never
 * read for a static executable). Also built as tests/m32-suites when gcc -m32 works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char line[512];
    int mapped = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        mapped |= strstr(line, "libthpalloc") != NULL;
    if (f)
        fclose(f);
    size_t total = 0;
    for (size_t n = 1; n < (8u << 20); n *= 3) {
        char *p = malloc(n);
        if (!p)
            return 1;
        memset(p, 1, n);
        total += n;
        free(p);
    }
    printf("%s ok (%zu bytes)\n", sizeof(void *) == 4 ? "32-bit" : "static", total);
    if (mapped)
        printf("thpalloc mapped\n");
    return 0;
}
