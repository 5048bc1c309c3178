"""Spreading a sweep over several workers: what a case costs, and who runs it next.

The cost of a case is an estimate in seconds, from napkin math on its
workload's bytes and FLOPs against rough roofs, plus a fixed overhead per
implementation:

- setting up: inputs and a float64 reference (the reference reads and writes
  the case's bytes at float64 width and does its FLOPs at a fraction of the
  float32 rate);
- per implementation: the warm-up call (torch.compile traces and compiles once
  per shape, a Triton kernel compiles and autotunes once per shape and dtype, a
  CUDA extension is loaded), two checked calls, and per timer the samples the
  protocol asks for: about ``budget_ms`` of them, at least ``min_samples`` and
  at most ``max_samples``, each one kernel time plus an L2 flush on a GPU.

The numbers are rough, so the schedule does not trust them: the parent keeps
the cases in one queue, most expensive first, and each worker pulls the next
one when it is free (longest processing time first, with dynamic pull, so a
wrong estimate delays only the worker that drew it).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

# seconds of warm-up per (implementation, case), beyond its first kernel time
FIXED_S = {"eager": 0.05, "torch": 0.05, "compile": 4.0, "triton": 1.5, "cuda": 0.3}
VARIANT_S = {"compile:dynamic": 2.0, "compile:max-autotune": 40.0}
DEFAULT_FIXED_S = 0.5  # a plugin's backend
CASE_S = 0.05  # making inputs, freeing memory
LAUNCH_S = 5e-6  # the shortest kernel time a call takes, launch included
FLUSH_S = 1e-4  # writing a few L2 sizes of HBM before each GPU sample
REFERENCE_SLOWDOWN = 8.0  # float64 reference against float32 peak


@dataclass(frozen=True)
class Rates:
    """The roofs the estimate uses: GB/s, TFLOP/s, and the flush before a sample."""

    gbps: float
    tflops: float
    flush_s: float

    @classmethod
    def for_device(cls, device: str, ceil=None, gpu_name: str = "") -> "Rates":
        """Measured ceilings when known, else the datasheet, else a guess of the right order."""
        flush = FLUSH_S if device == "cuda" else 0.0
        if ceil is not None:
            return cls(ceil.copy_gbps, ceil.matmul_tflops.get("float32", 1.0), flush)
        if device == "cuda":
            from suite.ceilings import datasheet

            sheet = datasheet(gpu_name)
            return cls(sheet.get("gbps", 2000.0), (sheet.get("tflops") or {}).get("float32", 50.0), flush)
        return cls(20.0, 0.5, flush)


def kernel_s(flops: float, nbytes: float, r: Rates) -> float:
    """One call at the roofline, never below a launch."""
    return max(flops / (r.tflops * 1e12), nbytes / (r.gbps * 1e9), LAUNCH_S)


def timed_s(call_s: float, protocol, timers: int, r: Rates) -> float:
    """What the protocol's samples take for ``timers`` timers, estimate pass included."""
    sample = call_s + r.flush_s
    n = min(max(protocol.budget_ms * 1e-3 / sample, protocol.min_samples), protocol.max_samples)
    return timers * (n + 3) * sample


def impl_s(wl, case, impl_name: str, r: Rates, protocol, timers: int) -> float:
    backend = impl_name.split(":", 1)[0]
    fixed = VARIANT_S.get(impl_name, FIXED_S.get(backend, DEFAULT_FIXED_S))
    traffic = wl.eager_bytes(case) if backend == "eager" else wl.min_bytes(case)
    call = kernel_s(wl.flops(case), traffic, r)
    return fixed + 3 * call + timed_s(call, protocol, timers, r)


def case_s(wl, case, impl_names: Iterable[str], r: Rates, protocol, timers: int) -> float:
    """Estimated seconds for one case with every implementation named."""
    ref = kernel_s(wl.flops(case) * REFERENCE_SLOWDOWN, wl.min_bytes(case) * 8.0, r)
    return CASE_S + ref + sum(impl_s(wl, case, n, r, protocol, timers) for n in impl_names)


def by_cost(items: Sequence, cost: Callable) -> list:
    """Most expensive first; equal costs keep their order."""
    return sorted(items, key=cost, reverse=True)


def greedy(costs: Sequence[float], workers: int) -> list[list[int]]:
    """Longest processing time first: each item, most expensive first, to the
    worker that is free soonest (what dynamic pull does when estimates are exact)."""
    loads = [(0.0, w) for w in range(workers)]
    out: list[list[int]] = [[] for _ in range(workers)]
    for i in sorted(range(len(costs)), key=lambda i: costs[i], reverse=True):
        load, w = heapq.heappop(loads)
        out[w].append(i)
        heapq.heappush(loads, (load + costs[i], w))
    return out


def round_robin(costs: Sequence[float], workers: int) -> list[list[int]]:
    return [list(range(w, len(costs), workers)) for w in range(workers)]


def makespan(costs: Sequence[float], assignment: list[list[int]]) -> float:
    return max((sum(costs[i] for i in items) for items in assignment), default=0.0)
