# problem: 36
# dsl: cutedsl
"""RMSNorm over 128-wide rows in CuTe DSL: one warp per row, 8 rows per CTA.

Each lane holds 4 elements of its row in registers (fp32), a warp shuffle reduction gives the
row's sum of squares, and each lane writes its 4 outputs as bf16(x * rsqrt(mean + eps) * w).
"""
import torch

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

ROWS_PER_CTA = 8
D = 128
PER_LANE = D // 32
EPS = 1e-6


@cute.kernel
def _rmsnorm_h128(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    row = bidx * ROWS_PER_CTA + warp
    if row < mX.shape[0]:
        acc = cutlass.Float32(0.0)
        for k in cutlass.range_constexpr(PER_LANE):
            x = cutlass.Float32(mX[row, lane + 32 * k])
            acc = acc + x * x
        acc = cute.arch.warp_reduction_sum(acc)
        r = cute.math.rsqrt(acc / cutlass.Float32(D) + cutlass.Float32(EPS))
        for k in cutlass.range_constexpr(PER_LANE):
            j = lane + 32 * k
            y = cutlass.Float32(mX[row, j]) * r * cutlass.Float32(mW[j])
            mY[row, j] = y.to(cutlass.BFloat16)


@cute.jit
def _launch(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    ctas = (mX.shape[0] + ROWS_PER_CTA - 1) // ROWS_PER_CTA
    _rmsnorm_h128(mX, mW, mY).launch(grid=(ctas, 1, 1), block=(32 * ROWS_PER_CTA, 1, 1))


_compiled = {}


def solve(hidden_states, weight):
    assert hidden_states.shape[1] == D
    y = torch.empty_like(hidden_states)
    args = [from_dlpack(t) for t in (hidden_states, weight, y)]
    key = tuple(hidden_states.shape)
    fn = _compiled.get(key)
    if fn is None:
        fn = cute.compile(_launch, *args)
        _compiled[key] = fn
    fn(*args)
    return y
