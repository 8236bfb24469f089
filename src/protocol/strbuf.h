/* A growable NUL-terminated string for rendering text (spec sheets, reports, plans).
 * Out-of-memory is sticky: appends after a failure do nothing and mkb_strbuf_take returns NULL.
 * Ownership: the buffer is malloc'ed; mkb_strbuf_take hands it over, mkb_strbuf_free drops it. */
#ifndef MKB_PROTOCOL_STRBUF_H
#define MKB_PROTOCOL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

struct mkb_strbuf {
    char *p;
    size_t n, cap;
    bool failed;
};

void mkb_strbuf_put(struct mkb_strbuf *b, const char *s, size_t n);
void mkb_strbuf_puts(struct mkb_strbuf *b, const char *s);
void mkb_strbuf_printf(struct mkb_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (never NULL unless out of memory); the buffer is empty afterwards. */
char *mkb_strbuf_take(struct mkb_strbuf *b);
void mkb_strbuf_free(struct mkb_strbuf *b);

/* snprintf into a fixed buffer, truncating silently (for notes and messages). */
void mkb_fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* snprintf into a fixed buffer; MKB_ERR_INVALID "path too long" when it does not fit (for paths). */
enum mkb_status mkb_pathf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
