/* Whether the library's purger thread runs: a thread named thpalloc-purge in
 * /proc/self/task (the C test programs that need it to start, or not to). */
#ifndef THPALLOC_PURGER_RUNNING_H
#define THPALLOC_PURGER_RUNNING_H
#include <dirent.h>
#include <stdio.h>
#include <string.h>

static int purger_running(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) && !found) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            found = fgets(comm, sizeof comm, f) && !strncmp(comm, "thpalloc-purge", 14);
            fclose(f);
        }
    }
    if (d)
        closedir(d);
    return found;
}
#endif
