/* UTF-8 repair for text that came from processes and files (see utf8.h). */
#include "core/utf8.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static int utf8_len(const unsigned char *s, int64_t n) {
    unsigned char c = s[0];
    int len;
    unsigned min;
    unsigned cp;
    if (c < 0x80) return c ? 1 : 0;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void mkb_utf8_sanitize(char *s, int64_t len) {
    unsigned char *u = (unsigned char *)s;
    for (int64_t i = 0; i < len;) {
        int k = utf8_len(u + i, len - i);
        if (k == 0) {
            u[i] = '?';
            k = 1;
        }
        i += k;
    }
}
