"""Joules a call, from NVML's energy counter while the call runs back to back
(``run --energy``).

The timed samples are no place to count energy: an L2 eviction and a spin
kernel run before every sample, and their joules would be charged to the
call.  So after a case x implementation is timed, it runs again back to back.

The board's total energy counter (``nvmlDeviceGetTotalEnergyConsumption``,
mJ) does not move continuously: on an H200 it steps every 100 ms, by about
70 J at the 700 W cap, and the time between steps as a host sees them
wanders (p90 103 ms, max 122 ms; lab/energy_counter.py).  A short burst read
before and after is off by up to a whole step, and so is one step timed on
its own.  So a thread polls the counter every ``POLL_S`` and stamps each
change; the calls run in chunks of about ``CHUNK_MS`` (a synchronise after
each, so the GPU never queues more than that) until ``EDGES`` changes have
been seen, about a second; then

    power_w  = (E at the last change - E at the first) / (time between them)
    energy_j = power_w * (the burst's wall time / its calls)
    gflops_per_j = flops / 1e9 / energy_j,   gb_per_j = min_bytes / 1e9 / energy_j

Ten steps put a misplaced step boundary at a tenth of its weight.  What the
figure is: the board's joules (HBM, SMs, the rest of the card) while the call
runs in a loop; inputs that fit in L2 stay warm across calls, and a
microsecond kernel whose launches cannot keep the GPU busy is charged the
draw of the gaps between launches, as a caller running it in a loop would
pay.  Without NVML, or when the counter does not move ``EDGES`` times within
``MAX_S``, every energy column is NaN.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

POLL_S = 0.0002
CHUNK_MS = 5.0
EDGES = 11
MAX_S = 2.5
FIELDS = ("energy_j", "energy_w", "energy_calls", "gflops_per_j", "gb_per_j")


def empty() -> dict:
    return {f: math.nan for f in FIELDS}


def chunk_calls(ms_per_call: float, chunk_ms: float = CHUNK_MS) -> int:
    """Calls that fill about ``chunk_ms`` at ``ms_per_call`` each (at least 1)."""
    if not ms_per_call or math.isnan(ms_per_call) or ms_per_call <= 0:
        return 1
    return max(1, min(100_000, int(chunk_ms / ms_per_call)))


class _Edges:
    """A thread that stamps each change of ``counter``: [(time, value), ...]."""

    def __init__(self, counter: Callable[[], int | None], clock: Callable[[], float]):
        self.counter, self.clock = counter, clock
        self.seen: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        last = self.counter()
        while not self._stop.is_set():
            v = self.counter()
            if v is not None and last is not None and v != last:
                self.seen.append((self.clock(), v))
            last = v
            time.sleep(POLL_S)

    def __enter__(self) -> "_Edges":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def burst(call: Callable[[], object], sync: Callable[[], None], counter: Callable[[], int | None] | None,
          ms_per_call: float, clock: Callable[[], float] = time.perf_counter,
          edges: int = EDGES, max_s: float = MAX_S) -> dict:
    """Energy per call of ``call`` run back to back (see the module docstring)."""
    if counter is None or counter() is None:
        return empty()
    per_chunk, calls = chunk_calls(ms_per_call), 0
    sync()
    with _Edges(counter, clock) as seen:
        t0 = clock()
        while len(seen.seen) < edges and clock() - t0 < max_s:
            for _ in range(per_chunk):
                call()
            sync()
            calls += per_chunk
        seconds = clock() - t0
    marks = seen.seen
    if len(marks) < edges or calls == 0:  # the counter did not move (or not often enough)
        return empty()
    (t_a, e_a), (t_b, e_b) = marks[0], marks[edges - 1]
    if t_b <= t_a or e_b <= e_a:
        return empty()
    watts = (e_b - e_a) / 1000.0 / (t_b - t_a)
    return {"energy_j": watts * seconds / calls, "energy_w": watts, "energy_calls": calls}


def per_joule(row: dict) -> dict:
    """GFLOP/J and GB/J of a row carrying ``energy_j``, ``flops`` and ``min_bytes``."""
    j = row.get("energy_j")
    ok = isinstance(j, (int, float)) and not math.isnan(j) and j > 0
    return {"gflops_per_j": row["flops"] / 1e9 / j if ok and row.get("flops") else math.nan,
            "gb_per_j": row["min_bytes"] / 1e9 / j if ok and row.get("min_bytes") else math.nan}
