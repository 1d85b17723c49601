/* One check of a C test program whose output tests/api-taplib.sh relays as TAP: an
 * unnumbered "ok - ..." or "not ok - ..." line, flushed at once (the program may die next). */
#ifndef THPALLOC_RELAY_REPORT_H
#define THPALLOC_RELAY_REPORT_H
#include <stdarg.h>
#include <stdio.h>

static int report_failures;

__attribute__((format(printf, 2, 3))) static void report(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(cond ? "ok - " : "not ok - ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    fflush(stdout);
    if (!cond)
        report_failures++;
}
#endif
