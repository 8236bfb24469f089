/* The GPU's identity and its two speed-of-light ceilings, measured (gpu.h).
 *
 * Copy bandwidth: a device-to-device cudaMemcpyAsync of a 1 GiB buffer (several times the L2),
 * counting bytes read plus bytes written. GEMM rates: square cuBLAS GEMMs of size 8192 in bf16,
 * fp16 (fp32 accumulation), fp32 (no TF32) and fp64, with the same math settings as the
 * backend's GEMMs, on random operands (zeros run faster than real data). Each figure is the
 * median of timed repeats after warm-up, timed with CUDA events on the backend's stream.
 * The cache (cache.c) stores the result; this file only measures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_impl.h"
#include "backend/cuda/gpu.h"

enum mkb_status mkb_gpu_info_get(struct mkb_gpu_info *out) {
    memset(out, 0, sizeof *out);
    struct mkb_cuda_state *st = mkb_cuda_state();
    if (!st) return MKB_ERR_UNSUPPORTED;
    struct cudaDeviceProp p;
    MKB_CUDA_CHECK(cudaGetDeviceProperties(&p, st->device));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(out->uuid, sizeof out->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
             u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->mem_bytes = (int64_t)p.totalGlobalMem;
    out->l2_bytes = p.l2CacheSize;
    MKB_CUDA_CHECK(cudaDriverGetVersion(&out->driver_version));
    MKB_CUDA_CHECK(cudaRuntimeGetVersion(&out->runtime_version));
    MKB_CUBLAS_CHECK(cublasGetVersion(st->blas, &out->cublas_version));
    MKB_CUDA_CHECK(cudaDeviceGetAttribute(&out->clock_khz, cudaDevAttrClockRate, st->device));
    MKB_CUDA_CHECK(cudaDeviceGetAttribute(&out->mem_clock_khz, cudaDevAttrMemoryClockRate, st->device));
    MKB_CUDA_CHECK(cudaDeviceGetAttribute(&out->mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, st->device));
    if (cudaDeviceGetPCIBusId(out->pci_bus_id, sizeof out->pci_bus_id, st->device) != cudaSuccess) {
        out->pci_bus_id[0] = '\0';
        cudaGetLastError();
    }
    return MKB_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define MAX_REPS 32

typedef enum mkb_status (*job_fn)(struct mkb_cuda_state *st, void *arg);

/* The median milliseconds of `reps` runs of fn after `warm` untimed ones. */
static enum mkb_status time_job(struct mkb_cuda_state *st, job_fn fn, void *arg, int warm, int reps, double *median_ms) {
    cudaEvent_t e0, e1;
    MKB_CUDA_CHECK(cudaEventCreate(&e0));
    cudaError_t ce = cudaEventCreate(&e1);
    if (ce != cudaSuccess) {
        cudaEventDestroy(e0);
        return mkb_cuda_fail(ce, "cudaEventCreate", __FILE__, __LINE__);
    }
    double ms[MAX_REPS];
    enum mkb_status s = MKB_OK;
    for (int i = 0; s == MKB_OK && i < warm; i++) s = fn(st, arg);
    for (int i = 0; s == MKB_OK && i < reps; i++) {
        float f = 0;
        ce = cudaEventRecord(e0, st->stream);
        if (ce == cudaSuccess) s = fn(st, arg);
        if (ce == cudaSuccess && s == MKB_OK) ce = cudaEventRecord(e1, st->stream);
        if (ce == cudaSuccess && s == MKB_OK) ce = cudaEventSynchronize(e1);
        if (ce == cudaSuccess && s == MKB_OK) ce = cudaEventElapsedTime(&f, e0, e1);
        if (ce != cudaSuccess) s = mkb_cuda_fail(ce, "timing with CUDA events", __FILE__, __LINE__);
        ms[i] = f;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (s != MKB_OK) return s;
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    *median_ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    return MKB_OK;
}

struct copy_job {
    void *dst, *src;
    int64_t bytes;
};

static enum mkb_status copy_run(struct mkb_cuda_state *st, void *arg) {
    struct copy_job *j = arg;
    MKB_CUDA_CHECK(cudaMemcpyAsync(j->dst, j->src, (size_t)j->bytes, cudaMemcpyDeviceToDevice, st->stream));
    return MKB_OK;
}

struct gemm_job {
    enum mkb_dtype dt;
    int64_t n;
    void *a, *b, *c;
};

static enum mkb_status gemm_run(struct mkb_cuda_state *st, void *arg) {
    struct gemm_job *j = arg;
    cudaDataType_t t = j->dt == MKB_DTYPE_F64 ? CUDA_R_64F : j->dt == MKB_DTYPE_F32 ? CUDA_R_32F
                                              : j->dt == MKB_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasComputeType_t ct = j->dt == MKB_DTYPE_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cublasMath_t mode = (j->dt == MKB_DTYPE_F64 || j->dt == MKB_DTYPE_F32)
                            ? CUBLAS_DEFAULT_MATH
                            : (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    MKB_CUBLAS_CHECK(cublasSetMathMode(st->blas, mode));
    double a64 = 1, b64 = 0;
    float a32 = 1, b32 = 0;
    const void *alpha = j->dt == MKB_DTYPE_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = j->dt == MKB_DTYPE_F64 ? (const void *)&b64 : (const void *)&b32;
    MKB_CUBLAS_CHECK(cublasGemmEx_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, j->n, j->n, j->n, alpha, j->a, t, j->n, j->b, t,
                                     j->n, beta, j->c, t, j->n, ct, CUBLAS_GEMM_DEFAULT));
    return MKB_OK;
}

static enum mkb_status measure_gemm(struct mkb_cuda_state *st, enum mkb_dtype dt, int64_t n, double *tflops) {
    struct gemm_job j = {dt, n, NULL, NULL, NULL};
    size_t bytes = (size_t)(n * n * (mkb_dtype_bits(dt) / 8));
    enum mkb_status s = MKB_OK;
    cudaError_t e = cudaMalloc(&j.a, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&j.b, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&j.c, bytes);
    if (e == cudaSuccess) e = mkb_cu_randn(st->stream, j.a, (int)dt, n * n, 7, 1);
    if (e == cudaSuccess) e = mkb_cu_randn(st->stream, j.b, (int)dt, n * n, 7, 2);
    if (e != cudaSuccess) s = mkb_cuda_fail(e, "preparing a calibration GEMM", __FILE__, __LINE__);
    double ms = 0;
    bool slow = dt == MKB_DTYPE_F32 || dt == MKB_DTYPE_F64;
    if (s == MKB_OK) s = time_job(st, gemm_run, &j, slow ? 1 : 3, slow ? 5 : 15, &ms);
    if (s == MKB_OK) *tflops = 2.0 * (double)n * (double)n * (double)n / (ms * 1e-3) / 1e12;
    if (j.a) cudaFree(j.a);
    if (j.b) cudaFree(j.b);
    if (j.c) cudaFree(j.c);
    return s;
}

enum mkb_status mkb_gpu_calibrate(struct mkb_gpu_calibration *out) {
    memset(out, 0, sizeof *out);
    struct mkb_cuda_state *st = mkb_cuda_state();
    if (!st) return MKB_ERR_UNSUPPORTED;
    struct mkb_gpu_info info;
    MKB_TRY(mkb_gpu_info_get(&info));
    snprintf(out->uuid, sizeof out->uuid, "%s", info.uuid);
    size_t free_b = 0, total_b = 0;
    MKB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    struct copy_job cj = {NULL, NULL, (int64_t)1 << 30};
    while (cj.bytes > ((int64_t)64 << 20) && (size_t)cj.bytes * 4 > free_b) cj.bytes /= 2;
    enum mkb_status s = MKB_OK;
    cudaError_t e = cudaMalloc(&cj.src, (size_t)cj.bytes);
    if (e == cudaSuccess) e = cudaMalloc(&cj.dst, (size_t)cj.bytes);
    if (e == cudaSuccess) e = mkb_cu_randn(st->stream, cj.src, MKB_DTYPE_F32, cj.bytes / 4, 3, 0);
    if (e != cudaSuccess) s = mkb_cuda_fail(e, "preparing the calibration copy", __FILE__, __LINE__);
    double ms = 0;
    if (s == MKB_OK) s = time_job(st, copy_run, &cj, 3, 21, &ms);
    if (s == MKB_OK) out->copy_gbps = 2.0 * (double)cj.bytes / (ms * 1e-3) / 1e9;
    out->copy_bytes = cj.bytes;
    if (cj.src) cudaFree(cj.src);
    if (cj.dst) cudaFree(cj.dst);
    MKB_TRY(s);
    out->gemm_n = 8192;
    MKB_TRY(measure_gemm(st, MKB_DTYPE_BF16, out->gemm_n, &out->gemm_tflops_bf16));
    MKB_TRY(measure_gemm(st, MKB_DTYPE_F16, out->gemm_n, &out->gemm_tflops_f16));
    MKB_TRY(measure_gemm(st, MKB_DTYPE_F32, out->gemm_n, &out->gemm_tflops_f32));
    MKB_TRY(measure_gemm(st, MKB_DTYPE_F64, out->gemm_n, &out->gemm_tflops_f64));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out->measured_at, sizeof out->measured_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return MKB_OK;
}
