/* The policy resolver with injected inputs: files, drop-ins, sections and their precedence,
 * the environment, trust, secure execution, and every kind of bad input. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

static char dir[256];
static char reports[8192];
static int nreports;

static void collect(void *ctx, const char *file, int line, const char *msg)
{
    (void)ctx;
    char one[600];
    snprintf(one, sizeof one, "%s:%d: %s\n", file, line, msg);
    strncat(reports, one, sizeof reports - strlen(reports) - 1);
    nreports++;
}

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
    const char *p = path_of(name);
    unlink(p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        abort();
    close(fd);
    chmod(p, mode);
    return p;
}

/* Resolves with the given files (NULL-ended), identity and environment. */
static int resolve(struct cfg_settings *s, const char *const *files, const char *exe,
                   const char *cgroup, char *const *envp, bool secure)
{
    struct cfg_inputs in;
    memset(&in, 0, sizeof in);
    in.files = files;
    in.exe = exe;
    in.program = exe ? strrchr(exe, '/') + 1 : "unnamed";
    in.cgroup_file = cgroup;
    in.envp = envp;
    in.secure = secure;
    in.ruid = getuid();
    reports[0] = '\0';
    nreports = 0;
    return cfg_resolve(s, &in, collect, NULL);
}

static void test_precedence(void)
{
    const char *conf = write_file("prec.conf",
                                  "thp = never\n"                  /* 1 */
                                  "[global]\n"                     /* 2 */
                                  "purge_delay = 10ms\n"           /* 3 */
                                  "[program redis-server]\n"       /* 4 */
                                  "thp = system\n"                 /* 5 */
                                  "arena_size = 128M\n"            /* 6 */
                                  "[path /usr/bin/redis-server]\n" /* 7 */
                                  "thp = always\n"                 /* 8 */
                                  "[unit redis-server.service]\n"  /* 9 */
                                  "thp_threshold = 4M\n"           /* 10 */
                                  "arena_size = 256M\n"            /* 11 */
                                  "[global]\n"                     /* 12 */
                                  "purge_delay = 20ms\n"           /* 13 */
                                  "thp = large\n",                 /* 14 */
                                  0644);
    const char *cg = write_file("cgroup", "0::/system.slice/redis-server.service\n", 0644);
    const char *nocg =
        write_file("cgroup-none", "0::/user.slice/user-0.slice/session-1.scope\n", 0644);
    const char *files[] = {conf, NULL};
    struct cfg_settings s;

    resolve(&s, files, "/usr/bin/other", nocg, NULL, false);
    tap_ok(s.thp == THP_MODE_LARGE && s.where[CFG_THP].line == 14,
           "global: the later line wins within a rank (thp from line 14)");
    tap_ok(s.purge_delay_ms == 20 && s.where[CFG_PURGE_DELAY].line == 13,
           "global: purge_delay 20ms from line 13");
    tap_ok(s.arena_size == ((size_t)64 << 20) && s.where[CFG_ARENA_SIZE].origin == CFG_FROM_DEFAULT,
           "a non-matching program section is not applied");

    resolve(&s, files, "/usr/local/bin/redis-server", nocg, NULL, false);
    tap_ok(s.thp == THP_MODE_SYSTEM && s.where[CFG_THP].line == 5 &&
               strcmp(s.where[CFG_THP].section, "program redis-server") == 0,
           "[program] beats a later [global] line");
    tap_ok(s.arena_size == ((size_t)128 << 20), "[program] arena_size 128M");

    resolve(&s, files, "/usr/bin/redis-server", nocg, NULL, false);
    tap_ok(s.thp == THP_MODE_ALWAYS && s.where[CFG_THP].line == 8, "[path] beats [program]");

    resolve(&s, files, "/usr/bin/redis-server", cg, NULL, false);
    tap_ok(s.thp_threshold == ((size_t)4 << 20) && s.arena_size == ((size_t)256 << 20) &&
               s.where[CFG_ARENA_SIZE].line == 11,
           "[unit] (from the injected cgroup file) beats [program]");

    char *env[] = {"THPALLOC_THP=never", "THPALLOC_ARENA_SIZE=32M", "OTHER=1", NULL};
    resolve(&s, files, "/usr/bin/redis-server", cg, env, false);
    tap_ok(s.thp == THP_MODE_NEVER && s.where[CFG_THP].origin == CFG_FROM_ENV &&
               strcmp(s.where[CFG_THP].file, "THPALLOC_THP") == 0,
           "the environment beats every section");
    tap_ok(s.arena_size == ((size_t)32 << 20), "THPALLOC_ARENA_SIZE=32M");

    resolve(&s, files, "/usr/bin/redis-server", cg, env, true);
    tap_ok(s.thp == THP_MODE_ALWAYS || s.thp == THP_MODE_LARGE,
           "secure execution: the environment is ignored");
}

static void test_dropins(void)
{
    char d[512];
    snprintf(d, sizeof d, "%s/conf.d", dir);
    mkdir(d, 0755);
    write_file("main.conf", "thp = never\npurge = free\n", 0644);
    write_file("conf.d/20-b.conf", "thp = always\n", 0644);
    write_file("conf.d/10-a.conf", "thp = system\nstats = exit\n", 0644);
    write_file("conf.d/30-c.conf.disabled", "thp = never\n", 0644);
    write_file("conf.d/.hidden.conf", "thp = never\n", 0644);
    struct cfg_inputs in;
    memset(&in, 0, sizeof in);
    in.conf_file = path_of("main.conf");
    in.conf_dir = d;
    in.program = "x";
    in.ruid = getuid();
    struct cfg_settings s;
    reports[0] = '\0';
    int n = cfg_resolve(&s, &in, collect, NULL);
    tap_ok(n == 0 && s.thp == THP_MODE_ALWAYS && strstr(s.where[CFG_THP].file, "20-b.conf"),
           "drop-ins are read after the main file in lexical order (20-b wins)");
    tap_ok(s.stats_at_exit && s.purge == OS_PURGE_FREE,
           "keys from the main file and an earlier drop-in stay");

    char *env[] = {"THPALLOC_CONF=/nonexistent/thpalloc.conf", NULL};
    in.envp = env;
    reports[0] = '\0';
    n = cfg_resolve(&s, &in, collect, NULL);
    tap_ok(s.thp == THP_MODE_LARGE && n == 1 && strstr(reports, "/nonexistent/thpalloc.conf:0"),
           "THPALLOC_CONF replaces the system files; a missing one is reported");
    in.conf_file = "/nonexistent/main.conf";
    in.envp = NULL;
    n = cfg_resolve(&s, &in, collect, NULL);
    tap_ok(n == 0, "a missing system file is not a problem (the config is optional)");
}

/* The order in which files report problems, for test_many_dropins. */
static char last_file[512];
static int files_seen, files_out_of_order;

static void order(void *ctx, const char *file, int line, const char *msg)
{
    (void)ctx, (void)line, (void)msg;
    if (strcmp(file, last_file) <= 0)
        files_out_of_order++;
    snprintf(last_file, sizeof last_file, "%s", file);
    files_seen++;
}

/* More drop-ins than the resolver sorts at once: only the first 64 names in directory
 * order used to be read, so the lexically last file (the administrator's override) could be
 * ignored. Created in descending order, so that directory order is not lexical order. */
static void test_many_dropins(void)
{
    enum { N = 200 };
    char d[512], name[64], text[64];
    snprintf(d, sizeof d, "%s/many.d", dir);
    mkdir(d, 0755);
    for (int i = N - 1; i >= 0; i--) {
        snprintf(name, sizeof name, "many.d/%03d-x.conf", i);
        snprintf(text, sizeof text, "purge_delay = %dms\nstats = bad%d\n", i + 1, i);
        write_file(name, text, 0644);
    }
    struct cfg_inputs in;
    memset(&in, 0, sizeof in);
    in.conf_file = "/nonexistent/main.conf";
    in.conf_dir = d;
    in.program = "x";
    in.ruid = getuid();
    struct cfg_settings s;
    last_file[0] = '\0';
    files_seen = files_out_of_order = 0;
    int n = cfg_resolve(&s, &in, order, NULL);
    tap_ok(n == N && files_seen == N && files_out_of_order == 0,
           "all %d drop-ins are read, in lexical order (%d read, %d out of order)", N, files_seen,
           files_out_of_order);
    tap_ok(s.purge_delay_ms == N && strstr(s.where[CFG_PURGE_DELAY].file, "/199-x.conf"),
           "the lexically last drop-in wins (%ld ms from %s)", s.purge_delay_ms,
           s.where[CFG_PURGE_DELAY].file);
}

static void test_bad_values(void)
{
    const char *conf = write_file("bad.conf",
                                  "thp = sometimes\n"    /* 1 */
                                  "thp_threshold = 2X\n" /* 2 */
                                  "arena_size = 3M\n"    /* 3 */
                                  "purge_delay = 5\n"    /* 4 */
                                  "purge = maybe\n"      /* 5 */
                                  "stats = loud\n"       /* 6 */
                                  "arena_size = 2G\n"    /* 7 */
                                  "thp_threshold = -1\n" /* 8 */
                                  "purge_delay = 25h\n"  /* 9 */
                                  "colour = blue\n",     /* 10 */
                                  0644);
    const char *files[] = {conf, NULL};
    struct cfg_settings s, d;
    int n = resolve(&s, files, "/bin/x", NULL, NULL, false);
    cfg_defaults(&d);
    tap_ok(n == 10, "ten bad lines, ten problems (got %d)", n);
    bool same = s.thp == d.thp && s.thp_threshold == d.thp_threshold &&
                s.arena_size == d.arena_size && s.purge_delay_ms == d.purge_delay_ms &&
                s.purge == d.purge && s.stats_at_exit == d.stats_at_exit;
    tap_ok(same, "every key keeps its default");
    for (int line = 1; line <= 10; line++) {
        char want[600];
        snprintf(want, sizeof want, "%s:%d: ", conf, line);
        tap_ok(strstr(reports, want) != NULL, "line %d is named in the report", line);
    }
    char *env[] = {"THPALLOC_THP=bogus", "THPALLOC_PURGE_DELAY=forever", "THPALLOC_STATS=", NULL};
    n = resolve(&s, files, "/bin/x", NULL, env, false);
    tap_ok(n == 13 && s.thp == THP_MODE_LARGE && strstr(reports, "THPALLOC_THP:0: bad value"),
           "bad environment values are reported and ignored");
}

static void test_bad_files(void)
{
    struct cfg_settings s;
    char longline[400];
    memset(longline, 'x', sizeof longline);
    memcpy(longline, "thp = never ;", 13);
    longline[sizeof longline - 2] = '\n';
    longline[sizeof longline - 1] = '\0';
    char text[1024];
    snprintf(text, sizeof text, "%s[global\nthp never\n\xff\xfe garbage\n", longline);
    const char *garbage = write_file("garbage.conf", text, 0644);
    const char *files1[] = {garbage, NULL};
    int n = resolve(&s, files1, "/bin/x", NULL, NULL, false);
    tap_ok(s.thp == THP_MODE_LARGE && n == 4 && strstr(reports, ":1: line longer than") &&
               strstr(reports, ":2: section header without") && strstr(reports, ":3: not a"),
           "a long line, a broken header and garbage are named and skipped (%d)", n);

    const char *bin = path_of("binary.conf");
    int fd = open(bin, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static const char data[] = "thp = never\0\x01\x02\nthp = always\n";
    if (write(fd, data, sizeof data - 1) < 0)
        abort();
    close(fd);
    const char *files2[] = {bin, NULL};
    n = resolve(&s, files2, "/bin/x", NULL, NULL, false);
    tap_ok(n == 1 && s.thp == THP_MODE_ALWAYS && strstr(reports, ":1: binary data"),
           "a line with a NUL byte is skipped, the next one is read");

    const char *ww = write_file("world.conf", "thp = never\n", 0666);
    const char *files3[] = {ww, NULL};
    n = resolve(&s, files3, "/bin/x", NULL, NULL, false);
    tap_ok(n == 1 && s.thp == THP_MODE_LARGE && strstr(reports, "writable by group or others"),
           "a file anyone may write is not obeyed");

    const char *files4[] = {dir, NULL};
    n = resolve(&s, files4, "/bin/x", NULL, NULL, false);
    tap_ok(n == 1 && strstr(reports, "is a directory"), "a directory is reported");

    const char *loop = path_of("loop.conf");
    unlink(loop);
    if (symlink(loop, loop) != 0)
        abort();
    const char *files5[] = {loop, NULL};
    n = resolve(&s, files5, "/bin/x", NULL, NULL, false);
    tap_ok(n == 1 && strstr(reports, "symbolic links"), "a symlink loop is reported");

    const char *files6[] = {"/nonexistent.conf", NULL};
    n = resolve(&s, files6, "/bin/x", NULL, NULL, false);
    tap_ok(n == 1 && strstr(reports, "no such file"), "a missing named file is reported");

    if (getuid() == 0) {
        const char *other = write_file("other.conf", "thp = never\n", 0644);
        if (chown(other, 65534, 65534) != 0)
            abort();
        const char *files7[] = {other, NULL};
        n = resolve(&s, files7, "/bin/x", NULL, NULL, false);
        tap_ok(n == 1 && s.thp == THP_MODE_LARGE && strstr(reports, "not owned by root"),
               "a file of another user is not obeyed");
        struct cfg_inputs in;
        memset(&in, 0, sizeof in);
        in.files = files7;
        in.program = "x";
        in.ruid = 65534;
        in.secure = true;
        reports[0] = '\0';
        n = cfg_resolve(&s, &in, collect, NULL);
        tap_ok(n == 1 && s.thp == THP_MODE_LARGE && strstr(reports, "setuid"),
               "secure execution: even the real user's own file is not obeyed");
        in.secure = false;
        n = cfg_resolve(&s, &in, collect, NULL);
        tap_ok(n == 0 && s.thp == THP_MODE_NEVER, "the real user's own file is obeyed");
    } else {
        printf("ok %d # SKIP ownership tests need root\n", ++tap_n);
    }
}

/* Section headers inih would misread: a NAME longer than inih's 49 characters (it kept the
 * prefix, so a program at that prefix got the settings and the real one did not), a header
 * without ']' (its keys went to the previous section, [global] here), an inline comment
 * inside the brackets, text after ']'. Each is named; keys below a bad header apply to
 * nothing up to the next good header. */
static void test_sections(void)
{
    char exe[128];
    strcpy(exe, "/opt");
    while (strlen(exe) < 80)
        strcat(exe, "/a-fairly-long-directory-name");
    strcat(exe, "/prog");
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%.44s", exe); /* "path " + 44 = inih's 49 */
    static char text[16384];
    snprintf(text, sizeof text,
             "[global]\n"                        /* 1 */
             "thp = large\n"                     /* 2 */
             "[path %s]\n"                       /* 3 */
             "thp = never\n"                     /* 4 */
             "[program redis-server\n"           /* 5 */
             "thp = always\n"                    /* 6 */
             "[program redis-server ;note]\n"    /* 7 */
             "purge = free\n"                    /* 8 */
             "[program redis-server] trailing\n" /* 9 */
             "stats = exit\n"                    /* 10 */
             "[global]\n"                        /* 11 */
             "purge_delay = 10ms\n",             /* 12 */
             exe);
    const char *conf = write_file("sections.conf", text, 0644);
    const char *files[] = {conf, NULL};
    struct cfg_settings s;

    int n = resolve(&s, files, exe, NULL, NULL, false);
    char label[sizeof s.where[0].section];
    snprintf(label, sizeof label, "path %s", exe);
    tap_ok(s.thp == THP_MODE_NEVER && s.where[CFG_THP].line == 4 &&
               strcmp(s.where[CFG_THP].section, label) == 0,
           "a [path] of %zu characters applies to its executable", strlen(exe));
    tap_ok(n == 3, "three bad headers, three problems (got %d)", n);
    char want[600];
    snprintf(want, sizeof want,
             "%s:5: section header without a closing ]: its keys are ignored up to the next "
             "section\n"
             "%s:7: unknown section [program redis-server ;note]: expected [global], [program "
             "NAME], [path /EXE] or [unit NAME]\n"
             "%s:9: text after the closing ] of a section header: its keys are ignored up to "
             "the next section\n",
             conf, conf, conf);
    tap_ok(strcmp(reports, want) == 0, "each bad header is named with file:line");
    if (strcmp(reports, want) != 0)
        printf("# got:\n%s# want:\n%s", reports, want);

    resolve(&s, files, prefix, NULL, NULL, false);
    tap_ok(s.thp == THP_MODE_LARGE && s.where[CFG_THP].line == 2,
           "the program at inih's 49-character prefix does not get the [path] settings");

    n = resolve(&s, files, "/usr/bin/redis-server", NULL, NULL, false);
    tap_ok(s.thp == THP_MODE_LARGE && s.where[CFG_THP].line == 2 && s.purge == OS_PURGE_DONTNEED &&
               !s.stats_at_exit,
           "keys under a bad header apply to nothing, not to [global] or [program]");
    tap_ok(s.purge_delay_ms == 10 && s.where[CFG_PURGE_DELAY].line == 12,
           "the next good header is obeyed again");

    /* The longest NAME a path can have is accepted; one character more is not. */
    char longest[CFG_SECTION_NAME_MAX + 2];
    memset(longest, 'x', sizeof longest);
    longest[0] = '/';
    longest[CFG_SECTION_NAME_MAX] = '\0';
    static char text2[3 * CFG_SECTION_NAME_MAX];
    snprintf(text2, sizeof text2, "[path %s]\nthp = never\n[path %sx]\nthp = always\n", longest,
             longest);
    const char *conf2 = write_file("longest.conf", text2, 0644);
    const char *files2[] = {conf2, NULL};
    n = resolve(&s, files2, longest, NULL, NULL, false);
    snprintf(want, sizeof want,
             "%s:3: section name longer than %d characters: its keys are ignored up to the next "
             "section\n",
             conf2, CFG_SECTION_NAME_MAX);
    const char *l = s.where[CFG_THP].section;
    tap_ok(n == 1 && s.thp == THP_MODE_NEVER && strcmp(reports, want) == 0,
           "a NAME of %d characters applies; one more is named and applies to nothing",
           CFG_SECTION_NAME_MAX);
    tap_ok(strncmp(l, "path /xxx", 9) == 0 && strstr(l, "xxx...xxx") &&
               strlen(l) == sizeof s.where[0].section - 1,
           "its label is elided in the middle (%s)", l);
}

/* The key table: each variable is THPALLOC_ and the key in upper case, each default is
 * what cfg_defaults gives, and each default's canonical text reads back as itself. */
static void test_key_table(void)
{
    struct cfg_settings s;
    cfg_defaults(&s);
    for (int k = 0; k < CFG_NKEYS; k++) {
        const struct cfg_key_info *ki = &cfg_keys[k];
        char env[64] = "THPALLOC_", upper[32], text[64], again[64];
        size_t i;
        for (i = 0; ki->name[i] && i < sizeof upper - 1; i++)
            upper[i] =
                (char)(ki->name[i] >= 'a' && ki->name[i] <= 'z' ? ki->name[i] - 32 : ki->name[i]);
        upper[i] = '\0';
        strcat(env, upper);
        ki->format(ki->dflt, text, sizeof text);
        int64_t v = -2;
        cfg_format_value(&s, (enum cfg_key)k, again, sizeof again);
        tap_ok(strcmp(ki->env, env) == 0 && cfg_key_lookup(upper) == k &&
                   strcmp(cfg_key_name((enum cfg_key)k), ki->name) == 0,
               "%s: variable %s, found in any case", ki->name, ki->env);
        tap_ok(ki->parse(text, &v) && v == ki->dflt && strcmp(text, again) == 0 &&
                   s.where[k].origin == CFG_FROM_DEFAULT,
               "%s: default %s reads back, and is cfg_defaults' value", ki->name, text);
    }
    tap_ok(cfg_key_lookup("colour") == -1, "an unknown key is not found");
    char list[128];
    cfg_key_list(list, sizeof list);
    tap_ok(
        strcmp(
            list,
            "thp, thp_threshold, arena_size, purge_delay, purge, stats, log_problems, thp_dense") ==
            0,
        "the key list (%s)", list);
}

static void test_cgroup(void)
{
    static const struct {
        const char *text, *unit;
    } cases[] = {
        {"0::/system.slice/nginx.service\n", "nginx.service"},
        {"0::/system.slice/system-getty.slice/getty@tty1.service\n", "getty@tty1.service"},
        {"0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.scope\n",
         "user@1000.service"},
        {"0::/user.slice/user-1000.slice/session-3.scope\n", "session-3.scope"},
        {"12:cpu:/x\n1:name=systemd:/system.slice/cron.service\n", "cron.service"},
        {"0::/init.scope\n", "init.scope"},
        {"0::/\n", NULL},
        {"0::/docker/0123abcd\n", NULL},
        {"garbage", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char unit[64] = "";
        bool ok = cfg_unit_from_cgroup(cases[i].text, unit, sizeof unit);
        tap_ok(cases[i].unit ? ok && strcmp(unit, cases[i].unit) == 0 : !ok,
               "cgroup case %zu -> %s", i, cases[i].unit ? cases[i].unit : "(none)");
    }
}

static void test_parsers(void)
{
    size_t z;
    long ms;
    tap_ok(cfg_parse_size("4096", &z) && z == 4096, "size 4096");
    tap_ok(cfg_parse_size("512K", &z) && z == 512 << 10, "size 512K");
    tap_ok(cfg_parse_size("2M", &z) && z == 2 << 20, "size 2M");
    tap_ok(cfg_parse_size("1G", &z) && z == (size_t)1 << 30, "size 1G");
    tap_ok(cfg_parse_size("2MiB", &z) && z == 2 << 20, "size 2MiB");
    tap_ok(!cfg_parse_size("", &z) && !cfg_parse_size("M", &z) && !cfg_parse_size("2 M", &z) &&
               !cfg_parse_size("99999999999999999999", &z) && !cfg_parse_size("16777216T", &z),
           "bad sizes are rejected");
    tap_ok(cfg_parse_size("65536T", &z) && z == (size_t)1 << 56 && !cfg_parse_size("65537T", &z) &&
               !cfg_parse_size("144115188075855871", &z),
           "sizes up to 64 PiB (a 5-level address space), not beyond");
    tap_ok(cfg_value_ok(CFG_ARENA_SIZE, 64 << 20) && !cfg_value_ok(CFG_ARENA_SIZE, 12345) &&
               cfg_value_ok(CFG_PURGE_DELAY, -1) && !cfg_value_ok(CFG_PURGE_DELAY, -2) &&
               !cfg_value_ok(CFG_PURGE_DELAY, (int64_t)1 << 40) &&
               cfg_value_ok(CFG_THP_THRESHOLD, 0) &&
               !cfg_value_ok(CFG_THP_THRESHOLD, ((int64_t)1 << 57) - 1) &&
               cfg_value_ok(CFG_THP, THP_MODE_ALWAYS) && !cfg_value_ok(CFG_THP, 4) &&
               !cfg_value_ok(CFG_PURGE, 2) && !cfg_value_ok(CFG_NKEYS, 0),
           "cfg_value_ok: the values the key table's grammars give, nothing else");
    tap_ok(cfg_parse_time_ms("0", &ms) && ms == 0, "time 0");
    tap_ok(cfg_parse_time_ms("10ms", &ms) && ms == 10, "time 10ms");
    tap_ok(cfg_parse_time_ms("1s", &ms) && ms == 1000, "time 1s");
    tap_ok(cfg_parse_time_ms("never", &ms) && ms == -1, "time never");
    tap_ok(!cfg_parse_time_ms("5", &ms) && !cfg_parse_time_ms("1y", &ms) &&
               !cfg_parse_time_ms("-1s", &ms),
           "bad times are rejected");
    struct cfg_settings s;
    cfg_defaults(&s);
    char buf[32];
    cfg_format_value(&s, CFG_THP_THRESHOLD, buf, sizeof buf);
    tap_ok(strcmp(buf, "2M") == 0, "format 2M");
    cfg_format_value(&s, CFG_PURGE_DELAY, buf, sizeof buf);
    tap_ok(strcmp(buf, "1s") == 0, "format 1s");
}

/* The secure walk inside a tree of its own (rootfd), trusting the tree's owner (root,
 * or the user running the test): links followed inside the root, ".." stopping at it,
 * every directory on the way checked, loops, directories and FIFOs refused. */
static void test_secure_walk(void)
{
    static char buf[2][PATH_MAX];
    char t[600];
    snprintf(t, sizeof t, "%s/walk", dir);
    const char *mk[] = {"walk", "walk/etc", "walk/etc/d", "walk/open"};
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++)
        if (mkdir(path_of(mk[i]), 0755) != 0)
            abort();
    chmod(path_of("walk/open"), 0777); /* anyone may put a file here */
    write_file("walk/etc/a.conf", "thp = never\n", 0644);
    write_file("walk/open/b.conf", "thp = never\n", 0644);
    if (symlink("/open/b.conf", path_of("walk/etc/d/abs.conf")) ||
        symlink("../a.conf", path_of("walk/etc/d/rel.conf")) ||
        symlink("loop.conf", path_of("walk/etc/loop.conf")) ||
        symlink("/../../../etc/a.conf", path_of("walk/etc/up.conf")) ||
        mkfifo(path_of("walk/etc/fifo.conf"), 0644))
        abort();
    int root = open(t, O_PATH | O_DIRECTORY);
    const struct {
        const char *path;
        bool dir;
        int err;
        const char *what;
    } cases[] = {
        {"/etc/a.conf", false, 0, "a file in trusted directories"},
        {"/etc/d/rel.conf", false, 0, "a relative link with .."},
        {"/etc/up.conf", false, 0, "an absolute link whose .. stops at the root"},
        {"/etc/d", true, 0, "a directory, asked for one"},
        {"/etc/d/abs.conf", false, EPERM, "a link into a directory anyone may write"},
        {"/open/b.conf", false, EPERM, "a file in a directory anyone may write"},
        {"/etc/loop.conf", false, ELOOP, "a link loop"},
        {"/etc/fifo.conf", false, ENOTDIR, "a FIFO (never opened)"},
        {"/etc/d", false, EISDIR, "a directory, asked for a file"},
        {"/etc/none.conf", false, ENOENT, "a missing file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *why;
        errno = 0;
        int fd = cfg_open_secure(root, cases[i].path, cases[i].dir, getuid(), buf, &why);
        int e = fd < 0 ? errno : 0;
        tap_ok(e == cases[i].err, "secure walk: %s (%s): errno %d, want %d", cases[i].what,
               cases[i].path, e, cases[i].err);
        if (fd >= 0)
            close(fd);
    }
    close(root);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/thpalloc-unit-config.XXXXXX");
    if (!mkdtemp(dir))
        return 99;
    chmod(dir, 0755);
    test_precedence();
    test_dropins();
    test_many_dropins();
    test_bad_values();
    test_bad_files();
    test_sections();
    test_cgroup();
    test_parsers();
    test_key_table();
    test_secure_walk();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_ok(0, "cleanup");
    return tap_done();
}
