"""The paper's grading loop as a plain Python script, for comparing mkb grade's overhead with it.

It imports a kernel.py in this process, draws inputs with torch from fresh seeds, checks 5 draws
with the paper's rule (expected and fp64 anchor from a torch reference), runs 10 warm-up calls,
times 50 calls (synchronise, start event, call, synchronise, end event), re-checks 3 of them, and
times the torch reference (the eager baseline) the same way on the same seeds.
It knows the torch references of the sample problems only (28, 36, 39). It prints one JSON line:
the kernel median and the wall time of each phase. This is a yardstick, not a grader: nothing
here is isolated or enforced.

usage: python3 tools/gpu/paper_loop.py --problem 28 --kernel KERNEL.py [--site DIR]
"""
import argparse
import importlib.util
import json
import random
import site
import statistics
import time

T0 = time.perf_counter()


def ref28(h, r, w):
    x = h.float() + r.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(h.dtype)


def in28(g, dt):
    h = torch.randn(14509, 4096, generator=g, device="cuda").to(dt)
    r = torch.randn(14509, 4096, generator=g, device="cuda").to(dt)
    w = (1 + 0.1 * torch.randn(4096, generator=g, device="cuda")).to(dt)
    return [h, r, w]


def ref36(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def in36(g, dt):
    x = torch.randn(520128, 128, generator=g, device="cuda").to(dt)
    w = (1 + 0.1 * torch.randn(128, generator=g, device="cuda")).to(dt)
    return [x, w]


def ref39(x, temb, wm, bm, wo, bo, eps):
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    xh = xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
    emb = torch.nn.functional.linear(torch.nn.functional.silu(temb), wm, bm)[:, None, :]
    d = x.shape[-1]
    z = xh * (1 + emb[..., :d]) + emb[..., d:]
    return torch.nn.functional.linear(z, wo, bo)


def in39(g, dt):
    b, s, d, o = 32, 256, 3072, 64
    r = lambda *shape: torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32)
    return [r(b, s, d), r(b, d), r(2 * d, d) / d ** 0.5, r(2 * d), r(o, d) / d ** 0.5, r(o), 1e-6]


PROBLEMS = {"28": (ref28, in28, "bf16"), "36": (ref36, in36, "bf16"), "39": (ref39, in39, "fp32")}


def draw(make, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return make(g, torch.bfloat16)


def matches(actual, ref, inputs):
    expected = ref(*inputs)
    anchor = ref(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    a64 = anchor.double()
    ref_err = float((expected.double() - a64).abs().max())
    floor = torch.finfo(expected.dtype).eps * float(a64.abs().max())
    allowance = 3.0 * max(ref_err, floor)
    return float((actual.double() - a64).abs().max()) <= allowance


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", required=True, choices=sorted(PROBLEMS))
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--site", action="append", default=[])
    a = ap.parse_args()
    for d in a.site:
        site.addsitedir(d)
    global torch
    t = {}
    t0 = time.perf_counter()
    import torch  # noqa: F401
    torch.empty(1, device="cuda")
    t["torch_import_s"] = time.perf_counter() - t0
    ref, make, _ = PROBLEMS[a.problem]
    t0 = time.perf_counter()
    spec = importlib.util.spec_from_file_location("kernel", a.kernel)
    kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernel)
    t["kernel_import_s"] = time.perf_counter() - t0
    rng = random.SystemRandom()
    seeds = [rng.getrandbits(63) for _ in range(65)]
    t0 = time.perf_counter()
    correct = sum(matches(kernel.solve(*draw(make, s)), ref, draw(make, s)) for s in seeds[:5])
    torch.cuda.synchronize()
    t["correctness_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in seeds[5:15]:
        kernel.solve(*draw(make, s))
    torch.cuda.synchronize()
    t["warmup_s"] = time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    checks = set(rng.sample(seeds[15:], 3))
    times, checked = [], 0
    t0 = time.perf_counter()
    for s in seeds[15:]:
        inputs = draw(make, s)
        torch.cuda.synchronize()
        start.record()
        out = kernel.solve(*inputs)
        torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        if s in checks:
            checked += matches(out, ref, draw(make, s))
    t["timing_s"] = time.perf_counter() - t0
    # the eager baseline: the torch reference, timed the same way on the same seeds
    t0 = time.perf_counter()
    for s in seeds[5:15]:
        ref(*draw(make, s))
    eager = []
    for s in seeds[15:]:
        inputs = draw(make, s)
        torch.cuda.synchronize()
        start.record()
        ref(*inputs)
        torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        eager.append(start.elapsed_time(end))
    t["baseline_s"] = time.perf_counter() - t0
    t["total_s"] = time.perf_counter() - T0
    print(json.dumps({"problem": a.problem, "kernel": a.kernel, "correct_draws": correct, "checked_ok": checked,
                      "kernel_ms": statistics.median(times), "eager_ms": statistics.median(eager),
                      "kernel_ms_samples": times, "wall": t}, sort_keys=True))


if __name__ == "__main__":
    main()
