/* 35 · residual_layernorm_gelu_ffn_backward_kokoro_fp32 — backward of a post-LN feed-forward
 * sublayer, out = LN(x + FFN(x)) γ + β with FFN(x) = GELU_tanh(x W1^T + b1) W2^T + b2
 * (SOL-ExecBench 042_ffn_gelu_projection_fused_backward; Kokoro TTS, ALBERT-style). All fp32,
 * every GEMM a full-fp32 GEMM. M = B·S token rows.
 *
 *   dγ = Σ_M dY ⊙ n,  dβ = Σ_M dY                       (H) fp32
 *   dn = dY ⊙ γ,  std = sqrt(v + eps)                    (M, H), (M, 1) fp32
 *   m1 = mean_H dn,  m2 = mean_H (dn ⊙ n)                (M, 1) fp32
 *   dr = (1/std) (dn − m1 − n ⊙ m2)                      (M, H) fp32
 *   db2 = Σ_M dr,  dW2 = dr^T g                          (H), (H, I) fp32
 *   dg = dr W2                                           (M, I) fp32
 *   da = dg ⊙ GELU_tanh'(a)                              (M, I) fp32
 *   db1 = Σ_M da,  dW1 = da^T x                          (I), (I, H) fp32
 *   dx = da W1 + dr                                      (B, S, H) fp32
 *
 * The saved tensors are generated consistently from x (only dY is independent), in fp32:
 *   a = x W1^T (no bias), g = GELU_tanh(a), r = x + g W2^T, μ = mean_H r,
 *   v = mean_H (r − μ)^2 (biased), n = (r − μ) / sqrt(v + eps).
 * Settled here (catalog "our design ?"): x = 0.1·N(0,1) and γ = 1 + 0.1·N(0,1) (a small input
 * keeps the residual and the FFN branch of comparable size; 0.1 is the spread the family uses
 * for learned norm weights); eps = 1e-5 (the common LayerNorm default, and the value a
 * three-token literal most plausibly holds). Also ours: the generator evaluates GELU_tanh op by
 * op in fp32 as 0.5·a·(1 + tanh(c·(a + k·a·a·a))) (the catalog's "explicit tanh formula"), the
 * variance as the mean of squared deviations, and the backward's GELU_tanh' as one op rounded
 * once to fp32 (its formula is the catalog legend's). */
#include <math.h>

#include "problem/problem.h"

static void generate(struct mkb_ctx *c, const struct mkb_dims *d, struct mkb_args *in) {
    const int64_t H = mkb_dim(d, "H"), I = mkb_dim(d, "I");
    const double eps = in->s[9];
    const double gc = 0.7978845608028654, gk = 0.044715; /* sqrt(2/pi), the cubic coefficient */
    /* W1 = N(0,1)·sqrt(2/H), W2 = N(0,1)·sqrt(2/I): one fp32 multiply each */
    struct mkb_tensor *w1 = mkb_mul_s(c, mkb_randn(c, MKB_STREAM(2, 0), MKB_DTYPE_F32, MKB_SHAPE(I, H)),
                                      sqrt(2.0 / (double)H)); /* (I, H) fp32 */
    struct mkb_tensor *w2 = mkb_mul_s(c, mkb_randn(c, MKB_STREAM(5, 0), MKB_DTYPE_F32, MKB_SHAPE(H, I)),
                                      sqrt(2.0 / (double)I)); /* (H, I) fp32 */
    const struct mkb_tensor *x = in->t[1];                    /* (B, S, H) fp32 */
    struct mkb_tensor *a = mkb_linear(c, x, w1, NULL);        /* (B, S, I) fp32 */
    struct mkb_tensor *a3 = mkb_mul(c, mkb_mul(c, a, a), a);  /* (B, S, I) fp32 */
    struct mkb_tensor *t = mkb_tanh(c, mkb_mul_s(c, mkb_add(c, a, mkb_mul_s(c, a3, gk)), gc));
    struct mkb_tensor *g = mkb_mul(c, mkb_mul_s(c, a, 0.5), mkb_add_s(c, t, 1.0)); /* (B, S, I) fp32 */
    struct mkb_tensor *r = mkb_add(c, x, mkb_linear(c, g, w2, NULL));              /* (B, S, H) fp32 */
    struct mkb_tensor *dev = mkb_sub(c, r, mkb_mean(c, r, -1, true));              /* (B, S, H) fp32 */
    struct mkb_tensor *v = mkb_mean(c, mkb_square(c, dev), -1, true);              /* (B, S, 1) fp32 */
    struct mkb_tensor *n = mkb_div(c, dev, mkb_sqrt(c, mkb_add_s(c, v, eps)));     /* (B, S, H) fp32 */
    in->t[2] = w1;
    in->t[3] = a;
    in->t[4] = g;
    in->t[5] = w2;
    in->t[6] = n;
    in->t[7] = v;
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), H = mkb_dim(d, "H"), I = mkb_dim(d, "I");
    const int64_t M = B * S;
    const struct mkb_tensor *dy = mkb_reshape(c, in->t[0], MKB_SHAPE(M, H)); /* (M, H) fp32 */
    const struct mkb_tensor *x = mkb_reshape(c, in->t[1], MKB_SHAPE(M, H));  /* (M, H) fp32 */
    const struct mkb_tensor *w1 = in->t[2];                                  /* (I, H) fp32 */
    const struct mkb_tensor *a = mkb_reshape(c, in->t[3], MKB_SHAPE(M, I));  /* (M, I) fp32 */
    const struct mkb_tensor *g = mkb_reshape(c, in->t[4], MKB_SHAPE(M, I));  /* (M, I) fp32 */
    const struct mkb_tensor *w2 = in->t[5];                                  /* (H, I) fp32 */
    const struct mkb_tensor *n = mkb_reshape(c, in->t[6], MKB_SHAPE(M, H));  /* (M, H) fp32 */
    const struct mkb_tensor *v = mkb_reshape(c, in->t[7], MKB_SHAPE(M, 1));  /* (M, 1) fp32 */
    const struct mkb_tensor *gamma = in->t[8];                               /* (H) fp32 */
    const double eps = in->s[9];

    struct mkb_tensor *dgamma = mkb_sum(c, mkb_mul(c, dy, n), 0, false); /* (H) fp32 */
    struct mkb_tensor *dbeta = mkb_sum(c, dy, 0, false);                 /* (H) fp32 */
    struct mkb_tensor *dn = mkb_mul(c, dy, gamma);                       /* (M, H) fp32 */
    struct mkb_tensor *sd = mkb_sqrt(c, mkb_add_s(c, v, eps));           /* (M, 1) fp32 */
    struct mkb_tensor *m1 = mkb_mean(c, dn, -1, true);                   /* (M, 1) fp32 */
    struct mkb_tensor *m2 = mkb_mean(c, mkb_mul(c, dn, n), -1, true);    /* (M, 1) fp32 */
    struct mkb_tensor *dr =                                              /* (M, H) fp32 */
        mkb_mul(c, mkb_recip(c, sd), mkb_sub(c, mkb_sub(c, dn, m1), mkb_mul(c, n, m2)));
    struct mkb_tensor *db2 = mkb_sum(c, dr, 0, false);                   /* (H) fp32 */
    struct mkb_tensor *dw2 = mkb_matmul(c, dr, g, true, false);          /* (H, I) fp32 */
    struct mkb_tensor *dg = mkb_matmul(c, dr, w2, false, false);         /* (M, I) fp32 */
    struct mkb_tensor *da = mkb_mul(c, dg, mkb_gelu_tanh_grad(c, a));    /* (M, I) fp32 */
    struct mkb_tensor *db1 = mkb_sum(c, da, 0, false);                   /* (I) fp32 */
    struct mkb_tensor *dw1 = mkb_matmul(c, da, x, true, false);          /* (I, H) fp32 */
    struct mkb_tensor *dx = mkb_add(c, mkb_matmul(c, da, w1, false, false), dr); /* (M, H) fp32 */

    out[0] = mkb_reshape(c, dx, MKB_SHAPE(B, S, H)); /* (B, S, H) fp32 */
    out[1] = dw1;                                    /* (I, H) fp32 */
    out[2] = db1;                                    /* (I) fp32 */
    out[3] = dw2;                                    /* (H, I) fp32 */
    out[4] = db2;                                    /* (H) fp32 */
    out[5] = dgamma;                                 /* (H) fp32 */
    out[6] = dbeta;                                  /* (H) fp32 */
}

MKB_PROBLEM(35) = {
    .id = 35,
    .name = "35_residual_layernorm_gelu_ffn_backward_kokoro_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench 042_ffn_gelu_projection_fused_backward, L2 row 41, workload index 4 (recipe)",
    .model = "Kokoro TTS (ALBERT-style post-LN feed-forward sublayer)",
    .summary = "backward of out = LayerNorm(x + GELU_tanh(x W1^T + b1) W2^T + b2) * gamma + beta from dY and "
               "consistent saved activations: return dx, dW1, db1, dW2, db2, dgamma, dbeta",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 1087, 5, "sequence length"},
        {"H", 512, 16, "hidden size"},
        {"I", 2048, 64, "feed-forward size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"grad_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "0.1 N(0,1), the product in fp32",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1}},
        {"fc1_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "I H", "N(0,1) * sqrt(2/H), the product in fp32",
         .draw = {MKB_DRAW_CUSTOM}},
        {"fc1_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S I", "a = hidden_states fc1_weight^T (fp32 GEMM, no bias)",
         .draw = {MKB_DRAW_CUSTOM}},
        {"gelu_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S I",
         "g = GELU_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), op by op in fp32",
         .draw = {MKB_DRAW_CUSTOM}},
        {"fc2_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "H I", "N(0,1) * sqrt(2/I), the product in fp32",
         .draw = {MKB_DRAW_CUSTOM}},
        {"normalized", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H",
         "n = (r - mean_H r) / sqrt(var_H r + eps) with r = hidden_states + g fc2_weight^T (fp32)",
         .draw = {MKB_DRAW_CUSTOM}},
        {"var", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S 1", "biased variance of r over H (fp32)",
         .draw = {MKB_DRAW_CUSTOM}},
        {"ln_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "H", "1 + 0.1 N(0,1) (fp32)",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"eps", MKB_ARG_FLOAT, .values = "1e-5", .value = 1e-5},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"grad_hidden_states", MKB_DTYPE_F32, "B S H", -1, NULL},
        {"grad_fc1_weight", MKB_DTYPE_F32, "I H", -1, NULL},
        {"grad_fc1_bias", MKB_DTYPE_F32, "I", -1, NULL},
        {"grad_fc2_weight", MKB_DTYPE_F32, "H I", -1, NULL},
        {"grad_fc2_bias", MKB_DTYPE_F32, "H", -1, NULL},
        {"grad_ln_weight", MKB_DTYPE_F32, "H", -1, NULL},
        {"grad_ln_bias", MKB_DTYPE_F32, "H", -1, NULL},
        {0},
    },
    .generate = generate,
    .reference = reference,
};
