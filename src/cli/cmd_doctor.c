/* mkb doctor: what this machine has and lacks for mkb. The GPU part: the device (name, compute
 * capability, memory), the driver, CUDA runtime and cuBLAS versions, and the two ceilings every
 * speed-of-light bound divides by (device-to-device copy bandwidth and cuBLAS GEMM rates),
 * measured on this GPU and cached per device (backend/cuda/gpu.h says where). Then the programs
 * mkb runs (python3, bwrap), what grading needs (the grader child, CUPTI, a working sandbox) and
 * whether each DSL's package is installed for the Python it is graded with.
 *
 * It changes nothing on the machine except the calibration cache, and never fails because
 * something is missing: it reports it (exit 0). --strict makes a missing GPU or program exit 1. */
#include <dlfcn.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cuda/gpu.h"
#include "cli/cli.h"
#include "core/json.h"
#include "dsl/dsl.h"
#include "grade/cupti.h"
#include "grade/parent.h"
#include "grade/placement.h"
#include "protocol/proc.h"
#include "protocol/sandbox.h"

static const char *const doctor_usage =
    "usage: mkb doctor [--json] [--refresh] [--no-calibrate] [--strict] [--python PY] [--site DIR]...\n"
    "\n"
    "Report what this machine has for mkb: the GPU (name, compute capability, memory, driver, CUDA\n"
    "runtime and cuBLAS versions), the measured ceilings of the speed-of-light bound (device-to-\n"
    "device copy bandwidth and cuBLAS GEMM rates in bf16, fp16, fp32 without TF32, and fp64), and\n"
    "the programs mkb runs (python3, bwrap), what grading needs (the grader child, CUPTI, a\n"
    "sandbox bubblewrap can make) and, for each DSL, whether its package is installed for the\n"
    "Python it is graded with. The ceilings are measured once per device (a few seconds of GPU\n"
    "time) and cached in $MKB_CACHE_DIR, $XDG_CACHE_HOME/mkb or ~/.cache/mkb. It also says where a\n"
    "grade runs on this host: the GPU's NUMA node and the cores next to it that mkb may use.\n"
    "\n"
    "options:\n"
    "  --refresh         measure the ceilings again even when they are cached\n"
    "  --no-calibrate    do not measure or read the ceilings\n"
    "  --strict          exit 1 when anything above is missing\n"
    "  --python PY       look for the DSLs with this interpreter (as mkb grade --python)\n"
    "  --site DIR        also look in DIR (wheels unpacked with pip --target; as mkb grade\n"
    "                    --site); repeatable\n"
    "  --json            machine-readable report on stdout\n"
    "  -h, --help        this help\n";

/* ---- what grading needs ---- */

struct grading {
    char child[PATH_MAX], child_why[2048];
    char cupti[PATH_MAX], cupti_why[512];
    char sandbox_why[2048]; /* empty: bubblewrap made a sandbox */
};

/* The CUPTI library a grade would load ($MKB_CUPTI_LIB, then grade/cupti.h's list). */
static bool find_cupti(char *path, size_t cap, char *why, size_t wcap) {
    const char *env = getenv("MKB_CUPTI_LIB");
    const char *const names[] = {env && *env ? env : "libcupti.so.13", MKB_CUPTI_CANDIDATES, NULL};
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
        if (!h) continue;
        void *sym = dlsym(h, "cuptiGetVersion");
        Dl_info info;
        snprintf(path, cap, "%s", sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : names[i]);
        /* left loaded: unloading it would orphan what its initialisers allocated */
        return true;
    }
    snprintf(why, wcap, "no libcupti.so.13 found (install the CUDA toolkit's CUPTI or set MKB_CUPTI_LIB)");
    return false;
}

static bool check_grading(struct grading *g, const char *bwrap) {
    memset(g, 0, sizeof *g);
    bool ok = true;
    if (mkb_grade_child_path(NULL, g->child, sizeof g->child) != MKB_OK) {
        snprintf(g->child_why, sizeof g->child_why, "%s", mkb_error_message());
        g->child[0] = '\0';
        ok = false;
    }
    if (!find_cupti(g->cupti, sizeof g->cupti, g->cupti_why, sizeof g->cupti_why)) ok = false;
    if (!bwrap) {
        snprintf(g->sandbox_why, sizeof g->sandbox_why, "bwrap is not on PATH (install bubblewrap)");
        ok = false;
    } else if (mkb_sandbox_check(bwrap, false) != MKB_OK) {
        snprintf(g->sandbox_why, sizeof g->sandbox_why, "%s", mkb_error_message());
        ok = false;
    }
    mkb_error_clear();
    return ok;
}

/* Whether d's root module can be found by the Python d is graded with (found, not imported:
 * importing a DSL takes seconds), and the installed version of its package. */
struct dsl_status {
    char python[PATH_MAX];
    char version[64]; /* empty: not installed */
    char why[PATH_MAX + 512];
};

static void check_dsl(const struct mkb_dsl *d, const char *python, const char *const *sites, int nsites,
                      struct dsl_status *st) {
    memset(st, 0, sizeof *st);
    if (python) snprintf(st->python, sizeof st->python, "%s", python);
    else if (mkb_grade_default_python(d->name, st->python, sizeof st->python) != MKB_OK) {
        snprintf(st->why, sizeof st->why, "%s", mkb_error_message());
        mkb_error_clear();
        return;
    }
    char root[128];
    snprintf(root, sizeof root, "%s", d->modules);
    root[strcspn(root, " ")] = '\0';
    const char *code = "import importlib.metadata as m, importlib.util as u, site, sys\n"
                       "for d in sys.argv[3:]:\n"
                       "    site.addsitedir(d)\n"
                       "spec = u.find_spec(sys.argv[1])\n"
                       "print(m.version(sys.argv[2]) if spec else '')\n";
    const char *argv[8 + 8] = {st->python, "-c", code, root, d->package};
    for (int i = 0; i < nsites && i < 8; i++) argv[5 + i] = sites[i];
    struct mkb_proc_spec ps = {.argv = argv, .deadline = mkb_proc_now() + 60, .capture_max = 4096};
    struct mkb_proc_result r;
    if (mkb_proc_run(&ps, &r) != MKB_OK) {
        snprintf(st->why, sizeof st->why, "%s", mkb_error_message());
        mkb_error_clear();
        return;
    }
    if (r.exit_code == 0 && r.out[0] && r.out[0] != '\n') {
        snprintf(st->version, sizeof st->version, "%s", r.out);
        st->version[strcspn(st->version, "\r\n")] = '\0';
    } else {
        snprintf(st->why, sizeof st->why, "%s is not installed for %s%s ('mkb env create --dsl %s' makes its environment)",
                 d->package, st->python, nsites ? " with the --site directories" : "", d->name);
    }
    mkb_proc_result_release(&r);
}

int cmd_doctor(int argc, char **argv) {
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},         {"refresh", no_argument, NULL, 'r'},
        {"no-calibrate", no_argument, NULL, 'n'}, {"strict", no_argument, NULL, 's'},
        {"python", required_argument, NULL, 'y'}, {"site", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},         {0, 0, 0, 0},
    };
    if (mkb_cli_wants_help(argc, argv)) {
        fputs(doctor_usage, stdout);
        return 0;
    }
    bool json = false, refresh = false, calibrate = true, strict = false;
    const char *python = NULL, *sites[8];
    int nsites = 0;
    struct stat sb;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 'r': refresh = true; break;
        case 'n': calibrate = false; break;
        case 's': strict = true; break;
        case 'y': python = optarg; break;
        case 'S':
            if (nsites >= 8) return mkb_cli_usage("doctor", "at most 8 --site directories");
            if (stat(optarg, &sb) != 0 || !S_ISDIR(sb.st_mode))
                return mkb_cli_usage("doctor", "--site '%s' is not a directory", optarg);
            sites[nsites++] = optarg;
            break;
        case ':': return mkb_cli_usage("doctor", "option '%s' needs a value", argv[optind - 1]);
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
    /* where a grade would run: the GPU's NUMA node and its cores among those allowed */
    struct mkb_placement pl;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
    if (s == MKB_OK) mkb_placement_decide("/sys", info.pci_bus_id, &allowed, &pl);
    char place_cpus[256] = "";
    if (s == MKB_OK) mkb_cpulist_format(&pl.cpus, place_cpus, sizeof place_cpus);
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
        found[i] = mkb_proc_which(progs[i], where[i], sizeof where[i]) == MKB_OK;
        mkb_error_clear();
        if (!found[i]) missing = true;
    }
    struct grading gr;
    if (!check_grading(&gr, found[1] ? where[1] : NULL)) missing = true;
    struct dsl_status dst[8];
    int ndsl = (int)(mkb_dsl_count < 8 ? mkb_dsl_count : 8);
    for (int i = 0; i < ndsl; i++) {
        check_dsl(&mkb_dsls[i], python, sites, nsites, &dst[i]);
        if (!dst[i].version[0]) missing = true;
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
            json_object_set_new(json_object_get(root, "gpu"), "pci_bus_id", json_string(info.pci_bus_id));
            json_object_set_new(root, "placement", mkb_placement_json(&pl, pl.ncpus > 0, NULL));
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
        json_object_set_new(root, "grading",
                            json_pack("{s:o, s:o, s:o, s:o, s:b, s:o}", "child",
                                      gr.child[0] ? json_string(gr.child) : json_null(), "child_missing",
                                      gr.child_why[0] ? json_string(gr.child_why) : json_null(), "cupti",
                                      gr.cupti[0] ? json_string(gr.cupti) : json_null(), "cupti_missing",
                                      gr.cupti_why[0] ? json_string(gr.cupti_why) : json_null(), "sandbox",
                                      !gr.sandbox_why[0], "sandbox_missing",
                                      gr.sandbox_why[0] ? json_string(gr.sandbox_why) : json_null()));
        json_t *dj = json_object();
        for (int i = 0; i < ndsl; i++)
            json_object_set_new(dj, mkb_dsls[i].name,
                                json_pack("{s:s, s:s, s:o, s:o}", "package", mkb_dsls[i].package, "python",
                                          dst[i].python, "version",
                                          dst[i].version[0] ? json_string(dst[i].version) : json_null(), "missing",
                                          dst[i].why[0] ? json_string(dst[i].why) : json_null()));
        json_object_set_new(root, "dsls", dj);
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
            if (pl.ncpus > 0 && pl.restricts)
                printf("  placement     grades run on cores %s, NUMA node %d next to the GPU (%d of the %d cores this process may use)\n",
                       place_cpus, pl.node, pl.ncpus, pl.nallowed);
            else if (pl.ncpus > 0)
                printf("  placement     grades run on cores %s: all %d this process may use are on the GPU's NUMA node %d\n",
                       place_cpus, pl.nallowed, pl.node);
            else
                printf("  placement     grades run where the system puts them: %s\n", pl.why);
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
        printf("grading\n");
        printf("  grader child  %s%s\n", gr.child[0] ? "" : "missing: ", gr.child[0] ? gr.child : gr.child_why);
        printf("  CUPTI         %s%s\n", gr.cupti[0] ? "" : "missing: ", gr.cupti[0] ? gr.cupti : gr.cupti_why);
        printf("  sandbox       %s%s\n", gr.sandbox_why[0] ? "missing: " : "",
               gr.sandbox_why[0] ? gr.sandbox_why : "bubblewrap makes one (no network, no GPU)");
        printf("dsls\n");
        for (int i = 0; i < ndsl; i++) {
            if (dst[i].version[0])
                printf("  %-13s %s %s with %s\n", mkb_dsls[i].name, mkb_dsls[i].package, dst[i].version, dst[i].python);
            else
                printf("  %-13s missing: %s\n", mkb_dsls[i].name, dst[i].why);
        }
    }
    return strict && missing ? MKB_EXIT_CHECK : 0;
}
