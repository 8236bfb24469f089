# problem: 39
# dsl: tirx
"""AdaLayerNormContinuous + output projection (FLUX.1 Kontext final layer) in TIRx, fp32.

Three TIRx kernels:
  1. emb = silu(temb) W_m^T + b_m: one thread per output element, fp64 accumulation over D;
  2. z = LayerNorm(x) * (1 + scale) + shift: one CTA per row, two block reductions (mean, then
     the mean of squared deviations), scale and shift read from emb;
  3. y = z W_o^T + b_o: one thread per output element, fp64 accumulation over D.
Eager PyTorch only allocates emb, z and y.

The dot products accumulate in fp64 and round once: the rule allows three times the error of the
eager fp32 GEMM, and a thread summing 3072 fp32 products one after another exceeded that on some
draws (on an H200 this kernel with fp32 accumulators passed 1 of 5 correctness draws).
"""
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def linear_silu(t_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, e_ptr: T.handle):
    bsz = T.int32()
    d = T.int32()
    nout = T.int32()
    Tm = T.match_buffer(t_ptr, (bsz, d), "float32")
    Wm = T.match_buffer(w_ptr, (nout, d), "float32")
    Bm = T.match_buffer(b_ptr, (nout,), "float32")
    E = T.match_buffer(e_ptr, (bsz, nout), "float32")
    T.device_entry()
    cta = T.cta_id([(bsz * nout + 255) // 256])
    tx = T.thread_id([256])
    acc = T.alloc_local((1,), "float64")
    if cta * 256 + tx < bsz * nout:
        acc[0] = T.float64(0)
        for k in range(d):
            acc[0] = acc[0] + T.Cast("float64", Tm[(cta * 256 + tx) // nout, k] / (
                T.float32(1) + T.exp(T.float32(0) - Tm[(cta * 256 + tx) // nout, k]))) * T.Cast(
                "float64", Wm[(cta * 256 + tx) % nout, k])
        E[(cta * 256 + tx) // nout, (cta * 256 + tx) % nout] = T.Cast(
            "float32", acc[0] + T.Cast("float64", Bm[(cta * 256 + tx) % nout]))


@T.prim_func
def norm_modulate(x_ptr: T.handle, e_ptr: T.handle, z_ptr: T.handle, seq: T.int32, eps: T.float32):
    rows = T.int32()
    d = T.int32()
    bsz = T.int32()
    X = T.match_buffer(x_ptr, (rows, d), "float32")
    E = T.match_buffer(e_ptr, (bsz, 2 * d), "float32")
    Z = T.match_buffer(z_ptr, (rows, d), "float32")
    T.device_entry()
    row = T.cta_id([rows])
    tx = T.thread_id([256])
    part = T.alloc_shared((8,), "float32")
    stats = T.alloc_shared((2,), "float32")
    acc = T.alloc_local((1,), "float32")
    acc[0] = T.float32(0)
    for k in range((d + 255) // 256):
        if k * 256 + tx < d:
            acc[0] = acc[0] + X[row, k * 256 + tx]
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 16, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 8, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 4, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 2, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 1, 32, 32)
    if tx % 32 == 0:
        part[tx // 32] = acc[0]
    T.cuda.cta_sync()
    if tx == 0:
        stats[0] = (part[0] + part[1] + part[2] + part[3] + part[4] + part[5] + part[6] + part[7]) / T.Cast("float32", d)
    T.cuda.cta_sync()
    acc[0] = T.float32(0)
    for k in range((d + 255) // 256):
        if k * 256 + tx < d:
            acc[0] = acc[0] + (X[row, k * 256 + tx] - stats[0]) * (X[row, k * 256 + tx] - stats[0])
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 16, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 8, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 4, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 2, 32, 32)
    acc[0] = acc[0] + T.tvm_warp_shuffle_xor(0xFFFFFFFF, acc[0], 1, 32, 32)
    T.cuda.cta_sync()
    if tx % 32 == 0:
        part[tx // 32] = acc[0]
    T.cuda.cta_sync()
    if tx == 0:
        stats[1] = T.sqrt((part[0] + part[1] + part[2] + part[3] + part[4] + part[5] + part[6] + part[7])
                          / T.Cast("float32", d) + eps)
    T.cuda.cta_sync()
    for k in range((d + 255) // 256):
        if k * 256 + tx < d:
            Z[row, k * 256 + tx] = (X[row, k * 256 + tx] - stats[0]) / stats[1] * (
                T.float32(1) + E[row // seq, k * 256 + tx]) + E[row // seq, d + k * 256 + tx]


@T.prim_func
def linear(z_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    d = T.int32()
    nout = T.int32()
    Z = T.match_buffer(z_ptr, (rows, d), "float32")
    Wo = T.match_buffer(w_ptr, (nout, d), "float32")
    Bo = T.match_buffer(b_ptr, (nout,), "float32")
    Y = T.match_buffer(y_ptr, (rows, nout), "float32")
    T.device_entry()
    cta = T.cta_id([(rows * nout + 255) // 256])
    tx = T.thread_id([256])
    acc = T.alloc_local((1,), "float64")
    if cta * 256 + tx < rows * nout:
        acc[0] = T.float64(0)
        for k in range(d):
            acc[0] = acc[0] + T.Cast("float64", Z[(cta * 256 + tx) // nout, k]) * T.Cast(
                "float64", Wo[(cta * 256 + tx) % nout, k])
        Y[(cta * 256 + tx) // nout, (cta * 256 + tx) % nout] = T.Cast(
            "float32", acc[0] + T.Cast("float64", Bo[(cta * 256 + tx) % nout]))


_exe = {}


def _compiled(name, func):
    if name not in _exe:
        _exe[name] = tvm.compile(tvm.IRModule({"main": func}), target=tvm.target.Target("cuda"), tir_pipeline="tirx")
    return _exe[name]


def solve(hidden_states, temb, norm_linear_weight, norm_linear_bias, proj_out_weight, proj_out_bias, eps):
    bsz, seq, d = hidden_states.shape
    o = proj_out_weight.shape[0]
    x2 = hidden_states.reshape(bsz * seq, d)
    emb = torch.empty(bsz, 2 * d, device=hidden_states.device, dtype=torch.float32)
    z = torch.empty_like(x2)
    y = torch.empty(bsz * seq, o, device=hidden_states.device, dtype=torch.float32)
    _compiled("linear_silu", linear_silu)(temb, norm_linear_weight, norm_linear_bias, emb)
    _compiled("norm_modulate", norm_modulate)(x2, emb, z, seq, eps)
    _compiled("linear", linear)(z, proj_out_weight, proj_out_bias, y)
    return y.reshape(bsz, seq, o)
