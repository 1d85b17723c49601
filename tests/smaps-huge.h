/* smaps-huge.h: AnonHugePages (kB) of a process's own mappings that overlap a range, read from
 * /proc/self/smaps, for the test programs that make huge pages of their own
 * (tests/status-scan-prog.c, tests/status-read-prog.c). */
#ifndef THPALLOC_TESTS_SMAPS_HUGE_H
#define THPALLOC_TESTS_SMAPS_HUGE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* AnonHugePages (kB) of the mappings that overlap [b, b + len). */
static inline unsigned long huge_kb(uintptr_t b, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long total = 0, kb;
    int in = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long s, e;
        if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = s < b + len && e > b;
        else if (in && sscanf(line, "AnonHugePages: %lu kB", &kb) == 1)
            total += kb;
    }
    if (f)
        fclose(f);
    return total;
}

#endif
