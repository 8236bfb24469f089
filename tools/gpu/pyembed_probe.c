/* pyembed_probe: run a Python script in an interpreter embedded the way mkb-grade-child embeds
 * it (the shared libpython, configured from C), to tell how much of the grader's host time inside
 * solve() comes from embedding itself. Used by tools/gpu/validate-grader.sh, step "probe":
 *
 *     pyembed_probe [--audit-hook] PYTHON SCRIPT [ARG...]
 *
 * PYTHON is the interpreter whose installation (prefix, site-packages) to use; SCRIPT runs as
 * __main__ with sys.argv = [SCRIPT, ARG...]. --audit-hook installs a C audit hook that lets every
 * event pass, as the child's hook does for events it does not inspect. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <string.h>

static long long events;

static int pass_all(const char *event, PyObject *args, void *ud) {
    (void)event;
    (void)args;
    (void)ud;
    events++;
    return 0;
}

int main(int argc, char **argv) {
    int a = 1;
    int hook = 0;
    if (a < argc && !strcmp(argv[a], "--audit-hook")) {
        hook = 1;
        a++;
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: pyembed_probe [--audit-hook] PYTHON SCRIPT [ARG...]\n");
        return 2;
    }
    if (hook && PySys_AddAuditHook(pass_all, NULL) != 0) return 3;
    PyConfig cfg;
    PyConfig_InitPythonConfig(&cfg);
    cfg.parse_argv = 0;
    cfg.install_signal_handlers = 0;
    PyStatus st = PyConfig_SetBytesString(&cfg, &cfg.program_name, argv[a]);
    if (!PyStatus_Exception(st)) st = PyConfig_SetBytesString(&cfg, &cfg.executable, argv[a]);
    if (!PyStatus_Exception(st)) st = PyConfig_SetBytesArgv(&cfg, argc - a - 1, argv + a + 1);
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&cfg);
    PyConfig_Clear(&cfg);
    if (PyStatus_Exception(st)) {
        fprintf(stderr, "pyembed_probe: cannot start Python: %s\n", st.err_msg ? st.err_msg : "?");
        return 3;
    }
    FILE *f = fopen(argv[a + 1], "r");
    if (!f) {
        fprintf(stderr, "pyembed_probe: cannot open %s\n", argv[a + 1]);
        return 2;
    }
    int rc = PyRun_SimpleFileExFlags(f, argv[a + 1], 1, NULL);
    if (hook) fprintf(stderr, "pyembed_probe: %lld audited events\n", events);
    if (Py_FinalizeEx() < 0) rc = 1;
    return rc ? 1 : 0;
}
