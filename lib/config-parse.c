/* config-parse: the policy's text (see config.h): the process's identity that sections
 * match (program, path, unit), section headers, and the keys each line sets, fed to inih one
 * line at a time. config.c reads the files and hands their text here. Same constraints as
 * config.c: no allocation, fixed buffers. */
#include "config-ctx.h"

#include <string.h>
#include <unistd.h>

TEXT_WARM
void cfg_problem(struct ctx *c, const char *file, int line, const char *a, const char *b,
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

TEXT_WARM
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

TEXT_WARM
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

TEXT_WARM
void cfg_section_enter(struct ctx *c, enum sect_type type, const char *arg, size_t alen)
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
TEXT_WARM
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
TEXT_WARM
static void section_header(struct ctx *c, const char *p, const char *end)
{
    static const char skipped[] = ": its keys are ignored up to the next section";
    c->sect_type = SECT_BAD;
    c->sect_applies = false;
    const char *close = memchr(p, ']', (size_t)(end - p));
    if (!close) {
        cfg_problem(c, c->path, c->line, "section header without a closing ]", skipped, NULL);
        return;
    }
    const char *rest = skip_blanks(close + 1, end);
    if (rest < end && *rest != ';' && *rest != '#') {
        cfg_problem(c, c->path, c->line, "text after the closing ] of a section header", skipped,
                    NULL);
        return;
    }
    const char *arg;
    size_t alen, len = (size_t)(close - p - 1);
    enum sect_type type = section_parse(p + 1, len, &arg, &alen);
    if (type == SECT_BAD) {
        char sect[160];
        copy_elided(sect, sizeof sect, p + 1, len);
        cfg_problem(c, c->path, c->line, "unknown section [", sect,
                    "]: expected [global], [program NAME], [path /EXE] or [unit NAME]");
        return;
    }
    if (alen > CFG_SECTION_NAME_MAX) {
        char lim[64] = "section name longer than ";
        cfg_str_cat_u64(lim, sizeof lim, CFG_SECTION_NAME_MAX);
        cfg_problem(c, c->path, c->line, lim, " characters", skipped);
        return;
    }
    cfg_section_enter(c, type, arg, alen);
    if (c->in->check_all && c->in->on_section && type != SECT_GLOBAL)
        section_announce(c, type, arg, alen);
}

static int rank_of(enum sect_type t)
{
    return t == SECT_GLOBAL ? 1 : t == SECT_PROGRAM ? 2 : t == SECT_PATH ? 3 : 4;
}

/* Sets key k from text when it is valid and at least as specific as what is there. */
TEXT_WARM
void cfg_set_key(struct ctx *c, enum cfg_key k, const char *value, int rank, enum cfg_origin origin,
                 const char *file, int line, const char *section, bool applies)
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
        cfg_problem(c, file, line, msg, NULL, NULL);
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
    cfg_field_set(&c->s->values, k, v);
    c->s->where[k] = w;
}

TEXT_WARM
int cfg_on_key(void *user, const char *section, const char *name, const char *value)
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
        cfg_problem(c, c->path, c->line, "unknown key \"", name, keys);
        return 1;
    }
    cfg_set_key(c, (enum cfg_key)k, value, rank_of(c->sect_type), CFG_FROM_FILE, c->path, c->line,
                c->sect_label, c->sect_applies);
    return 1;
}

/* Feeds inih one line at a time so that every report has its line number, and checks
 * what inih would silently drop or misread. */
TEXT_WARM
char *cfg_next_line(char *str, int num, void *stream)
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
        cfg_problem(c, c->path, c->line, "binary data (a NUL byte) on this line: line ignored",
                    NULL, NULL);
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
        cfg_problem(c, c->path, c->line, "line longer than ", lim, " characters: line ignored");
        memcpy(str, skip, sizeof skip);
        return str;
    }
    memcpy(str, start, n);
    str[n] = '\0';
    if (p == end || *p == ';' || *p == '#')
        return str;
    if (!memchr(p, '=', (size_t)(end - p)) && !memchr(p, ':', (size_t)(end - p))) {
        cfg_problem(c, c->path, c->line, "not a \"key = value\" line: line ignored", NULL, NULL);
        memcpy(str, skip, sizeof skip);
    }
    return str;
}
