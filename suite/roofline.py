"""Roofline arithmetic: pure functions of FLOPs, bytes, time and ceilings.

Units: bytes, FLOPs, milliseconds, GB/s (1e9 bytes/s), TFLOP/s (1e12 FLOP/s).
"""
from __future__ import annotations

import math
from typing import Mapping


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP per byte of compulsory traffic."""
    return flops / nbytes if nbytes > 0 else math.inf


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9 if ms > 0 else math.nan


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12 if ms > 0 else math.nan


def memory_ms(nbytes: float, peak_gbps: float) -> float:
    return nbytes / (peak_gbps * 1e9) * 1e3


def compute_ms(flops: float, peak_tflops: float) -> float:
    return flops / (peak_tflops * 1e12) * 1e3


def bound_ms(flops: float, nbytes: float, peak_gbps: float, peak_tflops: float) -> float:
    """The roofline floor: no kernel moving these bytes and doing these FLOPs is faster."""
    return max(compute_ms(flops, peak_tflops), memory_ms(nbytes, peak_gbps))


def sol(bound: float, ms: float) -> float:
    """Speed of light: bound / measured; 1.0 is at the limit, above SUSPECT_SOL is suspect."""
    return bound / ms if ms > 0 else math.nan


def mix_gbps(read_bytes: float, write_bytes: float, measured: Mapping[float, float]) -> float:
    """The bandwidth roof of traffic that reads ``read_bytes`` and writes ``write_bytes``.

    ``measured`` maps a read fraction (read / (read + write): 0 write-only,
    1/2 copy, 2/3 two reads a write, 1 read-only) to the streaming GB/s
    measured at that mix.  Between measured mixes the time per byte is
    interpolated linearly in the read fraction: a kernel whose traffic is the
    sum of two measured streams takes the sum of their times.  Outside them
    the nearest measured mix holds.
    """
    points = sorted((f, g) for f, g in measured.items() if g and g > 0 and math.isfinite(g))
    if not points:
        return math.nan
    total = read_bytes + write_bytes
    f = read_bytes / total if total > 0 else 0.5
    if f <= points[0][0]:
        return points[0][1]
    for (f0, g0), (f1, g1) in zip(points, points[1:]):
        if f <= f1:
            t = (f - f0) / (f1 - f0)
            return 1.0 / ((1.0 - t) / g0 + t / g1)
    return points[-1][1]


def ridge_point(peak_gbps: float, peak_tflops: float) -> float:
    """The intensity (FLOP/byte) at which the bandwidth slope meets the compute roof."""
    return peak_tflops * 1e12 / (peak_gbps * 1e9)


def limiter(flops: float, nbytes: float, peak_gbps: float, peak_tflops: float) -> str:
    return "compute" if compute_ms(flops, peak_tflops) >= memory_ms(nbytes, peak_gbps) else "memory"


# A row timed with a cold L2 above this fraction of its roof is ``suspect``:
# its roof or its check is wrong (no kernel beats the measured streams), and
# it is never shown as fast.  2% is the spread of the ceilings themselves.
SUSPECT_SOL = 1.02


def held_to_roof(l2: str | None) -> bool:
    """Only a cold-L2 measurement is bound by the HBM roofs; a warm or CPU one
    reads from caches the ceilings never measured."""
    return isinstance(l2, str) and l2.startswith("cold")


def suspect_reason(sol_: float, l2: str | None, bound: str | None, peak_gbps: float,
                   peak_tflops: float, mix: str = "", math_mode: str | None = None) -> str | None:
    """Why a row cannot be trusted (it beats its roof), or None."""
    if not held_to_roof(l2) or not sol_ > SUSPECT_SOL:
        return None
    roof = (f"{peak_tflops:.1f} TFLOP/s {math_mode or ''}".rstrip() if bound == "compute"
            else f"{peak_gbps:.0f} GB/s{' ' + mix if mix else ''}")
    return (f"SOL {sol_:.3f} > {SUSPECT_SOL} of its {bound} roof ({roof}): the roof or "
            f"the check is wrong")
