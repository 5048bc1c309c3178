"""How much of the mma.sync GEMM's time does not scale with K: the cost of each output tile's start and epilogue.

``python3 -m lab.gemm_ksweep`` on a GPU.  The tuned
cuda tile (warp-specialised, persistent) and cuBLAS are timed at M = N =
4096 for K from 1024 to 16384 in paired rounds (suite events timer, 8
samples, order reversed every other round).  A line t(K) = a + b K fitted
to the cuda medians splits the time into a part per k-tile (the main loop)
and a fixed part a: the tile starts, the epilogues (the tensor pipe idles
while each warp drains its accumulators to C) and the last wave.  a / t(4096)
bounds what overlapping the epilogue with the next tile's main loop could buy.
"""
from __future__ import annotations

import statistics

import torch

from lab._probe import round_times, spread

KS = (1024, 2048, 4096, 8192, 16384)
ROUNDS = 7
TILES = (12, 13)


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_ksweep needs a CUDA GPU (it times kernels; see lab/findings)")
    from implementations.gemm.cuda import TILES as NAMES, gemm_tile

    n = 4096
    med: dict[tuple, float] = {}
    for k in KS:
        a = torch.randn(n, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        want = a.float() @ b.float()
        calls = {"torch": lambda: torch.matmul(a, b)}
        for t in TILES:
            calls[f"tile {t}"] = lambda t=t: gemm_tile(a, b, t)
        for name, fn in calls.items():
            err = ((fn().float() - want).norm() / want.norm()).item()
            if err > 1e-2:
                raise SystemExit(f"{name} at K={k}: relative error {err:.1e}")
        times = round_times(calls, ROUNDS)
        flops = 2.0 * n * n * k
        line = [f"K={k:5d}"]
        for name, v in times.items():
            med[(name, k)] = statistics.median(v)
            ratio = [x / y for x, y in zip(times["torch"], v)]
            line.append(f"{name} {med[(name, k)]:8.1f} us {flops / med[(name, k)] / 1e6:5.0f} TFLOP/s"
                        + ("" if name == "torch" else f" x torch {spread(ratio)}"))
        print("  ".join(line), flush=True)
        del a, b, want
    for name in ["torch"] + [f"tile {t}" for t in TILES]:
        xs = list(KS)
        ys = [med[(name, k)] for k in xs]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        icpt = my - slope * mx
        t4 = med[(name, 4096)]
        desc = "" if name == "torch" else f" ({NAMES[int(name.split()[1])]})"
        print(f"{name}{desc}: t(K) = {icpt:.1f} us + {slope * 1e3:.2f} us per 1000 K; "
              f"fixed part {icpt / t4:.3f} of t(4096); per-K rate {2.0 * n * n / slope / 1e6:.0f} TFLOP/s")


if __name__ == "__main__":
    bench()
