/* Call windows and the kernel records placed into them (the decision part of the child's CUPTI
 * tracer, grade/child/trace.c, kept apart so the CPU tests can check it).
 *
 * Each call of solve() runs inside a window [start, end] on CUPTI's clock. Kernel records arrive
 * later, at a flush, and may cover several windows at once (back-to-back timed calls are not
 * flushed between them): each record is placed by its GPU start time. A kernel inside a window
 * counts for that call by origin; the grader's own kernels never count but for the window's
 * totals (the eager baseline's kernels are the grader's); a kernel outside every window that is
 * not the grader's and started after the last window already accounted ran outside every call,
 * and is reported with the first window that began after it (else the last one), or, when no
 * window waits, with the next call to open (the pending account). */
#ifndef MKB_GRADE_WINDOWS_H
#define MKB_GRADE_WINDOWS_H

#include <stdbool.h>
#include <stdint.h>

#include "grade/policy.h"

struct mkb_trace_window {
    uint64_t start, end;
    struct mkb_call_account *acc; /* filled as records are placed */
};

struct mkb_kernel_record {
    uint64_t start, end; /* GPU times, ns */
    int origin;          /* enum mkb_kernel_origin; < 0: launch not seen (a library's) */
    bool graph;          /* launched from a CUDA graph */
    const char *name;
};

/* The window holding time t, or NULL. */
struct mkb_trace_window *mkb_windows_find(struct mkb_trace_window *w, int n, uint64_t t);

/* Place one record. last_end: the end of the latest window already accounted (0: none yet, so
 * nothing is outside a call); pending: where kernels outside every call go when no window waits
 * (its outside, first_outside and graph_launches). */
void mkb_windows_place(struct mkb_trace_window *w, int n, uint64_t last_end, const struct mkb_kernel_record *k,
                       struct mkb_call_account *pending);

#endif
