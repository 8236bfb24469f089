/* Shared helpers for the per-problem tests: run one problem at test scale on the CPU, in compute
 * precision and promoted to fp64, and read tensors back as double arrays.
 * Header-only (static functions), included by tests/unit/test_<family>_*.c. Every helper fails
 * the current Criterion test with a message instead of returning an error. */
#ifndef MKB_TESTS_PROBLEM_TESTUTIL_H
#define MKB_TESTS_PROBLEM_TESTUTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "problem/problem.h"
#include "tensor/backend.h"

/* One problem drawn at test scale, with its reference run both ways. */
struct pt_run {
    const struct mkb_problem *p;
    struct mkb_ctx c;
    struct mkb_dims d;
    struct mkb_args in;                   /* as drawn (stated dtypes) */
    struct mkb_args in64;                 /* promoted to fp64 */
    struct mkb_tensor *out[MKB_MAX_ARGS]; /* compute precision */
    struct mkb_tensor *out64[MKB_MAX_ARGS]; /* fp64 */
    int nout;
};

__attribute__((unused)) static const struct mkb_problem *pt_problem(const char *key) {
    const struct mkb_problem *p = NULL;
    enum mkb_status s = mkb_problem_find(key, &p);
    cr_assert(s == MKB_OK, "problem %s: %s", key, mkb_error_message());
    return p;
}

/* Draw the inputs of problem `key` at test scale with `seed` and run the reference in compute
 * precision and in fp64. Release with pt_release. */
__attribute__((unused)) static void pt_run_problem(struct pt_run *r, const char *key, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->p = pt_problem(key);
    mkb_ctx_init(&r->c, mkb_backend_cpu(), MKB_PREC_COMPUTE, seed);
    mkb_dims_init(&r->d, r->p, MKB_SCALE_TEST);
    cr_assert(mkb_problem_generate(&r->c, r->p, &r->d, &r->in) == MKB_OK, "generate %s: %s", key,
              mkb_error_message());
    cr_assert(mkb_problem_run(&r->c, r->p, &r->d, &r->in, r->out) == MKB_OK, "run %s: %s", key,
              mkb_error_message());
    r->c.precision = MKB_PREC_FP64;
    cr_assert(mkb_args_promote(&r->c, &r->in, &r->in64) == MKB_OK, "promote %s: %s", key, mkb_error_message());
    cr_assert(mkb_problem_run(&r->c, r->p, &r->d, &r->in64, r->out64) == MKB_OK, "run fp64 %s: %s", key,
              mkb_error_message());
    r->c.precision = MKB_PREC_COMPUTE;
    r->nout = mkb_problem_noutputs(r->p);
}

__attribute__((unused)) static void pt_release(struct pt_run *r) { mkb_ctx_release(&r->c); }

/* A malloc'ed double copy of t (row-major); the caller frees it. */
__attribute__((unused)) static double *pt_read(struct mkb_ctx *c, const struct mkb_tensor *t) {
    cr_assert(t != NULL, "tensor is NULL: %s", mkb_error_message());
    double *v = malloc(sizeof(double) * (size_t)(mkb_tensor_numel(t) ? mkb_tensor_numel(t) : 1));
    cr_assert(v != NULL);
    cr_assert(mkb_tensor_read_f64(c, t, v) == MKB_OK, "read: %s", mkb_error_message());
    return v;
}

/* max |a - b| / max(1, max |b|) over n values */
__attribute__((unused)) static double pt_max_rel(const double *a, const double *b, int64_t n) {
    double err = 0, scale = 1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= err)) err = e; /* NaN propagates as a failure */
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return err / scale;
}

/* Assert t (any dtype) equals `want` (n doubles) within rel tolerance of its scale. */
__attribute__((unused)) static void pt_assert_close(struct mkb_ctx *c, const struct mkb_tensor *t, const double *want, double tol,
                            const char *what) {
    int64_t n = mkb_tensor_numel(t);
    double *got = pt_read(c, t);
    double e = pt_max_rel(got, want, n);
    cr_assert(e <= tol, "%s: max relative error %.3g > %.3g", what, e, tol);
    free(got);
}

/* Run f(x) in fp64 for a scalar loss: used by the finite-difference tests. The caller perturbs
 * input values through pt_with_value. */
__attribute__((unused)) static struct mkb_tensor *pt_with_value(struct mkb_ctx *c, const struct mkb_tensor *t, int64_t i, double v) {
    int64_t n = mkb_tensor_numel(t);
    double *vals = pt_read(c, t);
    vals[i] = v;
    struct mkb_tensor *r = mkb_tensor_from_f64(c, t->dtype, t->ndim, t->shape, vals);
    free(vals);
    cr_assert(r != NULL && n > i);
    return r;
}

#endif
