/* The correctness rule: does one output of a candidate match the reference closely enough?
 *
 * The rule (docs/correctness.md explains it with a worked example):
 *   1. Structure first: the count of outputs, and each output's rank, shape and dtype, must match
 *      the expected output exactly.
 *   2. Integer and bool outputs must equal the expected output element for element.
 *   3. Floating outputs are compared with the anchor (the reference program promoted to fp64):
 *        ref_err   = max |expected - anchor|   (expected: the reference as written, in the
 *                                               program's compute precision)
 *        allowance = 3 x max(ref_err, eps(dtype) x max |anchor|)
 *        pass iff every element of actual is finite and max |actual - anchor| <= allowance.
 *      eps(dtype) is mkb_dtype_eps() of the expected output's dtype. When the anchor is all zeros
 *      and the reference is exact, the allowance is 0 and only an exact match passes.
 *   4. An output with no elements passes once its structure matches.
 *
 * A check reports through struct mkb_rule_result: pass/fail, the numbers behind the decision,
 * how many elements are over, where the worst and the first offending elements are, and a
 * one-line message for a human or an agent. The returned status is for harness failures only
 * (a non-finite expected or anchor value, inconsistent arguments, a tensor without data, no
 * memory); a candidate that fails the rule is r->pass == false with MKB_OK.
 *
 * Ownership: the functions read the caller's arrays and fill the caller's result; nothing is
 * kept. mkb_rule_check_tensor() allocates host copies for the duration of the call only.
 *
 * This module does not draw inputs, run references or candidates, poison outputs, or decide
 * how many draws a grade takes; it judges one output of one draw. */
#ifndef MKB_GRADE_RULE_H
#define MKB_GRADE_RULE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

/* The factor on the larger of the reference error and the eps floor. */
#define MKB_RULE_FACTOR 3.0

#define MKB_RULE_MSG_MAX 1024

struct mkb_rule_result {
    bool pass;
    int64_t numel;         /* elements compared (0 after a structure check) */
    /* Floating outputs: the numbers behind the decision. Integer outputs: max_err is the
     * largest |actual - expected| and the other three are 0. */
    double max_err;        /* max |actual - anchor|; +Inf when any actual value is non-finite */
    double ref_err;        /* max |expected - anchor| */
    double max_abs_anchor; /* max |anchor| */
    double allowance;      /* 3 x max(ref_err, eps x max_abs_anchor) */
    int64_t n_over;        /* elements whose error exceeds the allowance (non-finite included) */
    int64_t n_nonfinite;   /* NaN or +-Inf elements in actual */
    /* Flat row-major indices, -1 when there is none. worst: the element with the largest error
     * (the first non-finite one when there is any); first: the first element over. */
    int64_t worst_index, first_index;
    double worst_actual, worst_anchor; /* for integer outputs the anchor is the expected value */
    double first_actual, first_anchor; /* 0 when first_index is -1 */
    char message[MKB_RULE_MSG_MAX];    /* one line, no trailing newline */
};

/* The allowance for a floating output of dtype dt (pure arithmetic, exported so reports and
 * tests compute it the same way). */
double mkb_rule_allowance(enum mkb_dtype dt, double ref_err, double max_abs_anchor);

/* "[2, 17]": the multi-index of row-major flat index i in a tensor of the given shape; "[]" for
 * a 0-dimensional tensor. Writes at most cap bytes (always terminated); returns buf. */
char *mkb_rule_index_str(int ndim, const int64_t *shape, int64_t i, char *buf, int cap);

/* Step 1a: the number of outputs. */
enum mkb_status mkb_rule_check_count(int64_t want, int64_t got, struct mkb_rule_result *r);

/* Step 1b: rank, shape and dtype of one output. The want_* side comes from the problem (harness
 * data, validated); the got_* side from the candidate: any rank is accepted, and got_dt may be
 * MKB_DTYPE_COUNT for a dtype mkb does not know, which never matches. */
enum mkb_status mkb_rule_check_structure(const char *name, enum mkb_dtype want_dt, int want_ndim,
                                         const int64_t *want_shape, enum mkb_dtype got_dt, int got_ndim,
                                         const int64_t *got_shape, struct mkb_rule_result *r);

/* Step 3 on host arrays of prod(shape) elements in row-major order, all widened to double.
 * dt: the output dtype (a floating type); it sets eps and appears in the message. */
enum mkb_status mkb_rule_check_float(const char *name, enum mkb_dtype dt, int ndim, const int64_t *shape,
                                     const double *actual, const double *expected, const double *anchor,
                                     struct mkb_rule_result *r);

/* Step 2 on host arrays of prod(shape) elements; dt: an integer or bool type. */
enum mkb_status mkb_rule_check_int(const char *name, enum mkb_dtype dt, int ndim, const int64_t *shape,
                                   const int64_t *actual, const int64_t *expected, struct mkb_rule_result *r);

/* Steps 1b-4 on tensors: checks actual's structure against expected, then reads all three to
 * the host and applies the integer or floating check by expected's dtype.
 *   actual:   the candidate's output, any strided view
 *   expected: the reference as written; its dtype is the output dtype and sets eps
 *   anchor:   the reference promoted to fp64, same shape as expected, any floating dtype;
 *             unused (may be NULL) for integer and bool outputs
 * c: a context whose backend can read all three tensors (mkb_tensor_read_f64/_i64).
 * name: the output's name for messages; NULL takes expected->name, else "output". */
enum mkb_status mkb_rule_check_tensor(struct mkb_ctx *c, const char *name, const struct mkb_tensor *actual,
                                      const struct mkb_tensor *expected, const struct mkb_tensor *anchor,
                                      struct mkb_rule_result *r);

#endif
