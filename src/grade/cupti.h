/* Where the grader looks for CUPTI, after $MKB_CUPTI_LIB: the CUDA 13 toolkit's copies first (a
 * CUPTI shipped inside a profiler may be older than the driver's). Shared by the grader child
 * (grade/child/trace.c) and `mkb doctor`, which reports the one a grade would load. */
#ifndef MKB_GRADE_CUPTI_H
#define MKB_GRADE_CUPTI_H

#define MKB_CUPTI_CANDIDATES                                                                                 \
    "libcupti.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",                            \
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13", "libcupti.so", \
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so"

#endif
