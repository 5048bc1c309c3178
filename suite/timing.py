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

How a run times is one ``Protocol``: the events timer's L2 eviction (``l2``,
the rows' ``l2`` column), the sample limits of every timer, and an idle
``settle_ms`` before each measurement (see ``settle``).  It is checked
when it is made and trusted after.  A worker process sets its run's protocol
once (``use_protocol``), so that what times a kernel on the side, the
autotuners of implementations/, does so under the run's ``l2``
(``current_protocol``) with its own shorter sample limits.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

TIMERS = ("events", "graph", "wall")
FLUSH_FACTOR = 4  # the flush buffer is this many L2s
_flush_buffers: dict[str, tuple] = {}

# How the events timer evicts the L2 before each sample (see flush_l2), by the
# ``l2`` its rows carry; the graph timer's rows say "cold-rotate", the wall
# timer's "n/a" on the CPU.
L2_CHOICES = {
    "cold-clean": f"reads a buffer of {FLUSH_FACTOR} L2s that is never written: the L2 holds clean lines only",
    "cold-flush": f"writes a buffer of {FLUSH_FACTOR} L2s: the timed call pays for writing its dirty lines back",
}


@dataclass(frozen=True)
class Protocol:
    """How a run times: the events timer's ``l2``, every timer's sample limits
    (at least ``min_samples``, at most ``max_samples``, about ``budget_ms`` of them)
    and the idle time before each measurement (``settle_ms``, see ``settle``)."""

    l2: str = "cold-clean"
    min_samples: int = 10
    max_samples: int = 100
    budget_ms: float = 150.0
    settle_ms: float = 0.0

    def __post_init__(self):
        if self.l2 not in L2_CHOICES:
            raise ValueError(f"unknown l2 {self.l2!r}; choose from {', '.join(L2_CHOICES)}")
        if not isinstance(self.min_samples, int) or self.min_samples < 1:
            raise ValueError(f"min_samples must be a whole number of at least 1, not {self.min_samples!r}")
        if not isinstance(self.max_samples, int) or self.max_samples < self.min_samples:
            raise ValueError(f"max_samples must be a whole number of at least min_samples "
                             f"({self.min_samples}), not {self.max_samples!r}")
        if not (isinstance(self.budget_ms, (int, float)) and 0 < self.budget_ms < math.inf):
            raise ValueError(f"budget_ms must be a positive number of milliseconds, not {self.budget_ms!r}")
        if not (isinstance(self.settle_ms, (int, float)) and 0 <= self.settle_ms < math.inf):
            raise ValueError(f"settle_ms must be a number of milliseconds, 0 or more, not {self.settle_ms!r}")


def settle(device: str, p: Protocol) -> None:
    """Leave the device idle for ``p.settle_ms`` once its queued work is done.

    A GPU at its power limit runs a kernel at a clock set by the heat and power of
    what ran just before; in a sweep that is the previous case, so one case's
    samples start at a clock that depends on its place in the sweep and on how
    heavy its neighbours are (and on a candidate's slower neighbour in an A/B
    round).  An idle wait before the samples lets the limiter give the clock back,
    so that every case starts from about the same state."""
    if p.settle_ms > 0:
        _synchronizer(device)()
        time.sleep(p.settle_ms / 1e3)


_current = Protocol()


def use_protocol(protocol: Protocol) -> None:
    """Make ``protocol`` this process's current one (a worker does, once, for its run)."""
    global _current
    _current = protocol


def current_protocol() -> Protocol:
    """The protocol of the run this process times for (the default one outside a run)."""
    return _current


@dataclass
class Timing:
    samples_ms: list[float]
    timer: str
    l2: str  # a key of L2_CHOICES, "cold-rotate" (graph), or "n/a" / "warm" (wall on the CPU / a GPU)
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


def flush_l2(device: str, l2: str = "cold-clean") -> None:
    """Evict the L2 through a buffer of FLUSH_FACTOR times its size, as ``l2`` says.

    ``cold-clean`` sums the buffer, which is written once and never again: the
    L2 is left holding clean lines only.  ``cold-flush`` fills it, as most GPU
    timers do; but the L2 writes back lazily, so its last L2's worth of the
    buffer is still dirty when the timed call starts, and the call's own
    traffic then pays for writing it to HBM: on an H200, about a tenth of a
    16M-element float32 elementwise call.  With ``cold-clean``
    whatever the previous sample left dirty is written back during the
    flush, outside the timed interval.
    """
    if device == "cuda":
        _EVICT[l2](device)


def _evict_by_reading(device: str) -> None:
    import torch

    bufs = _flush_buffers.get("cold-clean")
    if bufs is None:
        n = FLUSH_FACTOR * l2_bytes(device) // 4
        bufs = _flush_buffers["cold-clean"] = (torch.ones(n, device=device), torch.empty((), device=device))
    torch.sum(bufs[0], dim=0, out=bufs[1])


def _evict_by_writing(device: str) -> None:
    import torch

    bufs = _flush_buffers.get("cold-flush")
    if bufs is None:
        n = FLUSH_FACTOR * l2_bytes(device) // 4
        bufs = _flush_buffers["cold-flush"] = (torch.empty(n, dtype=torch.int32, device=device),)
    bufs[0].fill_(0x5A5A5A5A)


_EVICT = {"cold-clean": _evict_by_reading, "cold-flush": _evict_by_writing}


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
                 l2: str = "cold-clean") -> list[float]:
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush_l2(device, l2)
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def probe_ms(fn: Callable[[], Any], device: str, l2: str = "cold-clean", n: int = 2) -> float:
    """The fastest of ``n`` calls, each after an L2 flush, following one untimed
    call: a quick ranking of candidates (a tuner's first look), not a measurement."""
    fn()
    return min(_time_events(fn, device, n, 0, l2))


def _count(estimate_ms: float, p: Protocol) -> int:
    return sample_count(estimate_ms, p.budget_ms, p.min_samples, p.max_samples)


def measure_events(calls: Sequence[Callable[[], Any]], device: str, p: Protocol) -> Timing:
    fn = calls[0]
    issue_us = launch_us(fn, device)
    hold = hold_us(issue_us)
    cycles = int(hold * _spin_rate(device))
    estimate = statistics.median(_time_events(fn, device, 3, cycles, p.l2))
    return Timing(_time_events(fn, device, _count(estimate, p), cycles, p.l2), "events", p.l2)


def measure_graph(calls: Sequence[Callable[[], Any]], device: str, p: Protocol) -> Timing:
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
    timing = Timing(replay_times(_count(estimate, p)), "graph", "cold-rotate", calls_per_sample=len(calls))
    del graph
    return timing


def measure_wall(calls: Sequence[Callable[[], Any]], device: str, p: Protocol) -> Timing:
    fn = calls[0]
    sync = _synchronizer(device)

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) * 1e3

    estimate = once()
    return Timing([once() for _ in range(_count(estimate, p))], "wall", "n/a" if device == "cpu" else "warm")


def _synchronizer(device: str) -> Callable[[], None]:
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return lambda: None


MEASURE = {"events": measure_events, "graph": measure_graph, "wall": measure_wall}


def measure(calls: Sequence[Callable[[], Any]], device: str, timer: str,
            protocol: Protocol | None = None, **limits: Any) -> Timing:
    """Time ``calls`` with ``timer`` under ``protocol`` (default: the current one);
    ``limits`` (min_samples, max_samples, budget_ms) replace its sample limits."""
    if timer not in MEASURE:
        raise ValueError(f"unknown timer {timer!r}; choose from {', '.join(TIMERS)}")
    if timer in ("events", "graph") and device != "cuda":
        raise ValueError(f"the {timer} timer needs a CUDA device; use --timer wall on the CPU")
    p = protocol if protocol is not None else current_protocol()
    return MEASURE[timer](calls, device, replace(p, **limits) if limits else p)
