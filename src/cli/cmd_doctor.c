/* mkb doctor: what this machine has and lacks for mkb. The GPU part: the device (name, compute
 * capability, memory), the driver, CUDA runtime and cuBLAS versions, and the two ceilings every
 * speed-of-light bound divides by (device-to-device copy bandwidth and cuBLAS GEMM rates),
 * measured on this GPU and cached per device (backend/cuda/gpu.h says where). Then the programs
 * mkb runs (python3, bwrap).
 *
 * It changes nothing on the machine except the calibration cache, and never fails because
 * something is missing: it reports it (exit 0). --strict makes a missing GPU or program exit 1. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/gpu.h"
#include "cli/cli.h"
#include "core/json.h"

static const char *const doctor_usage =
    "usage: mkb doctor [--json] [--refresh] [--no-calibrate] [--strict]\n"
    "\n"
    "Report what this machine has for mkb: the GPU (name, compute capability, memory, driver, CUDA\n"
    "runtime and cuBLAS versions), the measured ceilings of the speed-of-light bound (device-to-\n"
    "device copy bandwidth and cuBLAS GEMM rates in bf16, fp16, fp32 without TF32, and fp64), and\n"
    "the programs mkb runs (python3, bwrap). The ceilings are measured once per device (a few\n"
    "seconds of GPU time) and cached in $MKB_CACHE_DIR, $XDG_CACHE_HOME/mkb or ~/.cache/mkb.\n"
    "\n"
    "options:\n"
    "  --refresh         measure the ceilings again even when they are cached\n"
    "  --no-calibrate    do not measure or read the ceilings\n"
    "  --strict          exit 1 when the GPU or a program is missing\n"
    "  --json            machine-readable report on stdout\n"
    "  -h, --help        this help\n";

/* The full path of prog found on PATH, into buf; false when it is not there. */
static bool on_path(const char *prog, char *buf, size_t cap) {
    const char *path = getenv("PATH");
    if (!path) return false;
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && (size_t)snprintf(buf, cap, "%.*s/%s", (int)len, p, prog) < cap && access(buf, X_OK) == 0)
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

int cmd_doctor(int argc, char **argv) {
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},         {"refresh", no_argument, NULL, 'r'},
        {"no-calibrate", no_argument, NULL, 'n'}, {"strict", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},         {0, 0, 0, 0},
    };
    if (mkb_cli_wants_help(argc, argv)) {
        fputs(doctor_usage, stdout);
        return 0;
    }
    bool json = false, refresh = false, calibrate = true, strict = false;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 'r': refresh = true; break;
        case 'n': calibrate = false; break;
        case 's': strict = true; break;
        case 'h': fputs(doctor_usage, stdout); return 0;
        default: return mkb_cli_usage("doctor", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return mkb_cli_usage("doctor", "unexpected argument '%s'", argv[optind]);
    if (refresh && !calibrate) return mkb_cli_usage("doctor", "--refresh and --no-calibrate contradict each other");

    bool missing = false;
    struct mkb_gpu_info info;
    enum mkb_status s = mkb_gpu_info_get(&info);
    char gpu_why[512] = "";
    if (s != MKB_OK) {
        snprintf(gpu_why, sizeof gpu_why, "%s", mkb_error_message());
        missing = true;
        if (s != MKB_ERR_UNSUPPORTED) return mkb_cli_fail("doctor", s);
    }
    struct mkb_gpu_calibration cal;
    bool have_cal = false, cached = false;
    if (s == MKB_OK && calibrate) {
        if (!json) fprintf(stderr, "mkb doctor: %s the GPU's ceilings...\n", refresh ? "measuring" : "reading or measuring");
        enum mkb_status cs = mkb_gpu_calibration_get(refresh, &cal, &cached);
        if (cs != MKB_OK) return mkb_cli_fail("doctor", cs);
        have_cal = true;
    }
    static const char *const progs[] = {"python3", "bwrap"};
    char where[2][4096];
    bool found[2];
    for (int i = 0; i < 2; i++) {
        found[i] = on_path(progs[i], where[i], sizeof where[i]);
        if (!found[i]) missing = true;
    }

    if (json) {
        json_t *root = json_object();
        json_object_set_new(root, "cuda_backend_built", json_boolean(mkb_cuda_built()));
        if (s == MKB_OK) {
            json_object_set_new(
                root, "gpu",
                json_pack("{s:s, s:s, s:s, s:i, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:i}", "name", info.name, "uuid",
                          info.uuid, "compute_capability", "", "sm_count", info.sm_count, "memory_bytes",
                          (json_int_t)info.mem_bytes, "l2_bytes", (json_int_t)info.l2_bytes, "driver_version",
                          info.driver_version, "runtime_version", info.runtime_version, "cublas_version",
                          info.cublas_version, "sm_clock_khz", info.clock_khz, "memory_clock_khz",
                          info.mem_clock_khz, "memory_bus_bits", info.mem_bus_bits));
            char cc[16];
            snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
            json_object_set_new(json_object_get(root, "gpu"), "compute_capability", json_string(cc));
        } else {
            json_object_set_new(root, "gpu", json_null());
            json_object_set_new(root, "gpu_missing", json_string(gpu_why));
        }
        if (have_cal)
            json_object_set_new(root, "calibration",
                                json_pack("{s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:s, s:b}", "copy_gbps", cal.copy_gbps,
                                          "gemm_tflops_bf16", cal.gemm_tflops_bf16, "gemm_tflops_f16",
                                          cal.gemm_tflops_f16, "gemm_tflops_f32", cal.gemm_tflops_f32,
                                          "gemm_tflops_f64", cal.gemm_tflops_f64, "copy_bytes",
                                          (json_int_t)cal.copy_bytes, "gemm_n", (json_int_t)cal.gemm_n, "measured_at",
                                          cal.measured_at, "cached", cached));
        json_t *pj = json_object();
        for (int i = 0; i < 2; i++) json_object_set_new(pj, progs[i], found[i] ? json_string(where[i]) : json_null());
        json_object_set_new(root, "programs", pj);
        s = mkb_json_print(root);
        json_decref(root);
        if (s != MKB_OK) return mkb_cli_fail("doctor", s);
    } else {
        printf("gpu\n");
        if (!mkb_cuda_built() || gpu_why[0]) {
            printf("  missing: %s\n", gpu_why);
        } else {
            printf("  device        %s (compute capability %d.%d, %d SMs, %.1f GiB, L2 %.0f MiB)\n", info.name,
                   info.cc_major, info.cc_minor, info.sm_count, (double)info.mem_bytes / (1 << 30),
                   (double)info.l2_bytes / (1 << 20));
            printf("  uuid          %s\n", info.uuid);
            printf("  driver        CUDA %d.%d\n", info.driver_version / 1000, info.driver_version % 1000 / 10);
            printf("  runtime       CUDA %d.%d, cuBLAS %d\n", info.runtime_version / 1000,
                   info.runtime_version % 1000 / 10, info.cublas_version);
            printf("  clocks        SM %d MHz, memory %d MHz, %d-bit bus\n", info.clock_khz / 1000,
                   info.mem_clock_khz / 1000, info.mem_bus_bits);
        }
        if (have_cal) {
            printf("ceilings (%s, measured %s)\n", cached ? "cached" : "measured now", cal.measured_at);
            printf("  copy          %.0f GB/s (device-to-device, %.0f MiB, read + write)\n", cal.copy_gbps,
                   (double)cal.copy_bytes / (1 << 20));
            printf("  gemm bf16     %.1f TFLOP/s (cuBLAS, n = %lld, fp32 accumulation)\n", cal.gemm_tflops_bf16,
                   (long long)cal.gemm_n);
            printf("  gemm fp16     %.1f TFLOP/s\n", cal.gemm_tflops_f16);
            printf("  gemm fp32     %.1f TFLOP/s (no TF32)\n", cal.gemm_tflops_f32);
            printf("  gemm fp64     %.1f TFLOP/s\n", cal.gemm_tflops_f64);
        }
        printf("programs\n");
        for (int i = 0; i < 2; i++) printf("  %-13s %s\n", progs[i], found[i] ? where[i] : "missing");
    }
    return strict && missing ? MKB_EXIT_CHECK : 0;
}
