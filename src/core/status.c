/* Status codes and the per-thread error trace (see status.h). */
#include "core/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MKB_MSG_MAX 2048
#define MKB_TRACE_MAX 1024

static _Thread_local char msg_buf[MKB_MSG_MAX];
static _Thread_local char trace_buf[MKB_TRACE_MAX];

const char *mkb_status_name(enum mkb_status s) {
    switch (s) {
    case MKB_OK: return "ok";
    case MKB_ERR_INVALID: return "invalid input";
    case MKB_ERR_NOT_FOUND: return "not found";
    case MKB_ERR_CHECK: return "check failed";
    case MKB_ERR_IO: return "i/o error";
    case MKB_ERR_NOMEM: return "out of memory";
    case MKB_ERR_UNSUPPORTED: return "unsupported";
    case MKB_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int mkb_status_exit_code(enum mkb_status s) {
    switch (s) {
    case MKB_OK: return MKB_EXIT_OK;
    case MKB_ERR_CHECK: return MKB_EXIT_CHECK;
    case MKB_ERR_INVALID:
    case MKB_ERR_NOT_FOUND: return MKB_EXIT_USAGE;
    case MKB_ERR_IO:
    case MKB_ERR_NOMEM:
    case MKB_ERR_UNSUPPORTED:
    case MKB_ERR_INTERNAL: return MKB_EXIT_SYSTEM;
    }
    return MKB_EXIT_SYSTEM;
}

enum mkb_status mkb_verror(enum mkb_status s, const char *fmt, va_list ap) {
    /* formatted aside first: an argument may be mkb_error_message() itself */
    char next[MKB_MSG_MAX];
    vsnprintf(next, sizeof next, fmt, ap);
    memcpy(msg_buf, next, sizeof msg_buf);
    trace_buf[0] = '\0';
    return s;
}

enum mkb_status mkb_error(enum mkb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mkb_verror(s, fmt, ap);
    va_end(ap);
    return s;
}

enum mkb_status mkb_error_relay(enum mkb_status s, const char *file, int line) {
    size_t n = strlen(trace_buf);
    if (n + 1 < sizeof trace_buf) {
        const char *base = strrchr(file, '/');
        snprintf(trace_buf + n, sizeof trace_buf - n, "%s  at %s:%d", n ? "\n" : "",
                 base ? base + 1 : file, line);
    }
    return s;
}

enum mkb_status mkb_error_wrap(enum mkb_status s, const char *fmt, ...) {
    char old[MKB_MSG_MAX];
    memcpy(old, msg_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg_buf, sizeof msg_buf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof msg_buf - 2) {
        size_t used = (size_t)n;
        msg_buf[used++] = ':';
        msg_buf[used++] = ' ';
        size_t left = sizeof msg_buf - used - 1, len = strlen(old);
        if (len > left) len = left; /* a message longer than the buffer is cut short */
        memcpy(msg_buf + used, old, len);
        msg_buf[used + len] = '\0';
    }
    return s;
}

const char *mkb_error_message(void) { return msg_buf; }
const char *mkb_error_trace(void) { return trace_buf; }

void mkb_error_clear(void) {
    msg_buf[0] = '\0';
    trace_buf[0] = '\0';
}

void mkb_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "mkb: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}
