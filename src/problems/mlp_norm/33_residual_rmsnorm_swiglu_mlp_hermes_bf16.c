/* 33 · residual_rmsnorm_swiglu_mlp_hermes_bf16 — residual add, RMSNorm, then a SwiGLU MLP
 * (gate, up and down projections, no biases) at Llama-3.1-405B geometry; only the MLP output is
 * returned (SOL-ExecBench L2 004_fused_residual_rms_mlp, model Hermes 3).
 *
 *   s  = bf16(hidden + residual)                      (B, S, H) bf16   bf16 elementwise
 *   x  = f32(s); xh = x * rsqrt(mean_H x^2 + eps)     (B, S, H) fp32
 *   n  = bf16(f32(norm_weight) * xh)                  (B, S, H) bf16
 *   g  = bf16 GEMM n Wg^T;  u = bf16 GEMM n Wu^T      (B, S, I) bf16
 *   a  = bf16(silu(f32(g)));  h = bf16(a * u)         (B, S, I) bf16
 *   y  = bf16 GEMM h Wd^T                             (B, S, H) bf16
 *
 * The summed residual stream s is not returned. Argument names are the catalog's; order, shapes
 * and values are exact. No "(our design ?)" items. */
#include "problem/problem.h"

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    (void)d;
    /* hidden_states, residual: (B, S, H) bf16; norm_weight: (H) bf16; gate_proj_weight,
     * up_proj_weight: (I, H) bf16; down_proj_weight: (H, I) bf16 */
    const double eps = in->s[6];
    struct mkb_tensor *s = mkb_add(c, in->t[0], in->t[1]);              /* (B, S, H) bf16 */
    struct mkb_tensor *x = mkb_cast(c, s, MKB_DTYPE_F32);               /* (B, S, H) fp32 */
    struct mkb_tensor *ms = mkb_mean(c, mkb_square(c, x), -1, true);    /* (B, S, 1) fp32 */
    struct mkb_tensor *xh = mkb_mul(c, x, mkb_rsqrt(c, mkb_add_s(c, ms, eps))); /* (B, S, H) fp32 */
    struct mkb_tensor *n = mkb_cast(c, mkb_mul(c, mkb_cast(c, in->t[2], MKB_DTYPE_F32), xh), MKB_DTYPE_BF16);
    /* n: (B, S, H) bf16 */
    struct mkb_tensor *g = mkb_linear(c, n, in->t[3], NULL);            /* (B, S, I) bf16 */
    struct mkb_tensor *u = mkb_linear(c, n, in->t[4], NULL);            /* (B, S, I) bf16 */
    struct mkb_tensor *a = mkb_cast(c, mkb_silu(c, mkb_cast(c, g, MKB_DTYPE_F32)), MKB_DTYPE_BF16); /* (B, S, I) bf16 */
    struct mkb_tensor *h = mkb_mul(c, a, u);                            /* (B, S, I) bf16 */
    out[0] = mkb_linear(c, h, in->t[5], NULL);                          /* (B, S, H) bf16 */
}

MKB_PROBLEM(33) = {
    .id = 33,
    .name = "33_residual_rmsnorm_swiglu_mlp_hermes_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L2 004_fused_residual_rms_mlp, workload 4 (recipe)",
    .model = "Hermes 3 (Llama-3.1-405B geometry)",
    .summary = "residual add, RMSNorm (eps 1e-5), SwiGLU MLP with gate, up and down projections and no "
               "biases; only the MLP output is returned",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 128, 4, "sequence"},
        {"H", 16384, 16, "hidden size"},
        {"I", 53248, 48, "intermediate size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}},
        {"residual", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16", .draw = {MKB_DRAW_NORMAL}},
        {"norm_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H", "1 + 0.1 N(0,1), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"gate_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "I H", "N(0,1)/sqrt(H), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"up_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "I H", "N(0,1)/sqrt(H), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"down_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H I", "N(0,1)/sqrt(I), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "I"}},
        {"eps", MKB_ARG_FLOAT, .values = "1e-5", .value = 1e-5},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_BF16, "B S H", -1, NULL},
        {0},
    },
    .reference = reference,
};
