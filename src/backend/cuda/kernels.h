/* The boundary between the CUDA backend's host code (C: backend.c, gemm.c, calibrate.c) and its
 * kernels (C++: the .cu files). Only plain structs and extern "C" launchers cross it, so the C
 * side never sees a template and the .cu side never includes the op library's headers.
 *
 * Every launcher enqueues work on the given stream and returns the first CUDA error it met
 * (cudaSuccess when the launches were accepted); it never synchronises unless its comment says
 * so. Shapes arrive already validated by the op front-end (ops.c).
 *
 * Iteration over strided tensors: struct mkb_cu_iter describes up to MKB_CU_ARGS operands that
 * share one iteration shape (the output's), each with its own element strides aligned to that
 * shape (0 on broadcast dims) and element offset. mkb_cu_iter_collapse() merges dims that are
 * contiguous for every operand, so a contiguous op becomes one flat dim and a row broadcast
 * becomes two. This header does not allocate and does not know about contexts or tensors. */
#ifndef MKB_BACKEND_CUDA_KERNELS_H
#define MKB_BACKEND_CUDA_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "tensor/dtype.h"

#define MKB_CU_DIMS 8
#define MKB_CU_ARGS 4

/* Op codes: the same X-macro list as enum mkb_op (tensor/ops.h, which the .cu files cannot
 * include: its headers are C only), so the values agree by construction. dtype codes are
 * enum mkb_dtype's (tensor/dtype.h is plain enough for C++). */
enum mkb_cu_op {
#define X(e, name, kind, flops) MKB_CU_OP_##e,
#include "tensor/ops.def"
#undef X
    MKB_CU_OP_COUNT
};

/* A strided view as the kernels see it: element strides and offset, the buffer's base. */
struct mkb_cu_view {
    void *data;
    int dtype;
    int ndim;
    int64_t shape[MKB_CU_DIMS];
    int64_t stride[MKB_CU_DIMS];
    int64_t offset;
};

struct mkb_cu_iter {
    int ndim; /* 0: a single element */
    int narg;
    int64_t size[MKB_CU_DIMS];               /* outermost first */
    int64_t stride[MKB_CU_ARGS][MKB_CU_DIMS]; /* elements; 0 on broadcast dims */
    int64_t offset[MKB_CU_ARGS];
    void *data[MKB_CU_ARGS];
    int dtype[MKB_CU_ARGS];
};

/* Build an iteration over `shape` (rank nd) for n views (each broadcast to shape by numpy rules:
 * missing leading dims and size-1 dims get stride 0), then drop size-1 dims and merge dims that
 * are contiguous for every operand. */
void mkb_cu_iter_init(struct mkb_cu_iter *it, int nd, const int64_t *shape, int n, const struct mkb_cu_view *const *v);
void mkb_cu_iter_collapse(struct mkb_cu_iter *it);
int64_t mkb_cu_iter_numel(const struct mkb_cu_iter *it);

/* ---- elementwise (elementwise.cu) ----
 * op: enum mkb_op value; math: MKB_DTYPE_F32 or MKB_DTYPE_F64 (the call's acc type).
 * it: operand 0 is the output, then the inputs. */
cudaError_t mkb_cu_unary(cudaStream_t s, int op, int math, const struct mkb_cu_iter *it);
cudaError_t mkb_cu_binary(cudaStream_t s, int op, int math, const struct mkb_cu_iter *it);
cudaError_t mkb_cu_scalar(cudaStream_t s, int op, int math, double scalar, const struct mkb_cu_iter *it);
/* dst (operand 0) = src (operand 1) element by element, converted by dtype.h's rules; any
 * dtypes, any strides on both sides (fp4 destinations are written nibble-safely). */
cudaError_t mkb_cu_copy(cudaStream_t s, const struct mkb_cu_iter *it);

/* ---- reductions (reduce.cu) ----
 * x: the input view; reduce its axis into out (contiguous, out_dtype, outer * inner elements).
 * op: MKB_OP_SUM / MEAN / AMAX; math: MKB_DTYPE_F32 or MKB_DTYPE_F64. */
cudaError_t mkb_cu_reduce(cudaStream_t s, int op, int math, const struct mkb_cu_view *x, int axis, void *out,
                          int out_dtype);

/* ---- indexing (index.cu) ----
 * Both check every index; the first position (in row-major order of idx) whose index is out of
 * range is reported through *bad_pos (-1 when none) and *bad_val. These two synchronise the
 * stream to read the check. tmp allocations use the stream-ordered allocator. */
/* out (contiguous, table's dtype): out[i, ...] = table[idx[i], ...]; nidx rows of rowlen elements. */
cudaError_t mkb_cu_gather_rows(cudaStream_t s, const struct mkb_cu_view *table, const struct mkb_cu_view *idx,
                               void *out, int64_t *bad_pos, int64_t *bad_val);
/* out (contiguous, base's dtype, already holding base): out[idx[m]] += src[m] sequentially in m,
 * each addition rounded to out's dtype. src is contiguous (M, rowlen). */
cudaError_t mkb_cu_index_add_rows(cudaStream_t s, int out_dtype, void *out, int64_t nrows, int64_t rowlen,
                                  const struct mkb_cu_view *idx, const void *src, int64_t *bad_pos, int64_t *bad_val);

/* ---- generators (gen.cu): out contiguous, n elements of dtype ---- */
/* Fill nbytes at out with a 16-byte pattern repeated (byte i gets pattern[i % 16]); out is a
 * buffer start. The host encodes the pattern (full() of any dtype is a repeated element). */
cudaError_t mkb_cu_fill(cudaStream_t s, void *out, int64_t nbytes, const unsigned char *pattern);
cudaError_t mkb_cu_full(cudaStream_t s, void *out, int dtype, int64_t n, double value);
cudaError_t mkb_cu_randn(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream);
cudaError_t mkb_cu_rand(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream, double lo,
                        double hi);
cudaError_t mkb_cu_randint(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream,
                           int64_t lo, int64_t hi);
cudaError_t mkb_cu_randperm(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream);

#ifdef __cplusplus
}
#endif

#endif
