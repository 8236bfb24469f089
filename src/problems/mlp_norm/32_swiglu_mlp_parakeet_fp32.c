/* 32 · swiglu_mlp_parakeet_fp32 — a gated MLP with one fused gate-and-up projection: D→2I,
 * split in order into gate and up halves, up ⊙ SiLU(gate), then the down projection I→D; no
 * biases; fp32 throughout (SOL-ExecBench L1 074_fused_gated_mlp_silu, model labelled
 * "Parakeet").
 *
 *   gu   = x Wgu^T                    (B, S, 2I) fp32   fp32 GEMM
 *   gate = gu[..., 0:I], up = gu[..., I:2I]   (B, S, I) fp32 views
 *   h    = up * silu(gate)            (B, S, I) fp32
 *   y    = h Wdown^T                  (B, S, D) fp32
 *
 * SiLU on the first half is the catalog's "our design ✓" (gate-first convention). No
 * "(our design ?)" items. */
#include "problem/problem.h"

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    /* x: (B, S, D) fp32; gate_up_weight: (2I, D) fp32; down_weight: (D, I) fp32 */
    int64_t I = mkb_dim(d, "I");
    struct mkb_tensor *gu = mkb_linear(c, in->t[0], in->t[1], NULL); /* (B, S, 2I) fp32 */
    struct mkb_tensor *gate = mkb_slice(c, gu, -1, 0, I);            /* (B, S, I) fp32 */
    struct mkb_tensor *up = mkb_slice(c, gu, -1, I, 2 * I);          /* (B, S, I) fp32 */
    struct mkb_tensor *h = mkb_mul(c, up, mkb_silu(c, gate));        /* (B, S, I) fp32 */
    out[0] = mkb_linear(c, h, in->t[2], NULL);                       /* (B, S, D) fp32 */
}

MKB_PROBLEM(32) = {
    .id = 32,
    .name = "32_swiglu_mlp_parakeet_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 074_fused_gated_mlp_silu, workload 9 (recipe)",
    .model = "labelled \"Parakeet\" (d 1024, ffn 4096)",
    .summary = "fused gate-and-up projection (D -> 2I) split in halves, SiLU(gate) * up, down "
               "projection (I -> D), no biases, fp32",
    .dims = (const struct mkb_dim_spec[]){
        {"B", 64, 2, "batch"},
        {"S", 128, 4, "sequence"},
        {"D", 1024, 16, "model width"},
        {"I", 4096, 32, "intermediate width"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"x", MKB_ARG_TENSOR, MKB_DTYPE_F32, "B S D", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"gate_up_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "2*I D", "N(0,1)/sqrt(D); rows 0..I-1 gate, I..2I-1 up",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "D"}},
        {"down_weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "D I", "N(0,1)/sqrt(I)",
         .draw = {MKB_DRAW_NORMAL, .rsqrt_dim = "I"}},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_F32, "B S D", -1, NULL},
        {0},
    },
    .reference = reference,
};
