/* thp-status: text that other users chose (process names, executable and library paths,
 * cgroup names, drop-in file names and their contents), made safe for the three outputs.
 * UTF-8 is decoded strictly here (Unicode's table 3-7: no overlong forms, no surrogates,
 * nothing above U+10FFFF), for the text views (escapes, as ps does), JSON (\uXXXX) and
 * Prometheus (U+FFFD for what is not UTF-8); the same characters are unsafe in all three
 * (ts_unsafe). */
#include "thp-status.h"

#include <string.h>

size_t ts_utf8(const char *str, uint32_t *cp, size_t *skip)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char lo = 0x80, hi = 0xbf;
    size_t need;
    uint32_t c = s[0];
    *skip = 1;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
        c &= 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
        c &= 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
        c &= 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i <= need; i++) {
        if (s[i] < lo || s[i] > hi) {
            *skip = i; /* the longest start of a valid sequence: one replacement */
            return 0;
        }
        c = (c << 6) | (s[i] & 0x3f);
        lo = 0x80;
        hi = 0xbf;
    }
    *cp = c;
    *skip = need + 1;
    return need + 1;
}

bool ts_unsafe(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

#define ESC_SLOTS 8
#define ESC_CAP (4 * 4096 + 64)

const char *ts_text_max(const char *s, size_t max)
{
    static char ring[ESC_SLOTS][ESC_CAP];
    static unsigned next;
    char *out = ring[next++ % ESC_SLOTS];
    size_t n = 0;
    if (max > ESC_CAP - 1)
        max = ESC_CAP - 1;
    while (s && *s) {
        char piece[20];
        size_t plen, skip;
        uint32_t cp;
        size_t len = ts_utf8(s, &cp, &skip);
        if (len == 1 && cp == '\\') {
            plen = (size_t)snprintf(piece, sizeof piece, "\\\\");
        } else if (len && ts_unsafe(cp)) {
            plen = 0;
            for (size_t i = 0; i < len; i++)
                plen += (size_t)snprintf(piece + plen, sizeof piece - plen, "\\x%02x",
                                         (unsigned char)s[i]);
        } else if (len) {
            memcpy(piece, s, len);
            plen = len;
        } else {
            plen = 0;
            for (size_t i = 0; i < skip; i++)
                plen += (size_t)snprintf(piece + plen, sizeof piece - plen, "\\x%02x",
                                         (unsigned char)s[i]);
        }
        if (n + plen > max)
            break; /* never half a character or half an escape */
        memcpy(out + n, piece, plen);
        n += plen;
        s += len ? len : skip;
    }
    out[n] = '\0';
    return out;
}

const char *ts_text(const char *s)
{
    return ts_text_max(s, ESC_CAP - 1);
}
