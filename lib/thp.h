/* thp: the system's transparent-huge-page setting and the one decision function that says
 * which advice a piece of memory gets. Pure apart from the lazy read. */
#ifndef THPALLOC_THP_H
#define THPALLOC_THP_H

#include <stddef.h>

#include "os.h"

/* /sys/kernel/mm/transparent_hugepage/enabled */
enum thp_system { THP_SYS_UNKNOWN = 0, THP_SYS_ALWAYS, THP_SYS_MADVISE, THP_SYS_NEVER };

/* The administrator's `thp =` policy. */
enum thp_mode { THP_MODE_SYSTEM = 0, THP_MODE_NEVER, THP_MODE_LARGE, THP_MODE_ALWAYS };

/* What a piece of memory is used for. A chunk is the unit of advice (2 MiB). */
enum thp_use {
    THP_USE_SMALL = 0,   /* a chunk of small/medium object pages */
    THP_USE_LARGE_PIECE, /* a full, 2 MiB-aligned 2 MiB piece of a large block */
    THP_USE_LARGE_TAIL,  /* the last, partial chunk of a large block */
    THP_USE_DENSE,       /* a small-object chunk nearly all in use (dense.c) */
};

/* What the memory should carry: no advice, huge, or opted out. */
enum thp_want { THP_WANT_DEFAULT = 0, THP_WANT_HUGE, THP_WANT_NOHUGE };

struct thp_policy {
    enum thp_mode mode;
    size_t threshold; /* large blocks below this get no huge pages in mode large */
};

/* The want for one chunk of the given use; block_size is the whole large block's size. */
enum thp_want thp_want(const struct thp_policy *pol, enum thp_use use, size_t block_size);

/* The madvise to issue for a chunk whose current advice is `current`, given what it should
 * carry and the system setting. OS_ADVICE_NONE means: no syscall. */
enum os_advice thp_advice(enum thp_system sys, enum thp_want want, enum os_advice current);

/* The system setting, read once on first use (never read in mode system). */
enum thp_system thp_system_setting(void);
/* Parses the content of the sysfs `enabled` file ("always [madvise] never"). */
enum thp_system thp_parse_system(const char *text);
/* For tests and thp-status: forces the setting returned by thp_system_setting(). */
void thp_system_override(enum thp_system sys);

const char *thp_mode_name(enum thp_mode mode);
const char *thp_system_name(enum thp_system sys);

#endif
