#!/usr/bin/env python3
"""The same reference programs run op by op in PyTorch eager, timed the way bench_eager times
mkb's eager baseline, to check that mkb's baseline is not slower than an eager framework's.

Each function below transcribes one problem's reference (src/problems/mlp_norm/NN_*.c) op for op
with the same dtypes, casts and order, at the full workload. Timing: device sync, start, one call,
device sync, end (host wall clock), after warm-up; the median. Inputs are drawn once with
torch's generator (same shapes, dtypes and distributions as mkb's; the values differ, which does
not change the time of these dense programs).

usage: eager_torch.py BENCH_JSON [--warmup N] [--reps N] [--json OUT]
BENCH_JSON is bench_eager's --json output for the same problems. Exits 1 when mkb's baseline is
more than 5% slower than torch's on any problem compared, 77 where there is no GPU.
Runs only on a GPU host with torch."""
import argparse
import json
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("eager_torch: torch is not installed: skipped")
    sys.exit(77)

F32, BF16 = torch.float32, torch.bfloat16


def p28():
    T, H = 14509, 4096
    hs = torch.randn(T, H, device="cuda", dtype=BF16)
    res = torch.randn(T, H, device="cuda", dtype=BF16)
    w = (torch.randn(H, device="cuda", dtype=F32) * 0.1 + 1.0).to(BF16)

    def ref():
        x = hs.to(F32) + res.to(F32)
        ms = x.square().mean(-1, keepdim=True)
        r = torch.rsqrt(ms + 1e-5)
        return (x * r * w.to(F32)).to(BF16)

    return ref


def p29():
    B, S, D, F = 32, 512, 3072, 12288
    x = torch.randn(B, S, D, device="cuda", dtype=F32)
    w1 = torch.randn(F, D, device="cuda", dtype=F32) / D**0.5
    b1 = torch.randn(F, device="cuda", dtype=F32)
    w2 = torch.randn(D, F, device="cuda", dtype=F32) / F**0.5
    b2 = torch.randn(D, device="cuda", dtype=F32)

    def ref():
        h = torch.nn.functional.linear(x, w1, b1)
        g = torch.nn.functional.gelu(h, approximate="tanh")
        return torch.nn.functional.linear(g, w2, b2)

    return ref


def p33():
    B, S, H, I = 64, 128, 16384, 53248
    hs = torch.randn(B, S, H, device="cuda", dtype=BF16)
    res = torch.randn(B, S, H, device="cuda", dtype=BF16)
    nw = (torch.randn(H, device="cuda", dtype=BF16) * 0.1 + 1.0).to(BF16)
    wg = torch.randn(I, H, device="cuda", dtype=BF16) / H**0.5
    wu = torch.randn(I, H, device="cuda", dtype=BF16) / H**0.5
    wd = torch.randn(H, I, device="cuda", dtype=BF16) / I**0.5

    def ref():
        s = hs + res
        x = s.to(F32)
        ms = x.square().mean(-1, keepdim=True)
        xh = x * torch.rsqrt(ms + 1e-5)
        n = (nw.to(F32) * xh).to(BF16)
        g = torch.nn.functional.linear(n, wg)
        u = torch.nn.functional.linear(n, wu)
        a = torch.nn.functional.silu(g.to(F32)).to(BF16)
        h = a * u
        return torch.nn.functional.linear(h, wd)

    return ref


def p36():
    R, D = 520128, 128
    hs = torch.randn(R, D, device="cuda", dtype=BF16)
    w = (torch.randn(D, device="cuda", dtype=F32) * 0.1 + 1.0).to(BF16)

    def ref():
        x = hs.to(F32)
        ms = x.square().mean(-1, keepdim=True)
        r = torch.rsqrt(ms + 1e-6)
        return (x * r * w.to(F32)).to(BF16)

    return ref


PROBLEMS = {28: p28, 29: p29, 33: p33, 36: p36}


def time_it(fn, warm, reps):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_json")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("eager_torch: no GPU: skipped")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 GEMMs in fp32, as mkb's
    with open(a.bench_json) as f:
        mkb = {p["id"]: p for p in json.load(f)["problems"]}
    rows, slower = [], 0
    print(f"{'problem':<48} {'mkb ms':>10} {'torch ms':>10} {'mkb/torch':>10}")
    for pid, make in PROBLEMS.items():
        if pid not in mkb:
            continue
        fn = make()
        with torch.no_grad():
            t = time_it(fn, a.warmup, a.reps)
        m = mkb[pid]["eager_ms"]
        ratio = m / t
        bad = ratio > 1.05
        slower += bad
        print(f"{mkb[pid]['name'][:48]:<48} {m:10.3f} {t:10.3f} {ratio:10.3f}{'  SLOWER' if bad else ''}")
        rows.append({"id": pid, "name": mkb[pid]["name"], "mkb_ms": m, "torch_ms": t, "ratio": ratio})
        del fn
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "problems": rows}, f, indent=2)
    if not rows:
        print("eager_torch: none of its problems is in the bench JSON")
        return 1
    print(f"eager_torch: mkb's eager baseline is within 5% of torch eager or faster on {len(rows) - slower} of {len(rows)} problems")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
