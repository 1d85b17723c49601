/* config: resolves the policy from files, sections and the environment (see config.h);
 * the keys and their grammars are config-keys.c. Runs inside every process that allocates,
 * possibly before libc is fully set up: only open/read/getdents64/readlink, fixed buffers,
 * and inih with its stack line buffer. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_FILE ((size_t)64 << 10)
#define MAX_DROPINS 64 /* names sorted per pass over the directory, not a limit */
#define NAME_CAP 256

/* ---- resolution context ------------------------------------------------------------ */

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

static void problem(struct ctx *c, const char *file, int line, const char *a, const char *b,
                    const char *d)
{
    char msg[512];
    msg[0] = '\0';
    cfg_str_cat(msg, sizeof msg, a);
    if (b)
        cfg_str_cat(msg, sizeof msg, b);
    if (d)
        cfg_str_cat(msg, sizeof msg, d);
    c->problems++;
    if (c->report)
        c->report(c->rctx, file, line, msg);
}

static const char *path_basename(const char *p)
{
    const char *slash = strrchr(p, '/');
    return slash ? slash + 1 : p;
}

static void resolve_exe(struct ctx *c)
{
    if (c->exe_done)
        return;
    c->exe_done = true;
    c->exe[0] = '\0';
    if (c->in->exe) {
        cfg_str_copy(c->exe, sizeof c->exe, c->in->exe);
    } else if (!c->in->program && !c->in->check_all) {
        ssize_t n = readlink("/proc/self/exe", c->exe, sizeof c->exe - 1);
        c->exe[n > 0 ? n : 0] = '\0';
    }
    c->program = c->in->program ? c->in->program : path_basename(c->exe);
}

bool cfg_unit_from_cgroup(const char *text, char *unit, size_t cap)
{
    /* Prefer the unified hierarchy ("0::/path"), else the systemd v1 one. */
    const char *best = NULL;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, "0::", 3) == 0) {
            best = line + 3;
            break;
        }
        const char *c1 = memchr(line, ':', end ? (size_t)(end - line) : strlen(line));
        if (c1 && strncmp(c1 + 1, "name=systemd:", 13) == 0)
            best = c1 + 14;
        line = end ? end + 1 : NULL;
    }
    if (!best)
        return false;
    const char *p = best;
    while (*p && *p != '\n') {
        while (*p == '/')
            p++;
        const char *q = p;
        while (*q && *q != '/' && *q != '\n')
            q++;
        size_t n = (size_t)(q - p);
        bool slice = n > 6 && memcmp(q - 6, ".slice", 6) == 0;
        bool service = n > 8 && memcmp(q - 8, ".service", 8) == 0;
        bool scope = n > 6 && memcmp(q - 6, ".scope", 6) == 0;
        if ((service || scope) && n < cap) {
            memcpy(unit, p, n);
            unit[n] = '\0';
            return true;
        }
        if (!slice && n)
            return false; /* a cgroup systemd did not make: no unit */
        p = q;
    }
    return false;
}

static void resolve_unit(struct ctx *c)
{
    if (c->unit_done)
        return;
    c->unit_done = true;
    c->unit[0] = '\0';
    if (c->in->unit) {
        cfg_str_copy(c->unit, sizeof c->unit, c->in->unit);
        return;
    }
    /* An injected identity (thp-status --explain) only has the unit it was given. */
    if (c->in->check_all || ((c->in->program || c->in->exe) && !c->in->cgroup_file))
        return;
    char buf[2048];
    const char *path = c->in->cgroup_file ? c->in->cgroup_file : "/proc/self/cgroup";
    if (os_read_small_file(path, buf, sizeof buf) > 0)
        cfg_unit_from_cgroup(buf, c->unit, sizeof c->unit);
}

/* Blanks as inih's lskip sees them (isspace in the C locale), so that this file and inih
 * agree on which lines are headers. */
static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r' || ch == '\n';
}

static const char *skip_blanks(const char *p, const char *end)
{
    while (p < end && is_blank(*p))
        p++;
    return p;
}

/* Parses "global", "program NAME", "path /EXE", "unit NAME" (text[0..len), not
 * NUL-terminated); sets *arg and *alen to NAME. */
static enum sect_type section_parse(const char *text, size_t len, const char **arg, size_t *alen)
{
    static const struct {
        const char *word;
        enum sect_type type;
    } kinds[] = {{"program", SECT_PROGRAM}, {"path", SECT_PATH}, {"unit", SECT_UNIT}};
    const char *end = text + len;
    const char *p = text;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    *arg = "";
    *alen = 0;
    if (p == end || ((size_t)(end - p) == 6 && strncasecmp(p, "global", 6) == 0))
        return SECT_GLOBAL;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        size_t n = strlen(kinds[i].word);
        if ((size_t)(end - p) > n && strncasecmp(p, kinds[i].word, n) == 0 &&
            (p[n] == ' ' || p[n] == '\t')) {
            const char *a = p + n;
            while (a < end && (*a == ' ' || *a == '\t'))
                a++;
            size_t an = (size_t)(end - a);
            if (!an || memchr(a, ' ', an) || memchr(a, '\t', an))
                return SECT_BAD;
            if (kinds[i].type == SECT_PATH && *a != '/')
                return SECT_BAD;
            *arg = a;
            *alen = an;
            return kinds[i].type;
        }
    }
    return SECT_BAD;
}

/* text[0..len) as a NUL-terminated string that fits cap; what does not fit is replaced by
 * "..." in the middle, so that both the kind and the end of a long path stay readable. */
static void copy_elided(char *dst, size_t cap, const char *text, size_t len)
{
    if (len < cap) {
        memcpy(dst, text, len);
        dst[len] = '\0';
        return;
    }
    size_t head = (cap - 4) / 3, tail = cap - 4 - head;
    memcpy(dst, text, head);
    memcpy(dst + head, "...", 3);
    memcpy(dst + head + 3, text + len - tail, tail);
    dst[cap - 1] = '\0';
}

static bool same(const char *s, const char *text, size_t len)
{
    return strlen(s) == len && memcmp(s, text, len) == 0;
}

static void section_enter(struct ctx *c, enum sect_type type, const char *arg, size_t alen)
{
    static const char *const words[] = {
        [SECT_PROGRAM] = "program ", [SECT_PATH] = "path ", [SECT_UNIT] = "unit "};
    c->sect_type = type;
    c->sect_applies = false;
    if (type == SECT_GLOBAL) {
        cfg_str_copy(c->sect_label, sizeof c->sect_label, "global");
        c->sect_applies = true;
        return;
    }
    cfg_str_copy(c->sect_label, sizeof c->sect_label, words[type]);
    size_t wl = strlen(c->sect_label);
    copy_elided(c->sect_label + wl, sizeof c->sect_label - wl, arg, alen);
    if (c->in->check_all)
        return;
    if (type == SECT_UNIT) {
        resolve_unit(c);
        c->sect_applies = c->unit[0] && same(c->unit, arg, alen);
        return;
    }
    resolve_exe(c);
    if (type == SECT_PROGRAM)
        c->sect_applies = c->program && same(c->program, arg, alen);
    else
        c->sect_applies = c->exe[0] && same(c->exe, arg, alen);
}

/* For thp-status --check only (never in a process's policy load): the header's NAME as a
 * string, to the tool's checks of what can match. */
static void section_announce(struct ctx *c, enum sect_type type, const char *arg, size_t alen)
{
    char name[CFG_SECTION_NAME_MAX + 1];
    memcpy(name, arg, alen); /* alen <= CFG_SECTION_NAME_MAX: checked by the caller */
    name[alen] = '\0';
    c->in->on_section(c->rctx, c->path, c->line,
                      type == SECT_PROGRAM ? "program"
                      : type == SECT_PATH  ? "path"
                                           : "unit",
                      name);
}

/* A section header, p at its '[' and end at the end of the line. Read here, not by inih:
 * inih keeps 49 characters of a name, and after a header it cannot read it leaves the
 * previous section in force, so keys would land in a section they were not written for.
 * A header that is not understood applies to nothing, up to the next good one. */
static void section_header(struct ctx *c, const char *p, const char *end)
{
    static const char skipped[] = ": its keys are ignored up to the next section";
    c->sect_type = SECT_BAD;
    c->sect_applies = false;
    const char *close = memchr(p, ']', (size_t)(end - p));
    if (!close) {
        problem(c, c->path, c->line, "section header without a closing ]", skipped, NULL);
        return;
    }
    const char *rest = skip_blanks(close + 1, end);
    if (rest < end && *rest != ';' && *rest != '#') {
        problem(c, c->path, c->line, "text after the closing ] of a section header", skipped, NULL);
        return;
    }
    const char *arg;
    size_t alen, len = (size_t)(close - p - 1);
    enum sect_type type = section_parse(p + 1, len, &arg, &alen);
    if (type == SECT_BAD) {
        char sect[160];
        copy_elided(sect, sizeof sect, p + 1, len);
        problem(c, c->path, c->line, "unknown section [", sect,
                "]: expected [global], [program NAME], [path /EXE] or [unit NAME]");
        return;
    }
    if (alen > CFG_SECTION_NAME_MAX) {
        char lim[64] = "section name longer than ";
        cfg_str_cat_u64(lim, sizeof lim, CFG_SECTION_NAME_MAX);
        problem(c, c->path, c->line, lim, " characters", skipped);
        return;
    }
    section_enter(c, type, arg, alen);
    if (c->in->check_all && c->in->on_section && type != SECT_GLOBAL)
        section_announce(c, type, arg, alen);
}

static int rank_of(enum sect_type t)
{
    return t == SECT_GLOBAL ? 1 : t == SECT_PROGRAM ? 2 : t == SECT_PATH ? 3 : 4;
}

/* Sets key k from text when it is valid and at least as specific as what is there. */
static void set_key(struct ctx *c, enum cfg_key k, const char *value, int rank,
                    enum cfg_origin origin, const char *file, int line, const char *section,
                    bool applies)
{
    int64_t v;
    if (!cfg_keys[k].parse(value, &v)) {
        char msg[256];
        msg[0] = '\0';
        cfg_str_cat(msg, sizeof msg, "bad value \"");
        cfg_str_cat(msg, sizeof msg, value);
        cfg_str_cat(msg, sizeof msg, "\" for ");
        cfg_str_cat(msg, sizeof msg, cfg_keys[k].name);
        cfg_str_cat(msg, sizeof msg, ": expected ");
        cfg_str_cat(msg, sizeof msg, cfg_keys[k].expect);
        problem(c, file, line, msg, NULL, NULL);
        return;
    }
    if (!applies || rank < c->s->where[k].rank)
        return;
    struct cfg_where w;
    memset(&w, 0, sizeof w);
    w.origin = origin;
    w.rank = rank;
    w.line = line;
    cfg_str_copy(w.file, sizeof w.file, file);
    cfg_str_copy(w.section, sizeof w.section, section);
    cfg_str_copy(w.value, sizeof w.value, value);
    cfg_field_set(c->s, k, v);
    c->s->where[k] = w;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct ctx *c = user;
    (void)section; /* always "": headers never reach inih (section_header) */
    if (c->sect_type == SECT_BAD)
        return 1; /* reported at the header */
    int k = cfg_key_lookup(name);
    if (k < 0) {
        char keys[128] = "\" (keys: ";
        cfg_key_list(keys + strlen(keys), sizeof keys - strlen(keys));
        cfg_str_cat(keys, sizeof keys, ")");
        problem(c, c->path, c->line, "unknown key \"", name, keys);
        return 1;
    }
    set_key(c, (enum cfg_key)k, value, rank_of(c->sect_type), CFG_FROM_FILE, c->path, c->line,
            c->sect_label, c->sect_applies);
    return 1;
}

/* Feeds inih one line at a time so that every report has its line number, and checks
 * what inih would silently drop or misread. */
static char *next_line(char *str, int num, void *stream)
{
    struct ctx *c = stream;
    if (c->pos >= c->len)
        return NULL;
    const char *start = c->buf + c->pos;
    const char *nl = memchr(start, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - start) + 1 : c->len - c->pos;
    c->pos += n;
    c->line++;
    static const char skip[] = ";\n";
    if (memchr(start, '\0', n)) {
        problem(c, c->path, c->line, "binary data (a NUL byte) on this line: line ignored", NULL,
                NULL);
        memcpy(str, skip, sizeof skip);
        return str;
    }
    /* Syntax: blank, comment, [section], or key = value. */
    const char *end = start + n;
    const char *p = skip_blanks(start, end);
    if (c->line == 1 && end - p >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p = skip_blanks(p + 3, end);
    if (p < end && *p == '[') {
        section_header(c, p, end); /* from the whole line, however long */
        memcpy(str, skip, sizeof skip);
        return str;
    }
    if (n + 1 > (size_t)num) {
        char lim[32] = "";
        cfg_str_cat_u64(lim, sizeof lim, (uint64_t)num - 3);
        problem(c, c->path, c->line, "line longer than ", lim, " characters: line ignored");
        memcpy(str, skip, sizeof skip);
        return str;
    }
    memcpy(str, start, n);
    str[n] = '\0';
    if (p == end || *p == ';' || *p == '#')
        return str;
    if (!memchr(p, '=', (size_t)(end - p)) && !memchr(p, ':', (size_t)(end - p))) {
        problem(c, c->path, c->line, "not a \"key = value\" line: line ignored", NULL, NULL);
        memcpy(str, skip, sizeof skip);
    }
    return str;
}

/* ---- files ---------------------------------------------------------------------------- */

static bool scratch_get(struct ctx *c)
{
    if (!c->scratch)
        c->scratch = os_reserve_aligned(sizeof(struct scratch), 4096, OS_RESERVE_NORESERVE);
    return c->scratch != NULL;
}

/* ---- opening: the secure walk ------------------------------------------------------- */

#define MAX_LINKS 40 /* as the kernel's own walk */

/* A directory a setuid program may read its configuration through. */
static bool trusted_dir(int fd, uid_t owner)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (st.st_uid == 0 || st.st_uid == owner) &&
           !(st.st_mode & (S_IWGRP | S_IWOTH));
}

static int open_root(int rootfd)
{
    return rootfd >= 0 ? openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                       : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static bool same_inode(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int walk_fail(int fd, int e, const char **why, const char *text)
{
    if (fd >= 0)
        close(fd);
    *why = text;
    errno = e;
    return -1;
}

int cfg_open_secure(int rootfd, const char *path, bool dir, uid_t owner, char (*buf)[PATH_MAX],
                    const char **why)
{
    static const char untrusted[] =
        "a directory on its path is not owned by root or is writable by group or others";
    char *rest = buf[0], *link = buf[1];
    size_t n = strlen(path), pos = 0;
    int hops = 0;
    *why = NULL;
    if (n >= PATH_MAX)
        return walk_fail(-1, ENAMETOOLONG, why, "path too long");
    memcpy(rest, path, n + 1);
    int fd = open_root(rootfd);
    for (;;) {
        if (fd < 0)
            return walk_fail(-1, errno, why, NULL);
        if (!trusted_dir(fd, owner))
            return walk_fail(fd, EPERM, why, untrusted);
        while (rest[pos] == '/')
            pos++;
        if (!rest[pos]) { /* the path names this directory */
            if (!dir)
                return walk_fail(fd, EISDIR, why, "is a directory, not a file");
            int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            int e = errno;
            close(fd);
            errno = e;
            return d;
        }
        /* the next name, NUL-terminated in place while it is opened */
        char *name = rest + pos;
        size_t len = strcspn(name, "/");
        char save = name[len];
        name[len] = '\0';
        int next;
        if (!strcmp(name, "..") && rootfd >= 0) { /* stays in the root, as RESOLVE_IN_ROOT */
            int r = open_root(rootfd);
            next = r >= 0 && same_inode(fd, r) ? r : openat(fd, name, O_PATH | O_CLOEXEC);
            if (r >= 0 && r != next)
                close(r);
        } else {
            next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        name[len] = save;
        pos += len;
        bool last = !rest[pos + strspn(rest + pos, "/")];
        struct stat st;
        if (next < 0 || fstat(next, &st) != 0) {
            int e = errno;
            if (next >= 0)
                close(next);
            return walk_fail(fd, e, why, NULL);
        }
        if (S_ISLNK(st.st_mode)) { /* its target, then what followed it */
            ssize_t ln = ++hops > MAX_LINKS ? -1 : readlinkat(next, "", link, PATH_MAX);
            close(next);
            size_t tail = strlen(rest + pos);
            if (ln <= 0 || (size_t)ln + tail + 1 > PATH_MAX)
                return walk_fail(fd, ELOOP, why, NULL);
            memmove(rest + ln, rest + pos, tail + 1);
            memcpy(rest, link, (size_t)ln);
            pos = 0;
            if (link[0] == '/') {
                close(fd);
                fd = open_root(rootfd);
            }
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            close(fd);
            fd = next;
            continue;
        }
        if (!last || dir || !S_ISREG(st.st_mode)) {
            close(next);
            return walk_fail(fd, ENOTDIR, why,
                             last && !dir ? "not a regular file" : "not a directory");
        }
        /* the file, named in a directory only root may change: opened for reading (never
         * a FIFO or a device: checked above), and still the inode looked at */
        name[len] = '\0';
        int f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        int e = errno;
        name[len] = save;
        if (f >= 0 && !same_inode(f, next)) {
            close(f);
            f = -1;
            e = ESTALE;
        }
        close(next);
        close(fd);
        errno = e;
        return f;
    }
}

/* The file or directory path, opened as the inputs say: through thp-status's hook, by
 * the secure walk in secure execution, else plainly. */
static int open_input(struct ctx *c, const char *path, bool dir, const char **why)
{
    *why = NULL;
    if (c->in->open_input)
        return c->in->open_input(c->in->open_ctx, path, dir, why);
    if (c->in->secure) {
        if (!scratch_get(c)) {
            errno = ENOMEM;
            return -1;
        }
        return cfg_open_secure(-1, path, dir, 0, c->scratch->walk, why);
    }
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (dir ? O_DIRECTORY : 0));
}

/* thp-status --check of the system's files: would a setuid program read path? Said as a
 * problem when not, so that --check and the library decide alike. The tree's root is
 * what comes before SYSCONFDIR in conf_file (thp-status --root), else "/". */
static void check_secure(struct ctx *c, const char *path)
{
    static const char suffix[] = SYSCONFDIR "/thpalloc.conf";
    const char *conf = c->in->conf_file;
    if (!c->in->check_all || c->in->files || c->in->secure || c->in->open_input || !conf ||
        !scratch_get(c))
        return;
    size_t cl = strlen(conf), sl = sizeof suffix - 1, rl = cl >= sl ? cl - sl : 0;
    if (cl < sl || strcmp(conf + rl, suffix) != 0 || strncmp(path, conf, rl) != 0)
        return;
    int rootfd = -1;
    if (rl) {
        cfg_str_copy(c->scratch->walk[0], rl + 1, conf);
        rootfd = open(c->scratch->walk[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
            return;
    }
    const char *why;
    int fd = cfg_open_secure(rootfd, path + rl, false, c->in->ruid, c->scratch->walk, &why);
    int e = errno;
    if (rootfd >= 0)
        close(rootfd);
    if (fd >= 0)
        close(fd);
    else if (e != ENOENT)
        problem(c, path, 0,
                e == EPERM   ? "a directory on its path is not owned by root (or you) or is "
                               "writable by group or others"
                : e == ELOOP ? "too many levels of symbolic links on its path"
                             : "cannot be opened through its path",
                ": setuid/setcap programs ignore it", NULL);
}

/* Reads a trusted regular file into the scratch buffer. */
static bool read_trusted(struct ctx *c, const char *path, bool must_exist)
{
    const char *why;
    int fd = open_input(c, path, false, &why);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !must_exist)
            return false;
        if (c->in->secure && e == EPERM && why)
            problem(c, path, 0, why, " (required in setuid/setcap programs): ignored", NULL);
        else
            problem(c, path, 0, "cannot open",
                    why           ? ": "
                    : e == ENOENT ? ": no such file"
                    : e == ELOOP  ? ": too many levels of symbolic links"
                    : e == EACCES ? ": permission denied"
                                  : NULL,
                    why);
        return false;
    }
    struct stat st;
    bool ok = fstat(fd, &st) == 0;
    if (ok && !S_ISREG(st.st_mode)) {
        problem(c, path, 0,
                S_ISDIR(st.st_mode) ? "is a directory, not a file: ignored"
                                    : "not a regular file: ignored",
                NULL, NULL);
        ok = false;
    } else if (ok && st.st_uid != 0 && (c->in->secure || st.st_uid != c->in->ruid)) {
        problem(c, path, 0,
                c->in->secure ? "not owned by root (required in setuid/setcap programs): ignored"
                              : "not owned by root or by the user running the program: ignored",
                NULL, NULL);
        ok = false;
    } else if (ok && (st.st_mode & (S_IWGRP | S_IWOTH))) {
        problem(c, path, 0, "writable by group or others: not trusted, ignored (chmod go-w)", NULL,
                NULL);
        ok = false;
    } else if (ok && (size_t)st.st_size >= MAX_FILE) {
        problem(c, path, 0, "larger than 64 KiB: ignored", NULL, NULL);
        ok = false;
    }
    if (!ok || !scratch_get(c)) {
        close(fd);
        return false;
    }
    check_secure(c, path);
    size_t len = os_read_fd(fd, c->scratch->file, MAX_FILE);
    close(fd);
    c->buf = c->scratch->file;
    c->len = len;
    return true;
}

static void parse_file(struct ctx *c, const char *path, bool must_exist)
{
    if (!read_trusted(c, path, must_exist))
        return;
    c->path = path;
    c->pos = 0;
    c->line = 0;
    section_enter(c, SECT_GLOBAL, "", 0); /* keys before the first header */
    ini_parse_stream(next_line, c, on_key, c);
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* The next batch of *.conf names of the directory open at fd, sorted bytewise (lexical, as
 * in systemd and sudo): the MAX_DROPINS smallest names after `after` ("" at first). One
 * pass over the directory per batch keeps any number of files in fixed memory. */
static int list_dropins(struct ctx *c, int fd, const char *after)
{
    char(*names)[NAME_CAP] = c->scratch->names;
    int count = 0;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, c->scratch->dents, sizeof c->scratch->dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(c->scratch->dents + off);
            off += d->d_reclen;
            size_t len = strlen(d->d_name); /* at most NAME_MAX (255) */
            if (d->d_name[0] == '.' || len < 6 || strcmp(d->d_name + len - 5, ".conf") != 0 ||
                strcmp(d->d_name, after) <= 0)
                continue;
            if (count == MAX_DROPINS && strcmp(names[count - 1], d->d_name) < 0)
                continue; /* for a later batch */
            int i = count < MAX_DROPINS ? count++ : MAX_DROPINS - 1;
            while (i > 0 && strcmp(names[i - 1], d->d_name) > 0) {
                memcpy(names[i], names[i - 1], NAME_CAP);
                i--;
            }
            cfg_str_copy(names[i], NAME_CAP, d->d_name);
        }
    }
    return count;
}

/* Every *.conf file of dir, in lexical order. */
static void parse_dropins(struct ctx *c, const char *dir)
{
    const char *why;
    int fd = open_input(c, dir, true, &why); /* each file is walked again on its own */
    if (fd < 0)
        return;
    char last[NAME_CAP] = "";
    int n = scratch_get(c) ? MAX_DROPINS : 0;
    while (n == MAX_DROPINS) {
        n = list_dropins(c, fd, last);
        for (int i = 0; i < n; i++) {
            char *path = c->scratch->path;
            path[0] = '\0';
            cfg_str_cat(path, sizeof c->scratch->path, dir);
            cfg_str_cat(path, sizeof c->scratch->path, "/");
            cfg_str_cat(path, sizeof c->scratch->path, c->scratch->names[i]);
            if (strlen(path) + 1 == sizeof c->scratch->path)
                problem(c, dir, 0, "a *.conf file's path is too long: ignored", NULL, NULL);
            else
                parse_file(c, path, false); /* reuses the file buffer, not the name list */
        }
        if (n)
            cfg_str_copy(last, sizeof last, c->scratch->names[n - 1]);
    }
    close(fd);
}

static const char *env_lookup(char *const *envp, const char *name)
{
    if (!envp)
        return NULL;
    size_t n = strlen(name);
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int cfg_resolve(struct cfg_settings *s, const struct cfg_inputs *in, cfg_report_fn report,
                void *rctx)
{
    struct ctx c;
    /* not memset, see struct ctx: exe and unit are written by resolve_exe/resolve_unit */
    c.s = s;
    c.in = in;
    c.report = report;
    c.rctx = rctx;
    c.problems = 0;
    c.path = c.buf = NULL;
    c.len = c.pos = 0;
    c.line = 0;
    c.exe_done = c.unit_done = false;
    c.program = NULL;
    c.sect_label[0] = '\0';
    c.sect_type = (enum sect_type)0; /* before any section */
    c.sect_applies = false;
    c.scratch = NULL;
    cfg_defaults(s);

    /* inih's knobs are globals of our private copy: set them for our syntax, each only
     * where it differs (in the preloaded library, a write to a page of inih's .bss would
     * cost every process a private page). */
#define INI_SET(var, value)                                                                        \
    do {                                                                                           \
        if ((var) != (value))                                                                      \
            (var) = (value);                                                                       \
    } while (0)
    INI_SET(ini_allow_multiline, false);
    INI_SET(ini_allow_inline_comments, true);
    INI_SET(ini_use_stack, true);
    INI_SET(ini_stop_on_first_error, false);
#undef INI_SET
    if (!ini_inline_comment_prefixes || strcmp(ini_inline_comment_prefixes, ";#") != 0)
        ini_inline_comment_prefixes = ";#";
    if (!ini_start_comment_prefixes || strcmp(ini_start_comment_prefixes, ";#") != 0)
        ini_start_comment_prefixes = ";#";

    char *const *envp = in->secure ? NULL : in->envp;
    const char *conf_env = env_lookup(envp, "THPALLOC_CONF");
    if (in->files) {
        for (const char *const *f = in->files; *f; f++)
            parse_file(&c, *f, true);
    } else if (conf_env && *conf_env) {
        parse_file(&c, conf_env, true);
    } else {
        parse_file(&c, in->conf_file ? in->conf_file : SYSCONFDIR "/thpalloc.conf", false);
        parse_dropins(&c, in->conf_dir ? in->conf_dir : SYSCONFDIR "/thpalloc.d");
    }
    for (int k = 0; k < CFG_NKEYS; k++) {
        const char *v = env_lookup(envp, cfg_keys[k].env);
        if (v)
            set_key(&c, (enum cfg_key)k, v, 5, CFG_FROM_ENV, cfg_keys[k].env, 0, "environment",
                    true);
    }
    if (c.scratch)
        os_release(c.scratch, sizeof(struct scratch));
    return c.problems;
}
