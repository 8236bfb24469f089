/* 31 · groupnorm_sd15_fp32 — GroupNorm with 32 groups and a per-channel affine over NCHW
 * feature maps, in fp32 (Stable Diffusion 1.5 UNet at the 8×8, 1280-channel level;
 * SOL-ExecBench L1 078_group_norm_fusion).
 *
 *   xg = x viewed as (N, G, (C/G)·H·W)                         (N, G, L) fp32, G = 32
 *   mu = mean_L xg;  v = mean_L (xg - mu)^2   (biased)         (N, G, 1) fp32
 *   xh = (xg - mu) / sqrt(v + eps)   (square root, then divide) (N, G, L) fp32
 *   y  = xh viewed as (N, C, H, W) * weight[c] + bias[c]      (N, C, H, W) fp32
 *
 * The variance is the two-pass form (mean of squared deviations from the fp32 mean), the
 * numerically sound reading of "biased variance" the catalog gives. No "(our design ?)" items. */
#include "problem/problem.h"

#define GROUPS 32

static void reference(struct mkb_ctx *c, const struct mkb_dims *d, const struct mkb_args *in,
                      struct mkb_tensor **out) {
    /* x: (N, C, H, W) fp32; weight, bias: (C) fp32 */
    const double eps = in->s[3];
    int64_t N = mkb_dim(d, "N"), C = mkb_dim(d, "C"), H = mkb_dim(d, "H"), W = mkb_dim(d, "W");
    if (C % GROUPS) {
        mkb_ctx_fail(c, MKB_ERR_INVALID, "C = %lld is not a multiple of %d groups", (long long)C, GROUPS);
        return;
    }
    struct mkb_tensor *xg = mkb_reshape(c, in->t[0], MKB_SHAPE(N, GROUPS, C / GROUPS * H * W)); /* (N, G, L) fp32 */
    struct mkb_tensor *xc = mkb_sub(c, xg, mkb_mean(c, xg, -1, true));       /* (N, G, L) fp32 */
    struct mkb_tensor *v = mkb_mean(c, mkb_square(c, xc), -1, true);         /* (N, G, 1) fp32 */
    struct mkb_tensor *xh = mkb_div(c, xc, mkb_sqrt(c, mkb_add_s(c, v, eps))); /* (N, G, L) fp32 */
    xh = mkb_reshape(c, xh, MKB_SHAPE(N, C, H, W));                           /* (N, C, H, W) fp32 */
    struct mkb_tensor *w = mkb_reshape(c, in->t[1], MKB_SHAPE(C, 1, 1)); /* (C, 1, 1) fp32 */
    struct mkb_tensor *b = mkb_reshape(c, in->t[2], MKB_SHAPE(C, 1, 1)); /* (C, 1, 1) fp32 */
    out[0] = mkb_add(c, mkb_mul(c, xh, w), b);                           /* (N, C, H, W) fp32 */
}

MKB_PROBLEM(31) = {
    .id = 31,
    .name = "31_groupnorm_sd15_fp32",
    .family = "mlp_norm",
    .source = "SOL-ExecBench L1 078_group_norm_fusion, workload 10 (recipe)",
    .model = "Stable Diffusion 1.5 UNet GroupNorm (8x8, 1280 channels)",
    .summary = "GroupNorm with 32 groups and per-channel affine over NCHW feature maps, fp32",
    .dims = (const struct mkb_dim_spec[]){
        {"N", 32, 2, "batch"},
        {"C", 1280, 64, "channels (32 groups)"},
        {"H", 8, 4, "height"},
        {"W", 8, 4, "width"},
        {0},
    },
    .inputs = (const struct mkb_input_spec[]){
        {"x", MKB_ARG_TENSOR, MKB_DTYPE_F32, "N C H W", "N(0,1)", .draw = {MKB_DRAW_NORMAL}},
        {"weight", MKB_ARG_TENSOR, MKB_DTYPE_F32, "C", "1 + 0.1 N(0,1)",
         .draw = {MKB_DRAW_NORMAL, .scale = 0.1, .shift = 1.0}},
        {"bias", MKB_ARG_TENSOR, MKB_DTYPE_F32, "C", "0.1 N(0,1)", .draw = {MKB_DRAW_NORMAL, .scale = 0.1}},
        {"eps", MKB_ARG_FLOAT, .values = "1e-5", .value = 1e-5},
        {0},
    },
    .outputs = (const struct mkb_output_spec[]){
        {"y", MKB_DTYPE_F32, "N C H W", -1, NULL},
        {0},
    },
    .reference = reference,
};
