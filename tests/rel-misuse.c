/* rel-misuse: one heap misuse per run, for tests/rel-misuse.sh.
 *
 *   rel-misuse CASE
 *
 * CASE is one of
 *   small-double     free(p) twice, p = malloc(48), same thread
 *   medium-double    free(p) twice, p = malloc(100 KiB)
 *   large-double     free(p) twice, p = malloc(4 MiB) (a block with chunks of its own)
 *   small-interior   free(p + 16), p = malloc(256)
 *   large-interior   free(p + 4096), p = malloc(4 MiB)
 *   large-realloc    free(p), then realloc(p, 8 MiB), p = malloc(4 MiB)
 *   ok               no misuse at all (the control: must exit 0)
 *
 * Before the misuse the program prints "ptr=0x%016lx" (the pointer handed to free/realloc,
 * in the format thpalloc's fatal message uses: 8 digits in a 32-bit process) on stdout and
 * flushes. A correct allocator stops the process in the misuse call. When the call
 * returns, the program looks for the silent corruption that undetected misuse causes (the
 * same block handed out twice) and says what it found on stdout, then exits 3. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

/* Hides a pointer's provenance from the compiler, so that it neither warns about nor
 * removes the deliberate misuse. */
static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void announce(const void *p)
{
    printf("ptr=0x%0*lx\n", (int)(2 * sizeof p), (unsigned long)(uintptr_t)p);
    fflush(stdout);
}

/* After an undetected double free of a block of size n: do two allocations of that size
 * return the same address? */
static void look_for_duplicates(size_t n)
{
    void *a = malloc(n), *b = malloc(n);
    if (a && a == b)
        printf("silent corruption: malloc(%zu) returned %p twice\n", n, a);
    else
        printf("misuse went undetected (no duplicate seen at once)\n");
    fflush(stdout);
}

static int double_free(size_t n)
{
    char *p = malloc(n);
    if (!p)
        return 2;
    memset(p, 0x5a, n);
    announce(p);
    free(p);
    free(launder(p));
    look_for_duplicates(n);
    return 3;
}

static int interior(size_t n, size_t off)
{
    char *p = malloc(n);
    if (!p)
        return 2;
    memset(p, 0x5a, n);
    announce(p + off);
    free(launder(p + off));
    printf("misuse went undetected\n");
    fflush(stdout);
    return 3;
}

static int realloc_freed(size_t n)
{
    char *p = malloc(n);
    if (!p)
        return 2;
    memset(p, 0x5a, n);
    announce(p);
    free(p);
    void *q = realloc(launder(p), 2 * n);
    printf("misuse went undetected (realloc returned %p)\n", q);
    fflush(stdout);
    return 3;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rel-misuse CASE\n");
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "small-double"))
        return double_free(48);
    if (!strcmp(c, "medium-double"))
        return double_free(100 * KiB);
    if (!strcmp(c, "large-double"))
        return double_free(4 * MiB);
    if (!strcmp(c, "small-interior"))
        return interior(256, 16);
    if (!strcmp(c, "large-interior"))
        return interior(4 * MiB, 4096);
    if (!strcmp(c, "large-realloc"))
        return realloc_freed(4 * MiB);
    if (!strcmp(c, "ok")) {
        char *p = malloc(48), *q = malloc(4 * MiB);
        if (!p || !q)
            return 2;
        announce(p);
        free(launder(p));
        free(launder(q));
        return 0;
    }
    fprintf(stderr, "rel-misuse: unknown case %s\n", c);
    return 2;
}
