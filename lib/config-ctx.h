/* config's private header: the resolution context that config.c (the files and the
 * environment, in order) and config-parse.c (sections and keys) share. Not for the library's
 * other files, nor thp-status: config.h is their interface. */
#ifndef THPALLOC_CONFIG_CTX_H
#define THPALLOC_CONFIG_CTX_H

#include "config.h"

#include <limits.h>
#include <stddef.h>

#define MAX_FILE ((size_t)64 << 10)
#define MAX_DROPINS 64 /* names sorted per pass over the directory, not a limit */
#define NAME_CAP 256

enum sect_type { SECT_GLOBAL = 1, SECT_PROGRAM, SECT_PATH, SECT_UNIT, SECT_BAD };

struct scratch {
    char file[MAX_FILE];
    char dents[8192];
    char names[MAX_DROPINS][NAME_CAP];
    char path[PATH_MAX];
    char walk[2][PATH_MAX]; /* cfg_open_secure's */
};

/* Lives on the stack of whatever thread loads the policy, in every process: the buffers
 * come first, at the deep end (the stack grows down), so that a process that never needs
 * them never touches their pages (cfg_resolve sets the other fields one by one). */
struct ctx {
    char exe[4096];
    char unit[256];
    struct cfg_settings *s;
    const struct cfg_inputs *in;
    cfg_report_fn report;
    void *rctx;
    int problems;
    /* the file being parsed */
    const char *path;
    const char *buf;
    size_t len, pos;
    int line;
    /* the identity of the process, resolved on demand */
    bool exe_done, unit_done;
    const char *program;
    /* the section the next keys belong to, and whether it applies to this process */
    char sect_label[sizeof(((struct cfg_where *)0)->section)];
    enum sect_type sect_type;
    bool sect_applies;
    struct scratch *scratch;
};

/* config-parse.c: a problem reported (and counted); key k set from text when it is valid and
 * at least as specific as what is there; the section the next keys belong to; inih's
 * callbacks, the lines fed one at a time (stream: the ctx, its buf, len and pos). */
void cfg_problem(struct ctx *c, const char *file, int line, const char *a, const char *b,
                 const char *d);
void cfg_set_key(struct ctx *c, enum cfg_key k, const char *value, int rank, enum cfg_origin origin,
                 const char *file, int line, const char *section, bool applies);
void cfg_section_enter(struct ctx *c, enum sect_type type, const char *arg, size_t alen);
int cfg_on_key(void *user, const char *section, const char *name, const char *value);
char *cfg_next_line(char *str, int num, void *stream);

#endif
