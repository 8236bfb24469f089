/* transcript.jsonl writing (see transcript.h). */
#include "protocol/transcript.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "protocol/proc.h"

enum mkb_status mkb_transcript_open(struct mkb_transcript *t, const char *path, double t0, int64_t max_output) {
    memset(t, 0, sizeof *t);
    t->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (t->fd < 0) return mkb_error(MKB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    t->t0 = t0;
    t->max = max_output;
    pthread_mutex_init(&t->mu, NULL);
    return MKB_OK;
}

/* Write one line; the caller holds the mutex. */
static void write_line(struct mkb_transcript *t, json_t *ev) {
    json_object_set_new(ev, "t", json_real((double)(int64_t)((mkb_proc_now() - t->t0) * 1000) / 1000.0));
    char *s = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
    json_decref(ev);
    if (!s) return;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return;
    }
    line[n] = '\n';
    const char *p = line;
    size_t left = n + 1;
    while (left > 0) {
        ssize_t w = write(t->fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    free(line);
}

void mkb_transcript_event(struct mkb_transcript *t, json_t *event) {
    if (!event) return;
    if (!t || t->fd < 0) {
        json_decref(event);
        return;
    }
    pthread_mutex_lock(&t->mu);
    write_line(t, event);
    pthread_mutex_unlock(&t->mu);
}

/* Emit pending[0..n) as an output event; keep the rest. Caller holds the mutex. */
static void emit(struct mkb_transcript *t, size_t n) {
    if (n == 0) return;
    if (t->kept >= t->max) {
        t->dropped += (int64_t)n;
    } else {
        char buf[sizeof t->pending + 1];
        memcpy(buf, t->pending, n);
        buf[n] = '\0';
        mkb_utf8_sanitize(buf, (int64_t)n);
        write_line(t, json_pack("{s:s, s:s%}", "type", "output", "text", buf, n));
        t->kept += (int64_t)n;
    }
    memmove(t->pending, t->pending + n, t->npending - n);
    t->npending -= n;
}

void mkb_transcript_output(void *ctx, const char *data, int64_t n) {
    struct mkb_transcript *t = ctx;
    pthread_mutex_lock(&t->mu);
    while (n > 0) {
        size_t room = sizeof t->pending - t->npending;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(t->pending + t->npending, data, take);
        t->npending += take;
        data += take;
        n -= (int64_t)take;
        /* whole lines go out; a full buffer goes out at a character boundary */
        size_t last_nl = 0;
        for (size_t i = 0; i < t->npending; i++)
            if (t->pending[i] == '\n') last_nl = i + 1;
        if (last_nl) emit(t, last_nl);
        if (t->npending == sizeof t->pending) {
            size_t cut = t->npending;
            while (cut > t->npending - 4 && ((unsigned char)t->pending[cut - 1] & 0xC0) == 0x80) cut--;
            if (cut > 0 && ((unsigned char)t->pending[cut - 1] & 0xC0) == 0xC0) cut--;
            if (cut == 0) cut = t->npending;
            emit(t, cut);
        }
    }
    pthread_mutex_unlock(&t->mu);
}

void mkb_transcript_close(struct mkb_transcript *t) {
    if (t->fd < 0) return;
    pthread_mutex_lock(&t->mu);
    emit(t, t->npending);
    if (t->dropped) write_line(t, json_pack("{s:s, s:I}", "type", "output_dropped", "bytes", (json_int_t)t->dropped));
    fsync(t->fd);
    close(t->fd);
    t->fd = -1;
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
}
