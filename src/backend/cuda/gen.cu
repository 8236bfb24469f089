/* Generators for the CUDA backend: full, randn, rand, randint, randperm.
 *
 * Every value comes from tensor/philox.h, the same header the CPU backend uses, compiled for the
 * device (its fp64 arithmetic goes through __dadd_rn/__dmul_rn, which the compiler may not fuse)
 * and is rounded into the output dtype by dtype.cuh's port of dtype.c, so each element is
 * bit-identical to the CPU's. randperm sorts the Philox keys with a stable CUB radix sort, which
 * breaks ties by index exactly as the CPU's comparison does.
 * Outputs are contiguous; fp4 outputs are written nibble-safely. */
#include <cub/device/device_radix_sort.cuh>
#include <string.h>

#include "backend/cuda/launch.cuh"
#include "tensor/philox.h"

namespace mkb_cu {

enum { GEN_FULL, GEN_NORMAL, GEN_UNIFORM };

__global__ void gen_float(void *out, int dt, int64_t n, int kind, double value, uint64_t seed, uint32_t stream,
                          double lo, double hi) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double v = kind == GEN_FULL     ? value
                   : kind == GEN_NORMAL ? mkb_draw_normal(seed, stream, (uint64_t)i)
                                        : mkb_draw_uniform(seed, stream, (uint64_t)i, lo, hi);
        st_f64(dt, out, i, v);
    }
}

__global__ void gen_int(void *out, int dt, int64_t n, uint64_t seed, uint32_t stream, int64_t lo, int64_t hi) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_i64(dt, out, i, mkb_draw_int(seed, stream, (uint64_t)i, lo, hi));
}

__global__ void perm_keys(uint64_t *keys, int64_t *idx, int64_t n, uint64_t seed, uint32_t stream) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = mkb_draw_key(seed, stream, (uint64_t)i);
        idx[i] = i;
    }
}

__global__ void store_i64s(void *out, int dt, const int64_t *v, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_i64(dt, out, i, v[i]);
}

static cudaError_t gen_launch(cudaStream_t s, void *out, int dt, int64_t n, int kind, double value, uint64_t seed,
                              uint32_t stream, double lo, double hi) {
    if (n == 0) return cudaSuccess;
    gen_float<<<grid_for(n, 256), 256, 0, s>>>(out, dt, n, kind, value, seed, stream, lo, hi);
    return cudaGetLastError();
}

} // namespace mkb_cu

using namespace mkb_cu;

namespace mkb_cu {
__global__ void fill16(uint4 *p, int64_t n, uint4 v) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) p[i] = v;
}
__global__ void fill_tail(unsigned char *p, int64_t from, int64_t to, uint4 v) {
    const unsigned char *b = reinterpret_cast<const unsigned char *>(&v);
    for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) p[i] = b[i % 16];
}
} // namespace mkb_cu

extern "C" cudaError_t mkb_cu_fill(cudaStream_t s, void *out, int64_t nbytes, const unsigned char *pattern) {
    if (nbytes == 0) return cudaSuccess;
    uint4 v;
    memcpy(&v, pattern, 16);
    int64_t n16 = ((uintptr_t)out & 15) == 0 ? nbytes / 16 : 0;
    if (n16) fill16<<<grid_for(n16, 256), 256, 0, s>>>((uint4 *)out, n16, v);
    if (n16 * 16 < nbytes) fill_tail<<<1, 256, 0, s>>>((unsigned char *)out, n16 * 16, nbytes, v);
    return cudaGetLastError();
}

extern "C" cudaError_t mkb_cu_full(cudaStream_t s, void *out, int dtype, int64_t n, double value) {
    return gen_launch(s, out, dtype, n, GEN_FULL, value, 0, 0, 0, 0);
}

extern "C" cudaError_t mkb_cu_randn(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream) {
    return gen_launch(s, out, dtype, n, GEN_NORMAL, 0, seed, stream, 0, 0);
}

extern "C" cudaError_t mkb_cu_rand(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream,
                                   double lo, double hi) {
    return gen_launch(s, out, dtype, n, GEN_UNIFORM, 0, seed, stream, lo, hi);
}

extern "C" cudaError_t mkb_cu_randint(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream,
                                      int64_t lo, int64_t hi) {
    if (n == 0) return cudaSuccess;
    gen_int<<<grid_for(n, 256), 256, 0, s>>>(out, dtype, n, seed, stream, lo, hi);
    return cudaGetLastError();
}

extern "C" cudaError_t mkb_cu_randperm(cudaStream_t s, void *out, int dtype, int64_t n, uint64_t seed, uint32_t stream) {
    if (n == 0) return cudaSuccess;
    uint64_t *keys = nullptr, *keys_sorted = nullptr;
    int64_t *idx = nullptr, *idx_sorted = nullptr;
    void *tmp = nullptr;
    size_t tmp_bytes = 0;
    cudaError_t e = cudaMallocAsync((void **)&keys, sizeof(uint64_t) * (size_t)n, s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&keys_sorted, sizeof(uint64_t) * (size_t)n, s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&idx, sizeof(int64_t) * (size_t)n, s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&idx_sorted, sizeof(int64_t) * (size_t)n, s);
    if (e == cudaSuccess) {
        perm_keys<<<grid_for(n, 256), 256, 0, s>>>(keys, idx, n, seed, stream);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, keys, keys_sorted, idx, idx_sorted, n, 0, 64, s);
    if (e == cudaSuccess) e = cudaMallocAsync(&tmp, tmp_bytes ? tmp_bytes : 1, s);
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, keys, keys_sorted, idx, idx_sorted, n, 0, 64, s);
    if (e == cudaSuccess) {
        store_i64s<<<grid_for(n, 256), 256, 0, s>>>(out, dtype, idx_sorted, n);
        e = cudaGetLastError();
    }
    void *bufs[5] = {tmp, keys, keys_sorted, idx, idx_sorted};
    for (int i = 0; i < 5; i++) {
        if (!bufs[i]) continue;
        cudaError_t f = cudaFreeAsync(bufs[i], s);
        if (e == cudaSuccess) e = f;
    }
    return e;
}
