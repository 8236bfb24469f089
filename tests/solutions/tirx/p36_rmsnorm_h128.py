# problem: 36
# dsl: tirx
"""RMSNorm over 128-wide rows in TIRx (Apache TVM): one warp per row, 8 rows per CTA.

Each lane reads 4 elements of its row (fp32), a warp shuffle reduction gives the row's sum of
squares, and each lane writes its 4 outputs as bf16(x * rsqrt(mean + eps) * w).
"""
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm_h128(x_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
    n = T.int32()
    X = T.match_buffer(x_ptr, (n, 128), "bfloat16")
    W = T.match_buffer(w_ptr, (128,), "bfloat16")
    Y = T.match_buffer(y_ptr, (n, 128), "bfloat16")
    T.device_entry()
    cta = T.cta_id([(n + 7) // 8])
    tx = T.thread_id([256])
    acc = T.alloc_local((1,), "float32")
    if cta * 8 + tx // 32 < n:
        acc[0] = T.float32(0)
        for k in T.unroll(4):
            acc[0] = acc[0] + T.Cast("float32", X[cta * 8 + tx // 32, tx % 32 + 32 * k]) * T.Cast(
                "float32", X[cta * 8 + tx // 32, tx % 32 + 32 * k])
        acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 16, 32, 32)
        acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 8, 32, 32)
        acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 4, 32, 32)
        acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 2, 32, 32)
        acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 1, 32, 32)
        acc[0] = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for k in T.unroll(4):
            Y[cta * 8 + tx // 32, tx % 32 + 32 * k] = T.Cast(
                "bfloat16",
                T.Cast("float32", X[cta * 8 + tx // 32, tx % 32 + 32 * k]) * acc[0]
                * T.Cast("float32", W[tx % 32 + 32 * k]))


_exe = []


def solve(hidden_states, weight):
    if not _exe:
        _exe.append(tvm.compile(tvm.IRModule({"main": rmsnorm_h128}), target=tvm.target.Target("cuda"),
                                tir_pipeline="tirx"))
    y = torch.empty_like(hidden_states)
    _exe[0](hidden_states, weight, y)
    return y
