/* 29 · gelu_feedforward_flux_fp32 — the FLUX.1 transformer feed-forward: Linear D→4D with bias,
 * tanh-approximate GELU, Linear 4D→D with bias, all in fp32 (SOL-ExecBench L1
 * 037_flux_feedforward_gelu_approximate).
 *
 *   h = x W1^T + b1        (B, S, F) fp32   fp32 GEMM, bias in the accumulator
 *   g = GELU_tanh(h)       (B, S, F) fp32
 *   y = g W2^T + b2        (B, S, D) fp32
 *
 * The argument names are the catalog's choice (upstream's are not visible); positions, shapes and
 * values are exact. No "(our design ?)" items. */
#include "problem/problem.h"

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    (void)d;
    /* hidden_states: (B, S, D) fp32; proj_in_weight: (F, D) fp32; proj_in_bias: (F) fp32;
     * proj_out_weight: (D, F) fp32; proj_out_bias: (D) fp32 */
    struct mkb_tensor *h = mkb_linear(c, in->t[0], in->t[1], in->t[2]); /* (B, S, F) fp32 */
    struct mkb_tensor *g = mkb_gelu_tanh(c, h);                         /* (B, S, F) fp32 */
    out[0] = mkb_linear(c, g, in->t[3], in->t[4]);                      /* (B, S, D) fp32 */
}

MKB_PROBLEM(29) = {
    .id = 29,
    .name = "29_gelu_feedforward_flux_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 037_flux_feedforward_gelu_approximate, workload 6 (recipe)",
    .model = "FLUX.1 transformer feed-forward (dim 3072, x4, tanh GELU)",
    .summary = "Linear (D -> 4D, bias) -> tanh-approximate GELU -> Linear (4D -> D, bias), fp32",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 32, 2, "batch"},
        {"S", 512, 4, "sequence"},
        {"D", 3072, 16, "model width"},
        {"F", 12288, 64, "feed-forward width 4D"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S D", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"proj_in_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "F D", "N(0,1)/sqrt(D)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "D"}},
        {"proj_in_bias", MKB_ARG_TENSOR, MKB_DTYPE_F32, "F", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"proj_out_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "D F", "N(0,1)/sqrt(F)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "F"}},
        {"proj_out_bias", MKB_ARG_TENSOR, MKB_DTYPE_F32, "D", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_F32, "B S D", -1, NULL},
        {0},
    },
    .reference = reference,
};
