/* Growable strings (see strbuf.h). */
#include "protocol/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(struct mkb_strbuf *b, size_t need) {
    if (b->failed) return false;
    if (b->n + need + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (b->n + need + 1 > cap) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->failed = true;
        return false;
    }
    b->p = np;
    b->cap = cap;
    return true;
}

void mkb_strbuf_put(struct mkb_strbuf *b, const char *s, size_t n) {
    if (!grow(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void mkb_strbuf_puts(struct mkb_strbuf *b, const char *s) { mkb_strbuf_put(b, s, strlen(s)); }

void mkb_strbuf_printf(struct mkb_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

char *mkb_strbuf_take(struct mkb_strbuf *b) {
    if (b->failed) {
        mkb_strbuf_free(b);
        return NULL;
    }
    if (!b->p && !grow(b, 0)) return NULL;
    b->p[b->n] = '\0';
    char *r = b->p;
    b->p = NULL;
    b->n = b->cap = 0;
    return r;
}

void mkb_strbuf_free(struct mkb_strbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->failed = false;
}

void mkb_fmt(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

enum mkb_status mkb_pathf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) return mkb_error(MKB_ERR_INVALID, "path too long: '%.200s...'", buf);
    return MKB_OK;
}
