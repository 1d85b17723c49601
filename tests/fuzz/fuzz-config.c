/* fuzz-config: libFuzzer harness for the policy: the ini parser (inih over lib/config-parse.c)
 * and the whole resolution (files, sections, environment, secure mode, cgroup unit).
 *
 * Input layout: the bytes up to the first NUL are a configuration file (written to a
 * private temporary file that cfg_inputs.files names); after it, NUL-separated fields:
 *   field 0       flags byte: bit 0 secure, bit 1 check_all, bit 2 give a program name
 *   fields 1..6   values of THPALLOC_THP, _THP_THRESHOLD, _ARENA_SIZE, _PURGE_DELAY,
 *                 _PURGE, _STATS (absent fields: variable unset)
 *   field 7       text of a /proc/self/cgroup file (unit lookup)
 * The value parsers (cfg_parse_size/time_ms/mode) also get each env value directly.
 * Invariants checked after every resolution (abort when broken): each key holds a legal
 * value (mode in range, arena_size a multiple of 2 MiB and at most 1 GiB, purge_delay
 * from -1 (never) to 24 h; thp_threshold may be any size, 0 included), every origin is
 * default/file/environment with a rank matching it, formatted values are NUL-terminated
 * and non-empty, and an identical second resolution gives identical settings.
 *
 * Build (tests/build-fuzz.sh): clang -fsanitize=fuzzer,address,undefined -Ilib
 *   tests/fuzz/fuzz-config.c lib/config*.c lib/thp.c lib/os.c libinih.a */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char conf_path[64], cgroup_path[64];

static void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (n && fwrite(buf, 1, n, f) != n)
        abort();
    fclose(f);
}

static void report(void *ctx, const char *file, int line, const char *msg)
{
    (void)line;
    /* touch every byte: ASan sees a dangling or unterminated string */
    size_t *count = ctx;
    *count += strlen(file ? file : "") + strlen(msg ? msg : "");
}

static void check(const struct cfg_settings *s)
{
    if ((int)s->thp < 0 || (int)s->thp > 3)
        abort();
    if (s->arena_size == 0 || s->arena_size % (2u << 20) || s->arena_size > (1u << 30))
        abort();
    if (s->purge_delay_ms < -1 || s->purge_delay_ms > 24L * 3600 * 1000)
        abort();
    for (int k = 0; k < CFG_NKEYS; k++) {
        const struct cfg_where *w = &s->where[k];
        if (w->origin == CFG_FROM_DEFAULT && w->rank != 0)
            abort();
        if (w->origin == CFG_FROM_ENV && w->rank != 5)
            abort();
        if (w->origin == CFG_FROM_FILE && (w->rank < 1 || w->rank > 4))
            abort();
        if (!memchr(w->file, 0, sizeof w->file) || !memchr(w->section, 0, sizeof w->section) ||
            !memchr(w->value, 0, sizeof w->value))
            abort();
        char buf[64];
        memset(buf, 0x7f, sizeof buf);
        cfg_format_value(s, (enum cfg_key)k, buf, sizeof buf);
        if (!memchr(buf, 0, sizeof buf) || !buf[0])
            abort();
        if (!cfg_key_name((enum cfg_key)k))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!conf_path[0]) {
        snprintf(conf_path, sizeof conf_path, "/tmp/fuzz-config.%d.conf", (int)getpid());
        snprintf(cgroup_path, sizeof cgroup_path, "/tmp/fuzz-config.%d.cgroup", (int)getpid());
    }
    const uint8_t *end = data + size, *nul = memchr(data, 0, size);
    size_t conf_len = nul ? (size_t)(nul - data) : size;
    write_file(conf_path, data, conf_len);

    /* fields after the config */
    static const char *const names[6] = {
        "THPALLOC_THP=",         "THPALLOC_THP_THRESHOLD=", "THPALLOC_ARENA_SIZE=",
        "THPALLOC_PURGE_DELAY=", "THPALLOC_PURGE=",         "THPALLOC_STATS="};
    char *fields[8] = {0};
    int nf = 0;
    const uint8_t *p = nul ? nul + 1 : end;
    while (p < end && nf < 8) {
        const uint8_t *q = memchr(p, 0, (size_t)(end - p));
        size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
        fields[nf] = strndup((const char *)p, len);
        nf++;
        p = q ? q + 1 : end;
    }
    unsigned flags = nf > 0 && fields[0][0] ? (unsigned char)fields[0][0] : 0;
    char *envp[8] = {0};
    int ne = 0;
    for (int i = 1; i <= 6 && i < nf; i++) {
        size_t n = strlen(names[i - 1]) + strlen(fields[i]) + 1;
        envp[ne] = malloc(n);
        snprintf(envp[ne], n, "%s%s", names[i - 1], fields[i]);
        ne++;
        /* the value parsers on their own */
        size_t sz;
        long ms;
        enum thp_mode m;
        (void)cfg_parse_size(fields[i], &sz);
        if (cfg_parse_time_ms(fields[i], &ms) && (ms < -1 || ms > 24L * 3600 * 1000))
            abort();
        if (cfg_parse_mode(fields[i], &m) && ((int)m < 0 || (int)m > 3))
            abort();
    }
    if (nf > 7) {
        write_file(cgroup_path, fields[7], strlen(fields[7]));
        char unit[128];
        if (cfg_unit_from_cgroup(fields[7], unit, sizeof unit) && !memchr(unit, 0, sizeof unit))
            abort();
    }

    const char *files[] = {conf_path, NULL};
    struct cfg_inputs in;
    memset(&in, 0, sizeof in);
    in.files = files;
    in.exe = "/usr/sbin/fuzzd";
    in.program = (flags & 4) ? "redis-server" : "fuzzd";
    in.unit = NULL;
    in.cgroup_file = nf > 7 ? cgroup_path : "/nonexistent/cgroup";
    in.envp = envp;
    in.secure = flags & 1;
    in.ruid = getuid();
    in.check_all = (flags & 2) != 0;

    struct cfg_settings a, b;
    size_t count = 0;
    cfg_resolve(&a, &in, report, &count);
    check(&a);
    cfg_resolve(&b, &in, NULL, NULL);
    check(&b);
    if (a.thp != b.thp || a.thp_threshold != b.thp_threshold || a.arena_size != b.arena_size ||
        a.purge_delay_ms != b.purge_delay_ms || a.purge != b.purge ||
        a.stats_at_exit != b.stats_at_exit)
        abort();

    for (int i = 0; i < nf; i++)
        free(fields[i]);
    for (int i = 0; i < ne; i++)
        free(envp[i]);
    return 0;
}
