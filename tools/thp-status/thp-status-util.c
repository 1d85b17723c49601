/* thp-status: reading /proc and /sys, the JSON and Prometheus writers, formatting. */
#include "thp-status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

struct ts_options ts_opt = {.format = TS_TEXT,
                            .root = "",
                            .scan_rate = (uint64_t)1 << 30,
                            .scan_max = (uint64_t)16 << 30,
                            .timeout = 10};

char *ts_slurp(const char *path, size_t *len, int *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    char *t = ts_slurp_fd(fd, len, err);
    close(fd);
    return t;
}

char *ts_slurp_fd(int fd, size_t *len, int *err)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        *err = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                *err = ENOMEM;
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *err = errno;
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    *err = 0;
    return buf;
}

int ts_read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t r;
    do
        r = read(fd, buf, cap - 1);
    while (r < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (r < 0) {
        buf[0] = '\0';
        return e;
    }
    buf[r] = '\0';
    while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
        buf[--r] = '\0';
    return 0;
}

void ts_rooted(char *out, size_t cap, const char *abs_path)
{
    const char *root = ts_opt.root ? ts_opt.root : "";
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    snprintf(out, cap, "%.*s%s", (int)rl, root, abs_path);
}

void ts_proc_path(char *out, size_t cap, const char *rel)
{
    const char *dir = getauxval(AT_SECURE) ? NULL : getenv("THP_STATUS_TEST_PROC");
    snprintf(out, cap, "%s/%s", dir && dir[0] ? dir : "/proc", rel);
}

bool ts_vmflag(const char *line, const char *flag)
{
    const char *p = strchr(line, ':');
    size_t fl = strlen(flag);
    for (p = p ? p + 1 : line; *p;) {
        p += strspn(p, " \t\n");
        size_t n = strcspn(p, " \t\n");
        if (n == fl && strncmp(p, flag, fl) == 0)
            return true;
        p += n;
    }
    return false;
}

void ts_selected(const char *text, char *out, size_t cap)
{
    const char *o = strchr(text, '['), *c = o ? strchr(o, ']') : NULL;
    if (o && c)
        snprintf(out, cap, "%.*s", (int)(c - o - 1), o + 1);
    else
        snprintf(out, cap, "%s", text);
}

static const char *find_line_key(const char *text, const char *key, char sep)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == sep)
            return p + kl + 1;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

static bool parse_u64(const char *p, uint64_t *out)
{
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno)
        return false;
    *out = v;
    return true;
}

bool ts_kv_kb(const char *text, const char *key, uint64_t *out)
{
    const char *p = find_line_key(text, key, ':');
    return p && parse_u64(p, out);
}

bool ts_kv_space(const char *text, const char *key, uint64_t *out)
{
    const char *p = find_line_key(text, key, ' ');
    return p && parse_u64(p, out);
}

void ts_human_bytes(uint64_t b, char *buf, size_t cap)
{
    static const char units[] = "KMGTPE";
    if (b < 1024 || b % 1024) {
        snprintf(buf, cap, "%" PRIu64, b);
        return;
    }
    int u = -1;
    while (b >= 1024 && b % 1024 == 0 && u < 5) {
        b /= 1024;
        u++;
    }
    snprintf(buf, cap, "%" PRIu64 "%c", b, units[u]);
}

const char *ts_errname(int err)
{
    switch (err) {
    case EACCES:
        return "EACCES";
    case EPERM:
        return "EPERM";
    case ENOENT:
        return "ENOENT";
    case ESRCH:
        return "ESRCH";
    case EIO:
        return "EIO";
    case EFAULT:
        return "EFAULT";
    case ENOMEM:
        return "ENOMEM";
    case EINVAL:
        return "EINVAL";
    case ENOEXEC:
        return "ENOEXEC";
    case ENOSYS:
        return "ENOSYS";
    default:
        return "error";
    }
}

void ts_test_pause(const char *step)
{
    const char *h = getenv("THP_STATUS_TEST_PAUSE");
    if (!h)
        return;
    size_t sl = strlen(step);
    if (strncmp(h, step, sl) != 0 || h[sl] != ':')
        return;
    long ms = atol(h + sl + 1);
    fprintf(stderr, "thp-status: test pause before %s (%ld ms)\n", step, ms);
    fflush(stderr);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- JSON ------------------------------------------------------------------------------ */

#define J_MAX_DEPTH 32
static int j_depth;
static bool j_need_comma[J_MAX_DEPTH];
static char j_closer[J_MAX_DEPTH]; /* '}' or ']' for each open level */

/* Valid JSON for any bytes: what is not UTF-8 becomes U+FFFD (JSON text is Unicode). */
static void j_string_out(const char *s)
{
    putchar('"');
    while (*s) {
        uint32_t cp;
        size_t skip, len = ts_utf8(s, &cp, &skip);
        if (!len)
            fputs("\\ufffd", stdout);
        else if (cp == '"' || cp == '\\')
            printf("\\%c", (char)cp);
        else if (cp == '\n')
            fputs("\\n", stdout);
        else if (cp == '\t')
            fputs("\\t", stdout);
        else if (cp == '\r')
            fputs("\\r", stdout);
        else if (ts_unsafe(cp) && cp > 0xffff) /* a surrogate pair, as JSON writes it */
            printf("\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
                   0xdc00 + ((cp - 0x10000) & 0x3ff));
        else if (ts_unsafe(cp)) /* invisible ones too: a dashboard would show them */
            printf("\\u%04x", (unsigned)cp);
        else
            fwrite(s, 1, len, stdout);
        s += len ? len : skip;
    }
    putchar('"');
}

static void j_key(const char *key)
{
    if (j_depth > 0) {
        if (j_need_comma[j_depth])
            putchar(',');
        j_need_comma[j_depth] = true;
    }
    if (key) {
        j_string_out(key);
        putchar(':');
    }
}

/* An object or an array, which j_end closes with closer. */
static void j_open(const char *key, char opener, char closer)
{
    j_key(key);
    putchar(opener);
    if (j_depth + 1 < J_MAX_DEPTH) {
        j_need_comma[++j_depth] = false;
        j_closer[j_depth] = closer;
    }
}

void j_obj(const char *key)
{
    j_open(key, '{', '}');
}

void j_arr(const char *key)
{
    j_open(key, '[', ']');
}

void j_end(void)
{
    putchar(j_closer[j_depth]);
    if (j_depth > 0)
        j_depth--;
}

void j_str(const char *key, const char *val)
{
    j_key(key);
    if (val)
        j_string_out(val);
    else
        fputs("null", stdout);
}
void j_int(const char *key, long long v)
{
    j_key(key);
    printf("%lld", v);
}
void j_u64(const char *key, uint64_t v)
{
    j_key(key);
    printf("%" PRIu64, v);
}
void j_bool(const char *key, bool v)
{
    j_key(key);
    fputs(v ? "true" : "false", stdout);
}
void j_null(const char *key)
{
    j_key(key);
    fputs("null", stdout);
}
void j_num(const char *key, double v)
{
    j_key(key);
    if (isfinite(v))
        printf("%.6g", v);
    else
        fputs("null", stdout);
}
void j_finish(void)
{
    putchar('\n');
    j_depth = 0;
}

/* ---- Prometheus ------------------------------------------------------------------------ */

static char p_seen[64][64];
static int p_nseen;

void p_reset(void)
{
    p_nseen = 0;
}

void p_family(const char *name, const char *type, const char *help)
{
    for (int i = 0; i < p_nseen; i++)
        if (strcmp(p_seen[i], name) == 0)
            return;
    if (p_nseen < 64)
        snprintf(p_seen[p_nseen++], sizeof p_seen[0], "%s", name);
    printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The exposition format escapes \\, \" and newline, and wants UTF-8: the other control
 * characters, invisible ones (ts_unsafe) and what is not UTF-8 become U+FFFD. */
static void p_label_value(const char *v)
{
    while (*v) {
        uint32_t cp;
        size_t skip, len = ts_utf8(v, &cp, &skip);
        if (len && (cp == '\\' || cp == '"'))
            printf("\\%c", (char)cp);
        else if (len && cp == '\n')
            fputs("\\n", stdout);
        else if (!len || ts_unsafe(cp)) /* no escape in the format: U+FFFD */
            fputs("\xef\xbf\xbd", stdout);
        else
            fwrite(v, 1, len, stdout);
        v += len ? len : skip;
    }
}

void p_sample(const char *name, double value, ...)
{
    va_list ap;
    va_start(ap, value);
    fputs(name, stdout);
    const char *k = va_arg(ap, const char *);
    if (k) {
        putchar('{');
        bool first = true;
        while (k) {
            const char *v = va_arg(ap, const char *);
            printf("%s%s=\"", first ? "" : ",", k);
            p_label_value(v ? v : "");
            putchar('"');
            first = false;
            k = va_arg(ap, const char *);
        }
        putchar('}');
    }
    va_end(ap);
    if (value == (double)(int64_t)value && fabs(value) < 9e15)
        printf(" %" PRId64 "\n", (int64_t)value);
    else
        printf(" %.9g\n", value);
}
