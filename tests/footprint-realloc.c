/* footprint-realloc: buffers grown by realloc, as string builders and vectors grow them.
 *
 *   inplace  one buffer grown 100 bytes at a time from 100 B to 512 KiB, a small block
 *            allocated after every move (a neighbour in the way): once past 4 KiB it is an
 *            extent and grows where it stands, without a copy; its contents stay intact.
 *   medium   2000 buffers of 3-4 KiB grown at once, a few bytes at a time in random order,
 *            to 5-16 KiB: the anonymous memory they cost (smaps_rollup, before and after)
 *            stays within 1.9x their bytes. Through the medium classes each buffer left a
 *            block behind in a 64 KiB page of each class it passed: 2.09x (1.75x now; glibc's
 *            malloc 1.40x: buffers growing in step leave holes that none of them fits).
 *
 * Prints "ok - " / "not ok - " lines for tests/footprint-realloc.sh; "thp-only - " marks what only
 * thpalloc promises. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "relay-report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long rollup_kib(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    char line[256];
    size_t n = strlen(key);
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned below(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static int test_inplace(void)
{
    size_t len = 100, moves_small = 0, moves_big = 0;
    unsigned char *p = malloc(len);
    void *neighbours[4096];
    size_t nn = 0;
    int intact = p != NULL;
    for (size_t i = 0; i < len && p; i++)
        p[i] = (unsigned char)(i * 7);
    while (intact && len < ((size_t)512 << 10)) {
        size_t want = len + 100;
        unsigned char *q = realloc(p, want);
        if (!q) {
            intact = 0;
            break;
        }
        if (q != p) {
            if (len > 4096)
                moves_big++;
            else
                moves_small++;
            if (nn < sizeof neighbours / sizeof neighbours[0])
                neighbours[nn++] = malloc(24); /* in the way of the next growth, if near */
        }
        p = q;
        for (size_t i = len; i < want; i++)
            p[i] = (unsigned char)(i * 7);
        len = want;
        if (len % 4096 < 100)
            for (size_t i = 0; i < len; i++)
                if (p[i] != (unsigned char)(i * 7)) {
                    intact = 0;
                    break;
                }
    }
    report(intact, "a buffer grown 100 B at a time to %zu KiB keeps its contents", len >> 10);
    printf("# moves: %zu up to 4 KiB, %zu above\n", moves_small, moves_big);
    printf("thp-only - ");
    report(moves_big == 0, "above 4 KiB it grows where it stands (%zu moves)", moves_big);
    free(p);
    for (size_t i = 0; i < nn; i++)
        free(neighbours[i]);
    return 0;
}

#define NBUF 2000

static int test_medium(void)
{
    static unsigned char *buf[NBUF];
    static size_t len[NBUF], target[NBUF];
    static unsigned open[NBUF];
    long before = rollup_kib("Anonymous");
    size_t live = 0;
    int ok = 1;
    for (unsigned i = 0; i < NBUF && ok; i++) {
        len[i] = 3000 + below(1000);
        target[i] = 5120 + below(11 * 1024);
        buf[i] = malloc(len[i]);
        ok = buf[i] != NULL;
        if (ok)
            memset(buf[i], (int)(i & 0xff), len[i]);
        open[i] = i;
        live += target[i];
    }
    unsigned nopen = NBUF;
    while (nopen && ok) {
        unsigned j = below(nopen), i = open[j];
        size_t n = 1 + below(64);
        if (len[i] + n > target[i])
            n = target[i] - len[i];
        unsigned char *q = realloc(buf[i], len[i] + n);
        if (!q) {
            ok = 0;
            break;
        }
        memset(q + len[i], (int)(i & 0xff), n);
        buf[i] = q;
        len[i] += n;
        if (len[i] == target[i])
            open[j] = open[--nopen];
    }
    long after = rollup_kib("Anonymous");
    for (unsigned i = 0; i < NBUF && ok; i++)
        for (size_t k = 0; k < len[i]; k++)
            if (buf[i][k] != (unsigned char)(i & 0xff)) {
                ok = 0;
                break;
            }
    report(ok && before >= 0 && after >= 0,
           "%d buffers grown from 3-4 KiB to 5-16 KiB in random order keep their contents", NBUF);
    long cost = after - before, live_kib = (long)(live >> 10);
    printf("# anonymous memory: %ld KiB for %ld KiB of buffers (%.2fx)\n", cost, live_kib,
           (double)cost / (double)live_kib);
    printf("thp-only - ");
    report(cost * 10 <= live_kib * 19, "they cost %ld KiB, within 1.9x their %ld KiB", cost,
           live_kib);
    for (unsigned i = 0; i < NBUF; i++)
        free(buf[i]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "inplace"))
        test_inplace();
    else if (!strcmp(what, "medium"))
        test_medium();
    else {
        fprintf(stderr, "usage: footprint-realloc inplace|medium\n");
        return 2;
    }
    puts("end");
    return report_failures != 0;
}
