#include "grade/diagnose.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *name;
    size_t offset;
    const char *what;
} items[] = {
    {"no-audit", offsetof(struct mkb_diagnose, no_audit), "the audit hook lets every Python event pass"},
    {"no-trace", offsetof(struct mkb_diagnose, no_trace), "no CUPTI: kernels are neither counted nor attributed"},
    {"no-callbacks", offsetof(struct mkb_diagnose, no_callbacks),
     "CUPTI records kernels but takes no API callbacks (kernels unattributed)"},
    {"no-activity", offsetof(struct mkb_diagnose, no_activity),
     "CUPTI takes its API callbacks but records no kernels (nothing counted)"},
    {"flush-each", offsetof(struct mkb_diagnose, flush_each),
     "CUPTI is flushed around every timed call instead of once per batch (the first launch after a flush is slow)"},
    {"verify-each", offsetof(struct mkb_diagnose, verify_each),
     "verify each timed draw right after its call instead of in batches after the calls"},
    {"no-pin", offsetof(struct mkb_diagnose, no_pin), "the grading thread may move between cores during timed calls"},
    {"keep-gc", offsetof(struct mkb_diagnose, keep_gc), "Python's garbage collector stays on during timed calls"},
    {"no-numa", offsetof(struct mkb_diagnose, no_numa),
     "the child runs on whatever cores it is given, not those of the GPU's NUMA node"},
};

enum mkb_status mkb_diagnose_parse(const char *list, struct mkb_diagnose *out) {
    memset(out, 0, sizeof *out);
    if (!list || !list[0]) return mkb_error(MKB_ERR_INVALID, "--diagnose needs a list of names (--diagnose help lists them)");
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        bool found = false;
        for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
            if (n == strlen(items[i].name) && !strncmp(p, items[i].name, n)) {
                *(bool *)((char *)out + items[i].offset) = true;
                found = true;
            }
        if (!found)
            return mkb_error(MKB_ERR_INVALID, "--diagnose: '%.*s' is not a part of the grader (--diagnose help lists them)",
                             (int)n, p);
        if (!p[n]) return MKB_OK;
        p += n + 1;
    }
}

bool mkb_diagnose_relaxes_tracing(const struct mkb_diagnose *d) {
    return d->no_trace || d->no_callbacks || d->no_activity;
}

void mkb_diagnose_print_help(FILE *out) {
    fprintf(out, "mkb grade --diagnose LIST: grade with parts of the grader switched off, to measure their cost\n"
                 "inside the timed calls (comma-separated; such a verdict never passes):\n");
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) fprintf(out, "  %-14s %s\n", items[i].name, items[i].what);
}
