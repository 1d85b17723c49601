/* config-keys: the policy's keys (the table cfg_keys: name, variable, grammar, formatter,
 * default) and the grammars of their values, shared by the resolver (config.c), the
 * library's thpalloc_policy() and thp-status. No stdio and no allocation: it runs inside
 * every process that allocates. */
#include "config.h"
#include "thpalloc.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* ---- small string helpers (no stdio) ---------------------------------------------- */

TEXT_WARM
void cfg_str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

TEXT_WARM
void cfg_str_cat(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(dst);
    if (len < cap)
        cfg_str_copy(dst + len, cap - len, src);
}

TEXT_WARM
void cfg_str_cat_u64(char *dst, size_t cap, uint64_t v)
{
    char num[21];
    cfg_str_cat(dst, cap, os_format_u64(num, v));
}

/* ---- values ------------------------------------------------------------------------ */

/* Digits, then an optional K/M/G (optionally followed by "B" or "iB"), powers of 1024. */
TEXT_WARM
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
    if (v > CFG_SIZE_MAX)
        return false;
    *out = (size_t)v;
    return true;
}

/* "0", "never", or a number with a unit: ms, s, m, h. */
TEXT_WARM
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

TEXT_WARM
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

/* A key of two words, value 0 and 1 (any other value formats as the second word, which
 * parses back as 1: cfg_value_ok refuses it): its words, parse_NAME and format_NAME. */
#define TWO_WORDS(name, word0, word1)                                                              \
    static const char *const name##_words[] = {word0, word1};                                      \
    TEXT_WARM static bool parse_##name(const char *text, int64_t *v)                               \
    {                                                                                              \
        return parse_word(name##_words, 2, text, v);                                               \
    }                                                                                              \
    TEXT_COLD static void format_##name(int64_t v, char *buf, size_t cap)                          \
    {                                                                                              \
        cfg_str_copy(buf, cap, name##_words[v != 0]);                                              \
    }

TEXT_WARM
static bool parse_mode(const char *text, int64_t *v)
{
    enum thp_mode m;
    if (!cfg_parse_mode(text, &m))
        return false;
    *v = m;
    return true;
}

TEXT_COLD
static void format_mode(int64_t v, char *buf, size_t cap)
{
    cfg_str_copy(buf, cap, thp_mode_name((enum thp_mode)v));
}

TEXT_WARM
static bool parse_any_size(const char *text, int64_t *v)
{
    size_t size;
    if (!cfg_parse_size(text, &size))
        return false;
    *v = (int64_t)size;
    return true;
}

/* A whole number of 2 MiB chunks, at most 1 GiB of address space at a time. */
TEXT_WARM
static bool parse_arena_size(const char *text, int64_t *v)
{
    size_t size;
    if (!cfg_parse_size(text, &size) || size == 0 || size % ((size_t)2 << 20) ||
        size > ((size_t)1 << 30))
        return false;
    *v = (int64_t)size;
    return true;
}

TEXT_COLD
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
    cfg_str_cat_u64(buf, cap, n);
    if (u >= 0) {
        char s[2] = {units[u], '\0'};
        cfg_str_cat(buf, cap, s);
    }
}

TEXT_WARM
static bool parse_time(const char *text, int64_t *v)
{
    long ms;
    if (!cfg_parse_time_ms(text, &ms))
        return false;
    *v = ms;
    return true;
}

TEXT_COLD
static void format_time(int64_t v, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (v < 0) {
        cfg_str_copy(buf, cap, "never");
    } else if (v % 1000 == 0 && v) {
        cfg_str_cat_u64(buf, cap, (uint64_t)v / 1000);
        cfg_str_cat(buf, cap, "s");
    } else {
        cfg_str_cat_u64(buf, cap, (uint64_t)v);
        cfg_str_cat(buf, cap, v ? "ms" : "");
    }
}

/* Indexed by enum os_purge. */
TWO_WORDS(purge, "dontneed", "free")

/* Indexed by log_problems. */
TWO_WORDS(log, "no", "syslog")

/* thp_dense: a percentage from CFG_THP_DENSE_MIN to 100 ("90" or "90%"), or off (0). */
TEXT_WARM
static bool parse_dense(const char *text, int64_t *v)
{
    if (strcasecmp(text, "off") == 0) {
        *v = 0;
        return true;
    }
    uint64_t n = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9' && n <= 100; p++)
        n = n * 10 + (uint64_t)(*p - '0');
    if (*p == '%')
        p++;
    if (*p || n < CFG_THP_DENSE_MIN || n > 100)
        return false;
    *v = (int64_t)n;
    return true;
}

TEXT_COLD
static void format_dense(int64_t v, char *buf, size_t cap)
{
    if (v == 0) {
        cfg_str_copy(buf, cap, "off");
        return;
    }
    buf[0] = '\0';
    cfg_str_cat_u64(buf, cap, (uint64_t)v);
    cfg_str_cat(buf, cap, "%");
}

/* Indexed by stats_at_exit. */
TWO_WORDS(stats, "no", "exit")

#define FIELD(f, kind) offsetof(struct cfg_values, f), kind
#define BLOCK(f)                                                                                   \
    offsetof(struct thpalloc_introspect, f), sizeof(((struct thpalloc_introspect *)0)->f)
#define NO_BLOCK 0, 0

const struct cfg_key_info cfg_keys[CFG_NKEYS] = {
    [CFG_THP] = {"thp", "THPALLOC_THP", parse_mode, format_mode, CFG_DEFAULT_THP,
                 "system, never, large or always", FIELD(thp, CFG_FIELD_MODE), BLOCK(thp_mode)},
    [CFG_THP_THRESHOLD] = {"thp_threshold", "THPALLOC_THP_THRESHOLD", parse_any_size, format_size,
                           CFG_DEFAULT_THP_THRESHOLD, "a size such as 4096, 512K, 2M or 1G",
                           FIELD(thp_threshold, CFG_FIELD_SIZE), BLOCK(thp_threshold)},
    [CFG_ARENA_SIZE] = {"arena_size", "THPALLOC_ARENA_SIZE", parse_arena_size, format_size,
                        CFG_DEFAULT_ARENA_SIZE, "a multiple of 2M from 2M to 1G, such as 64M",
                        FIELD(arena_size, CFG_FIELD_SIZE), BLOCK(arena_size)},
    [CFG_PURGE_DELAY] = {"purge_delay", "THPALLOC_PURGE_DELAY", parse_time, format_time,
                         CFG_DEFAULT_PURGE_DELAY_MS,
                         "0, a time with a unit (10ms, 1s, 5m; at most 24h) or never",
                         FIELD(purge_delay_ms, CFG_FIELD_MS), BLOCK(purge_delay_ms)},
    [CFG_PURGE] = {"purge", "THPALLOC_PURGE", parse_purge, format_purge, CFG_DEFAULT_PURGE,
                   "dontneed or free", FIELD(purge, CFG_FIELD_PURGE), BLOCK(purge)},
    [CFG_STATS] = {"stats", "THPALLOC_STATS", parse_stats, format_stats, CFG_DEFAULT_STATS_AT_EXIT,
                   "no or exit", FIELD(stats_at_exit, CFG_FIELD_FLAG), NO_BLOCK},
    [CFG_LOG_PROBLEMS] = {"log_problems", "THPALLOC_LOG_PROBLEMS", parse_log, format_log,
                          CFG_DEFAULT_LOG_PROBLEMS, "no or syslog",
                          FIELD(log_problems, CFG_FIELD_FLAG), NO_BLOCK},
    [CFG_THP_DENSE] = {"thp_dense", "THPALLOC_THP_DENSE", parse_dense, format_dense,
                       CFG_DEFAULT_THP_DENSE, "a percentage from 50% to 100%, or off",
                       FIELD(thp_dense, CFG_FIELD_SIZE), NO_BLOCK},
};

/* Key k's field of v, through its own type. Not rare text: every process that loads the
 * policy publishes it with this (introspect.c). */
int64_t cfg_field_get(const struct cfg_values *v, enum cfg_key k)
{
    const void *f = (const char *)v + cfg_keys[k].offset;
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

TEXT_WARM
void cfg_field_set(struct cfg_values *v, enum cfg_key k, int64_t value)
{
    void *f = (char *)v + cfg_keys[k].offset;
    switch (cfg_keys[k].field) {
    case CFG_FIELD_MODE:
        *(enum thp_mode *)f = (enum thp_mode)value;
        break;
    case CFG_FIELD_SIZE:
        *(size_t *)f = (size_t)value;
        break;
    case CFG_FIELD_MS:
        *(long *)f = (long)value;
        break;
    case CFG_FIELD_PURGE:
        *(enum os_purge *)f = (enum os_purge)value;
        break;
    default:
        *(bool *)f = value != 0;
        break;
    }
}

TEXT_WARM
const char *cfg_key_name(enum cfg_key k)
{
    return (unsigned)k < CFG_NKEYS ? cfg_keys[k].name : "?";
}

TEXT_WARM
int cfg_key_lookup(const char *name)
{
    for (int k = 0; k < CFG_NKEYS; k++)
        if (strcasecmp(name, cfg_keys[k].name) == 0)
            return k;
    return -1;
}

TEXT_WARM
void cfg_key_list(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int k = 0; k < CFG_NKEYS; k++) {
        cfg_str_cat(buf, cap, k ? ", " : "");
        cfg_str_cat(buf, cap, cfg_keys[k].name);
    }
}

void cfg_defaults(struct cfg_settings *s)
{
    memset(s, 0, sizeof *s);
    for (int k = 0; k < CFG_NKEYS; k++) {
        cfg_field_set(&s->values, (enum cfg_key)k, cfg_keys[k].dflt);
        cfg_str_copy(s->where[k].file, sizeof s->where[k].file, "default");
    }
}

TEXT_WARM
bool cfg_value_ok(enum cfg_key k, int64_t v)
{
    if ((unsigned)k >= CFG_NKEYS)
        return false;
    char text[64];
    int64_t back;
    if (cfg_keys[k].field == CFG_FIELD_MODE && (v < THP_MODE_SYSTEM || v > THP_MODE_ALWAYS))
        return false; /* its formatter only knows the modes */
    cfg_keys[k].format(v, text, sizeof text);
    return cfg_keys[k].parse(text, &back) && back == v;
}

TEXT_WARM
void cfg_format_value(const struct cfg_settings *s, enum cfg_key k, char *buf, size_t cap)
{
    buf[0] = '\0';
    if ((unsigned)k < CFG_NKEYS)
        cfg_keys[k].format(cfg_field_get(&s->values, k), buf, cap);
}
