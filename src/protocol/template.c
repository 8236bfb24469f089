/* Template loading and {{name}} substitution (see template.h). */
#include "protocol/template.h"

#include <stdlib.h>
#include <string.h>

#include "core/fs.h"

const char *mkb_templates_dir(void) {
    const char *e = getenv("MKB_TEMPLATES_DIR");
    if (e && *e) return e;
    return MKB_SOURCE_DIR "/templates";
}

enum mkb_status mkb_template_path(const char *name, char *buf, size_t cap) {
    return mkb_path_join(buf, cap, mkb_templates_dir(), name);
}

enum mkb_status mkb_template_load(const char *name, char **text, size_t *len) {
    char path[4096];
    MKB_TRY(mkb_template_path(name, path, sizeof path));
    enum mkb_status s = mkb_read_file(path, text, len);
    if (s != MKB_OK)
        return mkb_error_wrap(s, "template '%s' (set MKB_TEMPLATES_DIR to the templates directory)", name);
    return MKB_OK;
}

struct buf {
    char *p;
    size_t n, cap;
};

static int put(struct buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > cap) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

enum mkb_status mkb_template_render(const char *what, const char *text, const struct mkb_tvar *vars, int64_t n,
                                    const char *keep_prefix, char **out) {
    struct buf b = {0};
    if (put(&b, "", 0) != 0) return mkb_error(MKB_ERR_NOMEM, "out of memory rendering '%s'", what);
    const char *p = text;
    for (;;) {
        const char *open = strstr(p, "{{");
        if (!open) {
            if (put(&b, p, strlen(p)) != 0) goto nomem;
            break;
        }
        if (put(&b, p, (size_t)(open - p)) != 0) goto nomem;
        const char *name = open + 2, *e = name;
        while (name_char(*e)) e++;
        if (e == name || e[0] != '}' || e[1] != '}') {
            /* not a variable: keep the braces as text */
            if (put(&b, "{{", 2) != 0) goto nomem;
            p = open + 2;
            continue;
        }
        size_t len = (size_t)(e - name);
        const char *value = NULL;
        for (int64_t i = 0; i < n; i++)
            if (strlen(vars[i].name) == len && !strncmp(vars[i].name, name, len)) {
                value = vars[i].value ? vars[i].value : "";
                break;
            }
        if (!value) {
            if (keep_prefix && !strncmp(name, keep_prefix, strlen(keep_prefix))) {
                if (put(&b, open, (size_t)(e + 2 - open)) != 0) goto nomem;
                p = e + 2;
                continue;
            }
            free(b.p);
            int line = 1;
            for (const char *q = text; q < open; q++) line += *q == '\n';
            return mkb_error(MKB_ERR_INVALID, "template '%s' line %d uses '{{%.*s}}', which has no value", what, line,
                             (int)len, name);
        }
        if (put(&b, value, strlen(value)) != 0) goto nomem;
        p = e + 2;
    }
    *out = b.p;
    return MKB_OK;
nomem:
    free(b.p);
    return mkb_error(MKB_ERR_NOMEM, "out of memory rendering '%s'", what);
}
