/* 34 · swiglu_mlp_backward_hermes_bf16 — backward of a SwiGLU MLP,
 * y = (silu(X W_g^T) ⊙ X W_u^T) W_d^T, from the gradient dY and the saved activations
 * (SOL-ExecBench 005_swiglu_mlp_backward; Hermes 3, 405B geometry). M = B·S token rows.
 *
 *   dHid = dY W_d                                    (M, I) bf16   bf16 GEMM
 *   Hs   = bf16(A ⊙ U)                               (M, I) bf16
 *   dW_d = dY^T Hs                                   (H, I) bf16   bf16 GEMM
 *   dA   = bf16(dHid ⊙ U),  dU = bf16(dHid ⊙ A)      (M, I) bf16
 *   s    = σ(f32(Gp)),  silu' = s (1 + f32(Gp)(1 − s))   (M, I) fp32
 *   dG   = bf16(f32(dA) ⊙ silu')                     (M, I) bf16
 *   dX_g = dG W_g,  dW_g = dG^T X                    (M, H), (I, H) bf16   bf16 GEMMs
 *   dX_u = dU W_u,  dW_u = dU^T X                    (M, H), (I, H) bf16   bf16 GEMMs
 *   dX   = bf16(dX_g + dX_u)                         (B, S, H) bf16
 *
 * The saved tensors Gp (gate pre-activation), U (up projection) and A (silu(Gp)) are drawn
 * independently, as upstream does, so they are not consistent with X; A is used as given.
 * Settled here (catalog "our design ?"): the order and names of inputs 3-5 — gate_pre, up,
 * gate_act — following the order the computation first needs them in the forward pass
 * (gate pre-activation, up projection, then the activation); the three are identically
 * distributed, so only their roles matter. */
#include "problem/problem.h"

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), H = mkb_dim(d, "H"), I = mkb_dim(d, "I");
    const int64_t M = B * S;
    const struct mkb_tensor *dy = mkb_reshape(c, in->t[0], MKB_SHAPE(M, H)); /* (M, H) bf16 */
    const struct mkb_tensor *x = mkb_reshape(c, in->t[1], MKB_SHAPE(M, H));  /* (M, H) bf16 */
    const struct mkb_tensor *gp = mkb_reshape(c, in->t[2], MKB_SHAPE(M, I)); /* (M, I) bf16 */
    const struct mkb_tensor *u = mkb_reshape(c, in->t[3], MKB_SHAPE(M, I));  /* (M, I) bf16 */
    const struct mkb_tensor *a = mkb_reshape(c, in->t[4], MKB_SHAPE(M, I));  /* (M, I) bf16 */
    const struct mkb_tensor *wg = in->t[5];                                  /* (I, H) bf16 */
    const struct mkb_tensor *wu = in->t[6];                                  /* (I, H) bf16 */
    const struct mkb_tensor *wd = in->t[7];                                  /* (H, I) bf16 */

    struct mkb_tensor *dhid = mkb_matmul(c, dy, wd, false, false); /* (M, I) bf16 */
    struct mkb_tensor *hs = mkb_mul(c, a, u);                      /* (M, I) bf16 */
    struct mkb_tensor *dwd = mkb_matmul(c, dy, hs, true, false);   /* (H, I) bf16 */
    struct mkb_tensor *da = mkb_mul(c, dhid, u);                   /* (M, I) bf16 */
    struct mkb_tensor *du = mkb_mul(c, dhid, a);                   /* (M, I) bf16 */

    struct mkb_tensor *gp32 = mkb_cast(c, gp, MKB_DTYPE_F32);      /* (M, I) fp32 */
    struct mkb_tensor *s = mkb_sigmoid(c, gp32);                   /* (M, I) fp32 */
    struct mkb_tensor *dsilu =                                     /* (M, I) fp32 */
        mkb_mul(c, s, mkb_add_s(c, mkb_mul(c, gp32, mkb_rsub_s(c, s, 1.0)), 1.0));
    struct mkb_tensor *dg = mkb_cast(c, mkb_mul(c, mkb_cast(c, da, MKB_DTYPE_F32), dsilu), MKB_DTYPE_BF16);
                                                                   /* (M, I) bf16 */
    struct mkb_tensor *dxg = mkb_matmul(c, dg, wg, false, false);  /* (M, H) bf16 */
    struct mkb_tensor *dwg = mkb_matmul(c, dg, x, true, false);    /* (I, H) bf16 */
    struct mkb_tensor *dxu = mkb_matmul(c, du, wu, false, false);  /* (M, H) bf16 */
    struct mkb_tensor *dwu = mkb_matmul(c, du, x, true, false);    /* (I, H) bf16 */
    struct mkb_tensor *dx = mkb_add(c, dxg, dxu);                  /* (M, H) bf16 */

    out[0] = mkb_reshape(c, dx, MKB_SHAPE(B, S, H)); /* (B, S, H) bf16 */
    out[1] = dwg;                                    /* (I, H) bf16 */
    out[2] = dwu;                                    /* (I, H) bf16 */
    out[3] = dwd;                                    /* (H, I) bf16 */
}

MKB_PROBLEM(34) = {
    .id = 34,
    .name = "34_swiglu_mlp_backward_hermes_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench 005_swiglu_mlp_backward, L2 row 4, workload index 12 (recipe)",
    .model = "Hermes 3 (405B geometry)",
    .summary = "backward of the SwiGLU MLP y = (silu(X W_g^T) * X W_u^T) W_d^T from dY and saved activations: "
               "return dX, dW_g, dW_u, dW_d",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 128, 4, "sequence length"},
        {"H", 16384, 16, "hidden size"},
        {"I", 53248, 48, "intermediate size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"grad_output", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16", .draw = {MKB_DRAW_NORMAL}},
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}},
        {"gate_pre", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S I",
         "N(0,1) drawn in bf16 (the saved gate pre-activation, independent of X)", .draw = {MKB_DRAW_NORMAL}},
        {"up", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S I",
         "N(0,1) drawn in bf16 (the saved up projection, independent of X)", .draw = {MKB_DRAW_NORMAL}},
        {"gate_act", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S I",
         "N(0,1) drawn in bf16 (the saved silu(gate), independent of gate_pre, used as given)",
         .draw = {MKB_DRAW_NORMAL}},
        {"gate_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "I H", "N(0,1)/sqrt(H), drawn and divided in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"up_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "I H", "N(0,1)/sqrt(H), drawn and divided in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"down_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H I", "N(0,1)/sqrt(I), drawn and divided in bf16",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "I"}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"grad_hidden_states", MKB_DTYPE_BF16, "B S H", -1, NULL},
        {"grad_gate_proj_weight", MKB_DTYPE_BF16, "I H", -1, NULL},
        {"grad_up_proj_weight", MKB_DTYPE_BF16, "I H", -1, NULL},
        {"grad_down_proj_weight", MKB_DTYPE_BF16, "H I", -1, NULL},
        {0},
    },
    .reference = reference,
};
