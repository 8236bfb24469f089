/* DSL environments and rules: for each DSL the protocol registry names (dsl/dsl.h), what the
 * grader and `mkb env` need to know about it:
 *   - the pinned Python distributions of its environment (installed with pip, from PyPI or from a
 *     local wheelhouse) and why those versions were chosen;
 *   - the modules the grader imports before the candidate's code (so their import-time work is
 *     done under the grader's trust and is not charged to the candidate's first call);
 *   - the package directories whose code and shared objects count as the DSL: a GPU module loaded
 *     from there is the DSL's, and a kernel from such a module is a DSL kernel (kernel
 *     attribution, docs/grader.md);
 *   - the DSL's own gadgets that a candidate could turn into a back door for other kernel
 *     languages (compiling raw CUDA through the DSL's nvcc helper, loading a foreign cubin), which
 *     the source scan rejects.
 * Adding a DSL is adding a row in env.c with the same name as its dsl/dsl.c row.
 *
 * This file does not run pip, create environments (cmd_env.c does) or decide anything about a
 * particular kernel (grade/policy.h does). All strings are static. */
#ifndef MKB_DSL_ENV_H
#define MKB_DSL_ENV_H

#include <stdint.h>

#include "core/status.h"

#define MKB_DSL_MAX_LIST 12

struct mkb_dsl_env {
    const char *name; /* as in dsl/dsl.c: "cutedsl", "tirx" */
    /* pip requirement specifiers installed with --no-deps, in order; dependencies the GPU image
     * already has (torch, numpy, cuda-bindings, ml_dtypes, protobuf, typing_extensions) are not
     * repeated here: `mkb env` checks them instead */
    const char *pins[MKB_DSL_MAX_LIST];
    const char *needs[MKB_DSL_MAX_LIST]; /* import names that must already be importable */
    const char *why;                     /* why these versions (one paragraph) */
    const char *preload[MKB_DSL_MAX_LIST]; /* modules the grader imports before the candidate */
    const char *version_module;            /* module whose __version__ the verdict records */
    /* top-level directories under a site-packages directory that belong to the DSL */
    const char *roots[MKB_DSL_MAX_LIST];
    /* source tokens a kernel in this DSL must not contain (the DSL's gadgets for other kernel
     * languages), each with the reason shown to the agent */
    const char *gadgets[MKB_DSL_MAX_LIST][2];
};

extern const struct mkb_dsl_env mkb_dsl_envs[];
extern const int64_t mkb_dsl_env_count;

/* By name; MKB_ERR_NOT_FOUND listing the known names otherwise. */
enum mkb_status mkb_dsl_env_find(const char *name, const struct mkb_dsl_env **out);

/* Space-separated pins of a DSL into buf (for messages and `mkb env --json`). */
char *mkb_dsl_env_pins_str(const struct mkb_dsl_env *e, char *buf, int cap);

#endif
