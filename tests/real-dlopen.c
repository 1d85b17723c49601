/* real-dlopen: dlopen()s many of the system's shared libraries into one process
 * (tests/real-preload-world.sh), the way a plugin host does, allocating in between.
 *
 *   real-dlopen DIR MAX
 *
 * Takes the regular files named lib*.so.* in DIR, sorted, skipping allocators, sanitizer
 * runtimes and other interposers (they would replace malloc mid-run, which is not what
 * is tested here), opens up to MAX of them with RTLD_LAZY | RTLD_LOCAL, prints
 * "opened NAME" or "failed NAME" for each, allocates and frees a few blocks after each,
 * then dlcloses them in reverse order and prints "closed N". Exit 0 unless the program
 * itself fails. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const skip[] = {"libc.",
                                   "libc_malloc_debug",
                                   "libmemusage",
                                   "libpcprofile",
                                   "libSegFault",
                                   "libjemalloc",
                                   "libtcmalloc",
                                   "libmimalloc",
                                   "libasan",
                                   "libtsan",
                                   "liblsan",
                                   "libubsan",
                                   "libhwasan",
                                   "libthpalloc",
                                   "libfakeroot",
                                   "libeatmydata",
                                   "libvtv",
                                   "libLLVM",
                                   "libclang",
                                   "libpython",
                                   "libmpi",
                                   "libopen-",
                                   "libnss_",
                                   "libpam",
                                   "libBrokenLocale",
                                   "libthread_db",
                                   "libz3",
                                   "liblldb",
                                   "libgtk",
                                   "libgdk",
                                   "libpulse",
                                   "libvulkan",
                                   "libGL",
                                   "libEGL",
                                   "libgallium",
                                   "libdrm",
                                   "libxcb",
                                   "libX",
                                   "libwayland",
                                   "libsystemd",
                                   "libudev",
                                   "libdbus",
                                   "libcuda",
                                   "libnvidia",
                                   NULL};

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: real-dlopen DIR MAX\n");
        return 2;
    }
    const char *dir = argv[1];
    int max = atoi(argv[2]);
    DIR *d = opendir(dir);
    if (!d)
        return 2;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "lib", 3) || !strstr(e->d_name, ".so."))
            continue;
        int bad = 0;
        for (int i = 0; skip[i]; i++)
            bad |= !strncmp(e->d_name, skip[i], strlen(skip[i]));
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (bad || lstat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names)
                return 2;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    void **handles = calloc(n + 1, sizeof *handles);
    int opened = 0;
    for (size_t i = 0; i < n && opened < max; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        handles[i] = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        printf("%s %s\n", handles[i] ? "opened" : "failed", names[i]);
        opened += handles[i] != NULL;
        void *p = malloc(100 + i * 1000), *q = calloc(1, 70000);
        free(p);
        p = realloc(q, 3 << 20);
        free(p ? p : q);
    }
    int closed = 0;
    for (size_t i = n; i-- > 0;)
        if (handles[i]) {
            dlclose(handles[i]);
            closed++;
        }
    printf("closed %d\n", closed);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(handles);
    return 0;
}
