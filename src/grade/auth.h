/* The authenticated channel from a grader child to the parent.
 *
 * The parent draws a fresh 32-byte key for every grade and hands it to the child on a pipe the
 * child reads before it starts the Python interpreter and then closes. The child sends frames on
 * another inherited pipe:
 *
 *     MKB1 <seq> <len> <tag>\n<body: len bytes>\n
 *
 * where seq counts frames from 0, tag = hex HMAC-SHA256(key, "<seq>\n<body>"). The parent accepts
 * frames in order; the first frame whose header, sequence number or tag is wrong ends the trusted
 * part of the stream (mkb_auth_reader reports it). Candidate code can write to the pipe, close
 * it, or print anything anywhere, but without the key it cannot make a frame the parent accepts,
 * and it cannot reorder or replay the child's frames (seq is under the tag).
 *
 * This file does not hide the key inside the child (grade/child/ does, and docs/grader.md says
 * what remains possible) and it does not interpret bodies. Bodies are at most
 * MKB_AUTH_MAX_BODY bytes. */
#ifndef MKB_GRADE_AUTH_H
#define MKB_GRADE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MKB_AUTH_KEY_BYTES 32
#define MKB_AUTH_TAG_HEX 65
#define MKB_AUTH_MAX_BODY (64 * 1024 * 1024)

/* A fresh key from the OS's random source. */
enum mkb_status mkb_auth_key_new(uint8_t key[MKB_AUTH_KEY_BYTES]);

/* The hex tag of frame seq with this body. */
enum mkb_status mkb_auth_tag(const uint8_t key[MKB_AUTH_KEY_BYTES], uint64_t seq, const void *body, size_t len,
                             char tag[MKB_AUTH_TAG_HEX]);

/* A complete frame into a malloc'ed buffer (*out, *out_len); the caller frees it. */
enum mkb_status mkb_auth_frame(const uint8_t key[MKB_AUTH_KEY_BYTES], uint64_t seq, const void *body, size_t len,
                               char **out, size_t *out_len);

/* Parses a byte stream of frames. Feed it everything read from the pipe, then take the frames. */
struct mkb_auth_reader {
    uint8_t key[MKB_AUTH_KEY_BYTES];
    char *buf; /* unparsed bytes (malloc'ed) */
    size_t len, cap;
    uint64_t next_seq;
    bool broken;        /* a bad frame was seen: nothing after it is accepted */
    char why[256];      /* what was wrong with it */
    int64_t rejected_bytes;
};

void mkb_auth_reader_init(struct mkb_auth_reader *r, const uint8_t key[MKB_AUTH_KEY_BYTES]);
void mkb_auth_reader_release(struct mkb_auth_reader *r);
enum mkb_status mkb_auth_reader_feed(struct mkb_auth_reader *r, const void *data, size_t len);
/* The next accepted frame's body: *body is malloc'ed and NUL-terminated (the caller frees it);
 * false when no complete trusted frame is buffered. */
bool mkb_auth_reader_next(struct mkb_auth_reader *r, char **body, size_t *len);
/* After the stream has ended: true if bytes were left that did not form an accepted frame (a
 * truncated or forged tail); *why says what. */
bool mkb_auth_reader_leftover(const struct mkb_auth_reader *r, const char **why);

/* Hex <-> bytes for the key hand-over. */
void mkb_auth_hex(const uint8_t *bytes, size_t n, char *hex);
bool mkb_auth_unhex(const char *hex, uint8_t *bytes, size_t n);

#endif
