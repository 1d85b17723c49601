/* thpalloc-preload: /etc/ld.so.preload as ld.so parses it and its byte-exact, atomic
 * editing (tools/thpalloc-preload/preload-file.c). */
#ifndef THPALLOC_PRELOAD_FILE_H
#define THPALLOC_PRELOAD_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define PRELOAD_FILE "/etc/ld.so.preload"
#define PRELOAD_NAME "ld.so.preload" /* in etcfd */
#define MAX_FILE (1 << 20)           /* ld.so.preload is a few lines; refuse anything absurd */

extern char entry[PATH_MAX]; /* our entry, as written in the file */
extern size_t entry_len;
extern char root[PATH_MAX];      /* --root, "" for / */
extern char dir[PATH_MAX + 8];   /* ROOT/etc */
extern char path[PATH_MAX + 32]; /* ROOT/etc/ld.so.preload */
/* ROOT/etc, opened inside ROOT (open_beneath): the file is read, written, renamed and
 * removed there only; -1 for status when there is no ROOT/etc. */
extern int etcfd;

void *xrealloc(void *p, size_t n);
void *xcalloc(size_t n, size_t size);
bool is_sep(unsigned char c);

/* --- the file's tokens, as glibc sees them --- */

struct token {
    size_t start, end; /* [start, end) */
    bool ours;         /* our entry, or our entry and a '\r' (cr) */
    bool cr;           /* a CRLF line's: ld.so looks for a file whose name ends in '\r' */
    bool seen;         /* ld.so reads it (see parse) */
};

struct parsed {
    struct token *tok;
    size_t ntok;
    size_t ours; /* tokens that are ours, loaded or not */
    size_t live; /* ours, without '\r', where ld.so reads: the library is loaded */
    size_t nul;  /* offset of the first NUL outside a comment; the length if none */
};

void parse(const char *buf, size_t len, struct parsed *p);

/* The file as it stands, read and split into tokens. */
struct current {
    char *buf;
    size_t len;
    struct stat st;
    bool exists;
    struct parsed p;
};

#define NONE SIZE_MAX /* no token */

/* 0 when read (c->exists: whether there is a file), -1 on an error (already said). */
int load(struct current *c);
void unload(struct current *c);
/* The file's bytes without our tokens but the one at index `keep` (NONE: all go), and
 * (uncr) without that one's '\r'. Returns a malloc'd buffer (its length in *n). */
char *without_ours(const struct current *c, size_t keep, bool uncr, size_t *n);
/* The first of our tokens that ld.so reads, with a '\r' (cr) or without; NONE if none. */
size_t first_seen(const struct parsed *p, bool cr);
/* Replaces the file with buf[0..len) atomically, mode 0644; 0, or -1 (said why). */
int write_file(const char *buf, size_t len);
int remove_file(void);
bool only_separators(const char *buf, size_t len);

#endif
