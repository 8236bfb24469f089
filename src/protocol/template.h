/* Text templates: the files under templates/ (instruction, skill header, placebo skill, the
 * sandbox helpers) and the one substitution rule they use: `{{name}}` is replaced by the value of
 * the variable `name`. A name that has no value is an error naming it and the template, except
 * names that start with a deferred prefix, which are left as they are for a later pass (the task
 * is rendered once per build; `{{budget.*}}` is filled per trial). No loops, no conditionals, no
 * escapes: a template is the text the agent reads.
 *
 * The templates directory is $MKB_TEMPLATES_DIR when set, else the source tree's templates/.
 * Ownership: rendered and loaded texts are malloc'ed; the caller frees them. */
#ifndef MKB_PROTOCOL_TEMPLATE_H
#define MKB_PROTOCOL_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct mkb_tvar {
    const char *name;
    const char *value;
};

/* Render text (named `what` in errors) with vars[0..n). keep_prefix: names starting with it are
 * left untouched; NULL for none. */
enum mkb_status mkb_template_render(const char *what, const char *text, const struct mkb_tvar *vars, int64_t n,
                                    const char *keep_prefix, char **out);

/* The templates directory (never NULL). */
const char *mkb_templates_dir(void);

/* Read templates/<name>; *text is malloc'ed and NUL-terminated. */
enum mkb_status mkb_template_load(const char *name, char **text, size_t *len);

/* The path of templates/<name> in buf. */
enum mkb_status mkb_template_path(const char *name, char *buf, size_t cap);

#endif
