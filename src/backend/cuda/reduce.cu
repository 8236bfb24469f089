/* Reductions along one axis (sum, mean, amax) for the CUDA backend.
 *
 * The input (any strided view) is seen as (outer, len, inner) around the reduced axis; the output
 * is contiguous (outer, inner). Floats accumulate in the call's math type (fp32 for fp32 and
 * narrower, fp64 for fp64) in a tree order, as an eager framework does; the CPU backend adds
 * sequentially, so sums agree to the rounding of the accumulator. amax propagates NaN.
 *   inner == 1: each row is reduced by one warp (short rows) or one block (long rows);
 *   inner > 1:  32 adjacent columns per block, the reduced axis split over 8 thread rows.
 * When those give too few blocks to fill the GPU, the reduced axis is also split over
 * gridDim.y into partial results (in the math type) that a second kernel combines.
 * Shapes are trusted (the op front-end checked them). */
#include <math.h>

#include "backend/cuda/launch.cuh"

namespace mkb_cu {

template <typename M> MKB_DEV M red_init(int op) { return op == MKB_CU_OP_AMAX ? (M)-INFINITY : (M)0; }

template <typename M> MKB_DEV M red_combine(int op, M a, M b) {
    if (op != MKB_CU_OP_AMAX) return a + b;
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

template <typename M> MKB_DEV M warp_reduce(int op, M v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = red_combine(op, v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

struct red_args {
    const void *x;
    int dt;
    int64_t base;    /* x's element offset */
    sub_iter outer, inner;
    int64_t sa, len; /* stride and length of the reduced axis */
    uint32_t n_outer, n_inner;
    int op;
    int chunks;
    int64_t chunk_len;
    void *out;
    int out_dt;
};

/* Write one result: the final value (mean divided) when not split, else a partial. */
template <typename M> MKB_DEV void red_emit(const red_args &a, M *partial, uint32_t o, M acc) {
    if (a.chunks == 1) {
        if (a.op == MKB_CU_OP_MEAN) acc = acc / (M)a.len;
        stm(a.out_dt, a.out, (int64_t)o, acc);
    } else {
        partial[(int64_t)blockIdx.y * a.n_outer * a.n_inner + o] = acc;
    }
}

/* inner == 1: WARPS rows per block, one warp each (WARPS > 0), or one block per row (WARPS == 0). */
template <typename M, int WARPS> __global__ void reduce_rows(red_args a, M *partial) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t j0 = (int64_t)blockIdx.y * a.chunk_len;
    const int64_t j1 = j0 + a.chunk_len < a.len ? j0 + a.chunk_len : a.len;
    const int per_block = WARPS > 0 ? WARPS : 1;
    const int step = WARPS > 0 ? 32 : blockDim.x;
    const int t = WARPS > 0 ? lane : threadIdx.x;
    __shared__ M sh[32];
    for (uint32_t row0 = blockIdx.x * per_block; row0 < a.n_outer; row0 += gridDim.x * per_block) {
        uint32_t row = row0 + (WARPS > 0 ? warp : 0);
        M acc = red_init<M>(a.op);
        if (row < a.n_outer) {
            int64_t base = a.base + sub_offset(a.outer, row);
            M acc1 = acc, acc2 = acc, acc3 = acc;
            int64_t j = j0 + t;
            for (; j + 3 * step < j1; j += 4 * step) {
                M v0 = ldm<M>(a.dt, a.x, base + j * a.sa);
                M v1 = ldm<M>(a.dt, a.x, base + (j + step) * a.sa);
                M v2 = ldm<M>(a.dt, a.x, base + (j + 2 * step) * a.sa);
                M v3 = ldm<M>(a.dt, a.x, base + (j + 3 * step) * a.sa);
                acc = red_combine(a.op, acc, v0);
                acc1 = red_combine(a.op, acc1, v1);
                acc2 = red_combine(a.op, acc2, v2);
                acc3 = red_combine(a.op, acc3, v3);
            }
            for (; j < j1; j += step) acc = red_combine(a.op, acc, ldm<M>(a.dt, a.x, base + j * a.sa));
            acc = red_combine(a.op, red_combine(a.op, acc, acc1), red_combine(a.op, acc2, acc3));
        }
        acc = warp_reduce(a.op, acc);
        if (WARPS > 0) {
            if (lane == 0 && row < a.n_outer) red_emit(a, partial, row, acc);
        } else {
            if (lane == 0) sh[warp] = acc;
            __syncthreads();
            if (warp == 0) {
                acc = lane < (int)(blockDim.x >> 5) ? sh[lane] : red_init<M>(a.op);
                acc = warp_reduce(a.op, acc);
                if (lane == 0) red_emit(a, partial, row, acc);
            }
            __syncthreads();
        }
    }
}

/* inner > 1: a block is 32 columns x 8 slices of the reduced axis. */
template <typename M> __global__ void reduce_cols(red_args a, M *partial) {
    __shared__ M sh[8][33];
    const uint32_t tiles = (a.n_inner + 31) / 32;
    const int64_t j0 = (int64_t)blockIdx.y * a.chunk_len;
    const int64_t j1 = j0 + a.chunk_len < a.len ? j0 + a.chunk_len : a.len;
    for (uint32_t b = blockIdx.x; b < a.n_outer * tiles; b += gridDim.x) {
        uint32_t o = b / tiles, col = (b - o * tiles) * 32 + threadIdx.x;
        M acc = red_init<M>(a.op);
        if (col < a.n_inner) {
            int64_t base = a.base + sub_offset(a.outer, o) + sub_offset(a.inner, col);
            for (int64_t j = j0 + threadIdx.y; j < j1; j += 8) acc = red_combine(a.op, acc, ldm<M>(a.dt, a.x, base + j * a.sa));
        }
        sh[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && col < a.n_inner) {
            for (int r = 1; r < 8; r++) acc = red_combine(a.op, acc, sh[r][threadIdx.x]);
            red_emit(a, partial, o * a.n_inner + col, acc);
        }
        __syncthreads();
    }
}

/* ---- typed, vectorised variants for contiguous data (T the storage type, V per 16 bytes) ---- */

/* inner == 1 and the reduced axis contiguous, every row start 16-byte aligned. */
/* inner == 1, short contiguous rows: each warp reduces RPW rows at once, so RPW loads are in
 * flight per lane where one row would leave the warp waiting on a single load. */
template <typename T, typename M, int RPW>
__global__ void reduce_short_rows_vec(red_args a, M *partial) {
    constexpr int V = 16 / sizeof(T);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t j0 = (int64_t)blockIdx.y * a.chunk_len;
    const int64_t j1 = j0 + a.chunk_len < a.len ? j0 + a.chunk_len : a.len;
    const int64_t jv = j0 + (j1 - j0) / V * V;
    for (uint32_t row0 = (blockIdx.x * warps + warp) * RPW; row0 < a.n_outer; row0 += gridDim.x * warps * RPW) {
        const T *x[RPW];
        M acc[RPW];
#pragma unroll
        for (int q = 0; q < RPW; q++) {
            uint32_t row = row0 + q < a.n_outer ? row0 + q : a.n_outer - 1; /* a repeat is harmless */
            x[q] = (const T *)a.x + a.base + sub_offset(a.outer, row);
            acc[q] = red_init<M>(a.op);
        }
        for (int64_t j = j0 + (int64_t)lane * V; j < jv; j += 32 * V) {
            pack<T, V> p[RPW];
#pragma unroll
            for (int q = 0; q < RPW; q++) p[q] = *reinterpret_cast<const pack<T, V> *>(x[q] + j);
#pragma unroll
            for (int q = 0; q < RPW; q++)
#pragma unroll
                for (int v = 0; v < V; v++) acc[q] = red_combine(a.op, acc[q], (M)to_f(p[q].v[v]));
        }
        for (int64_t k = jv + lane; k < j1; k += 32)
#pragma unroll
            for (int q = 0; q < RPW; q++) acc[q] = red_combine(a.op, acc[q], (M)to_f(x[q][k]));
#pragma unroll
        for (int q = 0; q < RPW; q++) {
            M r = warp_reduce(a.op, acc[q]);
            if (lane == 0 && row0 + q < a.n_outer) red_emit(a, partial, row0 + q, r);
        }
    }
}

template <typename T, typename M, int WARPS>
__global__ void reduce_rows_vec(red_args a, M *partial) {
    constexpr int V = 16 / sizeof(T);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t j0 = (int64_t)blockIdx.y * a.chunk_len; /* a multiple of V */
    const int64_t j1 = j0 + a.chunk_len < a.len ? j0 + a.chunk_len : a.len;
    const int64_t jv = j0 + (j1 - j0) / V * V; /* end of the whole vectors */
    const int per_block = WARPS > 0 ? WARPS : 1;
    const int step = WARPS > 0 ? 32 : blockDim.x;
    const int t = WARPS > 0 ? lane : threadIdx.x;
    __shared__ M sh[32];
    for (uint32_t row0 = blockIdx.x * per_block; row0 < a.n_outer; row0 += gridDim.x * per_block) {
        uint32_t row = row0 + (WARPS > 0 ? warp : 0);
        M acc = red_init<M>(a.op), acc1 = acc;
        if (row < a.n_outer) {
            const T *x = (const T *)a.x + a.base + sub_offset(a.outer, row);
            int64_t j = j0 + (int64_t)t * V;
            for (; j + (int64_t)step * V < jv; j += 2 * (int64_t)step * V) {
                pack<T, V> p0 = *reinterpret_cast<const pack<T, V> *>(x + j);
                pack<T, V> p1 = *reinterpret_cast<const pack<T, V> *>(x + j + (int64_t)step * V);
#pragma unroll
                for (int v = 0; v < V; v++) {
                    acc = red_combine(a.op, acc, (M)to_f(p0.v[v]));
                    acc1 = red_combine(a.op, acc1, (M)to_f(p1.v[v]));
                }
            }
            for (; j < jv; j += (int64_t)step * V) {
                pack<T, V> p0 = *reinterpret_cast<const pack<T, V> *>(x + j);
#pragma unroll
                for (int v = 0; v < V; v++) acc = red_combine(a.op, acc, (M)to_f(p0.v[v]));
            }
            for (int64_t k = jv + t; k < j1; k += step) acc = red_combine(a.op, acc, (M)to_f(x[k]));
            acc = red_combine(a.op, acc, acc1);
        }
        acc = warp_reduce(a.op, acc);
        if (WARPS > 0) {
            if (lane == 0 && row < a.n_outer) red_emit(a, partial, row, acc);
        } else {
            if (lane == 0) sh[warp] = acc;
            __syncthreads();
            if (warp == 0) {
                acc = lane < (int)(blockDim.x >> 5) ? sh[lane] : red_init<M>(a.op);
                acc = warp_reduce(a.op, acc);
                if (lane == 0) red_emit(a, partial, row, acc);
            }
            __syncthreads();
        }
    }
}

/* inner > 1 and contiguous, n_inner a multiple of V, aligned: each thread owns V adjacent
 * columns; a block is 32 x V columns by 8 slices of the reduced axis. */
template <typename T, typename M>
__global__ void reduce_cols_vec(red_args a, M *partial) {
    constexpr int V = 16 / sizeof(T);
    __shared__ M sh[8][32 * V + 1];
    const uint32_t tiles = (a.n_inner + 32 * V - 1) / (32 * V);
    const int64_t j0 = (int64_t)blockIdx.y * a.chunk_len;
    const int64_t j1 = j0 + a.chunk_len < a.len ? j0 + a.chunk_len : a.len;
    for (uint32_t b = blockIdx.x; b < a.n_outer * tiles; b += gridDim.x) {
        uint32_t o = b / tiles, col = ((b - o * tiles) * 32 + threadIdx.x) * V;
        M acc[V];
#pragma unroll
        for (int v = 0; v < V; v++) acc[v] = red_init<M>(a.op);
        if (col < a.n_inner) {
            const T *x = (const T *)a.x + a.base + sub_offset(a.outer, o) + col;
            int64_t j = j0 + threadIdx.y;
            for (; j + 8 < j1; j += 16) {
                pack<T, V> p0 = *reinterpret_cast<const pack<T, V> *>(x + j * a.sa);
                pack<T, V> p1 = *reinterpret_cast<const pack<T, V> *>(x + (j + 8) * a.sa);
#pragma unroll
                for (int v = 0; v < V; v++)
                    acc[v] = red_combine(a.op, red_combine(a.op, acc[v], (M)to_f(p0.v[v])), (M)to_f(p1.v[v]));
            }
            for (; j < j1; j += 8) {
                pack<T, V> p0 = *reinterpret_cast<const pack<T, V> *>(x + j * a.sa);
#pragma unroll
                for (int v = 0; v < V; v++) acc[v] = red_combine(a.op, acc[v], (M)to_f(p0.v[v]));
            }
        }
#pragma unroll
        for (int v = 0; v < V; v++) sh[threadIdx.y][threadIdx.x * V + v] = acc[v];
        __syncthreads();
        if (threadIdx.y == 0 && col < a.n_inner) {
#pragma unroll
            for (int v = 0; v < V; v++) {
                M r = acc[v];
                for (int k = 1; k < 8; k++) r = red_combine(a.op, r, sh[k][threadIdx.x * V + v]);
                red_emit(a, partial, o * a.n_inner + col + v, r);
            }
        }
        __syncthreads();
    }
}

template <typename M> __global__ void reduce_finish(red_args a, const M *partial) {
    int64_t n = (int64_t)a.n_outer * a.n_inner;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        M acc = red_init<M>(a.op);
        for (int c = 0; c < a.chunks; c++) acc = red_combine(a.op, acc, partial[(int64_t)c * n + i]);
        if (a.op == MKB_CU_OP_MEAN) acc = acc / (M)a.len;
        stm(a.out_dt, a.out, i, acc);
    }
}

template <typename T, typename M>
void typed_launch_t(bool rows, int warps, dim3 grid, dim3 block, cudaStream_t s, const red_args &a, M *partial) {
    if (!rows) {
        reduce_cols_vec<T, M><<<grid, block, 0, s>>>(a, partial);
    } else if (warps == 4) { /* short rows, four per warp */
        dim3 g4((grid.x + 3) / 4, grid.y);
        reduce_short_rows_vec<T, M, 4><<<g4, block, 0, s>>>(a, partial);
    } else if (warps) {
        reduce_rows_vec<T, M, 8><<<grid, block, 0, s>>>(a, partial);
    } else {
        reduce_rows_vec<T, M, 0><<<grid, block, 0, s>>>(a, partial);
    }
}

template <typename M>
void typed_launch(int dt, bool rows, int warps, dim3 grid, dim3 block, cudaStream_t s, const red_args &a, M *partial);

template <>
void typed_launch<float>(int dt, bool rows, int warps, dim3 grid, dim3 block, cudaStream_t s, const red_args &a,
                         float *partial) {
    if (dt == MKB_DTYPE_BF16)
        typed_launch_t<bf16s, float>(rows, warps, grid, block, s, a, partial);
    else if (dt == MKB_DTYPE_F16)
        typed_launch_t<f16s, float>(rows, warps, grid, block, s, a, partial);
    else
        typed_launch_t<float, float>(rows, warps, grid, block, s, a, partial);
}

template <>
void typed_launch<double>(int dt, bool rows, int warps, dim3 grid, dim3 block, cudaStream_t s, const red_args &a,
                          double *partial) {
    (void)dt;
    typed_launch_t<double, double>(rows, warps, grid, block, s, a, partial);
}

template <typename M>
cudaError_t reduce_launch(cudaStream_t s, int op, const mkb_cu_view *x, int axis, void *out, int out_dt) {
    red_args a;
    int64_t n_outer, n_inner;
    a.x = x->data;
    a.dt = x->dtype;
    a.base = x->offset;
    a.outer = sub_make(x, 0, axis, &n_outer);
    a.inner = sub_make(x, axis + 1, x->ndim, &n_inner);
    a.sa = x->stride[axis];
    a.len = x->shape[axis];
    a.op = op;
    a.out = out;
    a.out_dt = out_dt;
    if (n_outer * n_inner == 0) return cudaSuccess;
    if (n_outer > INT32_MAX || n_inner > INT32_MAX || n_outer * n_inner > INT32_MAX) return cudaErrorInvalidValue;
    a.n_outer = (uint32_t)n_outer;
    a.n_inner = (uint32_t)n_inner;
    /* the typed vector paths: contiguous reduced axis (rows) or contiguous inner dims (columns),
     * one arithmetic storage type, 16-byte aligned starts */
    const int es = dtype_bytes(x->dtype);
    const int V = 16 / es;
    bool typed = (sizeof(M) == 8) == (x->dtype == MKB_DTYPE_F64) &&
                 (x->dtype == MKB_DTYPE_F64 || x->dtype == MKB_DTYPE_F32 || x->dtype == MKB_DTYPE_BF16 ||
                  x->dtype == MKB_DTYPE_F16);
    uintptr_t base_addr = (uintptr_t)x->data + (uintptr_t)(x->offset * es);
    bool aligned = (base_addr & 15) == 0;
    for (int d = 0; d < a.outer.ndim; d++) aligned = aligned && (a.outer.stride[d] * es) % 16 == 0;
    const bool vec_rows = typed && aligned && n_inner == 1 && (a.sa == 1 || a.len == 1);
    const bool vec_cols = typed && aligned && n_inner > 1 && a.inner.ndim == 1 && a.inner.stride[0] == 1 &&
                          n_inner % V == 0 && (a.sa * es) % 16 == 0;
    if (vec_rows) a.sa = 1;
    const int64_t want_blocks = (int64_t)sm_count() * 8;
    dim3 block;
    int warps = 0;
    int64_t blocks, per_chunk_min;
    if (n_inner == 1) {
        /* a warp per row up to 32 KB rows (a block beyond); the typed path takes short rows
         * (<= 1 KB) four to a warp (warps == 4 marks it) */
        warps = a.len * es <= 32768 ? 8 : 0;
        if (!vec_rows && a.len > 1024) warps = 0;
        block = dim3(256);
        blocks = warps ? (n_outer + warps - 1) / warps : n_outer;
        per_chunk_min = warps ? 32 * 8 : 256 * 8;
    } else {
        block = dim3(32, 8);
        int64_t cols_per_block = vec_cols ? 32 * V : 32;
        blocks = n_outer * ((n_inner + cols_per_block - 1) / cols_per_block);
        per_chunk_min = 8 * 16;
    }
    int64_t chunks = 1;
    if (blocks < want_blocks && a.len > per_chunk_min) {
        chunks = (want_blocks + blocks - 1) / blocks;
        int64_t max_chunks = (a.len + per_chunk_min - 1) / per_chunk_min;
        if (chunks > max_chunks) chunks = max_chunks;
        if (chunks > 65535) chunks = 65535;
    }
    a.chunk_len = (a.len + chunks - 1) / chunks;
    if (vec_rows) a.chunk_len = (a.chunk_len + V - 1) / V * V; /* chunks start on whole vectors */
    if (a.chunk_len == 0) a.chunk_len = 1;
    chunks = (a.len + a.chunk_len - 1) / a.chunk_len;
    if (chunks < 1) chunks = 1;
    a.chunks = (int)chunks;
    int64_t gx = blocks < (int64_t)sm_count() * 32 ? blocks : (int64_t)sm_count() * 32;
    dim3 grid((unsigned)(gx < 1 ? 1 : gx), (unsigned)chunks);
    if (vec_rows && warps && chunks == 1 && a.len * es <= 1024 && n_outer >= 4 * want_blocks) warps = 4;
    M *partial = nullptr;
    cudaError_t e;
    if (chunks > 1) {
        e = cudaMallocAsync((void **)&partial, sizeof(M) * (size_t)(chunks * n_outer * n_inner), s);
        if (e != cudaSuccess) return e;
    }
    if (vec_rows || vec_cols) {
        typed_launch<M>(x->dtype, vec_rows, warps, grid, block, s, a, partial);
    } else if (n_inner == 1) {
        if (warps)
            reduce_rows<M, 8><<<grid, block, 0, s>>>(a, partial);
        else
            reduce_rows<M, 0><<<grid, block, 0, s>>>(a, partial);
    } else {
        reduce_cols<M><<<grid, block, 0, s>>>(a, partial);
    }
    e = cudaGetLastError();
    if (e == cudaSuccess && chunks > 1) {
        reduce_finish<M><<<grid_for(n_outer * n_inner, 256), 256, 0, s>>>(a, partial);
        e = cudaGetLastError();
    }
    if (partial) {
        cudaError_t f = cudaFreeAsync(partial, s);
        if (e == cudaSuccess) e = f;
    }
    return e;
}

} // namespace mkb_cu

extern "C" cudaError_t mkb_cu_reduce(cudaStream_t s, int op, int math, const struct mkb_cu_view *x, int axis, void *out,
                                     int out_dtype) {
    return math == MKB_DTYPE_F64 ? mkb_cu::reduce_launch<double>(s, op, x, axis, out, out_dtype)
                                 : mkb_cu::reduce_launch<float>(s, op, x, axis, out, out_dtype);
}
