/* problem-log: log_problems = syslog (thpalloc.conf(5)): one line to the system log when a
 * process's configuration has problems, so that a process running without settings it
 * could not read is seen without THPALLOC_VERBOSE. */
#ifndef THPALLOC_PROBLEM_LOG_H
#define THPALLOC_PROBLEM_LOG_H

#include <stddef.h>

/* The problems of one resolution: how many, and the first one's text. */
struct problem_log {
    unsigned n;
    char first[320];
};

/* A cfg_report_fn (config.h): counts the problem, keeps the first one's text. ctx: a
 * struct problem_log. */
void problem_log_note(void *ctx, const char *file, int line, const char *msg);
/* Sends "<12>PROG[PID]: thpalloc: ..." (user.warning) to /dev/log once: formatted on the
 * stack, no stdio, no allocation, never waiting (a full or absent log drops it). */
void problem_log_send(const struct problem_log *pl);

#endif
