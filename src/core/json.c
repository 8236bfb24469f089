/* jansson helpers (see json.h). */
#include "core/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"

enum mkb_status mkb_json_load(const char *path, json_t **out) {
    json_error_t e;
    json_t *v = json_load_file(path, 0, &e);
    if (!v) {
        if (e.line < 0) return mkb_error(MKB_ERR_IO, "cannot read '%s': %s", path, e.text);
        return mkb_error(MKB_ERR_INVALID, "'%s' is not valid JSON (line %d, column %d): %s", path, e.line,
                         e.column, e.text);
    }
    *out = v;
    return MKB_OK;
}

enum mkb_status mkb_json_save(const char *path, const json_t *v) {
    char *s = json_dumps(v, MKB_JSON_FLAGS);
    if (!s) return mkb_error(MKB_ERR_NOMEM, "cannot serialise JSON for '%s'", path);
    size_t n = strlen(s);
    char *buf = realloc(s, n + 2);
    if (!buf) {
        free(s);
        return mkb_error(MKB_ERR_NOMEM, "cannot serialise JSON for '%s'", path);
    }
    buf[n] = '\n';
    buf[n + 1] = '\0';
    enum mkb_status st = mkb_write_file_atomic(path, buf, n + 1);
    free(buf);
    return st;
}

enum mkb_status mkb_json_print(const json_t *v) {
    if (json_dumpf(v, stdout, MKB_JSON_FLAGS) != 0) return mkb_error(MKB_ERR_IO, "cannot write JSON to stdout");
    fputc('\n', stdout);
    return MKB_OK;
}

json_t *mkb_json_int_array(const int64_t *v, int n) {
    json_t *a = json_array();
    if (!a) return NULL;
    for (int i = 0; i < n; i++) {
        if (json_array_append_new(a, json_integer((json_int_t)v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *mkb_json_path(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    char *save = NULL;
    for (char *k = strtok_r(buf, "/", &save); k && v; k = strtok_r(NULL, "/", &save)) v = json_object_get(v, k);
    return v;
}

double mkb_json_path_real(json_t *o, const char *path) {
    json_t *v = mkb_json_path(o, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

long long mkb_json_path_int(json_t *o, const char *path) {
    json_t *v = mkb_json_path(o, path);
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

const char *mkb_json_path_str(json_t *o, const char *path) {
    json_t *v = mkb_json_path(o, path);
    return json_is_string(v) ? json_string_value(v) : "";
}
