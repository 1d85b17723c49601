/* thp-status: the administrator's view of transparent huge pages, system-wide and per
 * process, and of what thpalloc does inside each process and why. See thp-status(8). */
#include "thp-status.h"

#include <errno.h>
#include <string.h>

int main(int argc, char **argv)
{
    /* First of all: keep only the capabilities that reading processes needs. */
    ts_caps_drop();

    struct ts_command cmd;
    ts_parse_args(argc, argv, &cmd);
    int rc;
    switch (cmd.mode) {
    case TS_CMD_CHECK_VALUE:
        rc = ts_check_value(cmd.check_value);
        break;
    case TS_CMD_CHECK:
        rc = ts_check(cmd.args, cmd.nargs);
        break;
    case TS_CMD_EXPLAIN:
        rc = ts_explain(cmd.explain, cmd.unit, cmd.with_env);
        break;
    case TS_CMD_ALL:
        rc = ts_all();
        break;
    case TS_CMD_PROCS:
        rc = ts_procs(cmd.args, cmd.nargs);
        break;
    case TS_CMD_SYSTEM:
    default:
        rc = ts_system();
        break;
    }
    if (ts_opt.verbose && ts_caps.note[0])
        fprintf(stderr, "thp-status: capabilities: %s\n", ts_caps.note);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "thp-status: write error: %s\n", strerror(errno));
        return 1;
    }
    return rc;
}
