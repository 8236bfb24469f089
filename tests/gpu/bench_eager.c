/* The eager baseline of each problem on the GPU: the reference program in compute precision on
 * the CUDA backend, timed as the grader times a kernel (device sync, start, one call, device
 * sync, end: host wall clock; CUDA events recorded alongside), after warm-up, median of the
 * repeats, inputs drawn once. Each repeat runs in a fresh context whose buffers go back to the
 * stream-ordered pool when it is released, outside the timed region. Also reports the problem's
 * speed-of-light time from its costs and the calibrated ceilings of this GPU.
 * A benchmark, not a test: it checks nothing beyond the runs succeeding.
 *
 * usage: bench_eager [--scale full|test] [--warmup N] [--reps N] [--json FILE] [id ...]
 * Exits 77 where there is no GPU. */
#include <inttypes.h>
#include <jansson.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "core/json.h"
#include "gpu_common.h"
#include "problem/problem.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    enum mkb_scale scale = MKB_SCALE_FULL;
    int warm = 10, reps = 50;
    const char *json_path = NULL;
    const char *only[64];
    int nonly = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale = !strcmp(argv[++i], "test") ? MKB_SCALE_TEST : MKB_SCALE_FULL;
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            warm = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (argv[i][0] != '-' && nonly < 64) {
            only[nonly++] = argv[i];
        } else {
            fprintf(stderr, "usage: bench_eager [--scale full|test] [--warmup N] [--reps N] [--json FILE] [id ...]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000 || warm < 0) {
        fprintf(stderr, "bench_eager: --reps must be 1..1000 and --warmup >= 0\n");
        return 2;
    }
    struct mkb_backend *gpu = gpu_or_skip("bench_eager");
    struct mkb_gpu_calibration cal;
    bool cached;
    if (mkb_gpu_calibration_get(false, &cal, &cached) != MKB_OK) die("calibration");
    cudaStream_t stream = (cudaStream_t)mkb_cuda_stream();
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) die("events");
    double *wall = malloc(sizeof(double) * (size_t)reps), *ev = malloc(sizeof(double) * (size_t)reps);
    if (!wall || !ev) die("out of host memory");
    json_t *rows = json_array();
    printf("%-58s %10s %10s %10s %10s %8s %6s\n", "problem", "eager ms", "events ms", "min ms", "SOL ms", "SOL %",
           "ops");
    int failed = 0;
    for (int i = 0; i < mkb_registry_count; i++) {
        const struct mkb_problem *p = mkb_registry[i].p;
        if (nonly) {
            bool want = false;
            for (int k = 0; k < nonly; k++) {
                const struct mkb_problem *q;
                if (mkb_problem_find(only[k], &q) == MKB_OK && q == p) want = true;
            }
            if (!want) continue;
        }
        struct mkb_dims d;
        mkb_dims_init(&d, p, scale);
        struct mkb_cost cost;
        if (mkb_problem_cost(p, scale, &cost) != MKB_OK) die("cost");
        struct mkb_ctx cin;
        mkb_ctx_init(&cin, gpu, MKB_PREC_COMPUTE, 1);
        struct mkb_args in;
        enum mkb_status s = mkb_problem_generate(&cin, p, &d, &in);
        int64_t n_ops = 0;
        enum mkb_dtype out_dt = p->outputs[0].dtype;
        for (int r = 0; s == MKB_OK && r < warm + reps; r++) {
            struct mkb_ctx c;
            mkb_ctx_init(&c, gpu, MKB_PREC_COMPUTE, 1);
            struct mkb_tensor *out[MKB_MAX_ARGS];
            if (cudaStreamSynchronize(stream) != cudaSuccess) die("sync");
            double t0 = now_ms();
            cudaEventRecord(e0, stream);
            s = mkb_problem_run(&c, p, &d, &in, out);
            cudaEventRecord(e1, stream);
            if (cudaStreamSynchronize(stream) != cudaSuccess) die("sync");
            double t1 = now_ms();
            float f = 0;
            cudaEventElapsedTime(&f, e0, e1);
            if (r >= warm) {
                wall[r - warm] = t1 - t0;
                ev[r - warm] = f;
            }
            n_ops = c.n_ops;
            mkb_ctx_release(&c);
        }
        if (s != MKB_OK) {
            printf("FAIL %s: %s\n", p->name, mkb_error_message());
            failed++;
            mkb_ctx_release(&cin);
            continue;
        }
        double med = median(wall, reps), med_ev = median(ev, reps), lo = wall[0];
        double peak = out_dt == MKB_DTYPE_BF16 ? cal.gemm_tflops_bf16 : out_dt == MKB_DTYPE_F16 ? cal.gemm_tflops_f16
                      : out_dt == MKB_DTYPE_F64 ? cal.gemm_tflops_f64 : cal.gemm_tflops_f32;
        double t_flops = cost.flops / (peak * 1e12) * 1e3, t_bytes = cost.min_bytes / (cal.copy_gbps * 1e9) * 1e3;
        double sol = t_flops > t_bytes ? t_flops : t_bytes;
        printf("%-58.58s %10.3f %10.3f %10.3f %10.3f %7.1f%% %6" PRId64 "\n", p->name, med, med_ev, lo, sol,
               100 * sol / med, n_ops);
        json_array_append_new(rows, json_pack("{s:i, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:i}", "id", p->id,
                                              "name", p->name, "eager_ms", med, "events_ms", med_ev, "min_ms", lo,
                                              "sol_ms", sol, "flops", cost.flops, "min_bytes", cost.min_bytes,
                                              "op_bytes", cost.op_bytes, "ops", (json_int_t)n_ops, "reps", reps));
        fflush(stdout);
        mkb_ctx_release(&cin);
    }
    if (json_path) {
        json_t *root = json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:o}", "scale", scale == MKB_SCALE_FULL ? "full" : "test",
                                 "warmup", warm, "reps", reps, "copy_gbps", cal.copy_gbps, "gemm_tflops_bf16",
                                 cal.gemm_tflops_bf16, "gemm_tflops_f32", cal.gemm_tflops_f32, "problems", rows);
        if (!root || mkb_json_save(json_path, root) != MKB_OK) die("writing the JSON");
        json_decref(root);
    } else {
        json_decref(rows);
    }
    free(wall);
    free(ev);
    return failed ? 1 : 0;
}
