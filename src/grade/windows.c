#include "grade/windows.h"

#include <stdio.h>

struct mkb_trace_window *mkb_windows_find(struct mkb_trace_window *w, int n, uint64_t t) {
    for (int i = 0; i < n; i++)
        if (t >= w[i].start && t <= w[i].end) return &w[i];
    return NULL;
}

/* the call a kernel outside every window is reported with: the first window that began after
 * it, else the last one; NULL when none waits */
static struct mkb_call_account *reported_with(struct mkb_trace_window *w, int n, uint64_t t) {
    for (int i = 0; i < n; i++)
        if (w[i].start > t) return w[i].acc;
    return n ? w[n - 1].acc : NULL;
}

void mkb_windows_place(struct mkb_trace_window *w, int n, uint64_t last_end, const struct mkb_kernel_record *k,
                       struct mkb_call_account *pending) {
    struct mkb_trace_window *in = mkb_windows_find(w, n, k->start);
    double ms = (double)(k->end - k->start) * 1e-6;
    if (in) {
        in->acc->all_kernels++;
        in->acc->all_kernel_ms += ms;
    }
    int o = k->origin;
    if (o == MKB_ORIGIN_GRADER) return;
    if (o < 0 || o > MKB_ORIGIN_GRADER) o = MKB_ORIGIN_LIBRARY;
    struct mkb_call_account *acc = in ? in->acc : reported_with(w, n, k->start);
    if (!acc) acc = pending;
    if (k->graph) acc->graph_launches++;
    if (in) {
        acc->kernels[o]++;
        acc->kernel_ms[o] += ms;
        if (o == MKB_ORIGIN_FOREIGN && !acc->first_foreign[0])
            snprintf(acc->first_foreign, sizeof acc->first_foreign, "%s", k->name ? k->name : "?");
    } else if (last_end != 0 && k->start > last_end) {
        if (!acc->first_outside[0]) snprintf(acc->first_outside, sizeof acc->first_outside, "%s", k->name ? k->name : "?");
        acc->outside++;
    }
}
