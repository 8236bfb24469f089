/* 41 · qkv_per_head_rmsnorm_gemma3n_e4b_audio_fp32 — the attention inputs of the Gemma 3n (E4B)
 * audio encoder: Q/K/V projections without bias, split into heads, with a per-head RMSNorm and a
 * learned weight on Q and K only (SOL-ExecBench L1
 * 054_audio_attention_qkv_projection_with_normalization). Everything fp32; the GEMMs are fp32.
 *
 *   q = (x W_q^T).view(B, S, NH, D),  k, v likewise       (B, S, NH, D) fp32
 *   q = (q / sqrt(mean_D q^2 + eps)) * q_norm_weight       (B, S, NH, D) fp32
 *   k = (k / sqrt(mean_D k^2 + eps)) * k_norm_weight       (B, S, NH, D) fp32
 *   v is returned as projected; outputs (q, k, v) in head-split layout, no transpose
 *
 * Settled here: the norm is a square root followed by a division (not a reciprocal square root
 * and a multiply), and the weight multiplies the normalized value, as the catalog states. No
 * "(our design ?)" items. */
#include "problem/problem.h"

/* (t / sqrt(mean_D t^2 + eps)) * w over the last axis; t: (B, S, NH, D) fp32, w: (D) fp32 */
static struct mkb_tensor *head_rmsnorm(struct mkb_ctx *c, const struct mkb_tensor *t, const struct mkb_tensor *w,
                                       double eps) {
    struct mkb_tensor *ms = mkb_mean(c, mkb_square(c, t), -1, true);        /* (B, S, NH, 1) fp32 */
    struct mkb_tensor *n = mkb_div(c, t, mkb_sqrt(c, mkb_add_s(c, ms, eps))); /* (B, S, NH, D) fp32 */
    return mkb_mul(c, n, w);                                                /* (B, S, NH, D) fp32 */
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), NH = mkb_dim(d, "NH"), D = mkb_dim(d, "D");
    const double eps = in->s[6];
    /* x: (B, S, H); q_weight, k_weight, v_weight: (NH*D, H); q_norm_weight, k_norm_weight: (D); all fp32 */
    struct mkb_tensor *q = mkb_reshape(c, mkb_linear(c, in->t[0], in->t[1], NULL), MKB_SHAPE(B, S, NH, D));
    struct mkb_tensor *k = mkb_reshape(c, mkb_linear(c, in->t[0], in->t[2], NULL), MKB_SHAPE(B, S, NH, D));
    struct mkb_tensor *v = mkb_reshape(c, mkb_linear(c, in->t[0], in->t[3], NULL), MKB_SHAPE(B, S, NH, D));
    out[0] = head_rmsnorm(c, q, in->t[4], eps); /* (B, S, NH, D) fp32 */
    out[1] = head_rmsnorm(c, k, in->t[5], eps); /* (B, S, NH, D) fp32 */
    out[2] = v;                                 /* (B, S, NH, D) fp32 */
}

MKB_PROBLEM(41) = {
    .id = 41,
    .name = "41_qkv_per_head_rmsnorm_gemma3n_e4b_audio_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 054_audio_attention_qkv_projection_with_normalization, workload 5 (recipe)",
    .model = "Gemma 3n (E4B) audio encoder attention inputs, 8 heads x 128",
    .summary = "Q/K/V projections (no bias) split into heads, per-head RMSNorm with a learned weight on Q and K, "
               "fp32",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 128, 4, "sequence"},
        {"H", 1024, 32, "hidden size"},
        {"NH", 8, 2, "heads"},
        {"D", 128, 16, "head dim"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"q_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "NH*D H", "N(0,1)/sqrt(H)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"k_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "NH*D H", "N(0,1)/sqrt(H)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"v_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "NH*D H", "N(0,1)/sqrt(H)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "H"}},
        {"q_norm_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "D", "1 + 0.1 N(0,1)",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"k_norm_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "D", "1 + 0.1 N(0,1)",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"eps", MKB_ARG_FLOAT, .values = "1e-6", .value = 1e-6},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"q", MKB_DTYPE_F32, "B S NH D", -1, "RMS-normalized per head, times q_norm_weight"},
        {"k", MKB_DTYPE_F32, "B S NH D", -1, "RMS-normalized per head, times k_norm_weight"},
        {"v", MKB_DTYPE_F32, "B S NH D", -1, "as projected"},
        {0},
    },
    .reference = reference,
};
