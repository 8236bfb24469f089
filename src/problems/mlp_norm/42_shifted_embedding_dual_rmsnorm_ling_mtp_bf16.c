/* 42 · shifted_embedding_dual_rmsnorm_ling_mtp_bf16 — the input of a multi-token-prediction layer
 * (Ling): the token ids are shifted left by one and embedded; the embeddings and the incoming
 * hidden states are RMS-normalized with separate weights, concatenated and projected 2H -> H
 * (SOL-ExecBench L1 057_mtp_shifted_embedding_with_dual_rms_norm_fusion). bf16 storage, fp32
 * norm math, int64 ids.
 *
 *   shifted[b, s] = ids[b, s + 1] (s < S - 1),  shifted[b, S - 1] = 0      (B, S) int64
 *   e = word_embeddings[shifted]                                           (B, S, H) bf16
 *   RMSNorm(z, w) = bf16(f32(w) * f32(bf16(x * rsqrt(mean_H x^2 + eps)))), x = f32(z)
 *   cat = [RMSNorm(e, enorm_weight), RMSNorm(hidden, hnorm_weight)]        (B, S, 2H) bf16
 *   y = cat eh_proj_weight^T                          (bf16 GEMM, no bias) (B, S, H) bf16
 *
 * Settled here: the weight product of the norm is a bf16 elementwise multiply of the two bf16
 * tensors (the Hugging Face Llama convention); computed in fp32 it is the same value, since a
 * product of two bf16 values is exact in fp32. The shift is built as the ids from position 1 on
 * followed by a column of zeros. No "(our design ?)" items. */
#include "problem/problem.h"

/* bf16(w * bf16(x * rsqrt(mean_H x^2 + eps))), x = f32(z); z: (B, S, H) bf16, w: (H) bf16 */
static struct mkb_tensor *rmsnorm(struct mkb_ctx *c, const struct mkb_tensor *z, const struct mkb_tensor *w,
                                  double eps) {
    struct mkb_tensor *x = mkb_cast(c, z, MKB_DTYPE_F32);                    /* (B, S, H) fp32 */
    struct mkb_tensor *ms = mkb_mean(c, mkb_square(c, x), -1, true);         /* (B, S, 1) fp32 */
    struct mkb_tensor *xh = mkb_mul(c, x, mkb_rsqrt(c, mkb_add_s(c, ms, eps))); /* (B, S, H) fp32 */
    return mkb_mul(c, w, mkb_cast(c, xh, MKB_DTYPE_BF16));                   /* (B, S, H) bf16 */
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S");
    const double eps = in->s[6];
    /* input_ids: (B, S) int64; hidden_states: (B, S, H) bf16; word_embeddings: (V, H) bf16;
     * enorm_weight, hnorm_weight: (H) bf16; eh_proj_weight: (H, 2H) bf16 */
    const struct mkb_tensor *parts[2] = {
        mkb_slice(c, in->t[0], 1, 1, S),                      /* (B, S-1) int64 */
        mkb_full(c, MKB_DTYPE_I64, MKB_SHAPE(B, 1), 0.0),     /* (B, 1) int64 */
    };
    struct mkb_tensor *shifted = mkb_concat(c, 2, parts, 1);  /* (B, S) int64 */
    struct mkb_tensor *e = mkb_gather_rows(c, in->t[2], shifted); /* (B, S, H) bf16 */
    const struct mkb_tensor *normed[2] = {
        rmsnorm(c, e, in->t[3], eps),        /* (B, S, H) bf16 */
        rmsnorm(c, in->t[1], in->t[4], eps), /* (B, S, H) bf16 */
    };
    struct mkb_tensor *cat = mkb_concat(c, 2, normed, -1); /* (B, S, 2H) bf16 */
    out[0] = mkb_linear(c, cat, in->t[5], NULL);           /* (B, S, H) bf16 */
}

MKB_PROBLEM(42) = {
    .id = 42,
    .name = "42_shifted_embedding_dual_rmsnorm_ling_mtp_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 057_mtp_shifted_embedding_with_dual_rms_norm_fusion, workload 0 (recipe)",
    .model = "Ling (inclusionAI, vocab 157184, hidden 4096) multi-token-prediction layer input",
    .summary = "shift the token ids left by one and embed them, RMS-normalize the embeddings and the hidden "
               "states with separate weights, concatenate and project 2H -> H",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 32, 2, "batch"},
        {"S", 256, 5, "sequence"},
        {"V", 157184, 32, "vocabulary"},
        {"H", 4096, 16, "hidden size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"input_ids", MKB_ARG_TENSOR, MKB_DTYPE_I64, "B S", "U{0..V-1}", .draw = {MKB_DRAW_INT, .hi_dim = "V"}},
        {"hidden_states", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}},
        {"word_embeddings", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "V H", "N(0,1) drawn in bf16",
         .draw = {MKB_DRAW_NORMAL}, .rows_indexed_by = "input_ids"},
        {"enorm_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H", "1 + 0.1 N(0,1), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"hnorm_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H", "1 + 0.1 N(0,1), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"eh_proj_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H 2*H", "0.02 N(0,1), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.02}},
        {"rms_norm_eps", MKB_ARG_FLOAT, .values = "1e-6", .value = 1e-6},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_BF16, "B S H", -1, NULL},
        {0},
    },
    .reference = reference,
};
