/* config: resolves the policy from files, sections and the environment (see config.h).
 * Runs inside every process that allocates, possibly before libc is fully set up: only
 * open/read/getdents64/readlink, fixed buffers, and inih with its stack line buffer. */
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

/* ---- small string helpers (no stdio) ---------------------------------------------- */

static void str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void str_cat(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(dst);
    if (len < cap)
        str_copy(dst + len, cap - len, src);
}

static void str_cat_u64(char *dst, size_t cap, uint64_t v)
{
    char num[21];
    str_cat(dst, cap, os_format_u64(num, v));
}

/* ---- values ------------------------------------------------------------------------ */

/* Digits, then an optional K/M/G (optionally followed by "B" or "iB"), powers of 1024. */
bool cfg_parse_size(const char *text, size_t *out)
{
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        p++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        p++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        p++;
        break;
    case 't':
    case 'T':
        shift = 40;
        p++;
        break;
    default:
        break;
    }
    if (shift && (strcmp(p, "iB") == 0 || strcmp(p, "B") == 0))
        p += strlen(p);
    else if (!shift && strcmp(p, "B") == 0)
        p++;
    if (*p)
        return false;
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    v <<= shift;
    if (v > (uint64_t)SIZE_MAX / 2)
        return false;
    *out = (size_t)v;
    return true;
}

/* "0", "never", or a number with a unit: ms, s, m, h. */
bool cfg_parse_time_ms(const char *text, long *out)
{
    if (strcasecmp(text, "never") == 0) {
        *out = -1;
        return true;
    }
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > 1000000000u)
            return false;
    }
    uint64_t mult;
    if (*p == '\0')
        mult = v == 0 ? 1 : 0; /* a bare number other than 0 is ambiguous */
    else if (strcmp(p, "ms") == 0)
        mult = 1;
    else if (strcmp(p, "s") == 0)
        mult = 1000;
    else if (strcmp(p, "m") == 0 || strcmp(p, "min") == 0)
        mult = 60000;
    else if (strcmp(p, "h") == 0)
        mult = 3600000;
    else
        return false;
    if (!mult || v * mult > 24u * 3600000u)
        return false;
    *out = (long)(v * mult);
    return true;
}

bool cfg_parse_mode(const char *text, enum thp_mode *out)
{
    for (int m = THP_MODE_SYSTEM; m <= THP_MODE_ALWAYS; m++)
        if (strcasecmp(text, thp_mode_name((enum thp_mode)m)) == 0) {
            *out = (enum thp_mode)m;
            return true;
        }
    return false;
}

/* ---- the key table ------------------------------------------------------------------ */

/* An enumerated value: its index in words. */
static bool parse_word(const char *const *words, int n, const char *text, int64_t *v)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(text, words[i]) == 0) {
            *v = i;
            return true;
        }
    return false;
}

static bool parse_mode(const char *text, int64_t *v)
{
    enum thp_mode m;
    if (!cfg_parse_mode(text, &m))
        return false;
    *v = m;
    return true;
}

static void format_mode(int64_t v, char *buf, size_t cap)
{
    str_copy(buf, cap, thp_mode_name((enum thp_mode)v));
}

static bool parse_any_size(const char *text, int64_t *v)
{
    size_t size;
    if (!cfg_parse_size(text, &size))
        return false;
    *v = (int64_t)size;
    return true;
}

/* A whole number of 2 MiB chunks, at most 1 GiB of address space at a time. */
static bool parse_arena_size(const char *text, int64_t *v)
{
    size_t size;
    if (!cfg_parse_size(text, &size) || size == 0 || size % ((size_t)2 << 20) ||
        size > ((size_t)1 << 30))
        return false;
    *v = (int64_t)size;
    return true;
}

static void format_size(int64_t v, char *buf, size_t cap)
{
    static const char units[] = "KMGT";
    uint64_t n = (uint64_t)v;
    int u = -1;
    while (n && (n & 1023) == 0 && u < 3) {
        n >>= 10;
        u++;
    }
    buf[0] = '\0';
    str_cat_u64(buf, cap, n);
    if (u >= 0) {
        char s[2] = {units[u], '\0'};
        str_cat(buf, cap, s);
    }
}

static bool parse_time(const char *text, int64_t *v)
{
    long ms;
    if (!cfg_parse_time_ms(text, &ms))
        return false;
    *v = ms;
    return true;
}

static void format_time(int64_t v, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (v < 0) {
        str_copy(buf, cap, "never");
    } else if (v % 1000 == 0 && v) {
        str_cat_u64(buf, cap, (uint64_t)v / 1000);
        str_cat(buf, cap, "s");
    } else {
        str_cat_u64(buf, cap, (uint64_t)v);
        str_cat(buf, cap, v ? "ms" : "");
    }
}

/* Indexed by enum os_purge. */
static const char *const purge_words[] = {"dontneed", "free"};

static bool parse_purge(const char *text, int64_t *v)
{
    return parse_word(purge_words, 2, text, v);
}

static void format_purge(int64_t v, char *buf, size_t cap)
{
    str_copy(buf, cap, purge_words[v != 0]);
}

/* Indexed by stats_at_exit. */
static const char *const stats_words[] = {"no", "exit"};

static bool parse_stats(const char *text, int64_t *v)
{
    return parse_word(stats_words, 2, text, v);
}

static void format_stats(int64_t v, char *buf, size_t cap)
{
    str_copy(buf, cap, stats_words[v != 0]);
}

#define FIELD(f, kind) offsetof(struct cfg_settings, f), kind

const struct cfg_key_info cfg_keys[CFG_NKEYS] = {
    [CFG_THP] = {"thp", "THPALLOC_THP", parse_mode, format_mode, CFG_DEFAULT_THP,
                 "system, never, large or always", FIELD(thp, CFG_FIELD_MODE)},
    [CFG_THP_THRESHOLD] = {"thp_threshold", "THPALLOC_THP_THRESHOLD", parse_any_size, format_size,
                           CFG_DEFAULT_THP_THRESHOLD, "a size such as 4096, 512K, 2M or 1G",
                           FIELD(thp_threshold, CFG_FIELD_SIZE)},
    [CFG_ARENA_SIZE] = {"arena_size", "THPALLOC_ARENA_SIZE", parse_arena_size, format_size,
                        CFG_DEFAULT_ARENA_SIZE, "a multiple of 2M from 2M to 1G, such as 64M",
                        FIELD(arena_size, CFG_FIELD_SIZE)},
    [CFG_PURGE_DELAY] = {"purge_delay", "THPALLOC_PURGE_DELAY", parse_time, format_time,
                         CFG_DEFAULT_PURGE_DELAY_MS,
                         "0, a time with a unit (10ms, 1s, 5m; at most 24h) or never",
                         FIELD(purge_delay_ms, CFG_FIELD_MS)},
    [CFG_PURGE] = {"purge", "THPALLOC_PURGE", parse_purge, format_purge, CFG_DEFAULT_PURGE,
                   "dontneed or free", FIELD(purge, CFG_FIELD_PURGE)},
    [CFG_STATS] = {"stats", "THPALLOC_STATS", parse_stats, format_stats, CFG_DEFAULT_STATS_AT_EXIT,
                   "no or exit", FIELD(stats_at_exit, CFG_FIELD_FLAG)},
};

/* Key k's field of s, through its own type. */
static int64_t field_get(const struct cfg_settings *s, enum cfg_key k)
{
    const void *f = (const char *)s + cfg_keys[k].offset;
    switch (cfg_keys[k].field) {
    case CFG_FIELD_MODE:
        return *(const enum thp_mode *)f;
    case CFG_FIELD_SIZE:
        return (int64_t) * (const size_t *)f;
    case CFG_FIELD_MS:
        return *(const long *)f;
    case CFG_FIELD_PURGE:
        return *(const enum os_purge *)f;
    default:
        return *(const bool *)f;
    }
}

static void field_set(struct cfg_settings *s, enum cfg_key k, int64_t v)
{
    void *f = (char *)s + cfg_keys[k].offset;
    switch (cfg_keys[k].field) {
    case CFG_FIELD_MODE:
        *(enum thp_mode *)f = (enum thp_mode)v;
        break;
    case CFG_FIELD_SIZE:
        *(size_t *)f = (size_t)v;
        break;
    case CFG_FIELD_MS:
        *(long *)f = (long)v;
        break;
    case CFG_FIELD_PURGE:
        *(enum os_purge *)f = (enum os_purge)v;
        break;
    default:
        *(bool *)f = v != 0;
        break;
    }
}

const char *cfg_key_name(enum cfg_key k)
{
    return (unsigned)k < CFG_NKEYS ? cfg_keys[k].name : "?";
}

int cfg_key_lookup(const char *name)
{
    for (int k = 0; k < CFG_NKEYS; k++)
        if (strcasecmp(name, cfg_keys[k].name) == 0)
            return k;
    return -1;
}

void cfg_key_list(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int k = 0; k < CFG_NKEYS; k++) {
        str_cat(buf, cap, k ? ", " : "");
        str_cat(buf, cap, cfg_keys[k].name);
    }
}

void cfg_defaults(struct cfg_settings *s)
{
    memset(s, 0, sizeof *s);
    for (int k = 0; k < CFG_NKEYS; k++) {
        field_set(s, (enum cfg_key)k, cfg_keys[k].dflt);
        str_copy(s->where[k].file, sizeof s->where[k].file, "default");
    }
}

void cfg_format_value(const struct cfg_settings *s, enum cfg_key k, char *buf, size_t cap)
{
    buf[0] = '\0';
    if ((unsigned)k < CFG_NKEYS)
        cfg_keys[k].format(field_get(s, k), buf, cap);
}

/* ---- resolution context ------------------------------------------------------------ */

enum sect_type { SECT_GLOBAL = 1, SECT_PROGRAM, SECT_PATH, SECT_UNIT, SECT_BAD };

struct scratch {
    char file[MAX_FILE];
    char dents[8192];
    char names[MAX_DROPINS][NAME_CAP];
    char path[PATH_MAX];
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
    str_cat(msg, sizeof msg, a);
    if (b)
        str_cat(msg, sizeof msg, b);
    if (d)
        str_cat(msg, sizeof msg, d);
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
        str_copy(c->exe, sizeof c->exe, c->in->exe);
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
        str_copy(c->unit, sizeof c->unit, c->in->unit);
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
        str_copy(c->sect_label, sizeof c->sect_label, "global");
        c->sect_applies = true;
        return;
    }
    str_copy(c->sect_label, sizeof c->sect_label, words[type]);
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
        str_cat_u64(lim, sizeof lim, CFG_SECTION_NAME_MAX);
        problem(c, c->path, c->line, lim, " characters", skipped);
        return;
    }
    section_enter(c, type, arg, alen);
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
        str_cat(msg, sizeof msg, "bad value \"");
        str_cat(msg, sizeof msg, value);
        str_cat(msg, sizeof msg, "\" for ");
        str_cat(msg, sizeof msg, cfg_keys[k].name);
        str_cat(msg, sizeof msg, ": expected ");
        str_cat(msg, sizeof msg, cfg_keys[k].expect);
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
    str_copy(w.file, sizeof w.file, file);
    str_copy(w.section, sizeof w.section, section);
    str_copy(w.value, sizeof w.value, value);
    field_set(c->s, k, v);
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
        str_cat(keys, sizeof keys, ")");
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
        str_cat_u64(lim, sizeof lim, (uint64_t)num - 3);
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

/* Reads a trusted regular file into the scratch buffer. */
static bool read_trusted(struct ctx *c, const char *path, bool must_exist)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !must_exist)
            return false;
        problem(c, path, 0,
                e == ENOENT   ? "cannot open: no such file"
                : e == ELOOP  ? "cannot open: too many levels of symbolic links"
                : e == EACCES ? "cannot open: permission denied"
                              : "cannot open",
                NULL, NULL);
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
            str_copy(names[i], NAME_CAP, d->d_name);
        }
    }
    return count;
}

/* Every *.conf file of dir, in lexical order. */
static void parse_dropins(struct ctx *c, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char last[NAME_CAP] = "";
    int n = scratch_get(c) ? MAX_DROPINS : 0;
    while (n == MAX_DROPINS) {
        n = list_dropins(c, fd, last);
        for (int i = 0; i < n; i++) {
            char *path = c->scratch->path;
            path[0] = '\0';
            str_cat(path, sizeof c->scratch->path, dir);
            str_cat(path, sizeof c->scratch->path, "/");
            str_cat(path, sizeof c->scratch->path, c->scratch->names[i]);
            if (strlen(path) + 1 == sizeof c->scratch->path)
                problem(c, dir, 0, "a *.conf file's path is too long: ignored", NULL, NULL);
            else
                parse_file(c, path, false); /* reuses the file buffer, not the name list */
        }
        if (n)
            str_copy(last, sizeof last, c->scratch->names[n - 1]);
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
