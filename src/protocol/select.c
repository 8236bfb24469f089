/* Problem selection (see select.h). */
#include "protocol/select.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mkb_status mkb_split_list(const char *s, char ***out) {
    int64_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return mkb_error(MKB_ERR_NOMEM, "out of memory splitting '%s'", s);
    int64_t k = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            v[k] = strndup(p, len);
            if (!v[k]) {
                mkb_split_free(v);
                return mkb_error(MKB_ERR_NOMEM, "out of memory splitting '%s'", s);
            }
            k++;
        }
        if (!e) break;
        p = e + 1;
    }
    *out = v;
    return MKB_OK;
}

void mkb_split_free(char **v) {
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}

static bool has_wildcard(const char *s) { return strpbrk(s, "*?[") != NULL; }

enum mkb_status mkb_select_problems(const char *problems, const char *categories, const struct mkb_problem ***out,
                                    int64_t *n) {
    *out = NULL;
    *n = 0;
    bool *take = calloc((size_t)mkb_registry_count + 1, sizeof *take);
    if (!take) return mkb_error(MKB_ERR_NOMEM, "out of memory selecting problems");
    enum mkb_status s = MKB_OK;
    char **items = NULL;
    if (problems && *problems) {
        s = mkb_split_list(problems, &items);
        for (char **it = items; s == MKB_OK && it && *it; it++) {
            bool any = false;
            if (has_wildcard(*it)) {
                for (int i = 0; i < mkb_registry_count; i++)
                    if (fnmatch(*it, mkb_registry[i].p->name, 0) == 0) take[i] = any = true;
                if (!any) s = mkb_error(MKB_ERR_NOT_FOUND, "no problem matches '%s' (see 'mkb problems')", *it);
            } else {
                const struct mkb_problem *p;
                s = mkb_problem_find(*it, &p);
                for (int i = 0; s == MKB_OK && i < mkb_registry_count; i++)
                    if (mkb_registry[i].p == p) take[i] = true;
            }
        }
        mkb_split_free(items);
    } else {
        for (int i = 0; i < mkb_registry_count; i++) take[i] = true;
    }
    if (s == MKB_OK && categories && *categories) {
        char **fams = NULL;
        s = mkb_split_list(categories, &fams);
        for (char **f = fams; s == MKB_OK && f && *f; f++) {
            bool known = false;
            for (int i = 0; i < mkb_registry_count; i++) known = known || !strcmp(mkb_registry[i].p->family, *f);
            if (!known) {
                char list[512] = "";
                size_t used = 0;
                for (int i = 0; i < mkb_registry_count && used < sizeof list; i++) {
                    bool dup = false;
                    for (int j = 0; j < i; j++) dup = dup || !strcmp(mkb_registry[j].p->family, mkb_registry[i].p->family);
                    if (!dup)
                        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                                 mkb_registry[i].p->family);
                }
                s = mkb_error(MKB_ERR_NOT_FOUND, "no category '%s' (categories: %s)", *f, list);
            }
        }
        for (int i = 0; s == MKB_OK && i < mkb_registry_count; i++) {
            bool in = false;
            for (char **f = fams; f && *f; f++) in = in || !strcmp(mkb_registry[i].p->family, *f);
            take[i] = take[i] && in;
        }
        mkb_split_free(fams);
    }
    if (s == MKB_OK) {
        const struct mkb_problem **v = calloc((size_t)mkb_registry_count + 1, sizeof *v);
        if (!v) {
            s = mkb_error(MKB_ERR_NOMEM, "out of memory selecting problems");
        } else {
            for (int i = 0; i < mkb_registry_count; i++)
                if (take[i]) v[(*n)++] = mkb_registry[i].p;
            *out = v;
            if (*n == 0) {
                free(v);
                *out = NULL;
                s = mkb_error(MKB_ERR_NOT_FOUND, "the selection matches no problem");
            }
        }
    }
    free(take);
    return s;
}
