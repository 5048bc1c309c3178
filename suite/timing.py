"""Timing that a kernel engineer can trust.

Three timers share one interface, ``measure(calls, ...) -> Timing``, where
``calls`` are zero-argument closures, each over its own input set:

- ``events`` (GPU default): CUDA events around one call, with L2 evicted
  before every sample, outside the timed interval, by reading a buffer of
  several L2s that is never written (see flush_l2 for why reading rather
  than the usual writing).  After the flush a spin kernel holds the GPU for about
  twice the host time one call takes to launch, so the start event, the
  call's kernels and the end event are all queued before the start event
  fires: a Python launcher's overhead (Triton's is 10-20 us) is not counted
  as kernel time.
- ``graph``: the calls are captured into one CUDA graph, one call per input
  set, with enough sets that their total exceeds three L2s: every call finds
  its inputs cold, and launch overhead between calls disappears.  A replay is
  timed with events and divided by the number of calls in it.
- ``wall``: a host clock around synchronised calls, for CPU-only machines.

Warm-up (compilation, autotuning, extension builds) is the caller's first
call and is never among the samples.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

TIMERS = ("events", "graph", "wall")
FLUSH_FACTOR = 4  # the flush buffer is this many L2s
_flush_buffers: dict[tuple[str, str], tuple] = {}


@dataclass
class Timing:
    samples_ms: list[float]
    timer: str
    l2: str  # "cold-clean", "cold-flush", "cold-rotate", or "n/a" on the CPU
    calls_per_sample: int = 1
    notes: list[str] = field(default_factory=list)

    def _q(self, q: float) -> float:
        s = sorted(self.samples_ms)
        if not s:
            return math.nan
        pos = q * (len(s) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else math.nan

    @property
    def p20(self) -> float:
        return self._q(0.2)

    @property
    def p80(self) -> float:
        return self._q(0.8)

    @property
    def min(self) -> float:
        return min(self.samples_ms) if self.samples_ms else math.nan

    @property
    def n(self) -> int:
        return len(self.samples_ms)


def l2_bytes(device: str) -> int:
    if device != "cuda":
        return 0
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


# How the events timer evicts the L2, and the ``l2`` label its rows carry.
FLUSHES = {"clean": "cold-clean", "write": "cold-flush"}


def flush_l2(device: str, mode: str = "clean") -> None:
    """Evict the L2 through a buffer of FLUSH_FACTOR times its size.

    ``clean`` sums the buffer, which is written once and never again: the L2
    is left holding clean lines only.  ``write`` fills it, as most GPU timers
    do; but the L2 writes back lazily, so its last L2's worth of the buffer
    is still dirty when the timed call starts, and the call's own traffic
    then pays for writing it to HBM.  On the H200 that is 4 us of a 16M
    float32 elementwise op's 37 (37.2 against 33.1 us, 0.8% at 2^28 elements:
    results/h200/diagnostics/l2_flush-dad7d39.txt).  With ``clean``
    whatever the previous sample left dirty is written back during the
    flush, outside the timed interval.
    """
    if mode not in FLUSHES:
        raise ValueError(f"unknown L2 flush {mode!r}; choose from {', '.join(FLUSHES)}")
    if device != "cuda":
        return
    import torch

    key = (device, mode)
    bufs = _flush_buffers.get(key)
    if bufs is None:
        n = FLUSH_FACTOR * l2_bytes(device) // 4
        if mode == "clean":
            bufs = _flush_buffers[key] = (torch.ones(n, device=device), torch.empty((), device=device))
        else:
            bufs = _flush_buffers[key] = (torch.empty(n, dtype=torch.int32, device=device),)
    if mode == "clean":
        torch.sum(bufs[0], dim=0, out=bufs[1])
    else:
        bufs[0].fill_(0x5A5A5A5A)


def sample_count(estimate_ms: float, budget_ms: float, min_samples: int, max_samples: int) -> int:
    if not estimate_ms > 0:
        return max_samples
    return int(min(max_samples, max(min_samples, budget_ms // max(estimate_ms, 1e-6))))


def rotation_sets(set_bytes: int, l2: int, max_sets: int = 512) -> int:
    """How many input sets make every call of a rotation find its inputs cold."""
    if set_bytes <= 0:
        return 2
    return int(min(max_sets, max(2, math.ceil(3 * l2 / set_bytes) + 1)))


_spin_cycles_per_us: dict[str, float] = {}
HOLD_MIN_US = 20.0  # the least the GPU is held before a sample
HOLD_MAX_US = 2000.0


def hold_us(launch_us: float) -> float:
    """How long to hold the GPU before a sample whose call takes ``launch_us`` to issue."""
    return min(HOLD_MAX_US, max(HOLD_MIN_US, 2.0 * launch_us))


def _spin_rate(device: str) -> float:
    """Cycles of ``torch.cuda._sleep`` per microsecond, measured once per process."""
    rate = _spin_cycles_per_us.get(device)
    if rate is None:
        import torch

        cycles = 2_000_000
        torch.cuda._sleep(cycles // 10)  # first launch of the spin kernel
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        rate = _spin_cycles_per_us[device] = cycles / max(start.elapsed_time(end) * 1e3, 1e-3)
    return rate


def launch_us(fn: Callable[[], Any], device: str, n: int = 5) -> float:
    """Median host time to issue one call (no synchronisation inside)."""
    import torch

    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def _time_events(fn: Callable[[], Any], device: str, n: int, hold_cycles: int = 0,
                 flush: str = "clean") -> list[float]:
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush_l2(device, flush)
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def measure_events(calls: Sequence[Callable[[], Any]], device: str, *, min_samples: int = 10,
                   max_samples: int = 200, budget_ms: float = 400.0, flush: str = "clean") -> Timing:
    fn = calls[0]
    issue_us = launch_us(fn, device)
    hold = hold_us(issue_us)
    cycles = int(hold * _spin_rate(device))
    estimate = statistics.median(_time_events(fn, device, 3, cycles, flush))
    n = sample_count(estimate, budget_ms, min_samples, max_samples)
    return Timing(_time_events(fn, device, n, cycles, flush), "events", FLUSHES[flush])


def measure_graph(calls: Sequence[Callable[[], Any]], device: str, *, min_samples: int = 10,
                  max_samples: int = 200, budget_ms: float = 400.0) -> Timing:
    import torch

    # Inputs are cold by rotation: each call's set was last touched len(calls)
    # calls ago, by construction more than 3 L2s of traffic back.
    for fn in calls:  # every input set warm (its shape compiled) before capture
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:  # a side-stream run first, as capture requires
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        keep = [fn() for fn in calls]
    del keep
    graph.replay()
    torch.cuda.synchronize()

    def replay_times(n: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            starts[i].record()
            graph.replay()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / len(calls) for s, e in zip(starts, ends)]

    estimate = statistics.median(replay_times(2)) * len(calls)
    n = sample_count(estimate, budget_ms, min_samples, max_samples)
    timing = Timing(replay_times(n), "graph", "cold-rotate", calls_per_sample=len(calls))
    del graph
    return timing


def measure_wall(calls: Sequence[Callable[[], Any]], device: str, *, min_samples: int = 5,
                 max_samples: int = 50, budget_ms: float = 200.0) -> Timing:
    fn = calls[0]
    sync = _synchronizer(device)

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) * 1e3

    estimate = once()
    n = sample_count(estimate, budget_ms, min_samples, max_samples)
    return Timing([once() for _ in range(n)], "wall", "n/a" if device == "cpu" else "warm")


def _synchronizer(device: str) -> Callable[[], None]:
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return lambda: None


MEASURE = {"events": measure_events, "graph": measure_graph, "wall": measure_wall}


def measure(calls: Sequence[Callable[[], Any]], device: str, timer: str, flush: str = "clean",
            **limits: Any) -> Timing:
    """Time ``calls`` with ``timer``; ``flush`` (see flush_l2) applies to the events timer."""
    if timer not in MEASURE:
        raise ValueError(f"unknown timer {timer!r}; choose from {', '.join(TIMERS)}")
    if flush not in FLUSHES:
        raise ValueError(f"unknown L2 flush {flush!r}; choose from {', '.join(FLUSHES)}")
    if timer in ("events", "graph") and device != "cuda":
        raise ValueError(f"the {timer} timer needs a CUDA device; use --timer wall on the CPU")
    if timer == "events":
        limits["flush"] = flush
    return MEASURE[timer](calls, device, **limits)
