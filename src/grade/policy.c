/* The grader's rules as pure decisions (see policy.h). Nothing here touches Python, CUDA or the
 * file system: the child gathers the facts and these functions decide. */
#include "grade/policy.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mkb_actor_name(enum mkb_actor a) {
    switch (a) {
    case MKB_ACTOR_CANDIDATE: return "candidate";
    case MKB_ACTOR_DSL: return "dsl";
    case MKB_ACTOR_LIBRARY: return "library";
    case MKB_ACTOR_STDLIB: return "stdlib";
    case MKB_ACTOR_GRADER: return "grader";
    }
    return "?";
}

const char *mkb_origin_name(enum mkb_kernel_origin o) {
    switch (o) {
    case MKB_ORIGIN_DSL: return "dsl";
    case MKB_ORIGIN_LIBRARY: return "library";
    case MKB_ORIGIN_FOREIGN: return "foreign";
    case MKB_ORIGIN_GRADER: return "grader";
    }
    return "?";
}

bool mkb_path_within(const char *path, const char *dir) {
    if (!path || !dir || !*dir) return false;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (strncmp(path, dir, n) != 0) return false;
    return path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/');
}

bool mkb_policy_is_generated(const char *path) {
    return path && path[0] == '<' && strncmp(path, "<frozen ", 8) != 0 && strcmp(path, "<mkb-grader>") != 0;
}

enum mkb_actor mkb_policy_classify(const struct mkb_policy_paths *p, const char *path) {
    if (!path || !*path) return MKB_ACTOR_CANDIDATE;
    if (!strncmp(path, "<frozen ", 8)) return MKB_ACTOR_STDLIB;
    if (!strcmp(path, "<mkb-grader>")) return MKB_ACTOR_GRADER;
    if (path[0] != '/') return MKB_ACTOR_CANDIDATE;
    /* the candidate's own directory first: nothing the candidate writes there is trusted, even if
     * the directory happened to sit under a trusted one */
    if (p->workdir && mkb_path_within(path, p->workdir)) return MKB_ACTOR_CANDIDATE;
    /* DSL roots live under site directories: test them before the generic library rule */
    for (int i = 0; i < p->nsite; i++) {
        if (!mkb_path_within(path, p->site[i])) continue;
        const char *rest = path + strlen(p->site[i]);
        while (*rest == '/') rest++;
        for (int k = 0; p->dsl && k < MKB_DSL_MAX_LIST && p->dsl->roots[k]; k++) {
            size_t rl = strlen(p->dsl->roots[k]);
            if (!strncmp(rest, p->dsl->roots[k], rl) && (rest[rl] == '/' || rest[rl] == '\0' || rest[rl] == '.'))
                return MKB_ACTOR_DSL;
        }
    }
    /* site directories may sit inside the stdlib tree (lib/python3.x/site-packages): the longer,
     * more specific match wins, so test site before stdlib */
    for (int i = 0; i < p->nsite; i++)
        if (mkb_path_within(path, p->site[i])) return MKB_ACTOR_LIBRARY;
    for (int i = 0; i < p->nstdlib; i++)
        if (mkb_path_within(path, p->stdlib[i])) return MKB_ACTOR_STDLIB;
    /* the grader's directories may hold an environment (a venv in a checkout): the environment's
     * files are the library's, the rest is the grader's */
    for (int i = 0; i < p->ngrader; i++)
        if (mkb_path_within(path, p->grader[i])) return MKB_ACTOR_GRADER;
    for (int i = 0; i < p->nsystem; i++)
        if (mkb_path_within(path, p->system[i])) return MKB_ACTOR_LIBRARY;
    return MKB_ACTOR_CANDIDATE;
}

/* ---- forbidden modules ---- */

struct forbidden_module {
    const char *name;
    const char *why;
    bool any_actor; /* also when a library imports it after preload */
};

static const struct forbidden_module forbidden_modules[] = {
    {"triton", "Triton is another kernel language", true},
    {"cupy", "CuPy compiles and launches raw CUDA kernels", true},
    {"cupyx", "CuPy compiles and launches raw CUDA kernels", true},
    {"numba", "Numba compiles its own CUDA kernels", true},
    {"pycuda", "PyCUDA compiles and launches raw CUDA kernels", true},
    {"tilelang", "TileLang is another kernel language", true},
    {"jax", "JAX compiles its own GPU kernels", true},
    {"jaxlib", "JAX compiles its own GPU kernels", true},
    {"warp", "Warp compiles its own GPU kernels", true},
    {"cffi", "cffi calls native code directly", false},
    {"_cffi_backend", "cffi calls native code directly", false},
    {"torch.utils.cpp_extension", "cpp_extension builds raw CUDA/C++ extensions", false},
    {"torch._inductor", "torch.compile (Inductor) generates Triton kernels", true},
    {"torch._dynamo", "torch.compile (Dynamo) is another compiler", false},
    {"torch.cuda.jiterator", "the jiterator compiles raw CUDA C", false},
    {"cuda.core", "cuda.core compiles and launches raw CUDA kernels", false},
    {"cuda.bindings.nvrtc", "NVRTC compiles raw CUDA C", false},
    {"cuda.nvrtc", "NVRTC compiles raw CUDA C", false},
    {"subprocess", "kernels do not start processes", false},
    {"multiprocessing", "kernels do not start processes", false},
    {"socket", "kernels have no network", false},
};

static bool module_matches(const char *module, const char *name) {
    size_t n = strlen(name);
    return !strncmp(module, name, n) && (module[n] == '\0' || module[n] == '.');
}

static const struct forbidden_module *find_forbidden(const char *module) {
    if (!module) return NULL;
    for (size_t i = 0; i < sizeof forbidden_modules / sizeof *forbidden_modules; i++)
        if (module_matches(module, forbidden_modules[i].name)) return &forbidden_modules[i];
    return NULL;
}

bool mkb_policy_forbidden_module(const char *module, const char **why) {
    const struct forbidden_module *f = find_forbidden(module);
    if (why) *why = f ? f->why : NULL;
    return f != NULL;
}

/* ---- audit decisions ---- */

static void deny(struct mkb_audit_decision *d, const char *rule, const char *fmt, const char *a, const char *b) {
    d->deny = true;
    d->rule = rule;
    snprintf(d->message, sizeof d->message, fmt, a ? a : "?", b ? b : "");
}

static bool starts(const char *s, const char *prefix) { return s && !strncmp(s, prefix, strlen(prefix)); }

/* /proc/self/mem, /proc/<n>/mem, /proc/thread-self/mem, and the same for "map_files" and
 * "environ" of other processes: reading them reads a process's memory. */
static bool is_proc_memory(const char *path, int64_t self_pid) {
    if (!starts(path, "/proc/")) return false;
    const char *rest = path + 6;
    const char *slash = strchr(rest, '/');
    if (!slash) return false;
    const char *leaf = slash + 1;
    if (!strcmp(leaf, "mem") || starts(leaf, "map_files") || !strcmp(leaf, "pagemap")) return true;
    /* another process's files (the parent's, a sibling's) */
    if (isdigit((unsigned char)rest[0])) {
        long long pid = 0;
        if (sscanf(rest, "%lld", &pid) == 1 && pid != self_pid) return true;
    }
    return false;
}

static bool write_mode(const char *mode, int64_t flags) {
    if (flags >= 0) return (flags & 3) != 0 || (flags & 0100) || (flags & 01000); /* O_WRONLY|O_RDWR, O_CREAT, O_TRUNC */
    if (!mode) return false;
    return strpbrk(mode, "wax+") != NULL;
}

static void decide_open(const struct mkb_audit_policy *pol, const struct mkb_audit_event *ev,
                        struct mkb_audit_decision *d) {
    const char *path = ev->arg0;
    if (!path) return; /* an fd, not a path */
    if (is_proc_memory(path, ev->self_pid)) {
        deny(d, "forbidden-file", "opening '%s' is forbidden: it reads process memory%s", path, NULL);
        return;
    }
    for (int i = 0; i < pol->nprotected; i++)
        if (pol->protected_files[i] && !strcmp(path, pol->protected_files[i])) {
            deny(d, "forbidden-file", "opening '%s' is forbidden: it is the grader's file%s", path, NULL);
            return;
        }
    const struct mkb_policy_paths *p = pol->paths;
    if (mkb_policy_classify(p, path) == MKB_ACTOR_GRADER) {
        deny(d, "forbidden-file", "opening '%s' is forbidden: it belongs to the grader%s", path, NULL);
        return;
    }
    if (ev->actor == MKB_ACTOR_CANDIDATE && write_mode(ev->arg1, ev->flags)) {
        if (p->workdir && mkb_path_within(path, p->workdir)) return;
        if (!strcmp(path, "/dev/null") || starts(path, "/dev/shm/")) return;
        deny(d, "forbidden-file", "writing '%s' is forbidden: kernel code may write only inside its own directory%s",
             path, NULL);
    }
}

/* The event was raised by standard-library code (which the candidate called). */
static bool from_stdlib(const struct mkb_audit_policy *pol, const struct mkb_audit_event *ev) {
    return ev->innermost && mkb_policy_classify(pol->paths, ev->innermost) == MKB_ACTOR_STDLIB;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = s ? strlen(s) : 0, t = strlen(tail);
    return n > t && !strcmp(s + n - t, tail);
}

/* Standard-library code that looks at a frame without handing it to the candidate:
 * collections.namedtuple, typing (TypeVar and friends) and the Enum functional API read their
 * caller's module name; logging's findCaller reads file, line and function names, through
 * logging.currentframe, which does return a frame, so there only when logging itself called it. */
static bool frame_stays_inside(const struct mkb_audit_policy *pol, const struct mkb_audit_event *ev) {
    if (!from_stdlib(pol, ev)) return false;
    if (ends_with(ev->innermost, "/collections/__init__.py") || ends_with(ev->innermost, "/typing.py") ||
        ends_with(ev->innermost, "/enum.py"))
        return true;
    return ends_with(ev->innermost, "/logging/__init__.py") && ends_with(ev->innermost_caller, "/logging/__init__.py") &&
           mkb_policy_classify(pol->paths, ev->innermost_caller) == MKB_ACTOR_STDLIB;
}

void mkb_audit_decide(const struct mkb_audit_policy *pol, const struct mkb_audit_event *ev,
                      struct mkb_audit_decision *d) {
    d->deny = false;
    d->rule = NULL;
    d->message[0] = '\0';
    if (ev->phase == MKB_PHASE_PRELOAD || ev->actor == MKB_ACTOR_GRADER) return;
    const char *n = ev->name;
    bool cand = ev->actor == MKB_ACTOR_CANDIDATE;

    if (!strcmp(n, "open")) {
        decide_open(pol, ev, d);
        return;
    }
    if (!strcmp(n, "import")) {
        const struct forbidden_module *f = find_forbidden(ev->arg0);
        if (f && (cand || f->any_actor)) {
            deny(d, "forbidden-import", "importing '%s' is forbidden: %s", ev->arg0, f->why);
            return;
        }
        /* a native extension from outside the environments: code the candidate brought */
        size_t l = ev->arg1 ? strlen(ev->arg1) : 0;
        if (l > 3 && ev->arg1[0] == '/' && strstr(ev->arg1, ".so") &&
            mkb_policy_classify(pol->paths, ev->arg1) == MKB_ACTOR_CANDIDATE)
            deny(d, "forbidden-import", "importing the native extension '%s' is forbidden: it is not part of the "
                 "environment%s", ev->arg1, NULL);
        return;
    }
    if (!strcmp(n, "ctypes.dlopen") && ev->arg0 && ev->arg0[0] == '/' &&
        mkb_policy_classify(pol->paths, ev->arg0) == MKB_ACTOR_CANDIDATE) {
        /* whoever asks (torch.ops.load_library, a DSL helper): a library the candidate brought */
        deny(d, "forbidden-call", "loading the shared library '%s' is forbidden: it is not part of the environment%s",
             ev->arg0, NULL);
        return;
    }
    if (starts(n, "ctypes.")) {
        if (cand) deny(d, "forbidden-call", "%s from kernel code is forbidden: ctypes calls native code directly%s", n, NULL);
        return;
    }
    if (!strcmp(n, "subprocess.Popen") || !strcmp(n, "os.system") || starts(n, "os.exec") ||
        starts(n, "os.spawn") || !strcmp(n, "os.posix_spawn") || !strcmp(n, "os.fork") ||
        !strcmp(n, "os.forkpty") || !strcmp(n, "pty.spawn") || !strcmp(n, "os.startfile")) {
        if (cand) deny(d, "forbidden-call", "%s from kernel code is forbidden: kernels do not start processes%s", n, NULL);
        return;
    }
    if (!strcmp(n, "os.kill") || !strcmp(n, "os.killpg") || !strcmp(n, "signal.pthread_kill") ||
        !strcmp(n, "os.pidfd_open")) {
        if (cand || (ev->pid != 0 && ev->pid != ev->self_pid))
            deny(d, "forbidden-call", "%s is forbidden: kernel code does not signal processes%s", n, NULL);
        return;
    }
    if (starts(n, "socket.")) {
        deny(d, "forbidden-call", "%s is forbidden: a grade has no network%s", n, NULL);
        return;
    }
    if (!strcmp(n, "compile")) {
        /* code compiled under a library's file name would pass for the library's code */
        if (cand && ev->arg1 && ev->arg1[0] == '/') {
            enum mkb_actor owner = mkb_policy_classify(pol->paths, ev->arg1);
            if (owner != MKB_ACTOR_CANDIDATE)
                deny(d, "forged-code", "compiling code under the file name '%s' is forbidden: it belongs to %s",
                     ev->arg1, mkb_actor_name(owner));
        }
        return;
    }
    if (!strcmp(n, "code.__new__") || !strcmp(n, "function.__new__")) {
        if (cand) deny(d, "forged-code", "%s from kernel code is forbidden: it forges code objects%s", n, NULL);
        return;
    }
    if (!strcmp(n, "object.__setattr__") || !strcmp(n, "object.__delattr__")) {
        /* arg0: the object's type's module, arg1: the attribute */
        if (!cand || !ev->arg1) return;
        if (!strcmp(ev->arg1, "__code__") || !strcmp(ev->arg1, "__globals__") || !strcmp(ev->arg1, "__defaults__") ||
            !strcmp(ev->arg1, "__kwdefaults__") || !strcmp(ev->arg1, "__class__")) {
            /* the standard library doing it on a function generated at run time or written by the
             * candidate (namedtuple sets its new __new__'s defaults when a kernel imports a module
             * that defines one) rewrites nobody else's code; done by the candidate's own
             * statement, or to anybody else's function, it is denied */
            if (from_stdlib(pol, ev) && ev->target_file &&
                (mkb_policy_is_generated(ev->target_file) ||
                 mkb_policy_classify(pol->paths, ev->target_file) == MKB_ACTOR_CANDIDATE))
                return;
            deny(d, "forged-code", "setting '%s' is forbidden: it rewrites code the grader relies on%s", ev->arg1, NULL);
        }
        else if (ev->arg0 && (module_matches(ev->arg0, "torch") || module_matches(ev->arg0, "builtins")))
            deny(d, "forbidden-call", "patching %s types is forbidden (attribute '%s')", ev->arg0, ev->arg1);
        return;
    }
    if ((!strcmp(n, "sys._getframe") || !strcmp(n, "sys._getframemodulename")) && frame_stays_inside(pol, ev))
        return;
    if (!strcmp(n, "sys._getframe") || !strcmp(n, "sys._current_frames") || !strcmp(n, "sys._getframemodulename") ||
        !strcmp(n, "gc.get_objects") || !strcmp(n, "gc.get_referrers") || !strcmp(n, "gc.get_referents") ||
        !strcmp(n, "sys.settrace") || !strcmp(n, "sys.setprofile") || !strcmp(n, "sys.addaudithook") ||
        !strcmp(n, "sys.monitoring.register_callback") || !strcmp(n, "sys.monitoring.use_tool_id") ||
        !strcmp(n, "sys._setprofileallthreads") || !strcmp(n, "sys._settraceallthreads") ||
        !strcmp(n, "cpython.PyInterpreterState_Clear")) {
        if (cand) deny(d, "forbidden-call", "%s from kernel code is forbidden: it reaches into the grader%s", n, NULL);
        return;
    }
    if (!strcmp(n, "os.dup2") || !strcmp(n, "os.closerange")) {
        if (cand) deny(d, "forbidden-call", "%s from kernel code is forbidden%s", n, NULL);
        return;
    }
}

/* ---- kernel accounting ---- */

static int add_finding(struct mkb_finding *out, int k, int max, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int add_finding(struct mkb_finding *out, int k, int max, const char *rule, const char *fmt, ...) {
    if (k >= max) return k;
    out[k].rule = rule;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out[k].message, sizeof out[k].message, fmt, ap);
    va_end(ap);
    return k + 1;
}

int mkb_policy_judge_call(const struct mkb_call_account *a, const char *dsl_title, struct mkb_finding *out, int max) {
    int k = 0;
    if (a->graph_launches > 0)
        k = add_finding(out, k, max, "cuda-graph", "the call launched %lld CUDA graph%s; CUDA Graphs are forbidden",
                        (long long)a->graph_launches, a->graph_launches == 1 ? "" : "s");
    if (a->kernels[MKB_ORIGIN_FOREIGN] > 0)
        k = add_finding(out, k, max, "foreign-kernel",
                        "the call ran %lld kernel%s from GPU code loaded outside %s (first: %s); only %s kernels and "
                        "PyTorch's own eager operations may run",
                        (long long)a->kernels[MKB_ORIGIN_FOREIGN], a->kernels[MKB_ORIGIN_FOREIGN] == 1 ? "" : "s",
                        dsl_title, a->first_foreign[0] ? a->first_foreign : "?", dsl_title);
    if (a->kernels[MKB_ORIGIN_DSL] == 0)
        k = add_finding(out, k, max, "no-dsl-kernel",
                        "the call launched no %s kernel (%lld other kernel%s ran); every call of solve() must run at "
                        "least one kernel written in %s",
                        dsl_title, (long long)(a->kernels[MKB_ORIGIN_LIBRARY] + a->kernels[MKB_ORIGIN_FOREIGN]),
                        a->kernels[MKB_ORIGIN_LIBRARY] + a->kernels[MKB_ORIGIN_FOREIGN] == 1 ? "" : "s", dsl_title);
    if (a->outside > 0)
        k = add_finding(out, k, max, "work-outside-call",
                        "%lld kernel%s (first: %s) started after solve() returned or before it was called: work must "
                        "finish inside the call",
                        (long long)a->outside, a->outside == 1 ? "" : "s", a->first_outside[0] ? a->first_outside : "?");
    return k;
}

/* ---- source scan ---- */

struct scan_rule {
    const char *chain; /* a dotted name, matched against identifier chains */
    bool prefix;       /* match any identifier that starts with the last component */
    bool bare_only;    /* only when not an attribute (not preceded by '.') */
    const char *why;
};

static const struct scan_rule scan_rules[] = {
    {"triton", false, false, "Triton is another kernel language"},
    {"cupy", false, false, "CuPy compiles raw CUDA kernels"},
    {"cupyx", false, false, "CuPy compiles raw CUDA kernels"},
    {"numba", false, false, "Numba compiles its own CUDA kernels"},
    {"pycuda", false, false, "PyCUDA compiles raw CUDA kernels"},
    {"tilelang", false, false, "TileLang is another kernel language"},
    {"cffi", false, false, "cffi calls native code"},
    {"ctypes", false, false, "ctypes calls native code"},
    {"subprocess", false, false, "kernels do not start processes"},
    {"cpp_extension", false, false, "cpp_extension builds raw CUDA/C++ extensions"},
    {"load_inline", false, false, "load_inline builds raw CUDA/C++ extensions"},
    {"jiterator", false, false, "the jiterator compiles raw CUDA C"},
    {"torch.compile", false, false, "torch.compile is another compiler"},
    {"_dynamo", false, false, "torch.compile (Dynamo) is another compiler"},
    {"_inductor", false, false, "torch.compile (Inductor) generates Triton kernels"},
    {"CUDAGraph", false, false, "CUDA Graphs are forbidden"},
    {"make_graphed_callables", false, false, "CUDA Graphs are forbidden"},
    {"cuda.graph", false, false, "CUDA Graphs are forbidden"},
    {"cuda.graphs", false, false, "CUDA Graphs are forbidden"},
    {"cuGraphLaunch", true, false, "CUDA Graphs are forbidden"},
    {"cudaGraph", true, false, "CUDA Graphs are forbidden"},
    {"os.system", false, false, "kernels do not start processes"},
    {"os.popen", false, false, "kernels do not start processes"},
    {"os.fork", false, false, "kernels do not start processes"},
    {"os.exec", true, false, "kernels do not start processes"},
    {"os.spawn", true, false, "kernels do not start processes"},
    {"os.posix_spawn", true, false, "kernels do not start processes"},
    {"__import__", false, true, "dynamic imports hide what a kernel loads"},
    {"importlib", false, false, "dynamic imports hide what a kernel loads"},
    {"exec", false, true, "executing generated Python hides what a kernel runs"},
    {"eval", false, true, "executing generated Python hides what a kernel runs"},
    {"compile", false, true, "compiling generated Python hides what a kernel runs"},
};

static bool ident_start(int c) { return isalpha(c) || c == '_'; }
static bool ident_char(int c) { return isalnum(c) || c == '_'; }

/* Match chain "a.b.c" against the identifier chain ids[0..n) at any position. */
static bool chain_matches(char ids[][64], int n, const char *chain, bool prefix) {
    char parts[4][64];
    int np = 0;
    const char *s = chain;
    while (*s && np < 4) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        if (l >= 64) l = 63;
        memcpy(parts[np], s, l);
        parts[np][l] = '\0';
        np++;
        if (!dot) break;
        s = dot + 1;
    }
    for (int i = 0; i + np <= n; i++) {
        bool ok = true;
        for (int j = 0; j < np && ok; j++) {
            bool last = j == np - 1;
            if (last && prefix)
                ok = !strncmp(ids[i + j], parts[j], strlen(parts[j]));
            else
                ok = !strcmp(ids[i + j], parts[j]);
        }
        if (ok) return true;
    }
    return false;
}

int mkb_policy_scan_source(const char *src, size_t len, const struct mkb_dsl_env *dsl, struct mkb_finding *out,
                           int max) {
    int k = 0;
    bool seen_rule[sizeof scan_rules / sizeof *scan_rules] = {false};
    bool seen_gadget[MKB_DSL_MAX_LIST] = {false};
    int line = 1;
    size_t i = 0;
    char prev = ' '; /* last significant character before an identifier chain */
    while (i < len) {
        char c = src[i];
        if (c == '\n') {
            line++;
            i++;
            prev = ' ';
            continue;
        }
        if (c == '#') {
            while (i < len && src[i] != '\n') i++;
            continue;
        }
        /* string literal, with an optional prefix already consumed as an identifier: handled
         * below by checking for quotes here */
        if (c == '"' || c == '\'') {
            bool triple = i + 2 < len && src[i + 1] == c && src[i + 2] == c;
            size_t q = triple ? 3 : 1;
            i += q;
            while (i < len) {
                if (src[i] == '\\') {
                    i += 2;
                    continue;
                }
                if (src[i] == '\n') {
                    line++;
                    if (!triple) break;
                }
                if (src[i] == c && (!triple || (i + 2 < len && src[i + 1] == c && src[i + 2] == c))) {
                    i += q;
                    break;
                }
                i++;
            }
            prev = '"';
            continue;
        }
        if (ident_start((unsigned char)c)) {
            char ids[16][64];
            int n = 0;
            int chain_line = line;
            bool attr = prev == '.';
            for (;;) {
                size_t s = i;
                while (i < len && ident_char((unsigned char)src[i])) i++;
                size_t l = i - s;
                /* a string prefix (r"", b'', f"", rb"") is not a name */
                if (i < len && (src[i] == '"' || src[i] == '\'') && l <= 2) break;
                if (n < 16) {
                    if (l >= 64) l = 63;
                    memcpy(ids[n], src + s, l);
                    ids[n][l] = '\0';
                    n++;
                }
                size_t j = i;
                while (j < len && (src[j] == ' ' || src[j] == '\t')) j++;
                if (j < len && src[j] == '.') {
                    j++;
                    while (j < len && (src[j] == ' ' || src[j] == '\t')) j++;
                    if (j < len && ident_start((unsigned char)src[j])) {
                        i = j;
                        continue;
                    }
                }
                break;
            }
            for (size_t r = 0; r < sizeof scan_rules / sizeof *scan_rules; r++) {
                const struct scan_rule *sr = &scan_rules[r];
                if (seen_rule[r]) continue;
                if (sr->bare_only) {
                    if (attr || n < 1 || strcmp(ids[0], sr->chain)) continue;
                } else if (!chain_matches(ids, n, sr->chain, sr->prefix)) {
                    continue;
                }
                seen_rule[r] = true;
                k = add_finding(out, k, max, "source-scan", "kernel.py line %d uses '%s': %s", chain_line, sr->chain,
                                sr->why);
            }
            for (int g = 0; dsl && g < MKB_DSL_MAX_LIST && dsl->gadgets[g][0]; g++) {
                if (seen_gadget[g]) continue;
                for (int t = 0; t < n; t++)
                    if (strstr(ids[t], dsl->gadgets[g][0]) == ids[t]) {
                        seen_gadget[g] = true;
                        k = add_finding(out, k, max, "source-scan", "kernel.py line %d uses '%s': %s", chain_line,
                                        dsl->gadgets[g][0], dsl->gadgets[g][1]);
                        break;
                    }
            }
            prev = 'a';
            continue;
        }
        if (c != ' ' && c != '\t' && c != '\r') prev = c;
        i++;
    }
    return k;
}
