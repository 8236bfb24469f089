/* The authenticated frames between a grader child and the parent (see auth.h). HMAC-SHA256 comes
 * from libcrypto; tags are compared in constant time. */
#include "grade/auth.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

enum mkb_status mkb_auth_key_new(uint8_t key[MKB_AUTH_KEY_BYTES]) {
    size_t got = 0;
    while (got < MKB_AUTH_KEY_BYTES) {
        ssize_t n = getrandom(key + got, MKB_AUTH_KEY_BYTES - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return mkb_error(MKB_ERR_IO, "cannot read the OS random source: %s", strerror(errno));
        }
        got += (size_t)n;
    }
    return MKB_OK;
}

void mkb_auth_hex(const uint8_t *bytes, size_t n, char *hex) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = '\0';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

bool mkb_auth_unhex(const char *hex, uint8_t *bytes, size_t n) {
    if (strlen(hex) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        bytes[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

enum mkb_status mkb_auth_tag(const uint8_t key[MKB_AUTH_KEY_BYTES], uint64_t seq, const void *body, size_t len,
                             char tag[MKB_AUTH_TAG_HEX]) {
    char head[32];
    int hn = snprintf(head, sizeof head, "%" PRIu64 "\n", seq);
    /* HMAC over head || body without copying the body: feed both through one MAC context */
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    uint8_t out[32];
    size_t outlen = 0;
    bool ok = ctx && EVP_MAC_init(ctx, key, MKB_AUTH_KEY_BYTES, params) &&
              EVP_MAC_update(ctx, (const unsigned char *)head, (size_t)hn) &&
              EVP_MAC_update(ctx, body, len) && EVP_MAC_final(ctx, out, &outlen, sizeof out) && outlen == 32;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    if (!ok) return mkb_error(MKB_ERR_INTERNAL, "cannot compute an HMAC-SHA256 tag (libcrypto failed)");
    mkb_auth_hex(out, 32, tag);
    OPENSSL_cleanse(out, sizeof out);
    return MKB_OK;
}

enum mkb_status mkb_auth_frame(const uint8_t key[MKB_AUTH_KEY_BYTES], uint64_t seq, const void *body, size_t len,
                               char **out, size_t *out_len) {
    if (len > MKB_AUTH_MAX_BODY) return mkb_error(MKB_ERR_INVALID, "frame body of %zu bytes is over the limit", len);
    char tag[MKB_AUTH_TAG_HEX];
    MKB_TRY(mkb_auth_tag(key, seq, body, len, tag));
    char head[160];
    int hn = snprintf(head, sizeof head, "MKB1 %" PRIu64 " %zu %s\n", seq, len, tag);
    char *buf = malloc((size_t)hn + len + 1);
    if (!buf) return mkb_error(MKB_ERR_NOMEM, "out of memory building a frame of %zu bytes", len);
    memcpy(buf, head, (size_t)hn);
    memcpy(buf + hn, body, len);
    buf[(size_t)hn + len] = '\n';
    *out = buf;
    *out_len = (size_t)hn + len + 1;
    return MKB_OK;
}

void mkb_auth_reader_init(struct mkb_auth_reader *r, const uint8_t key[MKB_AUTH_KEY_BYTES]) {
    memset(r, 0, sizeof *r);
    memcpy(r->key, key, MKB_AUTH_KEY_BYTES);
}

void mkb_auth_reader_release(struct mkb_auth_reader *r) {
    OPENSSL_cleanse(r->key, sizeof r->key);
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

enum mkb_status mkb_auth_reader_feed(struct mkb_auth_reader *r, const void *data, size_t len) {
    if (r->broken) {
        r->rejected_bytes += (int64_t)len;
        return MKB_OK;
    }
    if (r->len + len > (size_t)MKB_AUTH_MAX_BODY + 4096) {
        r->broken = true;
        snprintf(r->why, sizeof r->why, "more than %d bytes without a complete frame", MKB_AUTH_MAX_BODY);
        r->rejected_bytes += (int64_t)(r->len + len);
        r->len = 0;
        return MKB_OK;
    }
    if (r->len + len + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + len + 1) cap *= 2;
        char *nb = realloc(r->buf, cap);
        if (!nb) return mkb_error(MKB_ERR_NOMEM, "out of memory buffering the result channel");
        r->buf = nb;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, len);
    r->len += len;
    return MKB_OK;
}

static void reader_break(struct mkb_auth_reader *r, const char *why) {
    r->broken = true;
    snprintf(r->why, sizeof r->why, "%s", why);
    r->rejected_bytes += (int64_t)r->len;
    r->len = 0;
}

bool mkb_auth_reader_next(struct mkb_auth_reader *r, char **body, size_t *blen) {
    if (r->broken || r->len == 0) return false;
    char *nl = memchr(r->buf, '\n', r->len < 160 ? r->len : 160);
    if (!nl) {
        if (r->len >= 160) reader_break(r, "a frame header is malformed");
        return false;
    }
    char head[160];
    size_t hl = (size_t)(nl - r->buf);
    memcpy(head, r->buf, hl);
    head[hl] = '\0';
    char magic[8], tag[MKB_AUTH_TAG_HEX + 1];
    unsigned long long seq, len;
    int pos = 0;
    if (sscanf(head, "%7s %llu %llu %65s%n", magic, &seq, &len, tag, &pos) != 4 || (size_t)pos != hl ||
        strcmp(magic, "MKB1") || strlen(tag) != 64) {
        reader_break(r, "a frame header is malformed");
        return false;
    }
    if (len > MKB_AUTH_MAX_BODY) {
        reader_break(r, "a frame announces a body over the size limit");
        return false;
    }
    size_t need = hl + 1 + (size_t)len + 1;
    if (r->len < need) return false; /* wait for more */
    if (seq != r->next_seq) {
        reader_break(r, "a frame is out of sequence (replayed or reordered)");
        return false;
    }
    const char *b = r->buf + hl + 1;
    if (b[len] != '\n') {
        reader_break(r, "a frame body is not terminated");
        return false;
    }
    char want[MKB_AUTH_TAG_HEX];
    if (mkb_auth_tag(r->key, seq, b, (size_t)len, want) != MKB_OK) {
        reader_break(r, "a frame tag could not be computed");
        return false;
    }
    if (CRYPTO_memcmp(want, tag, 64) != 0) {
        reader_break(r, "a frame's authentication tag is wrong (forged or corrupted)");
        return false;
    }
    char *out = malloc((size_t)len + 1);
    if (!out) return false;
    memcpy(out, b, (size_t)len);
    out[len] = '\0';
    memmove(r->buf, r->buf + need, r->len - need);
    r->len -= need;
    r->next_seq++;
    *body = out;
    *blen = (size_t)len;
    return true;
}

bool mkb_auth_reader_leftover(const struct mkb_auth_reader *r, const char **why) {
    if (r->broken) {
        *why = r->why;
        return true;
    }
    if (r->len > 0) {
        *why = "the stream ended inside a frame";
        return true;
    }
    *why = NULL;
    return false;
}
