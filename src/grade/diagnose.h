/* mkb grade --diagnose: grade with one part of the grader switched off, to measure what that
 * part costs inside the timed calls. Such a grade enforces less than the rules do, so its
 * verdict never passes (grade/parent.c marks it "diagnostic"). */
#ifndef MKB_GRADE_DIAGNOSE_H
#define MKB_GRADE_DIAGNOSE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/status.h"

struct mkb_diagnose {
    bool no_audit;     /* the audit hook lets everything pass */
    bool no_trace;     /* no CUPTI at all */
    bool no_callbacks; /* CUPTI's kernel records only: no API callbacks, so kernels are unattributed */
    bool no_activity;  /* CUPTI's API callbacks only: no kernel records, so nothing is counted */
    bool flush_each;   /* CUPTI is flushed around every timed call, not once per batch of calls */
    bool verify_each;  /* verify each timed draw right after its call, not in batches after them */
    bool no_pin;       /* the grading thread may move between cores during the timed calls */
    bool keep_gc;      /* Python's garbage collector stays on during the timed calls */
    bool no_numa;      /* the process runs on whatever cores it is given, not the GPU's NUMA node's */
};

/* Parse a comma-separated list of the names --diagnose help prints into *out (zeroed first);
 * an unknown or empty name is MKB_ERR_INVALID with a message naming it. */
enum mkb_status mkb_diagnose_parse(const char *list, struct mkb_diagnose *out);
/* Whether any switch that turns off rule enforcement (audit or tracing) is set. */
bool mkb_diagnose_relaxes_tracing(const struct mkb_diagnose *d);
/* One line per name: what it switches off. */
void mkb_diagnose_print_help(FILE *out);

#endif
