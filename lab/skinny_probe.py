"""gemm_skinny against cuBLAS on skinny shapes (M <= 16 rows of A), on a GPU.

``python3 -m lab.skinny_probe [--seed S] [--count N] [--dtype bfloat16]``

A seeded random set of shapes (M from 1 to 16; N and K log-uniform from 256
to 16384, half of them multiples of 8 and half odd, so both load paths run)
plus the shapes named in --extra (by default 5x1536x808, 5x2048x5888 and
8x7577x281).  Each shape gets fresh random inputs; gemm_skinny's result is
checked against the float64 product with the gemm workload's tolerance
before anything is timed.  Both are timed by the suite's events timer (L2
evicted before every sample, launch overhead outside the interval), in
alternating rounds; the table gives each median in us and cuBLAS / ours
(above 1: ours is faster), with the plan gemm_skinny runs, then the worst
ratio and the shapes below --floor.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics

import torch

from suite import verify
from suite.timing import measure
from suite.workload import Case, discover

EXTRA = ((5, 1536, 808), (5, 2048, 5888), (8, 7577, 281))


def shapes(seed: int, count: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    out = []

    def dim(aligned: bool) -> int:
        v = int(round(math.exp(rng.uniform(math.log(256), math.log(16384)))))
        return max(256, v // 8 * 8) if aligned else v | 1

    for i in range(count):
        m = rng.randint(1, 16)
        out.append((m, dim(i % 2 == 0), dim(rng.random() < 0.5)))
    return out


def time_us(fn) -> float:
    return measure([fn], "cuda", "events", min_samples=20, max_samples=200, budget_ms=200.0).median * 1e3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds a shape")
    ap.add_argument("--floor", type=float, default=0.85, help="list shapes whose ratio is below this")
    ap.add_argument("--extra", default=",".join("x".join(map(str, s)) for s in EXTRA),
                    help="more MxNxK shapes, comma separated")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("skinny_probe needs a CUDA GPU")

    from implementations.gemm.cuda import ops, skinny_blocks_per_sm, skinny_plan

    gemm_skinny = ops().gemm_skinny
    dtype = getattr(torch, args.dtype)
    wl = discover().workloads["gemm"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    extra = [tuple(int(v) for v in s.split("x")) for s in args.extra.split(",") if s]
    todo = shapes(args.seed, args.count) + extra
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {args.dtype}, seed {args.seed}")
    print(f"{'M x N x K':>20} {'splits':>6} {'rows':>5} {'ours us':>8} {'cuBLAS us':>9} {'cuBLAS/ours':>11}")
    ratios = {}
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    for m, n, k in todo:
        a = torch.randn(m, k, generator=g, device="cuda").to(dtype)
        b = torch.randn(k, n, generator=g, device="cuda").to(dtype)
        ref = a.double() @ b.double()
        verify.poison_allocator("cuda", m * n * 2, dtype)
        out = gemm_skinny(a, b)
        torch.cuda.synchronize()
        case = Case.make("gemm", args.dtype, M=m, N=n, K=k)
        res = verify.check_case(wl, case, out, ref)
        if not res.correct:
            raise SystemExit(f"{m}x{n}x{k}: gemm_skinny is wrong: {res.message}")
        torch.matmul(a, b)  # cuBLAS's warm-up (heuristics, workspace)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(time_us(lambda: gemm_skinny(a, b)))
            theirs.append(time_us(lambda: torch.matmul(a, b)))
        o, t = statistics.median(ours), statistics.median(theirs)
        rows, splits = skinny_plan(m, n, k, sms, skinny_blocks_per_sm(m))
        ratios[(m, n, k)] = t / o
        print(f"{f'{m} x {n} x {k}':>20} {splits:>6} {rows:>5} {o:>8.2f} {t:>9.2f} {t / o:>11.3f}", flush=True)
    worst = min(ratios, key=ratios.get)
    print(f"worst: {'x'.join(map(str, worst))} at {ratios[worst]:.3f}; "
          f"geometric mean {math.exp(statistics.mean(math.log(r) for r in ratios.values())):.3f}")
    low = [f"{'x'.join(map(str, s))} ({r:.3f})" for s, r in ratios.items() if r < args.floor]
    print(f"below {args.floor}: {', '.join(low) if low else 'none'}")


if __name__ == "__main__":
    main()
