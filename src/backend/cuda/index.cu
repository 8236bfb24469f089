/* Row indexing for the CUDA backend: gather_rows and index_add_rows.
 *
 * Both first convert the indices to a contiguous int64 scratch array and check them in one pass
 * that finds the first out-of-range position; the host reads that one number back (the only
 * synchronisation here) so a bad index fails the op with the CPU backend's message instead of a
 * device fault. index_add_rows keeps the CPU's sequential semantics exactly: the positions are
 * stably sorted by destination row (CUB radix sort), and one block per destination row adds its
 * sources in their original order, rounding to the output dtype after every addition, so the
 * result is bit-identical to the CPU's whatever the duplicates. It does not use atomics.
 * Scratch memory comes from the stream-ordered allocator. */
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/launch.cuh"

namespace mkb_cu {

/* idx (any strided integer view) -> contiguous int64 */
static cudaError_t idx_to_i64(cudaStream_t s, const mkb_cu_view *idx, int64_t **out, int64_t *n) {
    mkb_cu_view dst;
    *n = 1;
    for (int d = 0; d < idx->ndim; d++) *n *= idx->shape[d];
    cudaError_t e = cudaMallocAsync((void **)out, sizeof(int64_t) * (size_t)(*n ? *n : 1), s);
    if (e != cudaSuccess) return e;
    dst.data = *out;
    dst.dtype = MKB_DTYPE_I64;
    dst.ndim = idx->ndim;
    dst.offset = 0;
    int64_t st = 1;
    for (int d = idx->ndim - 1; d >= 0; d--) {
        dst.shape[d] = idx->shape[d];
        dst.stride[d] = st;
        st *= idx->shape[d];
    }
    const mkb_cu_view *v[2] = {&dst, idx};
    mkb_cu_iter it;
    mkb_cu_iter_init(&it, idx->ndim, idx->shape, 2, v);
    mkb_cu_iter_collapse(&it);
    return mkb_cu_copy(s, &it);
}

__global__ void idx_check(const int64_t *idx, int64_t n, int64_t limit, unsigned long long *bad) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (idx[i] < 0 || idx[i] >= limit) atomicMin(bad, (unsigned long long)i);
}

/* Synchronises: *bad_pos = first bad position or -1, *bad_val = its index value. */
static cudaError_t check_indices(cudaStream_t s, const int64_t *idx, int64_t n, int64_t limit, int64_t *bad_pos,
                                 int64_t *bad_val) {
    *bad_pos = -1;
    *bad_val = 0;
    if (n == 0) return cudaSuccess;
    unsigned long long *bad;
    cudaError_t e = cudaMallocAsync((void **)&bad, sizeof *bad, s);
    if (e != cudaSuccess) return e;
    unsigned long long none = ~0ull, host = 0;
    e = cudaMemcpyAsync(bad, &none, sizeof none, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) {
        idx_check<<<grid_for(n, 256), 256, 0, s>>>(idx, n, limit, bad);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, bad, sizeof host, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess && host != ~0ull) {
        *bad_pos = (int64_t)host;
        e = cudaMemcpy(bad_val, idx + host, sizeof(int64_t), cudaMemcpyDeviceToHost);
    }
    cudaError_t f = cudaFreeAsync(bad, s);
    return e != cudaSuccess ? e : f;
}

/* Copy one element of `bytes` bytes (fp4: a nibble). */
MKB_DEV void move_elem(int dt, int bytes, void *dst, int64_t di, const void *src, int64_t si) {
    switch (bytes) {
    case 8: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; return;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; return;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; return;
    default:
        if (dt == MKB_DTYPE_F4E2M1)
            st_nibble(dst, di, ld_nibble(src, si));
        else
            ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si];
        return;
    }
}

struct gather_args {
    const void *table;
    int dt, bytes;
    int64_t base, stride0; /* table offset and row stride */
    sub_iter row;        /* the table's dims 1.. */
    fastdiv rowlen;
    const int64_t *idx;
    void *out;
};

__global__ void gather_kernel(gather_args a, uint32_t n) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t r = fastdiv_div(a.rowlen, i), j = i - r * a.rowlen.d;
        int64_t src = a.base + a.idx[r] * a.stride0 + sub_offset(a.row, j);
        move_elem(a.dt, a.bytes, a.out, (int64_t)i, a.table, src);
    }
}

/* Rows that are contiguous runs of rowbytes bytes: one block per output row (grid-stride),
 * copied in W-sized words. */
template <typename W>
__global__ void gather_rows_words(const char *table, int64_t row_bytes_stride, const int64_t *idx, char *out,
                                  int64_t rowbytes, int64_t nrows) {
    const int64_t words = rowbytes / (int64_t)sizeof(W);
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const W *src = reinterpret_cast<const W *>(table + idx[r] * row_bytes_stride);
        W *dst = reinterpret_cast<W *>(out + r * rowbytes);
        for (int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = src[w];
    }
}

__global__ void index_add_kernel(int dt, void *out, int64_t rowlen, const int64_t *keys, const int64_t *pos, int64_t m,
                                 const void *src) {
    for (int64_t p = blockIdx.x; p < m; p += gridDim.x) {
        if (p > 0 && keys[p] == keys[p - 1]) continue;
        int64_t r = keys[p];
        for (int64_t j = threadIdx.x; j < rowlen; j += blockDim.x) {
            double acc = ld_f64(dt, out, r * rowlen + j);
            for (int64_t q = p; q < m && keys[q] == r; q++)
                acc = round_to(dt, acc + ld_f64(dt, src, pos[q] * rowlen + j));
            st_f64(dt, out, r * rowlen + j, acc);
        }
    }
}

__global__ void iota_kernel(int64_t *v, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) v[i] = i;
}

} // namespace mkb_cu

using namespace mkb_cu;

extern "C" cudaError_t mkb_cu_gather_rows(cudaStream_t s, const struct mkb_cu_view *table, const struct mkb_cu_view *idx,
                                          void *out, int64_t *bad_pos, int64_t *bad_val) {
    int64_t *idx64 = nullptr, n;
    *bad_pos = -1;
    cudaError_t e = idx_to_i64(s, idx, &idx64, &n);
    if (e == cudaSuccess) e = check_indices(s, idx64, n, table->shape[0], bad_pos, bad_val);
    int64_t rowlen = 1;
    for (int d = 1; d < table->ndim; d++) rowlen *= table->shape[d];
    if (e == cudaSuccess && *bad_pos < 0 && n * rowlen > 0) {
        int64_t cnt;
        sub_iter row = sub_make(table, 1, table->ndim, &cnt);
        const int es = dtype_bytes(table->dtype);
        bool rows_contiguous = table->dtype != MKB_DTYPE_F4E2M1 && (row.ndim == 0 || (row.ndim == 1 && row.stride[0] == 1));
        if (rows_contiguous) {
            const char *base = (const char *)table->data + table->offset * es;
            int64_t rowbytes = rowlen * es, stride_bytes = table->stride[0] * es;
            bool w16 = ((uintptr_t)base & 15) == 0 && rowbytes % 16 == 0 && stride_bytes % 16 == 0;
            unsigned grid = (unsigned)(n < (int64_t)sm_count() * 16 ? n : (int64_t)sm_count() * 16);
            int threads = rowbytes / (w16 ? 16 : es) >= 256 ? 256 : 64;
            if (w16)
                gather_rows_words<uint4><<<grid, threads, 0, s>>>(base, stride_bytes, idx64, (char *)out, rowbytes, n);
            else if (es == 8)
                gather_rows_words<uint64_t><<<grid, threads, 0, s>>>(base, stride_bytes, idx64, (char *)out, rowbytes, n);
            else if (es == 4)
                gather_rows_words<uint32_t><<<grid, threads, 0, s>>>(base, stride_bytes, idx64, (char *)out, rowbytes, n);
            else if (es == 2)
                gather_rows_words<uint16_t><<<grid, threads, 0, s>>>(base, stride_bytes, idx64, (char *)out, rowbytes, n);
            else
                gather_rows_words<uint8_t><<<grid, threads, 0, s>>>(base, stride_bytes, idx64, (char *)out, rowbytes, n);
            e = cudaGetLastError();
        } else if (n * rowlen > INT32_MAX) {
            e = cudaErrorInvalidValue;
        } else {
            gather_args a;
            a.table = table->data;
            a.dt = table->dtype;
            a.bytes = a.dt == MKB_DTYPE_F4E2M1 ? 0 : dtype_bytes(a.dt);
            a.base = table->offset;
            a.stride0 = table->stride[0];
            int64_t cnt;
            a.row = sub_make(table, 1, table->ndim, &cnt);
            a.rowlen = fastdiv_make((uint32_t)rowlen);
            a.idx = idx64;
            a.out = out;
            gather_kernel<<<grid_for(n * rowlen, 256), 256, 0, s>>>(a, (uint32_t)(n * rowlen));
            e = cudaGetLastError();
        }
    }
    if (idx64) {
        cudaError_t f = cudaFreeAsync(idx64, s);
        if (e == cudaSuccess) e = f;
    }
    return e;
}

extern "C" cudaError_t mkb_cu_index_add_rows(cudaStream_t s, int out_dtype, void *out, int64_t nrows, int64_t rowlen,
                                             const struct mkb_cu_view *idx, const void *src, int64_t *bad_pos,
                                             int64_t *bad_val) {
    int64_t *idx64 = nullptr, m;
    *bad_pos = -1;
    cudaError_t e = idx_to_i64(s, idx, &idx64, &m);
    if (e == cudaSuccess) e = check_indices(s, idx64, m, nrows, bad_pos, bad_val);
    if (e != cudaSuccess || *bad_pos >= 0 || m == 0 || rowlen == 0) {
        if (idx64) {
            cudaError_t f = cudaFreeAsync(idx64, s);
            if (e == cudaSuccess) e = f;
        }
        return e;
    }
    int64_t *keys = nullptr, *pos = nullptr, *pos_sorted = nullptr;
    void *tmp = nullptr;
    size_t tmp_bytes = 0;
    int end_bit = 1;
    while (end_bit < 64 && (1ll << end_bit) <= nrows) end_bit++;
    e = cudaMallocAsync((void **)&keys, sizeof(int64_t) * (size_t)m, s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&pos, sizeof(int64_t) * (size_t)m, s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&pos_sorted, sizeof(int64_t) * (size_t)m, s);
    if (e == cudaSuccess) {
        iota_kernel<<<grid_for(m, 256), 256, 0, s>>>(pos, m);
        e = cudaGetLastError();
    }
    /* indices are checked non-negative and < nrows, so sorting their low end_bit bits suffices */
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, (const uint64_t *)idx64, (uint64_t *)keys, pos,
                                            pos_sorted, m, 0, end_bit, s);
    if (e == cudaSuccess) e = cudaMallocAsync(&tmp, tmp_bytes ? tmp_bytes : 1, s);
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, (const uint64_t *)idx64, (uint64_t *)keys, pos, pos_sorted,
                                            m, 0, end_bit, s);
    if (e == cudaSuccess) {
        int threads = rowlen >= 256 ? 256 : (int)((rowlen + 31) / 32 * 32);
        index_add_kernel<<<grid_for(m * threads, threads), threads, 0, s>>>(out_dtype, out, rowlen, keys, pos_sorted, m,
                                                                           src);
        e = cudaGetLastError();
    }
    void *bufs[5] = {tmp, keys, pos, pos_sorted, idx64};
    for (int i = 0; i < 5; i++) {
        if (!bufs[i]) continue;
        cudaError_t f = cudaFreeAsync(bufs[i], s);
        if (e == cudaSuccess) e = f;
    }
    return e;
}
