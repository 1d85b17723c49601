/* One field of /proc/self/status in bytes ("VmSize", "VmData", ...), or 0 when it cannot be
 * read: the address-space and commit tests' view of the process, as the kernel keeps it. */
#ifndef THPALLOC_PROC_STATUS_H
#define THPALLOC_PROC_STATUS_H
#include <stdio.h>
#include <string.h>

static size_t proc_status_bytes(const char *field)
{
    char buf[256];
    FILE *f = fopen("/proc/self/status", "r");
    size_t len = strlen(field), kb = 0;
    if (!f)
        return 0;
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, field, len) && buf[len] == ':' && sscanf(buf + len + 1, "%zu", &kb) == 1)
            break;
    fclose(f);
    return kb << 10;
}
#endif
