"""Does the order the suite times GEMMs in move their ratios to cuBLAS?

``python3 -m lab.gemm_order`` on a GPU.  A power-capped
card (an H200 holds 700 W) slows its clock a while into a heavy GEMM and
speeds it up again a while after.  The runner times a case's implementations
one after another, each for about 150 ms, so one that follows a heavy
neighbour starts on a card already near its limit, and one that follows the
float64 reference or an idle gap starts cool.

Part 1 traces the SM clock and the board's instantaneous power every 10 ms:
1 s idle, 1.5 s of back-to-back 8192^3 bf16 GEMMs, 3 s idle; once for
torch.matmul and once for the cuda backend.  It shows how fast the limiter
bites and how long the card takes to cool.

Part 2 times torch, cuda and cuda:wgmma at 4096^3 and 8192^3 bf16 the way
the runner does (a warm-up call, a checked call, then the events timer with
the runner's default 10-100 samples in 150 ms, the clock sampler running)
under four orders, 3 rounds each: the suite's order with no gap, the reverse
order, and the suite's order with 1 s and 3 s of idle before each timing.
It prints each implementation's time as a ratio to torch's in the same
round (median [p20, p80]) and its mean SM clock.
"""
from __future__ import annotations

import statistics
import time

import torch

from lab._probe import spread
from suite import clocks
from suite.timing import measure
from suite.workload import Case, discover

IMPLS = ("torch", "cuda", "cuda:wgmma")
ORDERS = (("suite order", IMPLS, 0.0), ("reversed", IMPLS[::-1], 0.0),
          ("1 s idle before each", IMPLS, 1.0), ("3 s idle before each", IMPLS, 3.0))
ROUNDS = 3
LIMITS = dict(min_samples=10, max_samples=100, budget_ms=150.0)


def trace(nv, call, label: str) -> None:
    """SM clock and instant power every 10 ms: 1 s idle, 1.5 s of ``call`` back to back, 3 s idle."""
    torch.cuda.synchronize()
    samples: list[tuple[float, float | None, float | None]] = []
    t0 = time.perf_counter()

    def sample_until(t_end: float, work=None) -> None:
        nxt = time.perf_counter()
        while time.perf_counter() - t0 < t_end:
            if work is not None:
                work()
                torch.cuda.synchronize()  # a 8192^3 GEMM is over 1 ms: the wait costs little
            if time.perf_counter() >= nxt:
                mhz, watts, _ = nv.read()
                samples.append((time.perf_counter() - t0, mhz, watts))
                nxt += 0.01

    sample_until(1.0)
    sample_until(2.5, call)
    torch.cuda.synchronize()
    sample_until(5.5)
    print(f"trace {label}: t s, SM MHz, W (every 50 ms)")
    last = -1.0
    line = []
    for t, mhz, w in samples:
        if t - last >= 0.05:
            line.append(f"{t:.2f}:{mhz:.0f}/{w:.0f}" if mhz is not None and w is not None else f"{t:.2f}:-")
            last = t
    for i in range(0, len(line), 10):
        print("  " + "  ".join(line[i:i + 10]))


def visit(call) -> tuple[float, float | None]:
    """One implementation as the runner times it: warm-up call, checked call, timed samples."""
    call()
    call()
    torch.cuda.synchronize()
    with clocks.sampler("cuda") as card:
        ms = measure([call], "cuda", "events", **LIMITS).median
    return ms, card.fields()["sm_clock_mhz"]


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_order needs a CUDA GPU (it times GEMMs; see lab/findings)")
    reg = discover()
    wl = reg.workloads["gemm"]
    nv = clocks.nvml_for(torch.cuda.current_device())
    for n in (4096, 8192):
        case = Case.make("gemm", "bfloat16", M=n, N=n, K=n)
        inputs = wl.make_inputs(case, "cuda", 7)
        calls = {name: (lambda impl=reg.get("gemm", name): impl.fn(**inputs)) for name in IMPLS}
        for call in calls.values():
            call()  # builds and tuning, outside everything below
        torch.cuda.synchronize()
        if n == 8192 and nv is not None:
            for name in ("torch", "cuda"):
                trace(nv, calls[name], f"{name} {n}^3 bf16")
        time.sleep(3.0)
        for label, order, gap in ORDERS:
            times: dict[str, list[float]] = {k: [] for k in IMPLS}
            mhz: dict[str, list[float]] = {k: [] for k in IMPLS}
            for _ in range(ROUNDS):
                for name in order:
                    if gap:
                        time.sleep(gap)
                    ms, clock = visit(calls[name])
                    times[name].append(ms)
                    if clock is not None:
                        mhz[name].append(clock)
            flops = 2.0 * n ** 3
            print(f"{n}^3 bf16, {label}:")
            for name in IMPLS:
                ratio = [times["torch"][i] / times[name][i] for i in range(ROUNDS)]
                clock = f"{statistics.mean(mhz[name]):.0f} MHz" if mhz[name] else "-"
                print(f"  {name:11s} {flops / statistics.median(times[name]) / 1e9:6.0f} TFLOP/s  "
                      f"x torch {spread(ratio)}  SM {clock}", flush=True)
            time.sleep(3.0)


if __name__ == "__main__":
    bench()
