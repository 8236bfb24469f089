#!/usr/bin/env python3
"""mkb_ref: the reference of {{problem.name}} on the CPU, at the test scale.

It runs mkb's own C reference program (the one in /task/reference/, through `mkb ref`), so the
inputs and outputs are exactly the graded definition, only smaller. Values come back as numpy
arrays: floating tensors as float64 arrays holding the exact stored values (bf16, fp16 and fp8
widen exactly), integer and bool tensors in their own dtype; scalars as Python numbers.

    import sys; sys.path.insert(0, "/task"); import mkb_ref
    xs = mkb_ref.draw(seed=1)                 # the inputs, positional, as solve(*inputs) gets them
    ys = mkb_ref.reference(seed=1)            # the outputs, as the reference computes them
    anchor = mkb_ref.reference(seed=1, precision="fp64")
    tol = mkb_ref.allowance(seed=1)           # per output: the correctness allowance
    ok = mkb_ref.check(my_outputs, seed=1)    # the grader's rule applied to your outputs
    ts = mkb_ref.draw_torch(seed=1)           # the inputs as torch CPU tensors in their dtypes

From a shell: python3 /task/mkb_ref.py --seed 1 [--precision compute|fp64]
Needs numpy (and torch for draw_torch). The test scale is listed in /task/spec.md.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

PROBLEM = "{{problem.name}}"
EPS = {"fp64": 2.0 ** -52, "fp32": 2.0 ** -23, "fp16": 2.0 ** -10, "bf16": 2.0 ** -7,
       "fp8e4m3": 2.0 ** -3, "fp8e5m2": 2.0 ** -2, "fp4e2m1": 2.0 ** -1}
FLOATS = set(EPS)


def _mkb():
    for cand in (os.environ.get("MKB_BIN"), "/mkb/bin/mkb"):
        if cand and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("mkb")
    if found:
        return found
    raise RuntimeError("cannot find the mkb binary (set MKB_BIN)")


def _fp8(bits, exp_bits, bias, finite_only):
    b = bits.astype(np.int64)
    man_bits = 7 - exp_bits
    sign = np.where(b >> 7 & 1, -1.0, 1.0)
    e = (b >> man_bits) & ((1 << exp_bits) - 1)
    m = b & ((1 << man_bits) - 1)
    frac = m / float(1 << man_bits)
    val = np.where(e == 0, frac * 2.0 ** (1 - bias), (1.0 + frac) * np.exp2((e - bias).astype(np.float64)))
    top = (1 << exp_bits) - 1
    if finite_only:  # e4m3fn: only S.1111.111 is NaN
        val = np.where((e == top) & (m == (1 << man_bits) - 1), np.nan, val)
    else:            # e5m2: IEEE-like
        val = np.where((e == top) & (m == 0), np.inf, np.where(e == top, np.nan, val))
    return sign * val


def _decode(raw, dtype, shape):
    if dtype == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(shape)
    if dtype == "fp8e4m3":
        return _fp8(raw, 4, 7, True).reshape(shape)
    if dtype == "fp8e5m2":
        return _fp8(raw, 5, 15, False).reshape(shape)
    if dtype == "fp4e2m1":
        table = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6])
        b = raw.reshape(-1)
        nib = np.empty(b.size * 2, dtype=np.uint8)
        nib[0::2] = b & 15
        nib[1::2] = b >> 4
        n = int(np.prod(shape)) if len(shape) else 1
        return table[nib[:n]].reshape(shape)
    if dtype in ("fp16", "fp32", "fp64"):
        return raw.astype(np.float64).reshape(shape)
    return raw.reshape(shape)


def _run(seed, precision):
    d = tempfile.mkdtemp(prefix="mkb_ref-")
    try:
        cmd = [_mkb(), "ref", PROBLEM, "--scale", "test", "--seed", str(int(seed)),
               "--precision", precision, "--out", d, "--json"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("mkb ref failed (exit %d): %s" % (r.returncode, r.stderr.strip()))
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        ins, outs = {}, {}
        for fe in man["files"]:
            raw = np.load(os.path.join(d, fe["path"]))
            arr = _decode(raw, fe["dtype"], tuple(fe["shape"]))
            (ins if fe["role"] == "input" else outs)[fe["position"]] = (arr, fe["dtype"], fe["name"])
        for sc in man.get("scalars", []):
            ins[sc["position"]] = (sc["value"], sc["kind"], sc["name"])
        return ins, outs
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _ordered(d):
    return [d[k] for k in sorted(d)]


def draw(seed=1):
    """The inputs of one draw, positional: arrays (float64 values for floating dtypes) and scalars."""
    return [v for v, _, _ in _ordered(_run(seed, "compute")[0])]


def dtypes(seed=1):
    """(name, dtype) of every input and output, in order."""
    ins, outs = _run(seed, "compute")
    return [(n, t) for _, t, n in _ordered(ins)], [(n, t) for _, t, n in _ordered(outs)]


def reference(seed=1, precision="compute"):
    """The outputs: precision "compute" is the reference as written (the expected result),
    "fp64" the whole program promoted to fp64 (the anchor of the correctness rule)."""
    return [v for v, _, _ in _ordered(_run(seed, precision)[1])]


def allowance(seed=1):
    """Per output: name, dtype, ref_err = max|expected - anchor|, and the allowance
    3 * max(ref_err, eps(dtype) * max|anchor|) (0 for integer outputs: exact match)."""
    _, expected = _run(seed, "compute")
    _, anchor = _run(seed, "fp64")
    res = []
    for k in sorted(expected):
        e, dt, name = expected[k]
        a = anchor[k][0]
        if dt not in FLOATS or e.size == 0:
            res.append({"name": name, "dtype": dt, "ref_err": 0.0, "allowance": 0.0})
            continue
        ref_err = float(np.max(np.abs(e - a)))
        floor = EPS[dt] * float(np.max(np.abs(a)))
        res.append({"name": name, "dtype": dt, "ref_err": ref_err, "allowance": 3.0 * max(ref_err, floor)})
    return res


def check(outputs, seed=1):
    """Apply the correctness rule to your outputs for this seed (a list in output order, numpy
    arrays or torch CPU tensors). Returns a list of (name, passed, max_error, allowance)."""
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    _, anchor = _run(seed, "fp64")
    tol = allowance(seed)
    res = []
    for k, t in zip(sorted(anchor), tol):
        a, dt, name = anchor[k]
        if k >= len(outputs):
            res.append((name, False, float("inf"), t["allowance"]))
            continue
        o = outputs[k]
        if hasattr(o, "detach"):
            o = o.detach().cpu().double().numpy() if dt in FLOATS else o.detach().cpu().numpy()
        o = np.asarray(o)
        if o.shape != a.shape:
            res.append((name, False, float("inf"), t["allowance"]))
            continue
        if dt not in FLOATS:
            res.append((name, bool(np.array_equal(o, a)), 0.0 if np.array_equal(o, a) else float("inf"), 0.0))
            continue
        o = o.astype(np.float64)
        err = float(np.max(np.abs(o - a))) if o.size else 0.0
        ok = bool(np.all(np.isfinite(o))) and err <= t["allowance"]
        res.append((name, ok, err, t["allowance"]))
    return res


def draw_torch(seed=1):
    """The inputs as torch CPU tensors in their exact dtypes (scalars stay Python numbers)."""
    import torch
    names = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
             "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
             "uint8": torch.uint8, "bool": torch.bool}
    for n, t in (("fp8e4m3", "float8_e4m3fn"), ("fp8e5m2", "float8_e5m2")):
        if hasattr(torch, t):
            names[n] = getattr(torch, t)
    out = []
    for v, dt, name in _ordered(_run(seed, "compute")[0]):
        if not isinstance(v, np.ndarray):
            out.append(v)
        elif dt in names:
            out.append(torch.from_numpy(np.ascontiguousarray(v)).to(names[dt]))
        else:
            raise RuntimeError("torch has no dtype for input %s (%s)" % (name, dt))
    return out


def _summary(tag, items):
    for v, dt, name in items:
        if isinstance(v, np.ndarray):
            flat = v.reshape(-1)
            stats = ""
            if flat.size and v.dtype != np.bool_:
                stats = "min %.6g max %.6g mean %.6g" % (np.nanmin(flat), np.nanmax(flat), np.nanmean(flat.astype(np.float64)))
            print("%-6s %-20s %-8s %-16s %s" % (tag, name, dt, tuple(v.shape), stats))
            print("       first values: %s" % np.array2string(flat[:8], precision=6, separator=", "))
        else:
            print("%-6s %-20s %-8s %s" % (tag, name, dt, v))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="mkb_ref.py", description="the reference of %s at the test scale" % PROBLEM)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=("compute", "fp64"), default="compute")
    a = ap.parse_args(argv)
    ins, outs = _run(a.seed, a.precision)
    print("%s, test scale, seed %d, precision %s" % (PROBLEM, a.seed, a.precision))
    _summary("input", _ordered(ins))
    _summary("output", _ordered(outs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
