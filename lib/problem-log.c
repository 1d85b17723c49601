/* problem-log: the line log_problems = syslog sends. A process sends at most one, when it
 * resolves its policy; a machine where many processes start at once is not rate-limited
 * across processes (that would need shared state): the datagram is sent without waiting,
 * and dropped when the log's socket buffer is full or there is no log, and journald
 * rate-limits per service on its side. */
#include "problem-log.h"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#ifndef THPALLOC_LOG_SOCKET
#define THPALLOC_LOG_SOCKET "/dev/log"
#endif

/* Appends src with control characters (a line of a file quoted in a message) as '?'. */
TEXT_COLD
static void cat_clean(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(dst);
    for (; *src && len + 1 < cap; src++)
        dst[len++] = (unsigned char)*src < 0x20 || *src == 0x7f ? '?' : *src;
    dst[len] = '\0';
}

TEXT_COLD
void problem_log_note(void *ctx, const char *file, int line, const char *msg)
{
    struct problem_log *pl = ctx;
    if (pl->n++)
        return;
    pl->first[0] = '\0';
    cat_clean(pl->first, sizeof pl->first, file);
    if (line > 0) {
        cfg_str_cat(pl->first, sizeof pl->first, ":");
        cfg_str_cat_u64(pl->first, sizeof pl->first, (uint64_t)line);
    }
    cfg_str_cat(pl->first, sizeof pl->first, ": ");
    cat_clean(pl->first, sizeof pl->first, msg);
}

TEXT_COLD
void problem_log_send(const struct problem_log *pl)
{
    /* <12>: facility user, severity warning; no timestamp (that would need the time zone:
     * the log adds its own) */
    char line[512] = "<12>";
    cat_clean(line, sizeof line, program_invocation_short_name);
    cfg_str_cat(line, sizeof line, "[");
    cfg_str_cat_u64(line, sizeof line, (uint64_t)getpid());
    cfg_str_cat(line, sizeof line, "]: thpalloc: ");
    cfg_str_cat_u64(line, sizeof line, pl->n);
    cfg_str_cat(line, sizeof line,
                pl->n == 1 ? " configuration problem, running without what it would set: "
                           : " configuration problems, running without what they would set: ");
    cfg_str_cat(line, sizeof line, pl->first);
    cfg_str_cat(line, sizeof line, pl->n > 1 ? " (and more: thp-status --check)" : "");
    os_send_datagram(THPALLOC_LOG_SOCKET, line, strlen(line));
}
