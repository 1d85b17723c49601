/* fatal: heap corruption or misuse seen by the allocator: one line on standard error and
 * abort(), as glibc does; the failed invariant of a debug build the same way. No stdio, no
 * allocation: the heap may be broken. */
#include "base.h"

#include <stdlib.h>

/* Heap corruption seen by the allocator: say so and stop, as glibc does. */
TEXT_COLD
void lib_fatal(const char *msg, const void *p)
{
    char buf[160];
    static const char hex[] = "0123456789abcdef";
    enum { DIGITS = 2 * sizeof(uintptr_t) }; /* 16, or 8 in a 32-bit process */
    char num[2 + DIGITS + 1];
    uintptr_t v = (uintptr_t)p;
    num[0] = '0';
    num[1] = 'x';
    for (int i = 0; i < DIGITS; i++)
        num[2 + i] = hex[(v >> (4 * (DIGITS - 1 - i))) & 15];
    num[2 + DIGITS] = '\0';
    size_t n = 0;
    const char *parts[] = {"thpalloc: ", msg, " (", num, ")\n"};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (const char *s = parts[k]; *s && n + 1 < sizeof buf; s++)
            buf[n++] = *s;
    buf[n] = '\0';
    os_write_stderr(buf);
    abort();
}

/* noipa: gcc would find it noreturn itself and call it (lib_fatal_tail's declaration). */
TEXT_COLD __attribute__((noipa)) void lib_fatal_tail(const char *msg, void *p)
{
    lib_fatal(msg, p);
}

#ifdef THPALLOC_DEBUG
void lib_assert_fail(const char *expr, const char *file, int line)
{
    char msg[256], num[24];
    size_t n = 0;
    const char *parts[] = {
        "invariant failed: ", expr, " at ", file, ":", os_format_u64(num, (uint64_t)line)};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (const char *c = parts[k]; *c && n + 1 < sizeof msg; c++)
            msg[n++] = *c;
    msg[n] = '\0';
    lib_fatal(msg, NULL);
}
#endif
