# problem: 28
# dsl: tirx
"""Residual add + RMSNorm with a learned weight in TIRx (Apache TVM).

One CTA of 256 threads per row (rows and width are symbolic, read from the tensors): each thread
accumulates the squares of x = h + r (fp32) over a strided slice of the row, a warp shuffle
reduction and a shared-memory pass over the 8 warps give the row's sum, and the same threads
recompute x and write bf16(x * rsqrt(mean + eps) * w).
"""
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def fused_add_rmsnorm(h_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
    n = T.int32()
    h = T.int32()
    Hs = T.match_buffer(h_ptr, (n, h), "bfloat16")
    Rs = T.match_buffer(r_ptr, (n, h), "bfloat16")
    W = T.match_buffer(w_ptr, (h,), "bfloat16")
    Y = T.match_buffer(y_ptr, (n, h), "bfloat16")
    T.device_entry()
    row = T.cta_id([n])
    tx = T.thread_id([256])
    part = T.alloc_shared((8,), "float32")
    scale = T.alloc_shared((1,), "float32")
    acc = T.alloc_local((1,), "float32")
    acc[0] = T.float32(0)
    for k in range((h + 255) // 256):
        if k * 256 + tx < h:
            acc[0] = acc[0] + (T.Cast("float32", Hs[row, k * 256 + tx]) + T.Cast("float32", Rs[row, k * 256 + tx])) * (
                T.Cast("float32", Hs[row, k * 256 + tx]) + T.Cast("float32", Rs[row, k * 256 + tx]))
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 16, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 8, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 4, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 2, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 1, 32, 32)
    if tx % 32 == 0:
        part[tx // 32] = acc[0]
    T.cuda.cta_sync()
    if tx == 0:
        scale[0] = T.rsqrt((part[0] + part[1] + part[2] + part[3] + part[4] + part[5] + part[6] + part[7])
                           / T.Cast("float32", h) + T.float32(1e-5))
    T.cuda.cta_sync()
    for k in range((h + 255) // 256):
        if k * 256 + tx < h:
            Y[row, k * 256 + tx] = T.Cast(
                "bfloat16",
                (T.Cast("float32", Hs[row, k * 256 + tx]) + T.Cast("float32", Rs[row, k * 256 + tx])) * scale[0]
                * T.Cast("float32", W[k * 256 + tx]))


_exe = []


def solve(hidden_states, residual, weight):
    if not _exe:
        _exe.append(tvm.compile(tvm.IRModule({"main": fused_add_rmsnorm}), target=tvm.target.Target("cuda"),
                                tir_pipeline="tirx"))
    y = torch.empty_like(hidden_states)
    _exe[0](hidden_states, residual, weight, y)
    return y
