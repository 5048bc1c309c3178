"""Joules a call, from NVML's energy counter over a burst of back-to-back calls.

The timed samples are no place to count energy: an L2 eviction and a spin
kernel run before every sample, and their joules would be charged to the
call.  So after a case x implementation is timed, it runs again back to back,
nothing between the calls, for at least ``TARGET_MS``, with the board's total
energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) read before and
after, each read after a synchronise:

    energy_j = (E_after - E_before) / 1000 / calls
    energy_w = the same joules / the burst's wall time
    gflops_per_j = flops / 1e9 / energy_j,   gb_per_j = min_bytes / 1e9 / energy_j

At 700 W a 100 ms burst is 70 J, so a counter that moves in steps of a few
mJ, or updates every few ms, costs well under 1%.  What the figure is: the
board's joules (HBM, SMs, the rest of the card) while the call runs in a loop;
inputs that fit in L2 stay warm across calls, and a microsecond kernel whose
launches cannot keep the GPU busy is charged the draw of the gaps between
launches, as a caller running it in a loop would pay.  Without NVML, or on the
CPU, every energy column is NaN.
"""
from __future__ import annotations

import math
import time
from typing import Callable

TARGET_MS = 100.0
MIN_CALLS = 5
MAX_CALLS = 200_000
FIELDS = ("energy_j", "energy_w", "energy_calls", "gflops_per_j", "gb_per_j")


def empty() -> dict:
    return {f: math.nan for f in FIELDS}


def calls_for(ms_per_call: float, target_ms: float = TARGET_MS) -> int:
    """Calls that fill ``target_ms`` at ``ms_per_call`` each, within [MIN_CALLS, MAX_CALLS]."""
    if not ms_per_call or math.isnan(ms_per_call) or ms_per_call <= 0:
        return MIN_CALLS
    return int(min(MAX_CALLS, max(MIN_CALLS, math.ceil(target_ms / ms_per_call))))


def burst(call: Callable[[], object], sync: Callable[[], None], counter: Callable[[], int | None] | None,
          ms_per_call: float, target_ms: float = TARGET_MS,
          clock: Callable[[], float] = time.perf_counter) -> dict:
    """Energy per call of ``call`` run back to back (see the module docstring).

    A burst that ends shorter than half of ``target_ms`` (the timed median was
    of one cold call; back to back, calls can run faster) is run once more with
    the calls scaled up, and that one counts.
    """
    if counter is None:
        return empty()
    n = calls_for(ms_per_call, target_ms)
    for attempt in range(2):
        sync()
        before, t0 = counter(), clock()
        for _ in range(n):
            call()
        sync()
        after, seconds = counter(), clock() - t0
        if before is None or after is None or after <= before:  # no counter, or it did not move
            return empty()
        if attempt == 0 and seconds * 1e3 < target_ms / 2 and n < MAX_CALLS:
            n = calls_for(seconds * 1e3 / n, target_ms)
            continue
        break
    joules = (after - before) / 1000.0 / n
    return {"energy_j": joules, "energy_w": joules * n / seconds if seconds > 0 else math.nan,
            "energy_calls": n}


def per_joule(row: dict) -> dict:
    """GFLOP/J and GB/J of a row carrying ``energy_j``, ``flops`` and ``min_bytes``."""
    j = row.get("energy_j")
    ok = isinstance(j, (int, float)) and not math.isnan(j) and j > 0
    return {"gflops_per_j": row["flops"] / 1e9 / j if ok and row.get("flops") else math.nan,
            "gb_per_j": row["min_bytes"] / 1e9 / j if ok and row.get("min_bytes") else math.nan}
