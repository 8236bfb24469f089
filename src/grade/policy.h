/* The grader's rules as pure decisions, so that everything that can be decided without a GPU or
 * a Python interpreter is decided here and unit-tested on the CPU:
 *
 *   1. who is acting: a file path (a Python frame's file, or a shared object's path) classified as
 *      the candidate's, the DSL's, another library's, the standard library's or the grader's;
 *   2. the audit policy: given one CPython audit event, its arguments and the actor, allow it or
 *      deny it with a rule id and a message (grade/child/ raises the denial inside the candidate's
 *      Python and records it as a finding);
 *   3. kernel accounting: given the GPU work CUPTI saw in one call of solve(), the findings that
 *      call earns (no DSL kernel, a kernel from a module loaded outside the DSL, a CUDA graph
 *      launch, work launched outside the call);
 *   4. the source scan: forbidden imports and calls spelled in kernel.py itself, and the DSL's own
 *      gadgets for other kernel languages (dsl/env.h).
 *
 * Rule ids (stable, listed in docs/grader.md): forbidden-import, forbidden-call, forbidden-file,
 * forged-code, no-dsl-kernel, foreign-kernel, cuda-graph, work-outside-call, source-scan,
 * input-mutated, output-aliases-input, result-channel, oversized.
 *
 * Ownership: the caller owns every struct; strings passed in are borrowed for the call. */
#ifndef MKB_GRADE_POLICY_H
#define MKB_GRADE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "dsl/env.h"

/* ---- 1. actors ---- */

enum mkb_actor {
    MKB_ACTOR_CANDIDATE, /* the candidate's files, and any file the grader does not recognise */
    MKB_ACTOR_DSL,       /* under one of the DSL's package roots */
    MKB_ACTOR_LIBRARY,   /* under a site-packages directory (torch, numpy, cuda-bindings, ...) */
    MKB_ACTOR_STDLIB,    /* the interpreter's standard library, and frozen modules */
    MKB_ACTOR_GRADER,    /* the grader's own code ("<mkb-grader>") and executables */
};

const char *mkb_actor_name(enum mkb_actor a);

#define MKB_POLICY_MAX_DIRS 32

/* Directories, each absolute and without a trailing slash. */
struct mkb_policy_paths {
    const char *stdlib[MKB_POLICY_MAX_DIRS]; /* stdlib and lib-dynload */
    int nstdlib;
    const char *site[MKB_POLICY_MAX_DIRS];   /* site-packages and the entries .pth files add */
    int nsite;
    const char *grader[MKB_POLICY_MAX_DIRS]; /* the mkb executables' directory, the source tree */
    int ngrader;
    const char *system[MKB_POLICY_MAX_DIRS]; /* system library directories (/usr/lib, the CUDA
                                                toolkit): a shared object there is a library's;
                                                tested after stdlib so stdlib files stay stdlib */
    int nsystem;
    const char *workdir;                     /* the candidate's private directory */
    const struct mkb_dsl_env *dsl;
};

/* Who owns a file. "<frozen ...>" is the stdlib; "<mkb-grader>" the grader; other names in angle
 * brackets (generated code) are MKB_ACTOR_CANDIDATE here: callers that walk a stack skip them
 * (mkb_policy_is_generated) and use the frame that called the generated code. */
enum mkb_actor mkb_policy_classify(const struct mkb_policy_paths *p, const char *path);
bool mkb_policy_is_generated(const char *path);
/* True if path is dir itself or lies inside it (component-wise, no ".." games: paths are
 * normalised by the caller). */
bool mkb_path_within(const char *path, const char *dir);

/* ---- 2. audit events ---- */

enum mkb_phase {
    MKB_PHASE_PRELOAD,   /* the grader imports torch and the DSL: everything is allowed */
    MKB_PHASE_CANDIDATE, /* the candidate's import and every call of solve() */
};

struct mkb_audit_event {
    const char *name;  /* the audit event name, "open", "import", "ctypes.dlopen", ... */
    const char *arg0;  /* the first argument as text (module name, path, ...) or NULL */
    const char *arg1;  /* the second (open: the mode; compile: the filename; ...) or NULL */
    int64_t flags;     /* open: the os.open flags when given, else -1 */
    int64_t pid;       /* os.kill / os.killpg: the target, else 0 */
    int64_t self_pid;
    enum mkb_actor actor;
    enum mkb_phase phase;
    /* object.__setattr__ / __delattr__ and sys._getframe only: the file of the Python code that
     * raised the event (standard-library code when the candidate reached it through the standard
     * library: collections.namedtuple setting the defaults of the function it just generated, or
     * asking for its caller's module name), and, for setattr on a Python function, the file the
     * function's code came from (else NULL) */
    const char *innermost;
    const char *innermost_caller; /* the file of the frame that called the innermost one */
    const char *target_file;
};

struct mkb_audit_decision {
    bool deny;
    const char *rule;  /* a rule id when denied */
    char message[512]; /* why, for the finding and the exception */
};

/* Paths the candidate (and everybody after preload) must not open, beyond the grader
 * directories: the seed file, the verdict output, /proc/<self>/mem. */
struct mkb_audit_policy {
    const struct mkb_policy_paths *paths;
    const char *protected_files[8];
    int nprotected;
};

void mkb_audit_decide(const struct mkb_audit_policy *pol, const struct mkb_audit_event *ev,
                      struct mkb_audit_decision *d);
/* True for module names whose import is forbidden (name or a parent package on the list). */
bool mkb_policy_forbidden_module(const char *module, const char **why);

/* ---- 3. kernel accounting of one call ---- */

enum mkb_kernel_origin {
    MKB_ORIGIN_DSL,     /* from a module the DSL loaded */
    MKB_ORIGIN_LIBRARY, /* a library's built-in kernels (torch eager ops, cuBLAS, ...) */
    MKB_ORIGIN_FOREIGN, /* from a module loaded at run time by anything but the DSL */
    MKB_ORIGIN_GRADER,  /* the grader's own kernels (input draws, references) */
};

const char *mkb_origin_name(enum mkb_kernel_origin o);

struct mkb_call_account {
    int64_t kernels[4];       /* by enum mkb_kernel_origin, inside the call */
    double kernel_ms[4];      /* summed GPU time by origin, inside the call */
    int64_t graph_launches;   /* CUDA graph launches seen inside the call */
    int64_t outside;          /* non-grader kernels that started outside every call window */
    int64_t dropped_records;  /* activity records CUPTI dropped (accounting incomplete) */
    int64_t all_kernels;      /* every kernel inside the window, the grader's included (the
                                 eager baseline's kernels per call) */
    double all_kernel_ms;     /* their summed GPU time (the eager baseline's GPU time per call) */
    char first_foreign[160];  /* the name of the first foreign kernel, for the message */
    char first_outside[160];
};

struct mkb_finding {
    const char *rule;
    char message[512];
};

/* Findings earned by one call; returns how many were written to out (at most max). */
int mkb_policy_judge_call(const struct mkb_call_account *a, const char *dsl_title, struct mkb_finding *out, int max);

/* ---- 4. source scan ---- */

/* Scan kernel.py's text (comments and string literals are skipped, so a docstring that says
 * "no triton here" is fine). Returns the number of findings written (at most max). */
int mkb_policy_scan_source(const char *src, size_t len, const struct mkb_dsl_env *dsl, struct mkb_finding *out,
                           int max);

#endif
