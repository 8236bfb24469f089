/* 37 · gelu_mlp_backward_step1x_fp32 — backward of a tanh-GELU feed-forward,
 * y = GELU_tanh(x W1^T + b1) W2^T + b2, from dY and saved activations (SOL-ExecBench
 * 073_feedforward_mlp_backward; labelled Step1X, a DiT feed-forward). All fp32, every GEMM a
 * full-fp32 GEMM. M = B·S token rows.
 *
 *   dg  = dY W2                                  (M, I) fp32
 *   dW2 = dY^T g,  db2 = Σ_M dY                  (H, I), (H) fp32
 *   da  = dg ⊙ GELU_tanh'(a)                     (M, I) fp32
 *   dx  = da W1                                  (B, S, H) fp32
 *   dW1 = da^T x,  db1 = Σ_M da                  (I, H), (I) fp32
 *
 * The saved a (fc1 output) and g (gelu output) are drawn independently of x and of each other,
 * as upstream does; g is used as given. The biases do not enter the backward and are not inputs.
 * Settled here: GELU_tanh' (the catalog legend's formula) is one op rounded once to fp32. */
#include "problem/problem.h"

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), H = mkb_dim(d, "H"), I = mkb_dim(d, "I");
    const int64_t M = B * S;
    const struct mkb_tensor *dy = mkb_reshape(c, in->t[0], MKB_SHAPE(M, H)); /* (M, H) fp32 */
    const struct mkb_tensor *x = mkb_reshape(c, in->t[1], MKB_SHAPE(M, H));  /* (M, H) fp32 */
    const struct mkb_tensor *w1 = in->t[2];                                  /* (I, H) fp32 */
    const struct mkb_tensor *w2 = in->t[3];                                  /* (H, I) fp32 */
    const struct mkb_tensor *a = mkb_reshape(c, in->t[4], MKB_SHAPE(M, I));  /* (M, I) fp32 */
    const struct mkb_tensor *g = mkb_reshape(c, in->t[5], MKB_SHAPE(M, I));  /* (M, I) fp32 */

    struct mkb_tensor *dg = mkb_matmul(c, dy, w2, false, false);      /* (M, I) fp32 */
    struct mkb_tensor *dw2 = mkb_matmul(c, dy, g, true, false);       /* (H, I) fp32 */
    struct mkb_tensor *db2 = mkb_sum(c, dy, 0, false);                /* (H) fp32 */
    struct mkb_tensor *da = mkb_mul(c, dg, mkb_gelu_tanh_grad(c, a)); /* (M, I) fp32 */
    struct mkb_tensor *dx = mkb_matmul(c, da, w1, false, false);      /* (M, H) fp32 */
    struct mkb_tensor *dw1 = mkb_matmul(c, da, x, true, false);       /* (I, H) fp32 */
    struct mkb_tensor *db1 = mkb_sum(c, da, 0, false);                /* (I) fp32 */

    out[0] = mkb_reshape(c, dx, MKB_SHAPE(B, S, H)); /* (B, S, H) fp32 */
    out[1] = dw1;                                    /* (I, H) fp32 */
    out[2] = db1;                                    /* (I) fp32 */
    out[3] = dw2;                                    /* (H, I) fp32 */
    out[4] = db2;                                    /* (H) fp32 */
}

MKB_PROBLEM(37) = {
    .id = 37,
    .name = "37_gelu_mlp_backward_step1x_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench 073_feedforward_mlp_backward, L2 row 72, workload index 7 (recipe)",
    .model = "Step1X (DiT feed-forward with tanh GELU and biases)",
    .summary = "backward of y = GELU_tanh(x W1^T + b1) W2^T + b2 from dY and saved activations: "
               "return dx, dW1, db1, dW2, db2",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 128, 4, "sequence length"},
        {"H", 2048, 16, "hidden size"},
        {"I", 8192, 64, "feed-forward size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"grad_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"fc1_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "I H", "N(0,1)/sqrt(H), the quotient in fp32",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"fc2_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "H I", "N(0,1)/sqrt(I), the quotient in fp32",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "I"}},
        {"fc1_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S I", "N(0,1) (the saved pre-activation, independent of x)",
         .draw = {MKB_DRAW_NORMAL}},
        {"gelu_output", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S I",
         "N(0,1) (the saved activation, independent of fc1_output, used as given)", .draw = {MKB_DRAW_NORMAL}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"grad_hidden_states", MKB_DTYPE_F32, "B S H", -1, NULL},
        {"grad_fc1_weight", MKB_DTYPE_F32, "I H", -1, NULL},
        {"grad_fc1_bias", MKB_DTYPE_F32, "I", -1, NULL},
        {"grad_fc2_weight", MKB_DTYPE_F32, "H I", -1, NULL},
        {"grad_fc2_bias", MKB_DTYPE_F32, "H", -1, NULL},
        {0},
    },
    .reference = reference,
};
