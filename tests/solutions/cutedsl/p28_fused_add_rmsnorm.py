# problem: 28
# dsl: cutedsl
"""Residual add + RMSNorm with a learned weight in CuTe DSL.

One CTA of 256 threads per row: each thread accumulates the squares of x = h + r (fp32) over a
strided slice of the row, a warp shuffle reduction and a shared-memory pass over the 8 warps give
the row's sum, and the same threads recompute x and write bf16(x * rsqrt(mean + eps) * w).
"""
import torch

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
WARPS = THREADS // 32
EPS = 1e-5


@cute.kernel
def _fused_add_rmsnorm(mH: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout((WARPS,)))
    scale = smem.allocate_tensor(cutlass.Float32, cute.make_layout((1,)))

    n = mH.shape[1]
    steps = cute.ceil_div(n, THREADS)
    acc = cutlass.Float32(0.0)
    for i in range(steps):
        j = i * THREADS + tidx
        if j < n:
            x = cutlass.Float32(mH[row, j]) + cutlass.Float32(mR[row, j])
            acc = acc + x * x
    acc = cute.arch.warp_reduction_sum(acc)
    if lane == 0:
        partial[warp] = acc
    cute.arch.sync_threads()
    if tidx == 0:
        total = cutlass.Float32(0.0)
        for w in cutlass.range_constexpr(WARPS):
            total = total + partial[w]
        scale[0] = cute.math.rsqrt(total / cutlass.Float32(n) + cutlass.Float32(EPS))
    cute.arch.sync_threads()
    r = scale[0]
    for i in range(steps):
        j = i * THREADS + tidx
        if j < n:
            x = cutlass.Float32(mH[row, j]) + cutlass.Float32(mR[row, j])
            y = x * r * cutlass.Float32(mW[j])
            mY[row, j] = y.to(cutlass.BFloat16)


@cute.jit
def _launch(mH: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    _fused_add_rmsnorm(mH, mR, mW, mY).launch(grid=(mH.shape[0], 1, 1), block=(THREADS, 1, 1))


_compiled = {}


def solve(hidden_states, residual, weight):
    y = torch.empty_like(hidden_states)
    args = [from_dlpack(t) for t in (hidden_states, residual, weight, y)]
    key = (tuple(hidden_states.shape), hidden_states.dtype)
    fn = _compiled.get(key)
    if fn is None:
        fn = cute.compile(_launch, *args)
        _compiled[key] = fn
    fn(*args)
    return y
