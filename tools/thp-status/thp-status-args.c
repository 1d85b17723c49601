/* thp-status's command line: the options, their combinations, and the help text
 * (thp-status(8), SYNOPSIS and OPTIONS). Bad arguments: usage on stderr, exit 2. */
#include "thp-status.h"
#include "thpalloc.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *out)
{
    fputs("Usage:\n"
          " thp-status [options]                      the system\n"
          " thp-status [options] PID...               processes\n"
          " thp-status [options] --all                every process, by huge-page RSS\n"
          " thp-status [options] --scan PID...|--all  their zero-filled huge pages\n"
          " thp-status [options] --check [FILE...]    validate the thpalloc configuration\n"
          " thp-status [options] --explain PROGRAM [--unit UNIT]\n"
          "                                           the policy PROGRAM would get\n"
          " thp-status [options] --unit UNIT         the policy of systemd unit UNIT\n"
          " thp-status --check-value KEY=VALUE        check one value (thpalloc-run does)\n"
          "\nShow what transparent huge pages do on this system and in each process,\n"
          "and what thpalloc does and why.\n"
          "\nOptions:\n"
          " -a, --all              every process, sorted by AnonHugePages\n"
          " -c, --check            validate the configuration (default: the system's)\n"
          " -e, --explain PROGRAM  the policy PROGRAM (a name or a path) would get\n"
          " -u, --unit UNIT        with --explain: as if running in systemd unit UNIT;\n"
          "                        alone: the policy of any program in that unit\n"
          "     --check-value KEY=VALUE\n"
          "                        VALUE as the library reads THPALLOC_KEY: prints that\n"
          "                        assignment (exit 0) or what is wrong (exit 1)\n"
          "     --environment      with --explain: apply this shell's THPALLOC_* variables\n"
          " -j, --json             JSON output (schema \"" TS_SCHEMA "\", see thp-status(8))\n"
          " -p, --prometheus       Prometheus text format (system view and --all:\n"
          "                        per systemd service, and totals; PID with --scan)\n"
          "     --per-process      with --all --prometheus: series per process too\n"
          "     --scan             with PID or --all: how much of each process's huge\n"
          "                        pages is zero-filled (reads its memory: ptrace permission)\n"
          "     --scan-rate SIZE   read at most SIZE a second (default 1G; 0: no limit)\n"
          "     --scan-max SIZE    skip a process with more huge pages (default 16G)\n"
          "                        SIZE: bytes, or with K, M, G, T (KiB, MiB, ...): 512M\n"
          "     --timeout SECONDS  with PID or --all: give up a process that takes longer\n"
          "                        to read (default 10; --scan adds its --scan-rate time)\n"
          " -r, --root DIR         read etc/thpalloc.conf, etc/thpalloc.d and\n"
          "                        etc/ld.so.preload under DIR instead of /\n"
          " -v, --verbose          more detail (--all: list unreadable processes)\n"
          " -h, --help             display this help\n"
          " -V, --version          display version\n"
          "\nFor more details see thp-status(8).\n",
          out);
}

static void bad_usage(const char *fmt, const char *arg)
{
    fputs("thp-status: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'thp-status --help' for more information.\n", stderr);
    exit(2);
}

enum {
    OPT_ENV = 256,
    OPT_CHECK_VALUE,
    OPT_PER_PROCESS,
    OPT_SCAN,
    OPT_SCAN_RATE,
    OPT_SCAN_MAX,
    OPT_TIMEOUT
};

/* What the command line asked for besides struct ts_command: the combinations' rules need it. */
struct seen {
    bool all, check, json, prom, scan_limits, timeout;
};

/* The options, as getopt_long reads them, into *cmd, *seen and ts_opt; cmd->args the rest. */
static void read_options(int argc, char **argv, struct ts_command *cmd, struct seen *seen)
{
    static const struct option longopts[] = {
        {"all", no_argument, NULL, 'a'},
        {"check", no_argument, NULL, 'c'},
        {"explain", required_argument, NULL, 'e'},
        {"unit", required_argument, NULL, 'u'},
        {"environment", no_argument, NULL, OPT_ENV},
        {"check-value", required_argument, NULL, OPT_CHECK_VALUE},
        {"json", no_argument, NULL, 'j'},
        {"prometheus", no_argument, NULL, 'p'},
        {"per-process", no_argument, NULL, OPT_PER_PROCESS},
        {"scan", no_argument, NULL, OPT_SCAN},
        {"scan-rate", required_argument, NULL, OPT_SCAN_RATE},
        {"scan-max", required_argument, NULL, OPT_SCAN_MAX},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"root", required_argument, NULL, 'r'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    /* '+': options end at the first argument; ':': a missing argument is reported as such
     * (without it getopt says '?' and "--explain" read as an invalid "-e"). */
    while ((c = getopt_long(argc, argv, "+:ace:u:jpr:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            seen->all = true;
            break;
        case 'c':
            seen->check = true;
            break;
        case 'e':
            cmd->explain = optarg;
            break;
        case 'u':
            cmd->unit = optarg;
            break;
        case OPT_ENV:
            cmd->with_env = true;
            break;
        case OPT_CHECK_VALUE:
            cmd->check_value = optarg;
            break;
        case 'j':
            seen->json = true;
            break;
        case 'p':
            seen->prom = true;
            break;
        case OPT_PER_PROCESS:
            ts_opt.per_process = true;
            break;
        case OPT_SCAN:
            ts_opt.scan = true;
            break;
        case OPT_SCAN_RATE:
        case OPT_SCAN_MAX: {
            /* The policy's own grammar (thpalloc.conf(5), Values): one for all the tools. */
            size_t size;
            if (!cfg_parse_size(optarg, &size))
                bad_usage(c == OPT_SCAN_RATE ? "--scan-rate: not a size: '%s' (a whole number "
                                               "of bytes, with K, M, G or T: 512M, 512MiB, 2G)"
                                             : "--scan-max: not a size: '%s' (a whole number "
                                               "of bytes, with K, M, G or T: 512M, 512MiB, 2G)",
                          optarg);
            *(c == OPT_SCAN_RATE ? &ts_opt.scan_rate : &ts_opt.scan_max) = size;
            seen->scan_limits = true;
            break;
        }
        case OPT_TIMEOUT: {
            char *end;
            errno = 0;
            ts_opt.timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(ts_opt.timeout >= 0) || ts_opt.timeout > 86400)
                bad_usage("--timeout: not a number of seconds (0 to 86400): '%s'", optarg);
            seen->timeout = true;
            break;
        }
        case 'r':
            ts_opt.root = optarg;
            break;
        case 'v':
            ts_opt.verbose = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("thp-status from thpalloc %s\n", THPALLOC_VERSION_STRING);
            exit(0);
        case ':':
            bad_usage("option '%s' requires an argument", argv[optind - 1]);
            break;
        default:
            if (optopt && optopt != '?') {
                char o[3] = {'-', (char)optopt, '\0'};
                bad_usage("invalid option '%s'", o);
            }
            bad_usage("unrecognized option '%s'", argv[optind - 1]);
        }
    }
    cmd->nargs = argc - optind;
    cmd->args = argv + optind;
}

/* The combinations thp-status(8) refuses, each with its own message; and the arguments'
 * form (process IDs, --root a directory). */
static void check_combinations(const struct ts_command *cmd, const struct seen *s)
{
    int modes = s->all + s->check + (cmd->explain != NULL) + (cmd->check_value != NULL);
    if (modes > 1)
        bad_usage("%s", "--all, --check, --check-value and --explain cannot be combined");
    if (cmd->check_value && (s->json || s->prom || cmd->nargs > 0 || ts_opt.root[0]))
        bad_usage("%s", "--check-value takes no other option or argument");
    if (s->json && s->prom)
        bad_usage("%s", "--json and --prometheus cannot be combined");
    /* --unit alone explains the policy of that unit (any program in it). */
    if ((cmd->unit || cmd->with_env) && !cmd->explain && (modes || cmd->nargs > 0 || !cmd->unit))
        bad_usage("%s", "--unit and --environment go with --explain (or --unit alone)");
    if ((s->all || cmd->explain) && cmd->nargs > 0)
        bad_usage("unexpected argument '%s'", cmd->args[0]);
    if (s->prom && (s->check || cmd->explain || cmd->unit || (cmd->nargs > 0 && !ts_opt.scan)))
        bad_usage("%s", "--prometheus is for the system view, --all, and PID... with --scan");
    if (ts_opt.scan && !s->all && (cmd->nargs == 0 || s->check || cmd->explain || cmd->unit))
        bad_usage("%s", "--scan goes with PID... or --all");
    if (s->scan_limits && !ts_opt.scan)
        bad_usage("%s", "--scan-rate and --scan-max go with --scan");
    if (s->timeout && !s->all && (cmd->nargs == 0 || s->check || cmd->explain || cmd->unit))
        bad_usage("%s", "--timeout goes with PID... or --all");
    if (ts_opt.per_process && !(s->all && s->prom))
        bad_usage("%s", "--per-process goes with --all --prometheus");
    if (!s->check)
        for (int i = 0; i < cmd->nargs; i++) {
            char *end;
            errno = 0;
            long v = strtol(cmd->args[i], &end, 10);
            if (!*cmd->args[i] || *end || v <= 0 || v > 0x3fffffff || errno)
                bad_usage("not a process ID: '%s'", cmd->args[i]);
        }
    if (ts_opt.root[0]) {
        struct stat st;
        if (stat(ts_opt.root, &st) != 0 || !S_ISDIR(st.st_mode))
            bad_usage("--root: not a directory: '%s'", ts_opt.root);
    }
}

void ts_parse_args(int argc, char **argv, struct ts_command *cmd)
{
    struct seen s = {0};
    *cmd = (struct ts_command){0};
    read_options(argc, argv, cmd, &s);
    check_combinations(cmd, &s);
    ts_opt.format = s.json ? TS_JSON : s.prom ? TS_PROM : TS_TEXT;
    cmd->mode = cmd->check_value            ? TS_CMD_CHECK_VALUE
                : s.check                   ? TS_CMD_CHECK
                : cmd->explain || cmd->unit ? TS_CMD_EXPLAIN
                : s.all                     ? TS_CMD_ALL
                : cmd->nargs > 0            ? TS_CMD_PROCS
                                            : TS_CMD_SYSTEM;
}
