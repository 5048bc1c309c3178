"""How often does NVML's total-energy counter move, and by how much?

``python3 -m lab.energy_counter`` on a GPU.  The suite charges a call the
counter's rise over a back-to-back burst of ``suite.energy.TARGET_MS``
(suite/energy.py); that is honest only if the counter moves often against the
burst.  This keeps the GPU busy with a bf16 matmul loop for two seconds while
a thread reads the counter as fast as it can, then prints how many distinct
values it saw, the time between changes (median, p90, max) and the step sizes
in mJ, and the same for an idle GPU.
"""
from __future__ import annotations

import statistics
import threading
import time

import torch

from suite import clocks


def watch(counter, seconds: float) -> list[tuple[float, int]]:
    seen, end = [], time.perf_counter() + seconds
    last = None
    while time.perf_counter() < end:
        v = counter()
        if v != last:
            seen.append((time.perf_counter(), v))
            last = v
    return seen


def report(label: str, seen: list[tuple[float, int]]) -> None:
    gaps = [(b[0] - a[0]) * 1e3 for a, b in zip(seen, seen[1:])]
    steps = [b[1] - a[1] for a, b in zip(seen, seen[1:])]
    if len(gaps) < 2:
        print(f"{label}: {len(seen)} distinct values; too few to describe")
        return
    q = statistics.quantiles(gaps, n=10)
    span_s = seen[-1][0] - seen[0][0]
    print(f"{label}: {len(seen)} distinct values; ms between changes median {statistics.median(gaps):.2f}, "
          f"p90 {q[-1]:.2f}, max {max(gaps):.2f}; step mJ median {statistics.median(steps):.0f}, "
          f"max {max(steps)}; mean power {(seen[-1][1] - seen[0][1]) / 1e3 / span_s:.0f} W")


def main(argv: list[str] | None = None) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("energy_counter: needs a CUDA GPU")
    counter = clocks.energy_counter("cuda")
    if counter is None:
        raise SystemExit("energy_counter: NVML's total-energy counter is not available here")
    report("idle", watch(counter, 1.0))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            for _ in range(8):
                a @ a
            torch.cuda.synchronize()

    t = threading.Thread(target=load)
    t.start()
    time.sleep(0.3)
    try:
        report("bf16 8192^3 matmul loop", watch(counter, 2.0))
    finally:
        stop.set()
        t.join()


if __name__ == "__main__":
    main()
