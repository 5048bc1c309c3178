"""Roofline arithmetic: pure functions of FLOPs, bytes, time and ceilings.

Units: bytes, FLOPs, milliseconds, GB/s (1e9 bytes/s), TFLOP/s (1e12 FLOP/s).
"""
from __future__ import annotations

import math


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
    """Speed of light: bound / measured; 1.0 is at the limit, above 1.05 is suspect."""
    return bound / ms if ms > 0 else math.nan


def ridge_point(peak_gbps: float, peak_tflops: float) -> float:
    """The intensity (FLOP/byte) at which the bandwidth slope meets the compute roof."""
    return peak_tflops * 1e12 / (peak_gbps * 1e9)


def limiter(flops: float, nbytes: float, peak_gbps: float, peak_tflops: float) -> str:
    return "compute" if compute_ms(flops, peak_tflops) >= memory_ms(nbytes, peak_gbps) else "memory"


SUSPECT_SOL = 1.05
