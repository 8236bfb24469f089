/* What the CUDA kernels share: the 32-bit iteration a launch walks (struct iter32: sizes with
 * precomputed fast divisors, per-operand strides), the element-offset computation, grid sizing,
 * and the splitting of an iteration of 2^31 elements or more into launches of fewer along its
 * outermost dim. Kernels index with 32-bit unsigned arithmetic inside a launch; offsets are
 * 64-bit. This header holds no state beyond a cached multiprocessor count. */
#ifndef MKB_BACKEND_CUDA_LAUNCH_CUH
#define MKB_BACKEND_CUDA_LAUNCH_CUH

#include <stdint.h>

#include "backend/cuda/dtype.cuh"
#include "backend/cuda/kernels.h"

namespace mkb_cu {

/* n / d for n < 2^31 by multiply-high and shift (Granlund-Montgomery, as eager frameworks do). */
struct fastdiv {
    uint32_t d, mul, shift;
};

inline fastdiv fastdiv_make(uint32_t d) {
    fastdiv f;
    f.d = d;
    uint32_t s = 0;
    while (s < 32 && (1ull << s) < d) s++;
    f.shift = s;
    f.mul = (uint32_t)(((1ull << 32) * ((1ull << s) - d)) / d + 1);
    return f;
}

MKB_DEV uint32_t fastdiv_div(const fastdiv &f, uint32_t n) { return (__umulhi(n, f.mul) + n) >> f.shift; }

template <int N> struct iter32 {
    int ndim;
    fastdiv size[MKB_CU_DIMS]; /* outermost first */
    int64_t stride[N][MKB_CU_DIMS];
    int64_t offset[N];
    void *data[N];
    int dtype[N];
};

/* Storage offsets of iteration element i for every operand. */
template <int N> MKB_DEV void iter_offsets(const iter32<N> &it, uint32_t i, int64_t (&off)[N]) {
#pragma unroll
    for (int k = 0; k < N; k++) off[k] = it.offset[k];
#pragma unroll
    for (int d = MKB_CU_DIMS - 1; d >= 0; d--) {
        if (d >= it.ndim) continue;
        uint32_t q = fastdiv_div(it.size[d], i);
        uint32_t r = i - q * it.size[d].d;
#pragma unroll
        for (int k = 0; k < N; k++) off[k] += (int64_t)r * it.stride[k][d];
        i = q;
    }
}

inline int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
            n = 132;
    }
    return n;
}

/* Blocks for a grid-stride loop over n items with `threads` per block. */
inline unsigned grid_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads, cap = (int64_t)sm_count() * 32;
    if (b > cap) b = cap;
    return (unsigned)(b < 1 ? 1 : b);
}

/* Call fn(iter32<N>, count) once per chunk of fewer than 2^31 elements. */
template <int N, typename F> cudaError_t for_each_chunk(const mkb_cu_iter *it, F fn) {
    int64_t numel = mkb_cu_iter_numel(it);
    if (numel == 0) return cudaSuccess;
    int64_t inner = 1;
    for (int d = 1; d < it->ndim; d++) inner *= it->size[d];
    const int64_t limit = INT32_MAX;
    if (inner > limit) return cudaErrorInvalidValue;
    int64_t outer = it->ndim ? it->size[0] : 1;
    int64_t rows = it->ndim ? limit / inner : 1;
    if (rows < 1) rows = 1;
    for (int64_t start = 0; start < outer; start += rows) {
        int64_t cnt = outer - start < rows ? outer - start : rows;
        iter32<N> c;
        c.ndim = it->ndim;
        for (int d = 0; d < it->ndim; d++) c.size[d] = fastdiv_make((uint32_t)(d == 0 ? cnt : it->size[d]));
        for (int k = 0; k < N; k++) {
            c.offset[k] = it->offset[k] + (it->ndim ? start * it->stride[k][0] : 0);
            c.data[k] = it->data[k];
            c.dtype[k] = it->dtype[k];
            for (int d = 0; d < MKB_CU_DIMS; d++) c.stride[k][d] = d < it->ndim ? it->stride[k][d] : 0;
        }
        cudaError_t e = fn(c, (uint32_t)(cnt * inner));
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* One contiguous run: ndim <= 1 and unit strides for every operand. */
inline bool iter_flat(const mkb_cu_iter *it) {
    if (it->ndim > 1) return false;
    for (int k = 0; k < it->narg; k++)
        if (it->ndim == 1 && it->stride[k][0] != 1) return false;
    return true;
}

inline int dtype_bytes(int dt) {
    switch (dt) {
    case MKB_DTYPE_F64: case MKB_DTYPE_I64: return 8;
    case MKB_DTYPE_F32: case MKB_DTYPE_I32: return 4;
    case MKB_DTYPE_F16: case MKB_DTYPE_BF16: case MKB_DTYPE_I16: return 2;
    default: return 1;
    }
}

/* Is operand k's first element 16-byte aligned (for the vector paths)? */
inline bool aligned16(const mkb_cu_iter *it, int k) {
    uintptr_t p = (uintptr_t)it->data[k] + (uintptr_t)(it->offset[k] * dtype_bytes(it->dtype[k]));
    return (p & 15) == 0;
}

/* ---- offsets over a sub-range of one view's dims ---- */

/* The offset of flat index i over a few collapsed dims. */
struct sub_iter {
    int ndim;
    fastdiv size[MKB_CU_DIMS];
    int64_t stride[MKB_CU_DIMS];
};

MKB_DEV int64_t sub_offset(const sub_iter &s, uint32_t i) {
    int64_t off = 0;
#pragma unroll
    for (int d = MKB_CU_DIMS - 1; d >= 0; d--) {
        if (d >= s.ndim) continue;
        uint32_t q = fastdiv_div(s.size[d], i);
        off += (int64_t)(i - q * s.size[d].d) * s.stride[d];
        i = q;
    }
    return off;
}

/* dims [lo, hi) of x, size-1 dims dropped and contiguous neighbours merged */
inline sub_iter sub_make(const mkb_cu_view *x, int lo, int hi, int64_t *count) {
    int64_t size[MKB_CU_DIMS], stride[MKB_CU_DIMS];
    int n = 0;
    *count = 1;
    for (int d = lo; d < hi; d++) {
        *count *= x->shape[d];
        if (x->shape[d] == 1) continue;
        if (n > 0 && stride[n - 1] == x->stride[d] * x->shape[d]) {
            size[n - 1] *= x->shape[d];
            stride[n - 1] = x->stride[d];
        } else {
            size[n] = x->shape[d];
            stride[n] = x->stride[d];
            n++;
        }
    }
    sub_iter s;
    s.ndim = n;
    for (int d = 0; d < MKB_CU_DIMS; d++) {
        s.size[d] = fastdiv_make(d < n ? (uint32_t)size[d] : 1u);
        s.stride[d] = d < n ? stride[d] : 0;
    }
    return s;
}

template <typename T, int V> struct alignas(sizeof(T) * V) pack {
    T v[V];
};

} // namespace mkb_cu

#endif
