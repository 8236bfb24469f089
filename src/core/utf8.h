/* UTF-8 repair: output of commands and files is stored in JSON (transcripts, records), which
 * must be valid UTF-8. This does not decode or normalise anything. */
#ifndef MKB_CORE_UTF8_H
#define MKB_CORE_UTF8_H

#include <stdint.h>

/* Replace every byte that is not part of valid UTF-8 (and NUL) with '?', in place. */
void mkb_utf8_sanitize(char *s, int64_t len);

#endif
