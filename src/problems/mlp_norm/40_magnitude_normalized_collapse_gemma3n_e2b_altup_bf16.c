/* 40 · magnitude_normalized_collapse_gemma3n_e2b_altup_bf16 — the end-of-stack AltUp collapse of
 * Gemma 3n: streams 1 and 2 are projected by their own square matrices, each projected row is
 * rescaled to the RMS magnitude of stream 0, and the three streams are averaged
 * (SOL-ExecBench L1 052_altup_hidden_state_collapse_with_magnitude_normalization).
 * bf16 storage, fp32 math.
 *
 *   h0 = f32(hidden[0]),  T = sqrt(mean_H h0^2)                (1, B, S, H), (1, B, S, 1) fp32
 *   p_i = f32(hidden[i]) f32(W_i)^T           (fp32 GEMM)      (1, B, S, H) fp32, i = 1, 2
 *   N_i = sqrt(max(mean_H p_i^2, eps)),  q_i = p_i * (T / N_i) (1, B, S, H) fp32
 *   y = bf16(mean over the stacked stream axis of [h0, q_1, q_2])   (B, S, H) bf16
 *
 * Settled here: the streams stay 4-d (1, B, S, H) slices of the stacked input, and the final
 * average is a mean over the stream axis of their concatenation, taken in fp32 (sum, then
 * divide by 3), as the catalog words it. A = 3 at both scales (validate() checks it). No
 * "(our design ?)" items. */
#include "problem/problem.h"

/* stream i of hidden (A, B, S, H) bf16 as (1, B, S, H) fp32 */
static struct mkb_tensor *stream_f32(struct mkb_ctx *c, const struct mkb_tensor *hidden, int i) {
    return mkb_cast(c, mkb_slice(c, hidden, 0, i, i + 1), MKB_DTYPE_F32);
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    (void)d;
    const double eps = in->s[3];
    /* hidden_states: (A, B, S, H) bf16, A = 3; W1, W2: (H, H) bf16 */
    struct mkb_tensor *h0 = stream_f32(c, in->t[0], 0);                          /* (1, B, S, H) fp32 */
    struct mkb_tensor *t = mkb_sqrt(c, mkb_mean(c, mkb_square(c, h0), -1, true)); /* (1, B, S, 1) fp32 */
    const struct mkb_tensor *streams[3] = {h0, NULL, NULL}; /* (1, B, S, H) fp32 each */
    for (int i = 1; i <= 2; i++) {
        struct mkb_tensor *w = mkb_cast(c, in->t[i], MKB_DTYPE_F32);                /* (H, H) fp32 */
        struct mkb_tensor *p = mkb_linear(c, stream_f32(c, in->t[0], i), w, NULL);  /* (1, B, S, H) fp32 */
        struct mkb_tensor *ms = mkb_mean(c, mkb_square(c, p), -1, true);            /* (1, B, S, 1) fp32 */
        struct mkb_tensor *n = mkb_sqrt(c, mkb_max_s(c, ms, eps));                  /* (1, B, S, 1) fp32 */
        streams[i] = mkb_mul(c, p, mkb_div(c, t, n));                               /* (1, B, S, H) fp32 */
    }
    struct mkb_tensor *stack = mkb_concat(c, 3, streams, 0); /* (3, B, S, H) fp32 */
    out[0] = mkb_cast(c, mkb_mean(c, stack, 0, false), MKB_DTYPE_BF16);                        /* (B, S, H) bf16 */
}

static bool validate(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in) {
    (void)in;
    if (mkb_dim(d, "A") != 3) {
        mkb_ctx_fail(c, MKB_ERR_INVALID, "the collapse is written for A = 3 streams, got A = %lld",
                     (long long)mkb_dim(d, "A"));
        return false;
    }
    return true;
}

MKB_PROBLEM(40) = {
    .id = 40,
    .name = "40_magnitude_normalized_collapse_gemma3n_e2b_altup_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 052_altup_hidden_state_collapse_with_magnitude_normalization, workload 7 "
              "(recipe)",
    .model = "Gemma 3n E2B AltUp collapse (altup_num_inputs = 3, altup_unembed_projections)",
    .summary = "project streams 1 and 2 with their own square matrices, rescale each projected row to the "
               "RMS magnitude of stream 0, and average the three streams",
    .dims = (const struct mkb_dim_spec[]){
        {"A", 3, 3, "AltUp streams"},
        {"B", 64, 2, "batch"},
        {"S", 256, 4, "sequence"},
        {"H", 3072, 16, "hidden size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "A B S H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}},
        {"unembed_proj_1_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H H",
         "N(0,1) drawn in bf16, no fan-in scaling (the rescale makes the scale irrelevant)",
         .draw = {MKB_DRAW_NORMAL}},
        {"unembed_proj_2_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}},
        {"eps", MKB_ARG_FLOAT, .values = "1e-5", .value = 1e-5},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_BF16, "B S H", -1, NULL},
        {0},
    },
    .reference = reference,
    .validate = validate,
};
