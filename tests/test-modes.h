/* test-modes: a test program's modes by name, one table a program: the lookup and the usage
 * line (built from the table, so that it never misses a mode) in one place. */
#ifndef THPALLOC_TEST_MODES_H
#define THPALLOC_TEST_MODES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct test_mode {
    const char *name;
    void (*run)(void);
};

/* Runs the mode called name from modes[0..n): 0; else prints "usage: PROG [OPTS ]a|b|..."
 * and returns 2 (the exit status of a bad command line). */
static inline int test_mode_run(const char *prog, const char *opts, const struct test_mode *modes,
                                size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (name && !strcmp(name, modes[i].name)) {
            modes[i].run();
            return 0;
        }
    fprintf(stderr, "usage: %s %s%s", prog, opts ? opts : "", opts ? " " : "");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i ? "|" : "", modes[i].name);
    fputc('\n', stderr);
    return 2;
}

#endif
