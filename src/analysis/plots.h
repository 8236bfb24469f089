/* Figures for the report, drawn by gnuplot from results.json: the paired ratio per problem (per
 * model and direction), transfer by relative standing (per model, both directions pooled, and all
 * models pooled), and the ladders per arm (per model). For each figure <name> in
 * {paired_ratio, standing, ladders} it writes <name>.dat (the numbers) and <name>.gp (the script)
 * into a directory, then runs `gnuplot <name>.gp` there, which writes <name>.svg and <name>.png.
 * The scripts name only files beside them, so `cd DIR && gnuplot <name>.gp` rebuilds a figure
 * without mkb.
 *
 * Byte-stable: fixed terminals, sizes and fonts, no dates, numbers printed with fixed precision;
 * the same results and the same gnuplot give the same bytes. It computes nothing the results do
 * not hold, and it does not embed the figures anywhere (report.h refers to them by name). */
#ifndef MKB_ANALYSIS_PLOTS_H
#define MKB_ANALYSIS_PLOTS_H

#include <jansson.h>

#include "core/status.h"

extern const char *const mkb_plot_names[3];

/* Write the data and scripts into dir (which must exist). When render is set, run gnuplot on each
 * script: *rendered is set to 1 when every figure was drawn, 0 when gnuplot is not installed
 * (scripts and data are still written; not an error). A gnuplot that fails is an error quoting
 * its message. */
enum mkb_status mkb_plots_write(json_t *results, const char *dir, int render, int *rendered);

#endif
