/* The DSL environment table (see env.h). The versions were current on PyPI when pinned and are
 * the ones the sample solutions under tests/solutions/<dsl>/ are written against. */
#include "dsl/env.h"

#include <stdio.h>
#include <string.h>

const struct mkb_dsl_env mkb_dsl_envs[] = {
    {
        .name = "cutedsl",
        .pins = {"nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl-libs-core==4.8.1",
                 "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-cu13==4.8.1"},
        .needs = {"torch", "numpy", "cuda.bindings", "typing_extensions", "google.protobuf"},
        .why = "4.8.1 is the newest CuTe DSL release; it supports sm_90a (warpgroup MMA, TMA) and ships "
               "cu13 libraries that match a CUDA 13 driver and a cu130 torch. The meta package is "
               "installed without its dependencies because it always pulls the cu12 libraries; the "
               "cu13 libraries are named explicitly instead.",
        .preload = {"cutlass", "cutlass.cute", "cutlass.cute.runtime"},
        .version_module = "cutlass",
        .roots = {"nvidia_cutlass_dsl", "cutlass"},
        .gadgets = {
            {"cuModuleLoad", "loads a GPU module by hand instead of through the DSL"},
            {"cuLibraryLoad", "loads a GPU library by hand instead of through the DSL"},
            {"cuLaunchKernel", "launches a kernel by hand instead of through the DSL"},
            {"nvrtc", "compiles CUDA C at run time (another kernel language)"},
        },
    },
    {
        .name = "tirx",
        .pins = {"apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.15.post2"},
        .needs = {"torch", "numpy", "ml_dtypes", "typing_extensions"},
        .why = "apache-tvm 0.27.0.post1 is the newest Apache TVM release and carries the TIRx compiler as "
               "tvm.tirx (the module its documentation teaches); its CUDA code generator targets sm_90a. "
               "apache-tvm-ffi 0.1.15.post2 is the newest FFI release it accepts (>= 0.1.14.post0) and "
               "passes torch tensors to compiled kernels through DLPack.",
        .preload = {"tvm", "tvm.tirx", "tvm_ffi"},
        .version_module = "tvm",
        .roots = {"tvm", "tvm_ffi", "tvm_tirx"},
        .gadgets = {
            {"compile_cuda", "compiles hand-written CUDA C through TVM's nvcc helper"},
            {"nvcc", "compiles hand-written CUDA C"},
            {"nvrtc", "compiles CUDA C at run time (another kernel language)"},
            {"load_module", "loads a prebuilt module instead of a TIRx-compiled one"},
            {"cuModuleLoad", "loads a GPU module by hand instead of through the DSL"},
        },
    },
};
const int64_t mkb_dsl_env_count = (int64_t)(sizeof mkb_dsl_envs / sizeof *mkb_dsl_envs);

enum mkb_status mkb_dsl_env_find(const char *name, const struct mkb_dsl_env **out) {
    for (int64_t i = 0; i < mkb_dsl_env_count; i++)
        if (!strcmp(mkb_dsl_envs[i].name, name)) {
            *out = &mkb_dsl_envs[i];
            return MKB_OK;
        }
    char known[256] = "";
    size_t used = 0;
    for (int64_t i = 0; i < mkb_dsl_env_count && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", mkb_dsl_envs[i].name);
    return mkb_error(MKB_ERR_NOT_FOUND, "no DSL named '%s' (known: %s)", name, known);
}

char *mkb_dsl_env_pins_str(const struct mkb_dsl_env *e, char *buf, int cap) {
    int used = 0;
    buf[0] = '\0';
    for (int i = 0; i < MKB_DSL_MAX_LIST && e->pins[i] && used < cap; i++)
        used += snprintf(buf + used, (size_t)(cap - used), "%s%s", i ? " " : "", e->pins[i]);
    return buf;
}
