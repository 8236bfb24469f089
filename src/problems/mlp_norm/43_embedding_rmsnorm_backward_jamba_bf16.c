/* 43 · embedding_rmsnorm_backward_jamba_bf16 — backward of an embedding lookup followed by an
 * RMSNorm with a learned weight, out = RMSNorm(E[ids]) * w (Jamba; SOL-ExecBench L1
 * 087_embedding_with_initial_layernorm_backward). Returns the dense embedding-table gradient (a
 * scatter-add of per-token gradients) and the norm-weight gradient.
 *
 * Forward relation: h = E[ids] (kept in fp32), n = h * rstd, out = n * w.
 *   g = f32(dY),  n = h * rstd                               (B, S, H) fp32
 *   dw = bf16(sum_{b,s} g * n)                  (fp32 sum)   (H) bf16
 *   dn = g * f32(w),  m = mean_H (dn * n)                    (B, S, H), (B, S, 1) fp32
 *   dh = rstd * (dn - m * n)                                 (B, S, H) fp32
 *   dE = bf16(index_add(zeros(V, H) fp32, ids, dh))          (V, H) bf16, one rounding at the end
 *
 * The inputs are drawn independently, as upstream does: h is N(0,1) and unrelated to any table,
 * and rstd = rsqrt(u + 1e-6) with u = 2 U[0,1) + 0.1 drawn once per row, each step an fp32 op.
 *
 * Settled here:
 *   - rstd is fp32 (the catalog's "(our design ?)"): it is the saved statistic of a norm whose
 *     math is fp32, next to the fp32 saved hidden states; a bf16 rstd would round a value that
 *     every framework keeps in the norm's math type.
 *   - rstd is formed with a reciprocal square root, as the catalog writes 1/sqrt(.) for rsqrt
 *     throughout (problems 28, 36, 38).
 *   - the accumulation into the table is sequential over the B*S tokens in row-major order; the
 *     catalog allows any order within the tolerance. */
#include "problem/problem.h"

static void generate(struct mkb_ctx *c, const struct mkb_dims *d, struct mkb_args *in) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S");
    /* rstd = rsqrt((2 U[0,1) + 0.1) + 1e-6), every step in fp32; u: (B, S, 1) fp32 */
    struct mkb_tensor *u = mkb_rand(c, MKB_STREAM(3, 0), MKB_DTYPE_F32, MKB_SHAPE(B, S, 1), 0.0, 1.0);
    u = mkb_add_s(c, mkb_mul_s(c, u, 2.0), 0.1);
    in->t[3] = mkb_rsqrt(c, mkb_add_s(c, u, 1e-6)); /* (B, S, 1) fp32 */
}

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    const int64_t B = mkb_dim(d, "B"), S = mkb_dim(d, "S"), V = mkb_dim(d, "V"), H = mkb_dim(d, "H");
    /* grad_output dY: (B, S, H) bf16; input_ids: (B, S) int64; hidden_states_fp32 h: (B, S, H) fp32;
     * rstd: (B, S, 1) fp32; norm_weight w: (H) bf16 */
    const struct mkb_tensor *rstd = in->t[3];
    struct mkb_tensor *g = mkb_cast(c, in->t[0], MKB_DTYPE_F32); /* (B, S, H) fp32 */
    struct mkb_tensor *n = mkb_mul(c, in->t[2], rstd);           /* (B, S, H) fp32 */
    struct mkb_tensor *gn = mkb_reshape(c, mkb_mul(c, g, n), MKB_SHAPE(B * S, H)); /* (B*S, H) fp32 */
    out[1] = mkb_cast(c, mkb_sum(c, gn, 0, false), MKB_DTYPE_BF16); /* dw: (H) bf16 */
    struct mkb_tensor *dn = mkb_mul(c, g, mkb_cast(c, in->t[4], MKB_DTYPE_F32)); /* (B, S, H) fp32 */
    struct mkb_tensor *m = mkb_mean(c, mkb_mul(c, dn, n), -1, true);               /* (B, S, 1) fp32 */
    struct mkb_tensor *dh = mkb_mul(c, rstd, mkb_sub(c, dn, mkb_mul(c, m, n)));    /* (B, S, H) fp32 */
    struct mkb_tensor *zero = mkb_full(c, MKB_DTYPE_F32, MKB_SHAPE(V, H), 0.0);    /* (V, H) fp32 */
    struct mkb_tensor *de = mkb_index_add_rows(c, zero, mkb_reshape(c, in->t[1], MKB_SHAPE(B * S)),
                                               mkb_reshape(c, dh, MKB_SHAPE(B * S, H))); /* (V, H) fp32 */
    out[0] = mkb_cast(c, de, MKB_DTYPE_BF16); /* dE: (V, H) bf16 */
}

MKB_PROBLEM(43) = {
    .id = 43,
    .name = "43_embedding_rmsnorm_backward_jamba_bf16",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 087_embedding_with_initial_layernorm_backward, workload 0 (recipe)",
    .model = "Jamba (vocab 65536, hidden 4096)",
    .summary = "backward of out = RMSNorm(E[ids]) * w: the dense embedding-table gradient (a scatter-add of "
               "per-token gradients) and the norm-weight gradient",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 256, 6, "sequence"},
        {"V", 65536, 16, "vocabulary (small at test scale so that ids repeat)"},
        {"H", 4096, 32, "hidden size"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"grad_output", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "B S H", "N(0,1) drawn in bf16", .draw = {MKB_DRAW_NORMAL}},
        {"input_ids", MKB_ARG_TENSOR, MKB_DTYPE_I64, "B S", "U{0..V-1}; repeats occur",
         .draw = {MKB_DRAW_INT, .hi_dim = "V"}},
        {"hidden_states_fp32", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S H", "N(0,1), independent of the table",
         .draw = {MKB_DRAW_NORMAL}},
        {"rstd", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S 1",
         "rsqrt(u + 1e-6), u = 2 U[0,1) + 0.1 drawn once per row, each step in fp32", .draw = {MKB_DRAW_CUSTOM}},
        {"norm_weight", MKB_ARG_TENSOR, MKB_DTYPE_BF16, "H", "1 + 0.1 N(0,1), drawn in bf16",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"grad_embedding_weight", MKB_DTYPE_BF16, "V H", -1, "rows no id references are exactly 0"},
        {"grad_norm_weight", MKB_DTYPE_BF16, "H", -1, NULL},
        {0},
    },
    .generate = generate,
    .reference = reference,
};
