/* JSON through jansson: the few helpers every command needs on top of it.
 *
 * Ownership follows jansson: json_t values are reference counted; the *_new helpers below
 * return a new reference the caller owns. Output is stable: keys sorted, two-space indent. */
#ifndef MKB_CORE_JSON_H
#define MKB_CORE_JSON_H

#include <jansson.h>

#include "core/status.h"

#define MKB_JSON_FLAGS (JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))

/* Parse a file; errors name the path, line and column. *out is a new reference. */
enum mkb_status mkb_json_load(const char *path, json_t **out);
/* Write atomically with stable formatting and a trailing newline. */
enum mkb_status mkb_json_save(const char *path, const json_t *v);
/* Print to stdout with stable formatting and a trailing newline. */
enum mkb_status mkb_json_print(const json_t *v);
/* A JSON array of int64 values (shapes). New reference, NULL when out of memory. */
json_t *mkb_json_int_array(const int64_t *v, int n);

/* The value at a '/'-separated path of object keys ("ladder/base/S"), or NULL. Borrowed. */
json_t *mkb_json_path(json_t *o, const char *path);
/* Typed reads at a path: NAN, 0 or "" when the value is missing or of another type. */
double mkb_json_path_real(json_t *o, const char *path);
long long mkb_json_path_int(json_t *o, const char *path);
const char *mkb_json_path_str(json_t *o, const char *path);

#endif
