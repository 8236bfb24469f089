/* Tests of the grader's rule decisions (src/grade/policy.h) on the CPU: who is acting, which audit
 * events are denied to whom, which findings a call's kernel account earns, and the source scan.
 * Every rule is tested from both sides: the attack is denied and the honest neighbour allowed. */
#include <criterion/criterion.h>
#include <string.h>

#include "dsl/env.h"
#include "grade/policy.h"

static struct mkb_policy_paths P;
static struct mkb_audit_policy POL;

static void setup(void) {
    memset(&P, 0, sizeof P);
    P.stdlib[P.nstdlib++] = "/py/lib/python3.12";
    P.stdlib[P.nstdlib++] = "/py/lib/python3.12/lib-dynload";
    P.site[P.nsite++] = "/py/lib/python3.12/site-packages";
    P.site[P.nsite++] = "/venv/lib/python3.12/site-packages";
    P.grader[P.ngrader++] = "/opt/mkb/bin";
    P.grader[P.ngrader++] = "/src/mkb";
    P.system[P.nsystem++] = "/usr/lib";
    P.workdir = "/tmp/mkb-grade-abc";
    mkb_dsl_env_find("tirx", &P.dsl);
    memset(&POL, 0, sizeof POL);
    POL.paths = &P;
    POL.protected_files[POL.nprotected++] = "/home/u/verdict.json";
}

TestSuite(policy, .init = setup);

static struct mkb_audit_decision decide(const char *name, const char *a0, const char *a1, enum mkb_actor actor) {
    struct mkb_audit_event ev = {.name = name, .arg0 = a0, .arg1 = a1, .flags = -1, .self_pid = 100,
                                 .actor = actor, .phase = MKB_PHASE_CANDIDATE};
    struct mkb_audit_decision d;
    mkb_audit_decide(&POL, &ev, &d);
    return d;
}

Test(policy, path_within_is_component_wise) {
    cr_assert(mkb_path_within("/a/b/c", "/a/b"));
    cr_assert(mkb_path_within("/a/b", "/a/b"));
    cr_assert(mkb_path_within("/a/b", "/a/b/"));
    cr_assert(!mkb_path_within("/a/bc", "/a/b"));
    cr_assert(!mkb_path_within("/a", "/a/b"));
}

Test(policy, classify_actors) {
    cr_assert_eq(mkb_policy_classify(&P, "/tmp/mkb-grade-abc/kernel.py"), MKB_ACTOR_CANDIDATE);
    cr_assert_eq(mkb_policy_classify(&P, "/tmp/elsewhere/x.py"), MKB_ACTOR_CANDIDATE);
    cr_assert_eq(mkb_policy_classify(&P, "/py/lib/python3.12/subprocess.py"), MKB_ACTOR_STDLIB);
    cr_assert_eq(mkb_policy_classify(&P, "/py/lib/python3.12/site-packages/torch/__init__.py"), MKB_ACTOR_LIBRARY);
    cr_assert_eq(mkb_policy_classify(&P, "/venv/lib/python3.12/site-packages/tvm/tirx/build.py"), MKB_ACTOR_DSL);
    cr_assert_eq(mkb_policy_classify(&P, "/venv/lib/python3.12/site-packages/tvm_ffi/lib/libtvm_ffi.so"),
                 MKB_ACTOR_DSL);
    /* "tvmx" is not the "tvm" root */
    cr_assert_eq(mkb_policy_classify(&P, "/venv/lib/python3.12/site-packages/tvmx/a.py"), MKB_ACTOR_LIBRARY);
    cr_assert_eq(mkb_policy_classify(&P, "<frozen importlib._bootstrap>"), MKB_ACTOR_STDLIB);
    cr_assert_eq(mkb_policy_classify(&P, "<mkb-grader>"), MKB_ACTOR_GRADER);
    cr_assert_eq(mkb_policy_classify(&P, "/src/mkb/tests/fixtures/x"), MKB_ACTOR_GRADER);
    cr_assert_eq(mkb_policy_classify(&P, "/usr/lib/x86_64-linux-gnu/libcublas.so"), MKB_ACTOR_LIBRARY);
    cr_assert(mkb_policy_is_generated("<string>"));
    cr_assert(!mkb_policy_is_generated("<frozen os>"));
}

Test(policy, workdir_wins_over_trusted_parents) {
    /* a grade directory under a site directory must still be the candidate's */
    P.workdir = "/py/lib/python3.12/site-packages/grade-1";
    cr_assert_eq(mkb_policy_classify(&P, "/py/lib/python3.12/site-packages/grade-1/kernel.py"), MKB_ACTOR_CANDIDATE);
}

Test(policy, environment_inside_grader_tree_is_library) {
    P.site[P.nsite++] = "/src/mkb/.venv/lib/python3.12/site-packages";
    cr_assert_eq(mkb_policy_classify(&P, "/src/mkb/.venv/lib/python3.12/site-packages/torch/x.py"), MKB_ACTOR_LIBRARY);
    cr_assert_eq(mkb_policy_classify(&P, "/src/mkb/src/grade/rule.c"), MKB_ACTOR_GRADER);
}

Test(policy, preload_allows_everything) {
    struct mkb_audit_event ev = {.name = "import", .arg0 = "triton", .flags = -1, .actor = MKB_ACTOR_CANDIDATE,
                                 .phase = MKB_PHASE_PRELOAD};
    struct mkb_audit_decision d;
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(!d.deny);
}

Test(policy, forbidden_imports) {
    struct mkb_audit_decision d = decide("import", "triton", NULL, MKB_ACTOR_CANDIDATE);
    cr_assert(d.deny);
    cr_assert_str_eq(d.rule, "forbidden-import");
    cr_assert(strstr(d.message, "triton"));
    cr_assert(decide("import", "triton.language", NULL, MKB_ACTOR_CANDIDATE).deny);
    /* triton is forbidden even when a library pulls it in (torch.compile's Inductor would) */
    cr_assert(decide("import", "triton", NULL, MKB_ACTOR_LIBRARY).deny);
    cr_assert(decide("import", "torch._inductor.codegen", NULL, MKB_ACTOR_LIBRARY).deny);
    cr_assert(decide("import", "cupy", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("import", "numba.cuda", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("import", "torch.utils.cpp_extension", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("import", "cffi", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("import", "subprocess", NULL, MKB_ACTOR_CANDIDATE).deny);
    /* dynamo is lazily imported by torch itself: only the candidate may not */
    cr_assert(decide("import", "torch._dynamo", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("import", "torch._dynamo", NULL, MKB_ACTOR_LIBRARY).deny);
    cr_assert(!decide("import", "cffi", NULL, MKB_ACTOR_DSL).deny);
    /* honest neighbours */
    cr_assert(!decide("import", "tritonclient_not_really", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("import", "torch", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("import", "math", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("import", "tvm.tirx", NULL, MKB_ACTOR_CANDIDATE).deny);
}

Test(policy, native_extensions_from_outside_the_environment) {
    struct mkb_audit_decision d = decide("import", "evil", "/tmp/mkb-grade-abc/evil.cpython-312-x86_64-linux-gnu.so",
                                         MKB_ACTOR_CANDIDATE);
    cr_assert(d.deny);
    cr_assert(!decide("import", "torch._C", "/py/lib/python3.12/site-packages/torch/_C.cpython-312.so",
                      MKB_ACTOR_LIBRARY).deny);
}

Test(policy, ctypes_is_denied_to_the_candidate_only) {
    cr_assert(decide("ctypes.dlopen", "libc.so.6", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("ctypes.call_function", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("ctypes.cdata", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("ctypes.call_function", NULL, NULL, MKB_ACTOR_DSL).deny);
    cr_assert(!decide("ctypes.dlopen", "/py/lib/python3.12/site-packages/torch/lib/libtorch.so", NULL,
                      MKB_ACTOR_LIBRARY).deny);
    /* a library loading a shared object the candidate brought (torch.ops.load_library) */
    struct mkb_audit_decision d = decide("ctypes.dlopen", "/tmp/mkb-grade-abc/k.so", NULL, MKB_ACTOR_LIBRARY);
    cr_assert(d.deny);
    cr_assert_str_eq(d.rule, "forbidden-call");
}

Test(policy, processes_and_signals) {
    cr_assert(decide("subprocess.Popen", "nvcc", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("os.system", "ls", NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("os.exec", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("os.posix_spawn", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("os.fork", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    /* the DSL may run its compiler */
    cr_assert(!decide("subprocess.Popen", "nvcc", NULL, MKB_ACTOR_DSL).deny);
    struct mkb_audit_event ev = {.name = "os.kill", .pid = 1, .self_pid = 100, .actor = MKB_ACTOR_LIBRARY,
                                 .phase = MKB_PHASE_CANDIDATE, .flags = -1};
    struct mkb_audit_decision d;
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(d.deny, "signalling another process is denied to everybody");
    ev.pid = 100;
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(!d.deny);
    cr_assert(decide("socket.connect", NULL, NULL, MKB_ACTOR_LIBRARY).deny);
}

Test(policy, files) {
    struct mkb_audit_decision d = decide("open", "/proc/100/mem", "rb", MKB_ACTOR_CANDIDATE);
    cr_assert(d.deny);
    cr_assert_str_eq(d.rule, "forbidden-file");
    cr_assert(decide("open", "/proc/100/mem", "rb", MKB_ACTOR_LIBRARY).deny);
    cr_assert(decide("open", "/proc/42/environ", "rb", MKB_ACTOR_CANDIDATE).deny, "another process's files");
    cr_assert(decide("open", "/proc/100/map_files/7f00-7f01", "rb", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("open", "/proc/100/status", "r", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("open", "/proc/cpuinfo", "r", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("open", "/src/mkb/src/grade/rule.c", "r", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("open", "/opt/mkb/bin/mkb", "rb", MKB_ACTOR_DSL).deny);
    cr_assert(decide("open", "/home/u/verdict.json", "r", MKB_ACTOR_CANDIDATE).deny);
    /* writes: only inside the candidate's directory */
    cr_assert(decide("open", "/py/lib/python3.12/site-packages/torch/__init__.py", "w", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("open", "/tmp/mkb-grade-abc/cache.bin", "wb", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("open", "/py/lib/python3.12/site-packages/torch/__init__.py", "r", MKB_ACTOR_CANDIDATE).deny);
    struct mkb_audit_event ev = {.name = "open", .arg0 = "/etc/x", .flags = 01 | 0100, .self_pid = 100,
                                 .actor = MKB_ACTOR_CANDIDATE, .phase = MKB_PHASE_CANDIDATE};
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(d.deny, "os.open with O_WRONLY|O_CREAT outside the directory");
    /* the DSL writes its caches and temporary files where it likes */
    cr_assert(!decide("open", "/tmp/tvm-xyz/kernel.cu", "w", MKB_ACTOR_DSL).deny);
}

Test(policy, forged_code) {
    struct mkb_audit_decision d =
        decide("compile", NULL, "/venv/lib/python3.12/site-packages/tvm/fake.py", MKB_ACTOR_CANDIDATE);
    cr_assert(d.deny);
    cr_assert_str_eq(d.rule, "forged-code");
    cr_assert(!decide("compile", NULL, "/tmp/mkb-grade-abc/kernel.py", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("compile", NULL, "<string>", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("compile", NULL, "/venv/lib/python3.12/site-packages/tvm/x.py", MKB_ACTOR_DSL).deny);
    cr_assert(decide("code.__new__", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("object.__setattr__", "builtins", "__code__", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("object.__setattr__", "torch", "__dlpack__", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("object.__setattr__", "kernel", "cache", MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("sys._getframe", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("gc.get_objects", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(decide("gc.get_referrers", NULL, NULL, MKB_ACTOR_CANDIDATE).deny);
    cr_assert(!decide("sys._getframe", NULL, NULL, MKB_ACTOR_DSL).deny);
}

/* The standard library on the candidate's behalf: namedtuple (run when a kernel imports a module
 * that defines one) sets the defaults of the function it generated and asks for its caller's
 * module name; that is allowed. The same setattr by the candidate's own statement, or through the
 * standard library onto somebody else's function, and frame access through other standard-library
 * code (inspect) stay denied. */
static struct mkb_audit_decision decide_at(const char *name, const char *attr, const char *innermost,
                                           const char *target) {
    struct mkb_audit_event ev = {.name = name, .arg0 = "builtins", .arg1 = attr, .flags = -1, .self_pid = 100,
                                 .actor = MKB_ACTOR_CANDIDATE, .phase = MKB_PHASE_CANDIDATE,
                                 .innermost = innermost, .target_file = target};
    struct mkb_audit_decision d;
    mkb_audit_decide(&POL, &ev, &d);
    return d;
}

Test(policy, stdlib_on_the_candidates_behalf) {
    const char *coll = "/py/lib/python3.12/collections/__init__.py", *mock = "/py/lib/python3.12/unittest/mock.py";
    const char *kernel = "/tmp/mkb-grade-abc/kernel.py";
    cr_assert(!decide_at("object.__setattr__", "__defaults__", coll, "<string>").deny, "namedtuple's own __new__");
    cr_assert(!decide_at("object.__setattr__", "__code__", mock, kernel).deny, "the candidate's own function");
    cr_assert(decide_at("object.__setattr__", "__defaults__", kernel, "<string>").deny, "the candidate's statement");
    cr_assert(decide_at("object.__setattr__", "__code__", kernel, kernel).deny, "swapping its own code directly");
    struct mkb_audit_decision d =
        decide_at("object.__setattr__", "__defaults__", mock, "/py/lib/python3.12/site-packages/torch/functional.py");
    cr_assert(d.deny && !strcmp(d.rule, "forged-code"), "through mock.patch onto a library function");
    cr_assert(decide_at("object.__setattr__", "__kwdefaults__", mock, "/py/lib/python3.12/json/__init__.py").deny);
    cr_assert(decide_at("object.__setattr__", "__code__", mock, NULL).deny, "a target that is not a function");
    cr_assert(decide_at("object.__setattr__", "__code__", mock, "<mkb-grader>").deny, "the grader's code");
    /* frames */
    cr_assert(!decide_at("sys._getframe", NULL, coll, NULL).deny, "namedtuple asks for its caller's module");
    cr_assert(!decide_at("sys._getframe", NULL, "/py/lib/python3.12/typing.py", NULL).deny);
    cr_assert(!decide_at("sys._getframe", NULL, "/py/lib/python3.12/enum.py", NULL).deny);
    cr_assert(decide_at("sys._getframe", NULL, "/py/lib/python3.12/inspect.py", NULL).deny, "inspect hands out frames");
    cr_assert(decide_at("sys._getframe", NULL, kernel, NULL).deny);
    cr_assert(decide_at("sys._getframe", NULL, "/tmp/mkb-grade-abc/collections/__init__.py", NULL).deny,
              "a file of the candidate's named like the standard library's");
    cr_assert(decide_at("sys._current_frames", NULL, coll, NULL).deny);
    /* logging: findCaller (logging calling logging.currentframe) reads names; currentframe called
     * by the candidate would hand it a frame */
    const char *lg = "/py/lib/python3.12/logging/__init__.py";
    struct mkb_audit_event ev = {.name = "sys._getframe", .flags = -1, .self_pid = 100, .actor = MKB_ACTOR_CANDIDATE,
                                 .phase = MKB_PHASE_CANDIDATE, .innermost = lg, .innermost_caller = lg};
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(!d.deny, "logging's findCaller");
    ev.innermost_caller = kernel;
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(d.deny, "logging.currentframe() called by the kernel");
    ev.innermost_caller = NULL;
    mkb_audit_decide(&POL, &ev, &d);
    cr_assert(d.deny, "no caller known");
}

Test(policy, judge_call) {
    struct mkb_call_account a = {0};
    struct mkb_finding f[8];
    a.kernels[MKB_ORIGIN_DSL] = 1;
    a.kernels[MKB_ORIGIN_LIBRARY] = 3;
    cr_assert_eq(mkb_policy_judge_call(&a, "CuTe DSL", f, 8), 0, "a DSL kernel plus eager torch is allowed");

    memset(&a, 0, sizeof a);
    a.kernels[MKB_ORIGIN_LIBRARY] = 2;
    int n = mkb_policy_judge_call(&a, "CuTe DSL", f, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(f[0].rule, "no-dsl-kernel");
    cr_assert(strstr(f[0].message, "CuTe DSL"));
    cr_assert(strstr(f[0].message, "2 other kernels"));

    memset(&a, 0, sizeof a);
    a.kernels[MKB_ORIGIN_DSL] = 1;
    a.kernels[MKB_ORIGIN_FOREIGN] = 1;
    strcpy(a.first_foreign, "triton_poi_fused_add_0");
    n = mkb_policy_judge_call(&a, "TIRx", f, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(f[0].rule, "foreign-kernel");
    cr_assert(strstr(f[0].message, "triton_poi_fused_add_0"));

    memset(&a, 0, sizeof a);
    a.kernels[MKB_ORIGIN_DSL] = 1;
    a.graph_launches = 1;
    n = mkb_policy_judge_call(&a, "TIRx", f, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(f[0].rule, "cuda-graph");

    memset(&a, 0, sizeof a);
    a.kernels[MKB_ORIGIN_DSL] = 2;
    a.outside = 3;
    n = mkb_policy_judge_call(&a, "TIRx", f, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(f[0].rule, "work-outside-call");

    /* grader kernels never count, either way */
    memset(&a, 0, sizeof a);
    a.kernels[MKB_ORIGIN_GRADER] = 10;
    n = mkb_policy_judge_call(&a, "TIRx", f, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(f[0].rule, "no-dsl-kernel");
    cr_assert(strstr(f[0].message, "0 other kernels"));
}

static int scan(const char *src, const char *dsl, struct mkb_finding *f) {
    const struct mkb_dsl_env *e = NULL;
    if (dsl) mkb_dsl_env_find(dsl, &e);
    return mkb_policy_scan_source(src, strlen(src), e, f, 16);
}

Test(policy, scan_finds_forbidden_names) {
    struct mkb_finding f[16];
    cr_assert_eq(scan("import triton\n", NULL, f), 1);
    cr_assert(strstr(f[0].message, "line 1"));
    cr_assert_eq(scan("x = 1\nfrom torch.utils import cpp_extension\n", NULL, f), 1);
    cr_assert(strstr(f[0].message, "line 2"));
    cr_assert_eq(scan("f = torch.compile(g)\n", NULL, f), 1);
    cr_assert_eq(scan("g = torch.cuda.CUDAGraph()\n", NULL, f), 1);
    cr_assert_eq(scan("with torch.cuda.graph(g):\n  pass\n", NULL, f), 1);
    cr_assert_eq(scan("import os\nos.system('x')\n", NULL, f), 1);
    cr_assert_eq(scan("m = __import__('tri' + 'ton')\n", NULL, f), 1);
    cr_assert_eq(scan("exec(code)\n", NULL, f), 1);
    cr_assert_eq(scan("torch . compile (g)\n", NULL, f), 1, "spaces around the dot");
}

Test(policy, scan_ignores_comments_strings_and_attributes) {
    struct mkb_finding f[16];
    cr_assert_eq(scan("# no triton, no torch.compile here\nx = 1\n", NULL, f), 0);
    cr_assert_eq(scan("'''docstring: we avoid triton and ctypes'''\n", NULL, f), 0);
    cr_assert_eq(scan("s = \"import subprocess\"\n", NULL, f), 0);
    cr_assert_eq(scan("s = r'\\'triton\\''\n", NULL, f), 0);
    /* the DSL's own compile is an attribute, not the builtin */
    cr_assert_eq(scan("fn = cute.compile(kernel, a, b)\n", "cutedsl", f), 0);
    cr_assert_eq(scan("mod = tvm.compile(func, target='cuda')\n", "tirx", f), 0);
    cr_assert_eq(scan("my_triton_free_helper = 1\n", NULL, f), 0);
}

Test(policy, scan_finds_dsl_gadgets) {
    struct mkb_finding f[16];
    cr_assert_eq(scan("from tvm.contrib import nvcc\nnvcc.compile_cuda(src)\n", "tirx", f), 2);
    cr_assert_eq(scan("m = tvm.runtime.load_module('k.so')\n", "tirx", f), 1);
    cr_assert_eq(scan("cuda.cuModuleLoadData(img)\n", "cutedsl", f), 1);
    /* a gadget of one DSL is not flagged in the other */
    cr_assert_eq(scan("m = tvm.runtime.load_module('k.so')\n", "cutedsl", f), 0);
}
