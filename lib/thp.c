/* thp: system THP setting and the decision function (see thp.h and docs/design.md, "THP modes"). */
#include "thp.h"

#include <string.h>

#define THP_ENABLED_PATH "/sys/kernel/mm/transparent_hugepage/enabled"
#define CHUNK_BYTES ((size_t)2 << 20)

static int system_setting; /* enum thp_system; 0 until first read */

enum thp_want thp_want(const struct thp_policy *pol, enum thp_use use, size_t block_size)
{
    switch (pol->mode) {
    case THP_MODE_SYSTEM:
        return THP_WANT_DEFAULT;
    case THP_MODE_NEVER:
        return THP_WANT_NOHUGE;
    case THP_MODE_ALWAYS:
        return THP_WANT_HUGE;
    case THP_MODE_LARGE:
    default:
        /* Only full 2 MiB pieces of blocks at or above the threshold: a 1.5 MiB block
         * would pin 2 MiB, a 2.2 MiB block gets one huge page and a 4 KiB-page tail. */
        if (use == THP_USE_LARGE_PIECE && block_size >= pol->threshold && block_size >= CHUNK_BYTES)
            return THP_WANT_HUGE;
        if (use == THP_USE_DENSE) /* full: a huge page costs nothing more */
            return THP_WANT_HUGE;
        return THP_WANT_NOHUGE;
    }
}

enum os_advice thp_advice(enum thp_system sys, enum thp_want want, enum os_advice current)
{
    switch (want) {
    case THP_WANT_HUGE:
        /* Under system `never` MADV_HUGEPAGE changes nothing: skip the syscall. */
        if (sys == THP_SYS_NEVER || current == OS_ADVICE_HUGE)
            return OS_ADVICE_NONE;
        return OS_ADVICE_HUGE;
    case THP_WANT_NOHUGE:
        if (current == OS_ADVICE_NOHUGE)
            return OS_ADVICE_NONE;
        /* Earlier huge advice on reused memory must be undone (it would make the kernel
         * back small objects with huge pages under `madvise`); fresh memory needs an
         * opt-out only when the kernel would otherwise use huge pages, i.e. `always`. */
        if (current == OS_ADVICE_HUGE)
            return sys == THP_SYS_NEVER ? OS_ADVICE_NONE : OS_ADVICE_NOHUGE;
        return sys == THP_SYS_ALWAYS ? OS_ADVICE_NOHUGE : OS_ADVICE_NONE;
    case THP_WANT_DEFAULT:
    default:
        return OS_ADVICE_NONE;
    }
}

enum thp_system thp_parse_system(const char *text)
{
    const char *open = strchr(text, '[');
    if (!open)
        return THP_SYS_UNKNOWN;
    const char *word = open + 1;
    if (strncmp(word, "always]", 7) == 0)
        return THP_SYS_ALWAYS;
    if (strncmp(word, "madvise]", 8) == 0)
        return THP_SYS_MADVISE;
    if (strncmp(word, "never]", 6) == 0)
        return THP_SYS_NEVER;
    return THP_SYS_UNKNOWN;
}

enum thp_system thp_system_setting(void)
{
    int s = __atomic_load_n(&system_setting, __ATOMIC_RELAXED);
    if (s)
        return (enum thp_system)s;
    char buf[128];
    enum thp_system sys = THP_SYS_NEVER; /* no THP support in the kernel at all */
    if (os_read_small_file(THP_ENABLED_PATH, buf, sizeof buf) > 0)
        sys = thp_parse_system(buf);
    if (sys == THP_SYS_UNKNOWN)
        sys = THP_SYS_MADVISE; /* unreadable or new syntax: advice is cheap and safe */
    /* Racing first readers read the same file: last store wins, same value. */
    __atomic_store_n(&system_setting, (int)sys, __ATOMIC_RELAXED);
    return sys;
}

TEXT_COLD
void thp_system_override(enum thp_system sys)
{
    __atomic_store_n(&system_setting, (int)sys, __ATOMIC_RELAXED);
}

TEXT_COLD
const char *thp_mode_name(enum thp_mode mode)
{
    static const char *const names[] = {"system", "never", "large", "always"};
    return (unsigned)mode < 4 ? names[mode] : "?";
}

TEXT_COLD
const char *thp_system_name(enum thp_system sys)
{
    static const char *const names[] = {"unknown", "always", "madvise", "never"};
    return (unsigned)sys < 4 ? names[sys] : "?";
}
