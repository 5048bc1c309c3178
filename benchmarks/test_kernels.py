"""One pytest-benchmark test per (workload, implementation, dtype) at a small shape.

The measured call synchronises the device, so the time is the kernel's and not
only the launch's (pytest-benchmark's wall clock still adds the launch and the
synchronisation, some microseconds: use the suite's runner for event timing).
The L2 is flushed in ``setup``, outside the timed call, as the suite's own
timer does.  Each implementation is checked against the float64
reference once before it is timed: a wrong kernel fails instead of being timed.
"""
import math
import os

import pytest
import torch

from suite import roofline, verify
from suite.timing import Protocol

# As in `python -m suite run`: these run only when asked for.
OPT_IN = ("compile:max-autotune",)
# The runner's default L2 eviction, and the l2 these results carry on a GPU.
L2 = Protocol().l2


def _flush_l2(device: str) -> None:
    from suite.timing import flush_l2

    flush_l2(device, L2)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _config(impl, case):
    try:
        return impl.config(case)
    except Exception as exc:  # a describing hook must not lose the measurement
        return f"config() failed: {exc}"


def _rounds(device: str) -> tuple[int, int]:
    rounds = int(os.environ.get("KSUITE_BENCH_ROUNDS", "100" if device == "cuda" else "20"))
    return rounds, max(1, rounds // 10)


def test_kernel(benchmark, kernel, device, env, peaks):
    wl, impl, case = kernel
    if impl is None:
        pytest.skip(case)  # a backend module that failed to import: case holds the reason
    reason = impl.check_available(device) or impl.supports(case)
    if impl.name in OPT_IN and os.environ.get("KSUITE_BENCH_AUTOTUNE", "0") in ("", "0"):
        reason = f"{impl.name} autotunes for 15-60 s per shape; set KSUITE_BENCH_AUTOTUNE=1 to include it"
    if reason:
        pytest.skip(reason)

    inputs = wl.make_inputs(case, device, seed=0)
    # unwritten outputs read as NaN of their own dtype
    verify.poison_allocator(device, int(wl.write_bytes(case)), getattr(torch, case.dtype))
    with verify.poisoned_empty():
        out = impl.fn(**inputs)
        _sync(device)
    check = verify.check_case(wl, case, out, wl.reference(case, inputs), impl)
    assert check.correct, f"{impl.name} on {case}: {check.check}: {check.message}"
    del out

    def setup():
        _flush_l2(device)
        _sync(device)  # the flush is queued work: let it finish before the clock starts
        return (), inputs

    def call(**kw):
        result = impl.fn(**kw)
        _sync(device)
        return result

    rounds, warmup = _rounds(device)
    benchmark.group = f"{wl.name}-{case.dtype}-{case.label}"
    benchmark.pedantic(call, setup=setup, rounds=rounds, warmup_rounds=warmup, iterations=1)

    ms = benchmark.stats.stats.median * 1e3
    flops, nbytes = wl.flops(case), wl.min_bytes(case)
    peak_gbps, peak_tflops = peaks(case.dtype, impl.math, wl.read_bytes(case), wl.write_bytes(case))
    bound = (roofline.bound_ms(flops, nbytes, peak_gbps, peak_tflops)
             if peak_gbps and peak_tflops else None)
    sol = roofline.sol(bound, ms) if bound else None
    benchmark.extra_info.update(
        workload=wl.name, impl=impl.name, dtype=case.dtype, shape=case.label,
        device=device, gpu_name=env["gpu_name"], l2=L2 if device == "cuda" else "n/a",
        flops=flops, min_bytes=nbytes, eager_bytes=wl.eager_bytes(case),
        gbps=roofline.gbps(nbytes, ms), tflops=roofline.tflops(flops, ms),
        bound_ms=bound, sol=sol if sol is None or math.isfinite(sol) else None,
        peak_gbps=peak_gbps, peak_tflops=peak_tflops, rel_err=check.rel_err, tol=check.tol,
        correct=True, config=_config(impl, case), torch=torch.__version__,
    )
