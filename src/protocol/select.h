/* Selecting problems for `mkb build` and `mkb run`: --problems takes comma-separated items, each
 * a glob over problem names ("28_*", "*rmsnorm*") or, without wildcards, anything
 * mkb_problem_find accepts (an id, a name, a unique prefix); --categories takes comma-separated
 * family names. Both given: the problems that match both. Neither: the whole catalog.
 * An item that matches nothing, or an unknown family, is an error naming it.
 *
 * Ownership: the list is malloc'ed; free it with free(). Problems are in registry (id) order. */
#ifndef MKB_PROTOCOL_SELECT_H
#define MKB_PROTOCOL_SELECT_H

#include <stdint.h>

#include "core/status.h"
#include "problem/problem.h"

enum mkb_status mkb_select_problems(const char *problems, const char *categories, const struct mkb_problem ***out,
                                    int64_t *n);

/* Split "a,b,c" into a NULL-terminated array of malloc'ed strings (free with mkb_split_free). */
enum mkb_status mkb_split_list(const char *s, char ***out);
void mkb_split_free(char **v);

#endif
