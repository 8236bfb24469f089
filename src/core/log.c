/* stderr logger (see log.h). */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = -1;

static enum mkb_log_level level_from_env(void) {
    const char *e = getenv("MKB_LOG");
    if (!e) return MKB_LOG_WARN;
    if (!strcmp(e, "debug")) return MKB_LOG_DEBUG;
    if (!strcmp(e, "info")) return MKB_LOG_INFO;
    if (!strcmp(e, "error")) return MKB_LOG_ERROR;
    return MKB_LOG_WARN;
}

void mkb_log_set_level(enum mkb_log_level l) { level = (int)l; }

enum mkb_log_level mkb_log_get_level(void) {
    if (level < 0) level = (int)level_from_env();
    return (enum mkb_log_level)level;
}

void mkb_log_msg(enum mkb_log_level l, const char *fmt, ...) {
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (l < mkb_log_get_level()) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mkb: %s: ", names[l]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
