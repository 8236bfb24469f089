/* GEMMs of the CUDA backend: matmul (batched, broadcasting, transposes) and linear (x w^T + bias),
 * through cuBLAS, and cuBLASLt for a linear layer's bias epilogue.
 *
 * Precision, as an eager framework runs them: fp64 operands with fp64 accumulation; fp32 with
 * fp32 accumulation and no TF32 (CUBLAS_COMPUTE_32F, default math mode); fp16 and bf16 with fp32
 * accumulation, one rounding of the result to the operand type, and reduced-precision split-K
 * reductions disallowed, so the only rounding of partial sums is fp32's. A bias is added in the
 * accumulator before that one rounding: cuBLASLt's BIAS epilogue for fp32/fp16/bf16, and for
 * fp64 (and any layout cuBLASLt declines) C pre-filled with the broadcast bias and beta = 1.
 *
 * Layout: cuBLAS is column-major, so the row-major C (M, N) = op(A) op(B) is computed as
 * C^T = op(B)^T op(A)^T. A strided operand is used in place when one of its two matrix strides
 * is 1 (the other becomes the leading dimension); otherwise it is first copied contiguous.
 * Batch dims are collapsed; one strided-batched call covers the innermost run of batches and a
 * host loop the rest. Shapes are trusted (the op front-end checked them). */
#include <string.h>

#include "backend/cuda/cuda_impl.h"
#include "tensor/tensor_impl.h"

/* One cuBLAS operand: the transpose X = L^T of a logical row-major (rows, cols) matrix L whose
 * element (r, c) sits at base + r * sr + c * sc. */
struct operand {
    const void *p;
    cublasOperation_t op;
    int64_t ld;
    int64_t stored_rows, stored_cols; /* of the column-major matrix cuBLAS reads */
};

static bool make_operand(const void *p, int64_t rows, int64_t cols, int64_t sr, int64_t sc, struct operand *o) {
    o->p = p;
    if (cols == 1) sc = 1;
    if (rows == 1) sr = cols > 1 ? cols : 1;
    /* X (cols, rows) column-major, X(a, b) = L(b, a) at a * sc + b * sr */
    if (sc == 1 && sr >= (cols > 1 ? cols : 1)) {
        o->op = CUBLAS_OP_N;
        o->ld = sr;
        o->stored_rows = cols;
        o->stored_cols = rows;
        return true;
    }
    if (rows == 1) sr = 1;
    if (sr == 1 && (sc >= (rows > 1 ? rows : 1) || cols == 1)) {
        o->op = CUBLAS_OP_T; /* X = S^T, S (rows, cols) column-major with ld sc */
        o->ld = cols == 1 ? (rows > 1 ? rows : 1) : sc;
        o->stored_rows = rows;
        o->stored_cols = cols;
        return true;
    }
    return false;
}

static cudaDataType_t cuda_type(enum mkb_dtype dt) {
    switch (dt) {
    case MKB_DTYPE_F64: return CUDA_R_64F;
    case MKB_DTYPE_F16: return CUDA_R_16F;
    case MKB_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static int64_t esize(enum mkb_dtype dt) { return mkb_dtype_bits(dt) / 8; }

/* The math mode and compute type of a GEMM in dtype dt. */
static enum mkb_status set_math(struct mkb_cuda_state *st, enum mkb_dtype dt, cublasComputeType_t *ct) {
    if (dt == MKB_DTYPE_F64) {
        *ct = CUBLAS_COMPUTE_64F;
        MKB_CUBLAS_CHECK(cublasSetMathMode(st->blas, CUBLAS_DEFAULT_MATH));
    } else if (dt == MKB_DTYPE_F32) {
        *ct = CUBLAS_COMPUTE_32F;
        MKB_CUBLAS_CHECK(cublasSetMathMode(st->blas, CUBLAS_DEFAULT_MATH));
    } else {
        *ct = CUBLAS_COMPUTE_32F;
        MKB_CUBLAS_CHECK(
            cublasSetMathMode(st->blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    }
    return MKB_OK;
}

/* C (batch x M x N, row-major, ldc N) = op(A) op(B) (+ beta C) for `count` batches whose
 * operands are stride_a / stride_b elements apart. */
static enum mkb_status gemm_batched(struct mkb_cuda_state *st, enum mkb_dtype dt, const struct operand *x,
                                    const struct operand *y, void *c, int64_t m, int64_t n, int64_t k, int64_t count,
                                    int64_t stride_x, int64_t stride_y, int64_t stride_c, bool beta_one) {
    cublasComputeType_t ct;
    MKB_TRY(set_math(st, dt, &ct));
    cudaDataType_t t = cuda_type(dt);
    double a64 = 1.0, b64 = beta_one ? 1.0 : 0.0;
    float a32 = 1.0f, b32 = beta_one ? 1.0f : 0.0f;
    const void *alpha = dt == MKB_DTYPE_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = dt == MKB_DTYPE_F64 ? (const void *)&b64 : (const void *)&b32;
    /* column-major: (N x M) = X (N x K) * Y (K x M) */
    if (count == 1) {
        MKB_CUBLAS_CHECK(cublasGemmEx_64(st->blas, x->op, y->op, n, m, k, alpha, x->p, t, x->ld, y->p, t, y->ld, beta,
                                         c, t, n, ct, CUBLAS_GEMM_DEFAULT));
    } else {
        MKB_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(st->blas, x->op, y->op, n, m, k, alpha, x->p, t, x->ld, stride_x,
                                                       y->p, t, y->ld, stride_y, beta, c, t, n, stride_c, count, ct,
                                                       CUBLAS_GEMM_DEFAULT));
    }
    return MKB_OK;
}

/* A view's matrix as an operand, or a contiguous copy of it in *tmp (caller frees) when its
 * strides do not allow one. rows/cols: of the logical operand (after the call's transpose). */
static enum mkb_status operand_of(struct mkb_cuda_state *st, const struct mkb_cu_view *v, bool trans, int64_t rows,
                                  int64_t cols, struct mkb_cu_view *used, void **tmp) {
    *tmp = NULL;
    *used = *v;
    int nd = v->ndim;
    int64_t sr = trans ? v->stride[nd - 1] : v->stride[nd - 2];
    int64_t sc = trans ? v->stride[nd - 2] : v->stride[nd - 1];
    struct operand probe;
    if (make_operand(v->data, rows, cols, sr, sc, &probe)) return MKB_OK;
    MKB_TRY(mkb_cuda_contiguous_tmp(st, v, used));
    *tmp = used->data;
    return MKB_OK;
}

static enum mkb_status fill_zero(struct mkb_cuda_state *st, const struct mkb_tensor *out) {
    MKB_CUDA_CHECK(mkb_cu_full(st->stream, out->buf->data, (int)out->dtype, mkb_tensor_numel(out), 0.0));
    return MKB_OK;
}

enum mkb_status mkb_cuda_matmul(struct mkb_cuda_state *st, const struct mkb_op_call *k) {
    const struct mkb_tensor *o = k->out;
    enum mkb_dtype dt = o->dtype;
    int nb = o->ndim - 2;
    int64_t m = o->shape[nb], n = o->shape[nb + 1];
    int64_t kk = k->in[0]->shape[k->in[0]->ndim - (k->trans_a ? 2 : 1)];
    if (mkb_tensor_numel(o) == 0) return MKB_OK;
    if (kk == 0) return fill_zero(st, o);
    struct mkb_cu_view va = mkb_cuda_view(k->in[0]), vb = mkb_cuda_view(k->in[1]);
    struct mkb_cu_view ua, ub;
    void *ta = NULL, *tb = NULL;
    enum mkb_status s = operand_of(st, &va, k->trans_a, m, kk, &ua, &ta);
    if (s == MKB_OK) s = operand_of(st, &vb, k->trans_b, kk, n, &ub, &tb);
    /* batch iteration: operand 0 = C, 1 = A, 2 = B over the output's batch dims */
    struct mkb_cu_view bc, ba, bbv;
    memset(&bc, 0, sizeof bc);
    memset(&ba, 0, sizeof ba);
    memset(&bbv, 0, sizeof bbv);
    bc.ndim = nb;
    ba.ndim = ua.ndim - 2;
    bbv.ndim = ub.ndim - 2;
    for (int d = 0; d < nb; d++) {
        bc.shape[d] = o->shape[d];
        bc.stride[d] = o->stride[d];
    }
    for (int d = 0; d < ba.ndim; d++) {
        ba.shape[d] = ua.shape[d];
        ba.stride[d] = ua.stride[d];
    }
    for (int d = 0; d < bbv.ndim; d++) {
        bbv.shape[d] = ub.shape[d];
        bbv.stride[d] = ub.stride[d];
    }
    const struct mkb_cu_view *pv[3] = {&bc, &ba, &bbv};
    struct mkb_cu_iter it;
    mkb_cu_iter_init(&it, nb, o->shape, 3, pv);
    mkb_cu_iter_collapse(&it);
    int64_t inner = it.ndim ? it.size[it.ndim - 1] : 1, outer = 1;
    for (int d = 0; d + 1 < it.ndim; d++) outer *= it.size[d];
    int64_t sx = it.ndim ? it.stride[2][it.ndim - 1] : 0, sy = it.ndim ? it.stride[1][it.ndim - 1] : 0;
    int64_t sc = it.ndim ? it.stride[0][it.ndim - 1] : 0;
    int64_t es = esize(dt);
    for (int64_t g = 0; s == MKB_OK && g < outer; g++) {
        /* offsets of batch group g (the dims outside the innermost) */
        int64_t rem = g, oc = 0, oa = 0, ob = 0;
        for (int d = it.ndim - 2; d >= 0; d--) {
            int64_t i = rem % it.size[d];
            rem /= it.size[d];
            oc += i * it.stride[0][d];
            oa += i * it.stride[1][d];
            ob += i * it.stride[2][d];
        }
        int nda = ua.ndim, ndb = ub.ndim;
        struct operand x, y;
        const char *pa = (const char *)ua.data + (ua.offset + oa) * es;
        const char *pb = (const char *)ub.data + (ub.offset + ob) * es;
        int64_t sar = k->trans_a ? ua.stride[nda - 1] : ua.stride[nda - 2];
        int64_t sac = k->trans_a ? ua.stride[nda - 2] : ua.stride[nda - 1];
        int64_t sbr = k->trans_b ? ub.stride[ndb - 1] : ub.stride[ndb - 2];
        int64_t sbc = k->trans_b ? ub.stride[ndb - 2] : ub.stride[ndb - 1];
        bool ok = make_operand(pb, kk, n, sbr, sbc, &x) && make_operand(pa, m, kk, sar, sac, &y);
        if (!ok) {
            s = mkb_error(MKB_ERR_INTERNAL, "matmul: an operand has no cuBLAS layout after a contiguous copy");
            break;
        }
        void *pc = (char *)o->buf->data + (o->offset + oc) * es;
        s = gemm_batched(st, dt, &x, &y, pc, m, n, kk, inner, sx, sy, sc, false);
    }
    if (ta) cudaFreeAsync(ta, st->stream);
    if (tb) cudaFreeAsync(tb, st->stream);
    return s;
}

/* ---- linear ---- */

static int64_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int64_t al = 256;
    while (al > 1 && (a % (uintptr_t)al) != 0) al /= 2;
    return al;
}

/* D (rows, N) = x w^T + bias through cuBLASLt's bias epilogue. *declined when cuBLASLt offers
 * no algorithm for this layout (the caller then takes the beta = 1 path). */
static enum mkb_status lt_bias(struct mkb_cuda_state *st, enum mkb_dtype dt, const struct operand *x,
                               const struct operand *y, const void *bias, void *d, int64_t rows, int64_t n,
                               bool *declined) {
    *declined = false;
    cudaDataType_t t = cuda_type(dt);
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    enum mkb_status s = MKB_OK;
    cublasStatus_t e = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &x->op, sizeof x->op);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &y->op, sizeof y->op);
    if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatrixLayoutCreate(&la, t, (uint64_t)x->stored_rows, (uint64_t)x->stored_cols, x->ld);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatrixLayoutCreate(&lb, t, (uint64_t)y->stored_rows, (uint64_t)y->stored_cols, y->ld);
    if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatrixLayoutCreate(&lc, t, (uint64_t)n, (uint64_t)rows, n);
    if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = st->workspace_bytes;
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    uint32_t al_a = (uint32_t)align_of(x->p), al_b = (uint32_t)align_of(y->p), al_c = (uint32_t)align_of(d);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    if (e == CUBLAS_STATUS_SUCCESS && dt != MKB_DTYPE_F32) {
        uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE; /* split-K partials stay fp32 */
        e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
                                                 sizeof scheme);
    }
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatmulAlgoGetHeuristic(st->lt, desc, la, lb, lc, lc, pref, 1, &h, &found);
    if (e == CUBLAS_STATUS_SUCCESS && found == 0) e = CUBLAS_STATUS_NOT_SUPPORTED;
    if (e == CUBLAS_STATUS_NOT_SUPPORTED) {
        *declined = true;
    } else if (e == CUBLAS_STATUS_SUCCESS) {
        float alpha = 1.0f, beta = 0.0f;
        e = cublasLtMatmul(st->lt, desc, &alpha, x->p, la, y->p, lb, &beta, d, lc, d, lc, &h.algo, st->workspace,
                           st->workspace_bytes, st->stream);
        if (e != CUBLAS_STATUS_SUCCESS) s = mkb_cublas_fail(e, "cublasLtMatmul", __FILE__, __LINE__);
    } else {
        s = mkb_cublas_fail(e, "setting up a cuBLASLt bias epilogue", __FILE__, __LINE__);
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
    return s;
}

/* C (rows, N) = broadcast bias (N). */
static enum mkb_status fill_bias(struct mkb_cuda_state *st, const struct mkb_tensor *out, int64_t rows, int64_t n,
                                 const struct mkb_tensor *bias) {
    struct mkb_cu_view c = mkb_cuda_view(out), b = mkb_cuda_view(bias);
    c.ndim = 2;
    c.shape[0] = rows;
    c.shape[1] = n;
    c.stride[0] = n;
    c.stride[1] = 1;
    int64_t shape[2] = {rows, n};
    const struct mkb_cu_view *pv[2] = {&c, &b};
    struct mkb_cu_iter it;
    mkb_cu_iter_init(&it, 2, shape, 2, pv);
    mkb_cu_iter_collapse(&it);
    MKB_CUDA_CHECK(mkb_cu_copy(st->stream, &it));
    return MKB_OK;
}

enum mkb_status mkb_cuda_linear(struct mkb_cuda_state *st, const struct mkb_op_call *k) {
    const struct mkb_tensor *x = k->in[0], *w = k->in[1], *bias = k->nin > 2 ? k->in[2] : NULL, *o = k->out;
    enum mkb_dtype dt = o->dtype;
    int64_t kk = w->shape[1], n = w->shape[0];
    int64_t rows = n ? mkb_tensor_numel(o) / n : 0;
    if (rows == 0 || n == 0) return MKB_OK;
    if (kk == 0) return bias ? fill_bias(st, o, rows, n, bias) : fill_zero(st, o);
    int64_t es = esize(dt);
    /* x as a (rows, K) matrix: its leading dims must collapse to one stride, else copy it */
    struct mkb_cu_view vx = mkb_cuda_view(x), ux = vx;
    void *tx = NULL, *tw = NULL, *tbias = NULL;
    enum mkb_status s = MKB_OK;
    int64_t srow = kk;
    {
        bool ok = true;
        int64_t want = -1;
        for (int d = x->ndim - 2; d >= 0; d--) {
            if (x->shape[d] == 1) continue;
            if (want < 0) {
                srow = x->stride[d];
                want = x->stride[d] * x->shape[d];
            } else if (x->stride[d] != want) {
                ok = false;
            } else {
                want *= x->shape[d];
            }
        }
        struct operand probe;
        if (ok && !make_operand(vx.data, rows, kk, srow, x->stride[x->ndim - 1], &probe)) ok = false;
        if (!ok) {
            s = mkb_cuda_contiguous_tmp(st, &vx, &ux);
            tx = ux.data;
            srow = kk;
        }
    }
    int64_t sxk = tx ? 1 : x->stride[x->ndim - 1];
    struct mkb_cu_view vw = mkb_cuda_view(w), uw = vw;
    struct operand probe;
    if (s == MKB_OK && !make_operand(vw.data, kk, n, vw.stride[1], vw.stride[0], &probe)) {
        s = mkb_cuda_contiguous_tmp(st, &vw, &uw);
        tw = uw.data;
    }
    struct operand opx, opw; /* opx: op(B) = w^T (K x N) -> cuBLAS X; opw: op(A) = x (rows x K) -> cuBLAS Y */
    if (s == MKB_OK) {
        const char *pw = (const char *)uw.data + uw.offset * es;
        const char *px = (const char *)ux.data + ux.offset * es;
        if (!make_operand(pw, kk, n, uw.stride[1], uw.stride[0], &opx) || !make_operand(px, rows, kk, srow, sxk, &opw))
            s = mkb_error(MKB_ERR_INTERNAL, "linear: an operand has no cuBLAS layout after a contiguous copy");
    }
    void *pc = (char *)o->buf->data + o->offset * es;
    bool bias_done = false;
    if (s == MKB_OK && bias && dt != MKB_DTYPE_F64) {
        struct mkb_cu_view vb = mkb_cuda_view(bias), ub = vb;
        if (vb.stride[0] != 1 && n > 1) {
            s = mkb_cuda_contiguous_tmp(st, &vb, &ub);
            tbias = ub.data;
        }
        bool declined = true;
        if (s == MKB_OK)
            s = lt_bias(st, dt, &opx, &opw, (const char *)ub.data + ub.offset * es, pc, rows, n, &declined);
        bias_done = s == MKB_OK && !declined;
    }
    if (s == MKB_OK && !bias_done) {
        if (bias) s = fill_bias(st, o, rows, n, bias);
        if (s == MKB_OK) s = gemm_batched(st, dt, &opx, &opw, pc, rows, n, kk, 1, 0, 0, 0, bias != NULL);
    }
    if (tx) cudaFreeAsync(tx, st->stream);
    if (tw) cudaFreeAsync(tw, st->stream);
    if (tbias) cudaFreeAsync(tbias, st->stream);
    return s;
}
