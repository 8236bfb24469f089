/* 38 · residual_rmsnorm_backward_qwen3_4b_bf16 — backward of a fused residual-add RMSNorm,
 * out = (s·rstd) ⊙ w with s = hidden + residual (SOL-ExecBench
 * 013_fused_residual_rms_norm_backward; Qwen3-4B, hidden 2560). M = B·S token rows.
 *
 *   g  = f32(dY)                                 (B, S, H) fp32
 *   dw = Σ_{b,s} g ⊙ n                           (H) fp32, returned in fp32
 *   dn = g ⊙ w,  m = mean_H (dn ⊙ n)             (B, S, H), (B, S, 1) fp32
 *   dx = rstd ⊙ (dn − n ⊙ m)                     (B, S, H) fp32
 *   grad_hidden_states = grad_residual = bf16(dx)   (B, S, H) bf16, two separate tensors
 *
 * The saved tensors are consistent with a hidden x that is not itself an input, all in fp32:
 *   x = N(0,1) · (0.5 + 1.5·U[0,1)), the uniform drawn once per (b, s) row (per-token scales
 *       in [0.5, 2)); rstd = rsqrt(mean_H x^2 + 1e-6); n = x · rstd;
 *   dY = bf16(N(0,1) + 0.5·n ⊙ w), formed in fp32 and rounded once.
 * Settled here: x's normal and its row factor use the sub-draws 0 and 1 of the `normalized`
 * input's stream (x exists only to make n and rstd); rstd is the reciprocal square root op
 * (torch.rsqrt). The reference needs no eps of its own. */
#include "problem/problem.h"

static void generate(struct mkb_ctx *c, const struct mkb_dims *d, struct mkb_args *in) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), H = mkb_dim(d, "H");
    const struct mkb_tensor *w = in->t[3]; /* (H) fp32, drawn declaratively */
    struct mkb_tensor *z = mkb_randn(c, MKB_STREAM(1, 0), MKB_DTYPE_F32, MKB_SHAPE(B, S, H));        /* fp32 */
    struct mkb_tensor *u = mkb_rand(c, MKB_STREAM(1, 1), MKB_DTYPE_F32, MKB_SHAPE(B, S, 1), 0.0, 1.0); /* fp32 */
    struct mkb_tensor *x = mkb_mul(c, z, mkb_add_s(c, mkb_mul_s(c, u, 1.5), 0.5)); /* (B, S, H) fp32 */
    struct mkb_tensor *rstd =                                                      /* (B, S, 1) fp32 */
        mkb_rsqrt(c, mkb_add_s(c, mkb_mean(c, mkb_square(c, x), -1, true), 1e-6));
    struct mkb_tensor *n = mkb_mul(c, x, rstd);                                    /* (B, S, H) fp32 */
    struct mkb_tensor *e = mkb_randn(c, MKB_STREAM(0, 0), MKB_DTYPE_F32, MKB_SHAPE(B, S, H)); /* fp32 */
    struct mkb_tensor *dy = mkb_add(c, e, mkb_mul(c, mkb_mul_s(c, n, 0.5), w));    /* (B, S, H) fp32 */
    in->t[0] = mkb_cast(c, dy, MKB_DTYPE_BF16);                                    /* (B, S, H) bf16 */
    in->t[1] = n;
    in->t[2] = rstd;
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), H = mkb_dim(d, "H");
    const int64_t M = B * S;
    const struct mkb_tensor *n = in->t[1];    /* (B, S, H) fp32 */
    const struct mkb_tensor *rstd = in->t[2]; /* (B, S, 1) fp32 */
    const struct mkb_tensor *w = in->t[3];    /* (H) fp32 */

    struct mkb_tensor *g = mkb_cast(c, in->t[0], MKB_DTYPE_F32);                  /* (B, S, H) fp32 */
    struct mkb_tensor *gn = mkb_reshape(c, mkb_mul(c, g, n), MKB_SHAPE(M, H));    /* (M, H) fp32 */
    struct mkb_tensor *dw = mkb_sum(c, gn, 0, false);                            /* (H) fp32 */
    struct mkb_tensor *dn = mkb_mul(c, g, w);                                    /* (B, S, H) fp32 */
    struct mkb_tensor *m = mkb_mean(c, mkb_mul(c, dn, n), -1, true);             /* (B, S, 1) fp32 */
    struct mkb_tensor *dx = mkb_mul(c, rstd, mkb_sub(c, dn, mkb_mul(c, n, m)));  /* (B, S, H) fp32 */

    out[0] = mkb_cast(c, dx, MKB_DTYPE_BF16); /* (B, S, H) bf16 */
    out[1] = mkb_cast(c, dx, MKB_DTYPE_BF16); /* (B, S, H) bf16, the same values */
    out[2] = dw;                              /* (H) fp32 */
}

MKB_PROBLEM(38) = {
    .id = 38,
    .name = "38_residual_rmsnorm_backward_qwen3_4b_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench 013_fused_residual_rms_norm_backward, L1 row 12, workload index 1 (recipe)",
    .model = "Qwen3-4B (hidden 2560)",
    .summary = "backward of out = ((hidden + residual) * rstd) * w from dY and the saved normalized rows and "
               "rstd: return the hidden and residual gradients (equal, bf16) and the weight gradient (fp32)",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 8192, 3, "sequence length"},
        {"H", 2560, 32, "hidden size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"grad_output", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H",
         "bf16(N(0,1) + 0.5 normalized * weight), formed in fp32 and rounded once", .draw = {MKB_DRAW_CUSTOM}},
        {"normalized", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H",
         "n = x * rstd with x = N(0,1) * (0.5 + 1.5 U[0,1)) in fp32, the uniform drawn once per (b, s) row",
         .draw = {MKB_DRAW_CUSTOM}},
        {"rstd", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S 1", "1/sqrt(mean_H x^2 + 1e-6) (fp32)",
         .draw = {MKB_DRAW_CUSTOM}},
        {"weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "H", "1 + 0.1 N(0,1) (fp32)",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"grad_hidden_states", MKB_DTYPE_BF16, "B S H", -1, NULL},
        {"grad_residual", MKB_DTYPE_BF16, "B S H", -1, "the same values as grad_hidden_states"},
        {"grad_weight", MKB_DTYPE_F32, "H", -1, "left in fp32"},
        {0},
    },
    .generate = generate,
    .reference = reference,
};
