/* Seeds of a grade (see seeds.h). */
#include "grade/seeds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/json.h"

static enum mkb_status random_u63(uint64_t *out) {
    uint64_t v;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = getrandom((char *)&v + got, sizeof v - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return mkb_error(MKB_ERR_IO, "cannot read the OS random source: %s", strerror(errno));
        }
        got += (size_t)n;
    }
    *out = v >> 1;
    return MKB_OK;
}

enum mkb_status mkb_seeds_draw(struct mkb_seeds *s) {
    for (int i = 0; i < MKB_GRADE_CORRECTNESS_DRAWS; i++) MKB_TRY(random_u63(&s->correctness[i]));
    for (int i = 0; i < MKB_GRADE_WARMUP_DRAWS; i++) MKB_TRY(random_u63(&s->warmup[i]));
    for (int i = 0; i < MKB_GRADE_TIMING_DRAWS; i++) MKB_TRY(random_u63(&s->timing[i]));
    return MKB_OK;
}

static json_t *list_json(const uint64_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRIu64, v[i]);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

json_t *mkb_seeds_to_json(const struct mkb_seeds *s) {
    return json_pack("{s:o, s:o, s:o}", "correctness", list_json(s->correctness, MKB_GRADE_CORRECTNESS_DRAWS),
                     "warmup", list_json(s->warmup, MKB_GRADE_WARMUP_DRAWS), "timing",
                     list_json(s->timing, MKB_GRADE_TIMING_DRAWS));
}

static enum mkb_status list_from_json(const json_t *j, const char *name, uint64_t *v, int n) {
    const json_t *a = json_object_get(j, name);
    if (!json_is_array(a)) return mkb_error(MKB_ERR_INVALID, "seeds: '%s' must be a list of %d seeds", name, n);
    if ((int)json_array_size(a) != n)
        return mkb_error(MKB_ERR_INVALID, "seeds: '%s' has %zu seeds, expected %d", name, json_array_size(a), n);
    for (int i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, (size_t)i);
        if (json_is_integer(e)) {
            json_int_t x = json_integer_value(e);
            if (x < 0) return mkb_error(MKB_ERR_INVALID, "seeds: '%s'[%d] is negative", name, i);
            v[i] = (uint64_t)x;
        } else if (json_is_string(e)) {
            const char *t = json_string_value(e);
            if (!*t) return mkb_error(MKB_ERR_INVALID, "seeds: '%s'[%d] is empty", name, i);
            for (const char *q = t; *q; q++)
                if (*q < '0' || *q > '9')
                    return mkb_error(MKB_ERR_INVALID, "seeds: '%s'[%d] '%s' is not a decimal integer", name, i, t);
            errno = 0;
            unsigned long long x = strtoull(t, NULL, 10);
            if (errno == ERANGE || x >> 63)
                return mkb_error(MKB_ERR_INVALID, "seeds: '%s'[%d] '%s' is not below 2^63", name, i, t);
            v[i] = (uint64_t)x;
        } else {
            return mkb_error(MKB_ERR_INVALID, "seeds: '%s'[%d] is neither an integer nor a decimal string", name, i);
        }
    }
    return MKB_OK;
}

enum mkb_status mkb_seeds_from_json(const json_t *j, struct mkb_seeds *s) {
    if (!json_is_object(j)) return mkb_error(MKB_ERR_INVALID, "seeds: expected a JSON object");
    MKB_TRY(list_from_json(j, "correctness", s->correctness, MKB_GRADE_CORRECTNESS_DRAWS));
    MKB_TRY(list_from_json(j, "warmup", s->warmup, MKB_GRADE_WARMUP_DRAWS));
    MKB_TRY(list_from_json(j, "timing", s->timing, MKB_GRADE_TIMING_DRAWS));
    return MKB_OK;
}

enum mkb_status mkb_seeds_load(const char *path, struct mkb_seeds *s) {
    json_t *j;
    MKB_TRY(mkb_json_load(path, &j));
    enum mkb_status st = mkb_seeds_from_json(j, s);
    json_decref(j);
    if (st != MKB_OK) return mkb_error_wrap(st, "reading '%s'", path);
    return MKB_OK;
}
