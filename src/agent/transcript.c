/* zstd-framed JSON-lines transcripts (see transcript.h). */
#include "agent/transcript.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "core/fs.h"

#define AUTO_FLUSH (4 << 20) /* buffered bytes that force a frame */
#define LEVEL 6

struct mkb_agent_transcript {
    pthread_mutex_t lock;
    int fd;
    char *path;
    char *buf;
    size_t len, cap;
    double t0;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum mkb_status mkb_agent_transcript_open(const char *path, double t0, struct mkb_agent_transcript **out) {
    struct mkb_agent_transcript *t = calloc(1, sizeof *t);
    if (!t) return mkb_error(MKB_ERR_NOMEM, "out of memory opening transcript '%s'", path);
    t->path = strdup(path);
    if (!t->path) {
        free(t);
        return mkb_error(MKB_ERR_NOMEM, "out of memory opening transcript '%s'", path);
    }
    t->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        int e = errno;
        free(t->path);
        free(t);
        return mkb_error(MKB_ERR_IO, "cannot open transcript '%s': %s", path, strerror(e));
    }
    pthread_mutex_init(&t->lock, NULL);
    t->t0 = t0 > 0 ? t0 : now_s();
    *out = t;
    return MKB_OK;
}

static enum mkb_status flush_locked(struct mkb_agent_transcript *t) {
    if (t->len == 0) return MKB_OK;
    size_t bound = ZSTD_compressBound(t->len);
    char *z = malloc(bound);
    if (!z) return mkb_error(MKB_ERR_NOMEM, "out of memory compressing transcript '%s'", t->path);
    size_t zn = ZSTD_compress(z, bound, t->buf, t->len, LEVEL);
    if (ZSTD_isError(zn)) {
        free(z);
        return mkb_error(MKB_ERR_INTERNAL, "cannot compress transcript '%s': %s", t->path, ZSTD_getErrorName(zn));
    }
    size_t off = 0;
    while (off < zn) {
        ssize_t w = write(t->fd, z + off, zn - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(z);
            return mkb_error(MKB_ERR_IO, "cannot write transcript '%s': %s", t->path, strerror(e));
        }
        off += (size_t)w;
    }
    free(z);
    fdatasync(t->fd);
    t->len = 0;
    return MKB_OK;
}

enum mkb_status mkb_agent_transcript_add(struct mkb_agent_transcript *t, const char *type, json_t *event) {
    if (!event) return mkb_error(MKB_ERR_NOMEM, "out of memory building a transcript event");
    double secs = now_s() - t->t0;
    json_object_set_new(event, "type", json_string(type));
    json_object_set_new(event, "t", json_real((double)(int64_t)(secs * 1000) / 1000.0));
    char *line = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(event);
    if (!line) return mkb_error(MKB_ERR_NOMEM, "cannot serialise a transcript event");
    size_t n = strlen(line);
    pthread_mutex_lock(&t->lock);
    enum mkb_status st = MKB_OK;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 65536;
        while (cap < t->len + n + 1) cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) {
            st = mkb_error(MKB_ERR_NOMEM, "out of memory buffering transcript '%s'", t->path);
        } else {
            t->buf = b;
            t->cap = cap;
        }
    }
    if (st == MKB_OK) {
        memcpy(t->buf + t->len, line, n);
        t->buf[t->len + n] = '\n';
        t->len += n + 1;
        if (t->len >= AUTO_FLUSH) st = flush_locked(t);
    }
    pthread_mutex_unlock(&t->lock);
    free(line);
    return st;
}

enum mkb_status mkb_agent_transcript_flush(struct mkb_agent_transcript *t) {
    pthread_mutex_lock(&t->lock);
    enum mkb_status st = flush_locked(t);
    pthread_mutex_unlock(&t->lock);
    return st;
}

enum mkb_status mkb_agent_transcript_close(struct mkb_agent_transcript *t) {
    if (!t) return MKB_OK;
    enum mkb_status st = mkb_agent_transcript_flush(t);
    if (close(t->fd) != 0 && st == MKB_OK)
        st = mkb_error(MKB_ERR_IO, "cannot close transcript '%s': %s", t->path, strerror(errno));
    pthread_mutex_destroy(&t->lock);
    free(t->buf);
    free(t->path);
    free(t);
    return st;
}

/* ---- reading ---- */

/* Split text (malloc'ed, freed here; one spare byte past len) into events. */
static enum mkb_status parse_lines(const char *path, char *text, size_t len, bool frames_whole, json_t **events,
                                   bool *complete) {
    text[len] = '\0';
    *complete = frames_whole;
    json_t *arr = json_array();
    if (!arr) {
        free(text);
        return mkb_error(MKB_ERR_NOMEM, "out of memory reading transcript '%s'", path);
    }
    int64_t lineno = 0;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        lineno++;
        if (!nl) { /* a line cut short */
            *complete = false;
            break;
        }
        *nl = '\0';
        if (*p) {
            json_error_t je;
            json_t *ev = json_loads(p, 0, &je);
            if (!json_is_object(ev)) {
                json_decref(ev);
                json_decref(arr);
                free(text);
                return mkb_error(MKB_ERR_INVALID, "transcript '%s' event %lld is not a JSON object: %s", path,
                                 (long long)lineno, je.text);
            }
            json_array_append_new(arr, ev);
        }
        p = nl + 1;
    }
    free(text);
    *events = arr;
    return MKB_OK;
}

enum mkb_status mkb_agent_transcript_read(const char *path, json_t **events, bool *complete) {
    char *data = NULL;
    size_t len = 0;
    MKB_TRY(mkb_read_file(path, &data, &len));
    static const unsigned char magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    if (len > 0 && (len < 4 || memcmp(data, magic, 4))) /* plain JSON lines */
        return parse_lines(path, data, len, true, events, complete);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t out_cap = 1 << 20, out_len = 0;
    char *text = malloc(out_cap);
    if (!d || !text) {
        ZSTD_freeDCtx(d);
        free(text);
        free(data);
        return mkb_error(MKB_ERR_NOMEM, "out of memory reading transcript '%s'", path);
    }
    ZSTD_inBuffer in = {data, len, 0};
    size_t hint = 0;
    enum mkb_status st = MKB_OK;
    while (in.pos < in.size) {
        if (out_cap - out_len < (1 << 16)) {
            char *nt = realloc(text, out_cap * 2);
            if (!nt) {
                st = mkb_error(MKB_ERR_NOMEM, "out of memory reading transcript '%s'", path);
                break;
            }
            text = nt;
            out_cap *= 2;
        }
        ZSTD_outBuffer o = {text + out_len, out_cap - out_len - 1, 0};
        hint = ZSTD_decompressStream(d, &o, &in);
        out_len += o.pos;
        if (ZSTD_isError(hint)) {
            /* garbage after the good frames: keep what decoded, call it incomplete */
            hint = 1;
            break;
        }
    }
    /* a truncated final frame may still leave output in the context */
    for (int spins = 0; st == MKB_OK && hint != 0 && spins < 64; spins++) {
        if (out_cap - out_len < (1 << 16)) {
            char *nt = realloc(text, out_cap * 2);
            if (!nt) break;
            text = nt;
            out_cap *= 2;
        }
        ZSTD_inBuffer none = {NULL, 0, 0};
        ZSTD_outBuffer o = {text + out_len, out_cap - out_len - 1, 0};
        size_t r = ZSTD_decompressStream(d, &o, &none);
        out_len += o.pos;
        if (ZSTD_isError(r) || o.pos == 0) break;
    }
    ZSTD_freeDCtx(d);
    free(data);
    if (st != MKB_OK) {
        free(text);
        return st;
    }
    return parse_lines(path, text, out_len, hint == 0, events, complete);
}
