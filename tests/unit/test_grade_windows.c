/* Tests of placing kernel records into call windows (src/grade/windows.h): one flush may deliver
 * the records of many back-to-back calls, and each kernel must count for the call it ran in, by
 * origin; the grader's kernels count only in a window's totals; kernels that ran outside every
 * call are reported with the next call, or with the last one, or wait for the next window. */
#include <criterion/criterion.h>
#include <string.h>

#include "grade/windows.h"

static struct mkb_call_account acc[3], pending;
static struct mkb_trace_window w[3];

static void setup(void) {
    memset(acc, 0, sizeof acc);
    memset(&pending, 0, sizeof pending);
    /* three calls: [100, 200], [300, 400], [500, 600] (ns) */
    for (int i = 0; i < 3; i++) w[i] = (struct mkb_trace_window){.start = 100 + 200u * i, .end = 200 + 200u * i, .acc = &acc[i]};
}

static void place(uint64_t start, uint64_t dur, int origin, bool graph, const char *name, uint64_t last_end) {
    struct mkb_kernel_record k = {.start = start, .end = start + dur, .origin = origin, .graph = graph, .name = name};
    mkb_windows_place(w, 3, last_end, &k, &pending);
}

Test(windows, each_kernel_counts_for_the_call_it_started_in, .init = setup) {
    place(150, 1000000, MKB_ORIGIN_DSL, false, "a", 50);   /* call 0, 1 ms */
    place(300, 2000000, MKB_ORIGIN_DSL, false, "b", 50);   /* call 1, at its very start */
    place(600, 500000, MKB_ORIGIN_LIBRARY, false, "c", 50); /* call 2, at its very end */
    place(610, 500000, MKB_ORIGIN_DSL, false, "d", 50);    /* after every call: outside */
    cr_assert_eq(acc[0].kernels[MKB_ORIGIN_DSL], 1);
    cr_assert_float_eq(acc[0].kernel_ms[MKB_ORIGIN_DSL], 1.0, 1e-12);
    cr_assert_eq(acc[1].kernels[MKB_ORIGIN_DSL], 1);
    cr_assert_float_eq(acc[1].kernel_ms[MKB_ORIGIN_DSL], 2.0, 1e-12);
    cr_assert_eq(acc[2].kernels[MKB_ORIGIN_LIBRARY], 1);
    cr_assert_eq(acc[2].kernels[MKB_ORIGIN_DSL], 0);
    cr_assert_eq(acc[2].all_kernels, 1);
    /* "d" started after the last call: reported with it, as outside every call */
    cr_assert_eq(acc[2].outside, 1);
    cr_assert_str_eq(acc[2].first_outside, "d");
    cr_assert_eq(pending.outside, 0);
}

Test(windows, grader_kernels_count_only_in_the_totals, .init = setup) {
    place(120, 3000000, MKB_ORIGIN_GRADER, false, "ref", 50); /* the eager baseline's */
    place(250, 1000000, MKB_ORIGIN_GRADER, false, "draw", 50); /* input drawn between calls */
    cr_assert_eq(acc[0].all_kernels, 1);
    cr_assert_float_eq(acc[0].all_kernel_ms, 3.0, 1e-12);
    for (int o = 0; o < 4; o++) cr_assert_eq(acc[0].kernels[o], 0);
    cr_assert_eq(acc[1].outside + acc[0].outside + pending.outside, 0, "the grader's own kernels are never outside work");
    cr_assert_eq(acc[1].all_kernels, 0);
}

Test(windows, work_between_calls_is_reported_with_the_next_call, .init = setup) {
    place(250, 10, MKB_ORIGIN_LIBRARY, false, "between01", 50);
    place(450, 10, MKB_ORIGIN_FOREIGN, false, "between12", 50);
    place(460, 10, MKB_ORIGIN_FOREIGN, false, "between12b", 50);
    cr_assert_eq(acc[1].outside, 1);
    cr_assert_str_eq(acc[1].first_outside, "between01");
    cr_assert_eq(acc[2].outside, 2);
    cr_assert_str_eq(acc[2].first_outside, "between12");
    cr_assert_eq(acc[0].outside, 0);
    /* outside work is not the call's own work */
    cr_assert_eq(acc[1].kernels[MKB_ORIGIN_LIBRARY], 0);
}

Test(windows, nothing_is_outside_before_the_first_accounted_call, .init = setup) {
    place(50, 10, MKB_ORIGIN_LIBRARY, false, "import-time", 0); /* no call accounted yet */
    cr_assert_eq(acc[0].outside + pending.outside, 0);
    place(50, 10, MKB_ORIGIN_LIBRARY, false, "already-accounted", 80); /* before last_end */
    cr_assert_eq(acc[0].outside + pending.outside, 0);
}

Test(windows, with_no_window_waiting_outside_work_is_pending, .init = setup) {
    struct mkb_kernel_record k = {.start = 900, .end = 910, .origin = MKB_ORIGIN_LIBRARY, .graph = true, .name = "late"};
    mkb_windows_place(w, 0, 700, &k, &pending);
    cr_assert_eq(pending.outside, 1);
    cr_assert_eq(pending.graph_launches, 1);
    cr_assert_str_eq(pending.first_outside, "late");
}

Test(windows, unknown_origins_are_libraries_and_foreign_kernels_are_named, .init = setup) {
    place(110, 10, -1, false, "unseen", 50);
    place(120, 10, MKB_ORIGIN_FOREIGN, true, "triton_kernel", 50);
    place(130, 10, MKB_ORIGIN_FOREIGN, false, "second", 50);
    cr_assert_eq(acc[0].kernels[MKB_ORIGIN_LIBRARY], 1);
    cr_assert_eq(acc[0].kernels[MKB_ORIGIN_FOREIGN], 2);
    cr_assert_str_eq(acc[0].first_foreign, "triton_kernel");
    cr_assert_eq(acc[0].graph_launches, 1);
    /* and the policy judges such a call */
    struct mkb_finding f[8];
    int n = mkb_policy_judge_call(&acc[0], "CuTe DSL", f, 8);
    bool foreign = false;
    for (int i = 0; i < n; i++)
        if (strstr(f[i].message, "triton_kernel")) foreign = true;
    cr_assert(foreign, "the finding names the first foreign kernel");
}

Test(windows, find_uses_closed_intervals, .init = setup) {
    cr_assert_eq(mkb_windows_find(w, 3, 100), &w[0]);
    cr_assert_eq(mkb_windows_find(w, 3, 200), &w[0]);
    cr_assert_null(mkb_windows_find(w, 3, 201));
    cr_assert_eq(mkb_windows_find(w, 3, 599), &w[2]);
    cr_assert_null(mkb_windows_find(w, 3, 99));
}
