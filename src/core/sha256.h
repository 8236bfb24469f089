/* SHA-256 through libcrypto, as lower-case hex. Used for file fingerprints and manifests. */
#ifndef MKB_CORE_SHA256_H
#define MKB_CORE_SHA256_H

#include <stddef.h>

#include "core/status.h"

#define MKB_SHA256_HEX 65 /* 64 hex digits and a NUL */

struct mkb_sha256 {
    void *md_ctx; /* EVP_MD_CTX, opaque here */
};

enum mkb_status mkb_sha256_init(struct mkb_sha256 *h);
enum mkb_status mkb_sha256_update(struct mkb_sha256 *h, const void *data, size_t len);
/* Writes the hex digest and releases the context. */
enum mkb_status mkb_sha256_final(struct mkb_sha256 *h, char hex[MKB_SHA256_HEX]);
/* Frees a context that will not be finalised (on an error path). */
void mkb_sha256_release(struct mkb_sha256 *h);
enum mkb_status mkb_sha256_hex(const void *data, size_t len, char hex[MKB_SHA256_HEX]);

#endif
