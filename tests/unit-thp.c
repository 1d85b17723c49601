/* The THP decision function over every system setting x mode x use x size, with the system
 * state injected, and the parser of the sysfs file. */
#include <string.h>

#include "tap.h"
#include "thp.h"

#define M ((size_t)1 << 20)

/* Expected advice for fresh (unadvised) memory: the table of docs/design.md. */
static enum os_advice expect_fresh(enum thp_system sys, enum thp_mode mode, enum thp_use use,
                                   size_t size)
{
    bool huge;
    switch (mode) {
    case THP_MODE_SYSTEM:
        return OS_ADVICE_NONE;
    case THP_MODE_NEVER:
        huge = false;
        break;
    case THP_MODE_ALWAYS:
        huge = true;
        break;
    default:
        huge = use == THP_USE_LARGE_PIECE && size >= 2 * M;
    }
    if (huge)
        return sys == THP_SYS_NEVER ? OS_ADVICE_NONE : OS_ADVICE_HUGE;
    return sys == THP_SYS_ALWAYS ? OS_ADVICE_NOHUGE : OS_ADVICE_NONE;
}

int main(void)
{
    const enum thp_system systems[] = {THP_SYS_ALWAYS, THP_SYS_MADVISE, THP_SYS_NEVER};
    const enum thp_mode modes[] = {THP_MODE_SYSTEM, THP_MODE_NEVER, THP_MODE_LARGE,
                                   THP_MODE_ALWAYS};
    const enum thp_use uses[] = {THP_USE_SMALL, THP_USE_LARGE_PIECE, THP_USE_LARGE_TAIL};
    const size_t sizes[] = {1536 * 1024, 2 * M, 2253 * 1024, 3584 * 1024, 64 * M};
    for (size_t s = 0; s < 3; s++)
        for (size_t m = 0; m < 4; m++)
            for (size_t u = 0; u < 3; u++)
                for (size_t z = 0; z < 5; z++) {
                    struct thp_policy pol = {modes[m], 2 * M};
                    enum os_advice got =
                        thp_advice(systems[s], thp_want(&pol, uses[u], sizes[z]), OS_ADVICE_NONE);
                    enum os_advice want = expect_fresh(systems[s], modes[m], uses[u], sizes[z]);
                    tap_ok(got == want, "sys=%s mode=%s use=%zu size=%zuK: advice %d (want %d)",
                           thp_system_name(systems[s]), thp_mode_name(modes[m]), u, sizes[z] >> 10,
                           got, want);
                }

    /* Reused memory that carries huge advice is opted out again when no longer wanted,
     * except under `never`, where the flag is inert. */
    struct thp_policy large = {THP_MODE_LARGE, 2 * M};
    tap_ok(thp_advice(THP_SYS_MADVISE, thp_want(&large, THP_USE_SMALL, 0), OS_ADVICE_HUGE) ==
               OS_ADVICE_NOHUGE,
           "madvise: a huge-advised chunk reused for small objects is opted out");
    tap_ok(thp_advice(THP_SYS_NEVER, thp_want(&large, THP_USE_SMALL, 0), OS_ADVICE_HUGE) ==
               OS_ADVICE_NONE,
           "never: no syscall to undo inert advice");
    tap_ok(thp_advice(THP_SYS_MADVISE, THP_WANT_HUGE, OS_ADVICE_HUGE) == OS_ADVICE_NONE,
           "already huge-advised: no syscall");
    tap_ok(thp_advice(THP_SYS_ALWAYS, THP_WANT_NOHUGE, OS_ADVICE_NOHUGE) == OS_ADVICE_NONE,
           "already opted out: no syscall");
    struct thp_policy low = {THP_MODE_LARGE, 512 * 1024};
    tap_ok(thp_want(&low, THP_USE_LARGE_PIECE, 4 * M) == THP_WANT_HUGE &&
               thp_want(&large, THP_USE_LARGE_PIECE, 2 * M - 4096) == THP_WANT_NOHUGE,
           "threshold decides in mode large");
    struct thp_policy high = {THP_MODE_LARGE, 8 * M};
    tap_ok(thp_want(&high, THP_USE_LARGE_PIECE, 4 * M) == THP_WANT_NOHUGE,
           "a block below a raised threshold gets no huge page");

    tap_ok(thp_parse_system("always [madvise] never\n") == THP_SYS_MADVISE, "parse madvise");
    tap_ok(thp_parse_system("[always] madvise never\n") == THP_SYS_ALWAYS, "parse always");
    tap_ok(thp_parse_system("always madvise [never]\n") == THP_SYS_NEVER, "parse never");
    tap_ok(thp_parse_system("garbage") == THP_SYS_UNKNOWN, "parse garbage");
    thp_system_override(THP_SYS_ALWAYS);
    tap_ok(thp_system_setting() == THP_SYS_ALWAYS, "injected system setting is used");
    return tap_done();
}
