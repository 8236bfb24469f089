/* The grading loop of the child (DESIGN §6), for the candidate and for the eager baseline.
 *
 * Candidate, per draw: draw the inputs on the GPU from the draw's seed (grader kernels, outside any
 * window); hand them to solve() as torch tensors through DLPack; device-synchronise, record the
 * start event, call solve() once, device-synchronise, record the end event (the paper's timing,
 * here with CUPTI tracing the window); then, outside the timed region, draw the same inputs again
 * at fresh addresses, run the reference as written (expected) and promoted to fp64 (anchor), check
 * that solve() left its inputs untouched and returned no alias of them, apply the correctness rule
 * (grade/rule.h) to every output, and poison the returned memory (all bits set: NaN for every
 * float format) so a later call that returns it unwritten fails. 5 correctness draws (k/5 counted
 * like the paper), then, only if all passed and no rule was broken, 10 warm-up draws and 50 timed
 * draws, every one of them re-verified.
 *
 * Baseline: the same seeds, the reference program as written on the CUDA backend, timed the same
 * way, in a process that never starts Python.
 *
 * A Python exception, a GPU fault or a broken rule ends in a verdict; only what the grader itself
 * cannot do (no GPU, no CUPTI, torch or the DSL missing) is a harness error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MKB_CHILD_NO_PYTHON_TYPES
#include "backend/cuda/gpu.h"
#include "grade/child/child.h"
#include "grade/rule.h"
#include "grade/verdict.h"
#include "tensor/backend.h"

static struct mkb_backend *be;
static json_t *env_json;

struct draw_result {
    bool pass;
    double ms;
    json_t *mismatch; /* the first failed check of this draw, or NULL */
    json_t *error;    /* solve() raised or the GPU faulted: ends the grade */
    struct mkb_call_account acc;
    double host_ms;       /* the host's time inside solve() (the event-timed window less the sync) */
    int64_t audit_events; /* audited Python events raised inside solve() */
};

/* ---- reporting ---- */

static json_t *harness_error(const char *stage, const char *message) {
    return json_pack("{s:s, s:s, s:s}", "kind", "harness", "stage", stage, "message", message);
}

static int send_result(json_t *res, json_t *error, bool harness) {
    json_object_set_new(res, "kind", json_string("result"));
    json_object_set_new(res, "role", json_string(mkb_child.role));
    json_object_set_new(res, "stage", json_string(mkb_child.stage ? mkb_child.stage : "start"));
    if (error) {
        if (!json_object_get(error, "stage"))
            json_object_set_new(error, "stage", json_string(mkb_child.stage ? mkb_child.stage : "start"));
        if (!json_object_get(error, "draw")) json_object_set_new(error, "draw", json_integer(mkb_child.draw));
        json_object_set_new(res, "error", error);
    } else {
        json_object_set_new(res, "error", json_null());
    }
    json_object_set_new(res, "harness_error", json_boolean(harness));
    json_object_set(res, "findings", mkb_child.findings);
    if (env_json) json_object_set(res, "environment", env_json);
    mkb_child_send(res);
    json_decref(res);
    return harness ? 3 : 0;
}

static json_t *mismatch_json(const char *phase, int draw, const char *output, const char *kind,
                             const struct mkb_rule_result *rr, const char *message) {
    json_t *m = json_pack("{s:s, s:i, s:s, s:s, s:s}", "phase", phase, "draw", draw, "output", output ? output : "",
                          "kind", kind, "message", message);
    if (rr && rr->numel > 0) {
        json_object_set_new(m, "max_err", isfinite(rr->max_err) ? json_real(rr->max_err) : json_null());
        json_object_set_new(m, "allowance", json_real(rr->allowance));
        json_object_set_new(m, "ref_err", json_real(rr->ref_err));
        json_object_set_new(m, "n_over", json_integer(rr->n_over));
        json_object_set_new(m, "n_nonfinite", json_integer(rr->n_nonfinite));
        json_object_set_new(m, "numel", json_integer(rr->numel));
    }
    return m;
}

/* ---- one draw ---- */

static bool overlaps(const void *a, int64_t an, const void *b, int64_t bn) {
    const char *x = a, *y = b;
    return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

static struct mkb_tensor *foreign_view(struct mkb_ctx *c, const struct mkb_py_out *o, const char *name) {
    struct mkb_buffer *b = mkb_arena_alloc(&c->arena, sizeof *b);
    struct mkb_tensor *t = mkb_arena_alloc(&c->arena, sizeof *t);
    if (!b || !t) return NULL;
    b->data = o->data;
    b->nbytes = o->span_bytes;
    t->dtype = o->dtype;
    t->ndim = o->ndim;
    for (int i = 0; i < o->ndim; i++) {
        t->shape[i] = o->shape[i];
        t->stride[i] = o->stride[i];
    }
    t->offset = 0;
    t->buf = b;
    t->name = name;
    return t;
}

static enum mkb_status inputs_equal(struct mkb_ctx *c, const struct mkb_tensor *a, const struct mkb_tensor *b,
                                    bool *equal) {
    int64_t n = mkb_tensor_nbytes(a);
    void *x = malloc((size_t)(n ? n : 1)), *y = malloc((size_t)(n ? n : 1));
    if (!x || !y) {
        free(x);
        free(y);
        return mkb_error(MKB_ERR_NOMEM, "out of memory comparing inputs");
    }
    enum mkb_status s = mkb_tensor_read_raw(c, a, x);
    if (s == MKB_OK) s = mkb_tensor_read_raw(c, b, y);
    *equal = s == MKB_OK && memcmp(x, y, (size_t)n) == 0;
    free(x);
    free(y);
    return s;
}

/* ---- re-verification on the GPU ----
 * The rule (grade/rule.h) needs three numbers per floating output: max|expected - anchor|,
 * max|anchor| and max|actual - anchor|, plus whether actual is all finite. Maxima of absolute
 * differences formed in fp64 are exact and order-free, so computing them on the GPU with the op
 * library gives the numbers the host check would compute. When they show a pass, the draw passes;
 * in every other case (a failure, a non-finite value, an integer output) the host check
 * (mkb_rule_check_tensor) runs and decides, with its full message. So the GPU only ever shortens
 * the work for outputs the rule passes. */

static struct mkb_tensor *flat_f64(struct mkb_ctx *c, const struct mkb_tensor *t) {
    struct mkb_tensor *f = mkb_reshape(c, t, 1, (const int64_t[]){mkb_tensor_numel(t)});
    return t->dtype == MKB_DTYPE_F64 ? f : mkb_cast(c, f, MKB_DTYPE_F64);
}

static double scalar_of(struct mkb_ctx *c, const struct mkb_tensor *t) {
    double v = NAN;
    if (t && mkb_tensor_read_f64(c, t, &v) != MKB_OK) return NAN;
    return v;
}

/* True when the rule certainly passes actual; false means "ask the host check". */
static bool gpu_rule_passes(struct mkb_ctx *c, const struct mkb_tensor *actual, const struct mkb_tensor *expected,
                            const struct mkb_tensor *anchor) {
    if (!mkb_dtype_is_float(expected->dtype) || mkb_tensor_numel(expected) == 0) return false;
    struct mkb_tensor *a = flat_f64(c, actual), *e = flat_f64(c, expected), *n = flat_f64(c, anchor);
    double ref_err = scalar_of(c, mkb_amax(c, mkb_abs(c, mkb_sub(c, e, n)), 0, false));
    double max_abs = scalar_of(c, mkb_amax(c, mkb_abs(c, n), 0, false));
    double max_err = scalar_of(c, mkb_amax(c, mkb_abs(c, mkb_sub(c, a, n)), 0, false));
    double nonfinite = scalar_of(c, mkb_sum(c, mkb_mul_s(c, a, 0.0), 0, false)); /* NaN iff any Inf/NaN */
    if (mkb_ctx_status(c) != MKB_OK) {
        mkb_error_clear();
        c->status = MKB_OK;
        return false;
    }
    if (!isfinite(ref_err) || !isfinite(max_abs) || !isfinite(max_err) || !isfinite(nonfinite)) return false;
    return max_err <= mkb_rule_allowance(expected->dtype, ref_err, max_abs);
}

/* Bit-for-bit unchanged for integers, value-for-value for floats (drawn inputs hold no NaN). */
static bool gpu_inputs_equal(struct mkb_ctx *c, const struct mkb_tensor *x, const struct mkb_tensor *y) {
    struct mkb_tensor *a = mkb_reshape(c, x, 1, (const int64_t[]){mkb_tensor_numel(x)});
    struct mkb_tensor *b = mkb_reshape(c, y, 1, (const int64_t[]){mkb_tensor_numel(y)});
    if (mkb_dtype_is_float(x->dtype)) {
        a = mkb_cast(c, a, MKB_DTYPE_F64);
        b = mkb_cast(c, b, MKB_DTYPE_F64);
    } else {
        a = mkb_cast(c, a, MKB_DTYPE_I64);
        b = mkb_cast(c, b, MKB_DTYPE_I64);
    }
    double d = scalar_of(c, mkb_amax(c, mkb_abs(c, mkb_sub(c, a, b)), 0, false));
    if (mkb_ctx_status(c) != MKB_OK) {
        mkb_error_clear();
        c->status = MKB_OK;
        return false;
    }
    return d == 0.0;
}

static void account_findings(const struct mkb_call_account *acc) {
    struct mkb_finding f[8];
    int n = mkb_policy_judge_call(acc, mkb_child.dsl_title, f, 8);
    for (int i = 0; i < n; i++) mkb_child_finding(f[i].rule, f[i].message);
}

static enum mkb_status one_draw(uint64_t seed, const char *phase, int index, bool verify, struct draw_result *r,
                                double *verify_s) {
    memset(r, 0, sizeof *r);
    const struct mkb_problem *p = mkb_child.problem;
    struct mkb_dims d;
    mkb_dims_init(&d, p, mkb_child.scale);
    int nin = mkb_problem_ninputs(p), nout = mkb_problem_noutputs(p);
    struct mkb_ctx cin, cref;
    mkb_ctx_init(&cin, be, MKB_PREC_COMPUTE, seed);
    mkb_ctx_init(&cref, be, MKB_PREC_COMPUTE, seed);
    struct mkb_args in, inref, prom;
    struct mkb_py_out outs[MKB_MAX_ARGS];
    int got = 0;
    memset(outs, 0, sizeof outs);
    PyObject *args = NULL, *res = NULL;
    enum mkb_status s;

    mkb_trace_set_grader(true);
    s = mkb_problem_generate(&cin, p, &d, &in);
    if (s == MKB_OK) s = be->sync(be);
    if (s != MKB_OK) goto done;
    args = PyTuple_New(nin);
    for (int i = 0; i < nin; i++) {
        PyObject *x;
        if (p->inputs[i].kind == MKB_ARG_TENSOR) {
            char err[256];
            x = mkb_py_wrap_tensor(in.t[i], err, sizeof err);
            if (!x) {
                s = mkb_error(MKB_ERR_UNSUPPORTED, "input '%s': %s", p->inputs[i].name, err);
                goto done;
            }
        } else {
            x = mkb_py_scalar(p->inputs[i].kind, in.s[i]);
        }
        PyTuple_SET_ITEM(args, i, x);
    }

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaDeviceSynchronize();
    cudaEventRecord(e0, cudaStreamLegacy);
    mkb_trace_window_begin();
    int64_t ev0 = mkb_py_audit_count();
    mkb_py_audit_window(true);
    double th = mkb_child_now();
    res = mkb_py_call_solve(args, &r->error);
    r->host_ms = (mkb_child_now() - th) * 1e3;
    mkb_py_audit_window(false);
    r->audit_events = mkb_py_audit_count() - ev0;
    cudaError_t ce = cudaDeviceSynchronize();
    cudaEventRecord(e1, cudaStreamLegacy);
    cudaEventSynchronize(e1);
    mkb_trace_window_end(&r->acc);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    r->ms = ms;
    if (ce != cudaSuccess) {
        json_decref(r->error);
        r->error = json_pack("{s:s, s:s}", "kind", "gpu-fault", "message", cudaGetErrorString(ce));
        goto done;
    }
    if (r->error) goto done;
    if (!mkb_child.no_trace) account_findings(&r->acc);
    if (!verify) goto done;

    double tv = mkb_child_now();
    char msg[512];
    got = mkb_py_unpack(res, outs, MKB_MAX_ARGS, msg, sizeof msg);
    struct mkb_rule_result rr;
    if (got < 0) {
        r->mismatch = mismatch_json(phase, index, NULL, "structure", NULL, msg);
        got = 0;
        goto verified;
    }
    if (got > MKB_MAX_ARGS) got = 0; /* nothing was unpacked */
    s = mkb_rule_check_count(nout, got, &rr);
    if (s != MKB_OK) goto done;
    if (!rr.pass) {
        r->mismatch = mismatch_json(phase, index, NULL, "structure", &rr, rr.message);
        goto verified;
    }
    /* the reference, on inputs drawn again at fresh addresses */
    s = mkb_problem_generate(&cref, p, &d, &inref);
    struct mkb_tensor *exp[MKB_MAX_ARGS] = {0}, *anc[MKB_MAX_ARGS] = {0};
    if (s == MKB_OK) s = mkb_problem_run(&cref, p, &d, &inref, exp);
    if (s == MKB_OK) s = mkb_args_promote(&cref, &inref, &prom);
    if (s == MKB_OK) {
        cref.precision = MKB_PREC_FP64;
        s = mkb_problem_run(&cref, p, &d, &prom, anc);
        cref.precision = MKB_PREC_COMPUTE;
    }
    if (s != MKB_OK) goto done;
    /* inputs: untouched unless the problem says an output overwrites them */
    for (int i = 0; i < nin; i++) {
        if (p->inputs[i].kind != MKB_ARG_TENSOR) continue;
        bool inplace = false;
        for (int k = 0; k < nout; k++)
            if (p->outputs[k].inplace_of == i) inplace = true;
        if (inplace) continue;
        bool eq = mkb_tensor_numel(in.t[i]) == 0 || gpu_inputs_equal(&cref, in.t[i], inref.t[i]);
        if (!eq) {
            s = inputs_equal(&cref, in.t[i], inref.t[i], &eq);
            if (s != MKB_OK) goto done;
        }
        if (!eq) {
            char m[256];
            snprintf(m, sizeof m, "solve() changed its input '%s'; inputs are read-only", p->inputs[i].name);
            mkb_child_finding("input-mutated", m);
            if (!r->mismatch) r->mismatch = mismatch_json(phase, index, p->inputs[i].name, "input-mutated", NULL, m);
        }
    }
    bool all = true;
    for (int k = 0; k < nout; k++) {
        const char *name = p->outputs[k].name;
        struct mkb_tensor *actual;
        if (p->outputs[k].inplace_of >= 0) {
            actual = in.t[p->outputs[k].inplace_of];
        } else {
            if (!outs[k].cuda) {
                snprintf(msg, sizeof msg, "output '%s' is not on the GPU", name);
                all = false;
                if (!r->mismatch) r->mismatch = mismatch_json(phase, index, name, "structure", NULL, msg);
                continue;
            }
            s = mkb_rule_check_structure(name, exp[k]->dtype, exp[k]->ndim, exp[k]->shape,
                                         outs[k].known_dtype ? outs[k].dtype : MKB_DTYPE_COUNT, outs[k].ndim,
                                         outs[k].shape, &rr);
            if (s != MKB_OK) goto done;
            if (!rr.pass) {
                all = false;
                if (!r->mismatch) r->mismatch = mismatch_json(phase, index, name, "structure", &rr, rr.message);
                continue;
            }
            for (int i = 0; i < nin; i++)
                if (in.t[i] && in.t[i]->buf &&
                    overlaps(outs[k].data, outs[k].span_bytes, in.t[i]->buf->data, in.t[i]->buf->nbytes)) {
                    snprintf(msg, sizeof msg, "output '%s' shares memory with the input '%s'", name,
                             p->inputs[i].name);
                    mkb_child_finding("output-aliases-input", msg);
                    all = false;
                    if (!r->mismatch) r->mismatch = mismatch_json(phase, index, name, "alias", NULL, msg);
                }
            actual = foreign_view(&cref, &outs[k], name);
            if (!actual) {
                s = mkb_error(MKB_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
        if (gpu_rule_passes(&cref, actual, exp[k], anc[k])) continue;
        s = mkb_rule_check_tensor(&cref, name, actual, exp[k], anc[k], &rr);
        if (s != MKB_OK) goto done;
        if (!rr.pass) {
            all = false;
            if (!r->mismatch) r->mismatch = mismatch_json(phase, index, name, "value", &rr, rr.message);
        }
    }
    r->pass = all && !r->mismatch;
verified:
    /* poison what was returned: a later call that hands it back unwritten fails */
    for (int k = 0; k < got; k++)
        if (outs[k].cuda && outs[k].span_bytes > 0) cudaMemset(outs[k].data, 0xFF, (size_t)outs[k].span_bytes);
    cudaDeviceSynchronize();
    *verify_s += mkb_child_now() - tv;
done:
    for (int k = 0; k < got && k < MKB_MAX_ARGS; k++) mkb_py_out_release(&outs[k]);
    Py_XDECREF(res);
    Py_XDECREF(args);
    mkb_ctx_release(&cref);
    mkb_ctx_release(&cin);
    mkb_trace_set_grader(true);
    return s;
}

/* ---- the candidate ---- */

static json_t *doubles(const double *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

static void add_account(json_t *calls, const char *phase, int draw, const struct draw_result *r) {
    const struct mkb_call_account *a = &r->acc;
    json_array_append_new(calls, json_pack("{s:s, s:i, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:f, s:I}", "phase", phase,
                                           "draw", draw,
                                           "dsl_kernels", (json_int_t)a->kernels[MKB_ORIGIN_DSL], "library_kernels",
                                           (json_int_t)a->kernels[MKB_ORIGIN_LIBRARY], "foreign_kernels",
                                           (json_int_t)a->kernels[MKB_ORIGIN_FOREIGN], "dsl_kernel_ms",
                                           a->kernel_ms[MKB_ORIGIN_DSL], "other_kernel_ms",
                                           a->kernel_ms[MKB_ORIGIN_LIBRARY] + a->kernel_ms[MKB_ORIGIN_FOREIGN],
                                           "graph_launches", (json_int_t)a->graph_launches, "outside",
                                           (json_int_t)a->outside, "host_ms", r->host_ms, "audit_events",
                                           (json_int_t)r->audit_events));
}

static json_t *account_summary(json_t *calls) {
    int n = (int)json_array_size(calls);
    double *dk = calloc((size_t)(n ? n : 1), sizeof *dk), *ok = calloc((size_t)(n ? n : 1), sizeof *ok);
    double *hm = calloc((size_t)(n ? n : 1), sizeof *hm), *ae = calloc((size_t)(n ? n : 1), sizeof *ae);
    double dms = 0, oms = 0;
    for (int i = 0; i < n; i++) {
        json_t *c = json_array_get(calls, (size_t)i);
        hm[i] = json_real_value(json_object_get(c, "host_ms"));
        ae[i] = (double)json_integer_value(json_object_get(c, "audit_events"));
        dk[i] = (double)json_integer_value(json_object_get(c, "dsl_kernels"));
        ok[i] = (double)(json_integer_value(json_object_get(c, "library_kernels")) +
                         json_integer_value(json_object_get(c, "foreign_kernels")));
        dms += json_real_value(json_object_get(c, "dsl_kernel_ms"));
        oms += json_real_value(json_object_get(c, "other_kernel_ms"));
    }
    /* calls stays the caller's (O: a new reference): the summary is rebuilt after every draw and
     * replaces the last one, whose release must not free the list still being filled */
    json_t *j = json_pack("{s:f, s:f, s:o, s:f, s:f, s:o, s:O}", "dsl_kernels_median", n ? mkb_median(dk, n) : 0.0,
                          "other_kernels_median", n ? mkb_median(ok, n) : 0.0, "dsl_time_fraction",
                          dms + oms > 0 ? json_real(dms / (dms + oms)) : json_null(), "host_ms_median",
                          n ? mkb_median(hm, n) : 0.0, "audit_events_median", n ? mkb_median(ae, n) : 0.0,
                          "audit_events", mkb_py_audit_histogram(), "calls", calls);
    free(dk);
    free(ok);
    free(hm);
    free(ae);
    return j;
}

int mkb_child_run_candidate(void) {
    json_t *res = json_object();
    json_object_set_new(res, "imported", json_false());
    json_object_set_new(res, "correct_draws", json_integer(0));
    json_object_set_new(res, "timing_verified", json_integer(0));
    env_json = json_object();
    bool full = !strcmp(mkb_child.mode, "full");
    double w[16] = {0};
    double t = mkb_child_now();
    mkb_child_stage("start", 0);
    if (full && !mkb_child.no_trace && mkb_trace_start() != MKB_OK)
        return send_result(res, harness_error("start", mkb_trace_problem()), true);
    if (mkb_py_start() != MKB_OK) return send_result(res, harness_error("start", mkb_error_message()), true);
    w[0] = mkb_child_now() - t;
    t = mkb_child_now();
    mkb_child_stage("preload", 0);
    if (mkb_py_preload(env_json) != MKB_OK) return send_result(res, harness_error("preload", mkb_error_message()), true);
    if (full) {
        mkb_trace_set_grader(true);
        be = mkb_backend_cuda();
        mkb_trace_set_grader(false);
        if (!be) return send_result(res, harness_error("preload", mkb_error_message()), true);
        struct mkb_gpu_info gi;
        if (mkb_gpu_info_get(&gi) == MKB_OK) json_object_set_new(env_json, "gpu", json_string(gi.name));
    }
    w[1] = mkb_child_now() - t;
    t = mkb_child_now();
    mkb_py_enter_candidate_phase();
    mkb_child_stage("import", 0);
    json_t *err = NULL;
    if (mkb_py_import_kernel(&err) != MKB_OK) return send_result(res, harness_error("import", mkb_error_message()), true);
    w[2] = mkb_child_now() - t;
    json_t *wall = json_pack("{s:f, s:f, s:f}", "interpreter", w[0], "preload", w[1], "import", w[2]);
    json_object_set_new(res, "wall_s", wall);
    if (err) return send_result(res, err, false);
    json_object_set_new(res, "imported", json_true());
    if (!full) return send_result(res, NULL, false);

    json_t *calls = json_array();
    json_object_set_new(res, "accounting", account_summary(calls));
    json_decref(calls); /* the summary in res holds it now, and each new summary takes its own reference */
    double verify_s = 0;
    int correct = 0;
    json_t *mismatch = NULL;
    struct draw_result r;
    t = mkb_child_now();
    for (int i = 0; i < MKB_GRADE_CORRECTNESS_DRAWS; i++) {
        double t1 = mkb_child_now();
        mkb_child_stage("correctness", i);
        if (one_draw(mkb_child.seeds.correctness[i], "correctness", i, true, &r, &verify_s) != MKB_OK)
            return send_result(res, harness_error("correctness", mkb_error_message()), true);
        if (i == 0) json_object_set_new(wall, "first_call", json_real(mkb_child_now() - t1));
        add_account(calls, "correctness", i, &r);
        if (r.error) {
            json_object_set_new(res, "accounting", account_summary(calls));
            if (mismatch) json_object_set_new(res, "mismatch", mismatch);
            return send_result(res, r.error, false);
        }
        if (r.pass) correct++;
        if (r.mismatch && !mismatch) mismatch = r.mismatch;
        else json_decref(r.mismatch);
    }
    json_object_set_new(wall, "correctness", json_real(mkb_child_now() - t));
    json_object_set_new(res, "correct_draws", json_integer(correct));
    json_object_set_new(res, "accounting", account_summary(calls));
    if (correct < MKB_GRADE_CORRECTNESS_DRAWS || json_array_size(mkb_child.findings) > 0) {
        if (mismatch) json_object_set_new(res, "mismatch", mismatch);
        return send_result(res, NULL, false);
    }

    double warm[MKB_GRADE_WARMUP_DRAWS], timing[MKB_GRADE_TIMING_DRAWS];
    t = mkb_child_now();
    for (int i = 0; i < MKB_GRADE_WARMUP_DRAWS; i++) {
        mkb_child_stage("warmup", i);
        if (one_draw(mkb_child.seeds.warmup[i], "warmup", i, false, &r, &verify_s) != MKB_OK)
            return send_result(res, harness_error("warmup", mkb_error_message()), true);
        add_account(calls, "warmup", i, &r);
        warm[i] = r.ms;
        if (r.error) {
            json_object_set_new(res, "accounting", account_summary(calls));
            return send_result(res, r.error, false);
        }
    }
    json_object_set_new(wall, "warmup", json_real(mkb_child_now() - t));
    json_object_set_new(res, "warmup_ms_samples", doubles(warm, MKB_GRADE_WARMUP_DRAWS));
    int verified = 0;
    double vs0 = verify_s;
    t = mkb_child_now();
    for (int i = 0; i < MKB_GRADE_TIMING_DRAWS; i++) {
        mkb_child_stage("timing", i);
        if (one_draw(mkb_child.seeds.timing[i], "timing", i, true, &r, &verify_s) != MKB_OK)
            return send_result(res, harness_error("timing", mkb_error_message()), true);
        add_account(calls, "timing", i, &r);
        timing[i] = r.ms;
        if (r.error) {
            json_object_set_new(res, "accounting", account_summary(calls));
            return send_result(res, r.error, false);
        }
        if (r.pass) verified++;
        if (r.mismatch && !mismatch) mismatch = r.mismatch;
        else json_decref(r.mismatch);
    }
    json_object_set_new(wall, "timing", json_real(mkb_child_now() - t - (verify_s - vs0)));
    json_object_set_new(wall, "verify", json_real(verify_s));
    json_object_set_new(res, "kernel_ms_samples", doubles(timing, MKB_GRADE_TIMING_DRAWS));
    json_object_set_new(res, "timing_verified", json_integer(verified));
    json_object_set_new(res, "accounting", account_summary(calls));
    if (mismatch) json_object_set_new(res, "mismatch", mismatch);
    mkb_child_stage("done", 0);
    return send_result(res, NULL, false);
}

/* ---- the eager baseline ---- */

static enum mkb_status eager_once(uint64_t seed, double *ms, int64_t *kernels) {
    const struct mkb_problem *p = mkb_child.problem;
    struct mkb_dims d;
    mkb_dims_init(&d, p, mkb_child.scale);
    struct mkb_ctx c;
    mkb_ctx_init(&c, be, MKB_PREC_COMPUTE, seed);
    struct mkb_args in;
    struct mkb_tensor *out[MKB_MAX_ARGS];
    enum mkb_status s = mkb_problem_generate(&c, p, &d, &in);
    if (s == MKB_OK) s = be->sync(be);
    if (s == MKB_OK) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cudaDeviceSynchronize();
        cudaEventRecord(e0, cudaStreamLegacy);
        mkb_trace_window_begin();
        mkb_trace_set_grader(true);
        s = mkb_problem_run(&c, p, &d, &in, out);
        cudaError_t ce = cudaDeviceSynchronize();
        cudaEventRecord(e1, cudaStreamLegacy);
        cudaEventSynchronize(e1);
        struct mkb_call_account acc;
        mkb_trace_window_end(&acc);
        *kernels = acc.all_kernels;
        float f = 0;
        cudaEventElapsedTime(&f, e0, e1);
        *ms = f;
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        if (s == MKB_OK && ce != cudaSuccess)
            s = mkb_error(MKB_ERR_IO, "the eager reference faulted on the GPU: %s", cudaGetErrorString(ce));
    }
    mkb_ctx_release(&c);
    return s;
}

static json_t *sol_json(double *sol_ms) {
    *sol_ms = NAN;
    struct mkb_cost cost;
    if (mkb_problem_cost(mkb_child.problem, mkb_child.scale, &cost) != MKB_OK) return json_null();
    struct mkb_gpu_calibration cal;
    bool cached;
    if (mkb_gpu_calibration_get(false, &cal, &cached) != MKB_OK) return json_null();
    /* the narrowest floating input sets the arithmetic rate */
    enum mkb_dtype dt = MKB_DTYPE_F64;
    for (const struct mkb_input_spec *is = mkb_child.problem->inputs; is->name; is++)
        if (is->kind == MKB_ARG_TENSOR && mkb_dtype_is_float(is->dtype) && mkb_dtype_bits(is->dtype) < mkb_dtype_bits(dt))
            dt = is->dtype;
    double tflops = dt == MKB_DTYPE_F64 ? cal.gemm_tflops_f64 : dt == MKB_DTYPE_F32 ? cal.gemm_tflops_f32
                  : dt == MKB_DTYPE_F16 ? cal.gemm_tflops_f16 : cal.gemm_tflops_bf16;
    double t_math = tflops > 0 ? cost.flops / (tflops * 1e12) * 1e3 : 0;
    double t_mem = cal.copy_gbps > 0 ? cost.min_bytes / (cal.copy_gbps * 1e9) * 1e3 : 0;
    *sol_ms = t_math > t_mem ? t_math : t_mem;
    return json_pack("{s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:b}", "flops", cost.flops, "min_bytes", cost.min_bytes,
                     "rate_dtype", mkb_dtype_name(dt), "tflops", tflops, "copy_gbps", cal.copy_gbps, "math_ms",
                     t_math, "memory_ms", t_mem, "calibration_cached", cached);
}

int mkb_child_run_baseline(void) {
    json_t *res = json_object();
    mkb_child_stage("baseline", 0);
    if (mkb_trace_start() != MKB_OK) json_object_set_new(res, "trace", json_string(mkb_trace_problem()));
    mkb_trace_set_grader(true);
    be = mkb_backend_cuda();
    if (!be) return send_result(res, harness_error("baseline", mkb_error_message()), true);
    double warm[MKB_GRADE_WARMUP_DRAWS], timing[MKB_GRADE_TIMING_DRAWS], kern[MKB_GRADE_TIMING_DRAWS];
    for (int i = 0; i < MKB_GRADE_WARMUP_DRAWS; i++) {
        int64_t k;
        mkb_child.draw = i;
        if (eager_once(mkb_child.seeds.warmup[i], &warm[i], &k) != MKB_OK)
            return send_result(res, harness_error("baseline", mkb_error_message()), true);
    }
    for (int i = 0; i < MKB_GRADE_TIMING_DRAWS; i++) {
        int64_t k;
        mkb_child.draw = i;
        if (eager_once(mkb_child.seeds.timing[i], &timing[i], &k) != MKB_OK)
            return send_result(res, harness_error("baseline", mkb_error_message()), true);
        kern[i] = (double)k;
    }
    json_object_set_new(res, "warmup_ms_samples", doubles(warm, MKB_GRADE_WARMUP_DRAWS));
    json_object_set_new(res, "eager_ms_samples", doubles(timing, MKB_GRADE_TIMING_DRAWS));
    json_object_set_new(res, "accounting",
                        json_pack("{s:f, s:b}", "kernels_per_call_median", mkb_median(kern, MKB_GRADE_TIMING_DRAWS),
                                  "traced", mkb_trace_available()));
    double sol_ms;
    json_object_set_new(res, "sol", sol_json(&sol_ms));
    json_object_set_new(res, "sol_ms", isfinite(sol_ms) ? json_real(sol_ms) : json_null());
    mkb_child_stage("done", 0);
    return send_result(res, NULL, false);
}
