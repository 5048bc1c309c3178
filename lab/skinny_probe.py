"""gemm_skinny's forms against cuBLAS on skinny shapes (M <= 16 rows of A), on a GPU.

``python3 -m lab.skinny_probe [--seed S] [--count N] [--dtype bfloat16] [--variants 1,2,3]``

A seeded random set of shapes (M from 1 to 16; N and K log-uniform from 256
to 16384, half of them multiples of 8 and half odd, so both load paths run)
plus the shapes named in --extra (by default 5x1536x808, 5x2048x5888,
8x7577x281 and decode shapes of LLM layers).  Each shape gets fresh random
inputs; each form's result (gemm_skinny_v: 0 the op as registered, the
tensor-core form where N % 8 == 0; 1 the FMA form)
is checked against the float64 product with the gemm workload's tolerance
before anything is timed.  All are timed by the suite's events timer (L2
evicted before every sample, launch overhead outside the interval), in
alternating rounds; the table gives cuBLAS's median in us and cuBLAS / form
for each form (above 1: ours is faster), then per form the worst ratio, the
geometric mean and the shapes below --floor.
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

EXTRA = ((5, 1536, 808), (5, 2048, 5888), (8, 7577, 281), (1, 8192, 8192), (1, 14336, 4096),
         (16, 4096, 14336), (16, 4608, 3584), (8, 128256, 4096), (4, 4096, 4096), (2, 11008, 4096),
         (13, 5120, 4752), (12, 3496, 5224), (9, 2288, 10408))


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
    return measure([fn], "cuda", "events", min_samples=10, max_samples=200, budget_ms=60.0).median * 1e3


def race(m: int, n: int, k: int, forms: dict, dtype_name: str, g, rounds: int) -> tuple[float, dict]:
    """cuBLAS's median (us) at m x n x k and cuBLAS / form for each of ``forms``
    (name -> fn(a, b)), on fresh random inputs from ``g``; each form's result is
    checked against the float64 product first (SystemExit where it is wrong), then
    all are timed in ``rounds`` alternating rounds."""
    dtype = getattr(torch, dtype_name)
    wl = discover().workloads["gemm"]
    a = torch.randn(m, k, generator=g, device="cuda").to(dtype)
    b = torch.randn(k, n, generator=g, device="cuda").to(dtype)
    ref = a.double() @ b.double()
    case = Case.make("gemm", dtype_name, M=m, N=n, K=k)
    calls = {"cuBLAS": lambda: torch.matmul(a, b)}
    for name, fn in forms.items():
        verify.poison_allocator("cuda", m * n * 2, dtype)
        out = fn(a, b)
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, out, ref)
        if not res.correct:
            raise SystemExit(f"{m}x{n}x{k}: {name} is wrong: {res.message}")
        calls[name] = lambda fn=fn: fn(a, b)
    torch.matmul(a, b)  # cuBLAS's warm-up (heuristics, workspace)
    times: dict = {name: [] for name in calls}
    for r in range(rounds):
        for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            times[name].append(time_us(calls[name]))
    t = statistics.median(times["cuBLAS"])
    return t, {name: t / statistics.median(times[name]) for name in forms}


def summary(name: str, ratios: dict, floor: float) -> str:
    """One line over a form's cuBLAS / form ratios: its worst shape, the geometric mean, the shapes below floor."""
    worst = min(ratios, key=ratios.get)
    gm = math.exp(statistics.mean(math.log(r) for r in ratios.values()))
    low = [f"{'x'.join(map(str, s))} ({r:.3f})" for s, r in ratios.items() if r < floor]
    return (f"{name}: {len(ratios)} shapes, worst {'x'.join(map(str, worst))} at {ratios[worst]:.3f}, "
            f"geometric mean {gm:.3f}; below {floor}: {', '.join(low) if low else 'none'}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--variants", default="1,0", help="gemm_skinny_v forms to time")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds a shape")
    ap.add_argument("--floor", type=float, default=0.85, help="list shapes whose ratio is below this")
    ap.add_argument("--extra", default=",".join("x".join(map(str, s)) for s in EXTRA),
                    help="more MxNxK shapes, comma separated")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("skinny_probe needs a CUDA GPU")

    from implementations.gemm.cuda import ops

    skinny_v = ops().gemm_skinny_v
    variants = [int(v) for v in args.variants.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    extra = [tuple(int(v) for v in s.split("x")) for s in args.extra.split(",") if s]
    todo = shapes(args.seed, args.count) + extra
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {args.dtype}, seed {args.seed}")
    print(f"{'M x N x K':>20} {'cuBLAS us':>9} " + " ".join(f"{'v' + str(v):>7}" for v in variants))
    ratios: dict[int, dict] = {v: {} for v in variants}
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    for m, n, k in todo:
        # the tensor-core form needs 16-byte rows of B: where N % 8 != 0 variant 0 is the FMA form again
        forms = {v: (lambda a, b, v=v: skinny_v(a, b, v)) for v in variants if not (v == 0 and n % 8)}
        t, got = race(m, n, k, forms, args.dtype, g, args.rounds)
        cells = []
        for v in variants:
            if v in got:
                ratios[v][(m, n, k)] = got[v]
                cells.append(f"{got[v]:>7.3f}")
            else:
                cells.append(f"{'-':>7}")
        print(f"{f'{m} x {n} x {k}':>20} {t:>9.2f} " + " ".join(cells), flush=True)
    for v in variants:
        if ratios[v]:
            print(summary(f"v{v}", ratios[v], args.floor))


if __name__ == "__main__":
    main()
