/* The seeds of one grade: 5 correctness draws, 10 warm-up draws, 50 timing draws (the paper's
 * counts), each a fresh 63-bit number from the OS's random source, or read from a seed file for
 * a reproducible re-grade. Seeds travel as decimal strings in JSON (a 63-bit integer does not fit
 * every JSON reader's numbers); integers are accepted when reading.
 *
 * Seed file: {"correctness": [..5..], "warmup": [..10..], "timing": [..50..]}.
 * This file does not draw inputs from the seeds (problem/problem.h does). */
#ifndef MKB_GRADE_SEEDS_H
#define MKB_GRADE_SEEDS_H

#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

#define MKB_GRADE_CORRECTNESS_DRAWS 5
#define MKB_GRADE_WARMUP_DRAWS 10
#define MKB_GRADE_TIMING_DRAWS 50

struct mkb_seeds {
    uint64_t correctness[MKB_GRADE_CORRECTNESS_DRAWS];
    uint64_t warmup[MKB_GRADE_WARMUP_DRAWS];
    uint64_t timing[MKB_GRADE_TIMING_DRAWS];
};

/* Fresh seeds in [0, 2^63) from getrandom(). */
enum mkb_status mkb_seeds_draw(struct mkb_seeds *s);
/* {"correctness": [...], "warmup": [...], "timing": [...]} with decimal strings; new reference. */
json_t *mkb_seeds_to_json(const struct mkb_seeds *s);
/* From that object; every list must have exactly its count of integers in [0, 2^63). Errors
 * name the list and the position. */
enum mkb_status mkb_seeds_from_json(const json_t *j, struct mkb_seeds *s);
/* Read a seed file. */
enum mkb_status mkb_seeds_load(const char *path, struct mkb_seeds *s);

#endif
