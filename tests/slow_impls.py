"""Test-only implementations a known fraction slower than PyTorch's own op: the gate's known slowdown.

Imported by the runner's workers through ``--plugin tests.slow_impls``.  For
every workload it registers ``slow:10`` and ``slow:3``: the workload's ``torch``
implementation (``eager`` where there is none), then a hold of the device for
10% or 3% of the op's own time.  The hold is on only where ``KSUITE_SLOW`` is
set to a number other than 0, which scales it (``KSUITE_SLOW=1``: 10% and 3%;
``KSUITE_SLOW=10``: 100% and 30%).  So the two sides of
``suite ab REF REF --plugin tests.slow_impls --cand-env KSUITE_SLOW=1`` carry
the same implementations, and only the candidate's are slower.

On a GPU the hold is ``torch.cuda._sleep`` on the op's stream, inside the timed
interval.  At the harness's warm-up call, once per input shape, the op is timed
with suite.timing.measure under the run's protocol, the spin's length is set
from its cycles per microsecond, and the op with the spin is timed again (up to
CORRECTIONS times) until it is the fraction slower within 15%: the spin runs
at the clock the op leaves behind, and a power-capped op speeds up when given
idle time.  On the CPU the op runs again for
each whole multiple of its time (a spinning wait there would fight the op's
own idle-spinning threads for the cores) and a busy wait covers the fraction.
"""
import os
import time

from suite.workload import REGISTRY, register

PERCENT = {"slow:10": 10.0, "slow:3": 3.0}
CORRECTIONS = 4


def _scale() -> float:
    try:
        return float(os.environ.get("KSUITE_SLOW", "0") or 0)
    except ValueError:
        return 0.0


def _spin_cycles_per_us() -> float:
    import torch

    cycles = 4_000_000
    torch.cuda._sleep(cycles // 10)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) * 1e3)


def _slowed(inner, percent: float):
    holds = {}  # input signature -> spin cycles
    rate = []

    def fn(**inputs):
        extra = percent / 100.0 * _scale()
        if extra <= 0:
            return inner(**inputs)
        tensors = [v for v in inputs.values() if hasattr(v, "device")]
        if tensors[0].device.type != "cuda":
            t0 = time.perf_counter()
            out = inner(**inputs)
            dt = time.perf_counter() - t0
            for _ in range(int(extra)):  # whole extra calls compete for the cores like the op
                inner(**inputs)
            end = time.perf_counter() + (extra - int(extra)) * dt
            while time.perf_counter() < end:
                pass
            return out
        import torch

        from suite import timing

        key = tuple((k, tuple(getattr(v, "shape", ())), str(getattr(v, "dtype", v)))
                    for k, v in inputs.items())
        if key not in holds:
            def median_ms(cycles: int) -> float:
                def call():
                    inner(**inputs)
                    if cycles:
                        torch.cuda._sleep(cycles)
                return timing.measure([call], "cuda", "events").median

            ms = median_ms(0)
            if not rate:
                rate.append(_spin_cycles_per_us())
            cycles = max(1, int(extra * ms * 1e3 * rate[0]))
            # Corrections, under the run's own protocol: the spin runs at the clock
            # the op leaves behind, and at a power cap the op itself speeds up by
            # part of the idle time it is given, so the spin grows until the pair
            # is slower by `extra`.
            for _ in range(CORRECTIONS):
                got = median_ms(cycles) / median_ms(0) - 1.0
                if abs(got - extra) <= 0.15 * extra:
                    break
                cycles = max(1, int(cycles * min(4.0, extra / got))) if got > 0 else 4 * cycles
            holds[key] = cycles
        out = inner(**inputs)
        torch.cuda._sleep(holds[key])
        return out

    return fn


def _register_all() -> None:
    for workload in sorted(REGISTRY.workloads):
        names = {name for (w, name) in REGISTRY.impls if w == workload}
        base = "torch" if "torch" in names else "eager" if "eager" in names else None
        if base is None:
            continue
        inner = REGISTRY.get(workload, base)
        for name, percent in PERCENT.items():
            if (workload, name) in REGISTRY.impls:
                continue
            register(workload, name, available=inner.available, supports=inner.supports,
                     tolerance=inner.tolerance, math=inner.math,
                     description=f"{base}, then {percent:g}% more (KSUITE_SLOW)")(_slowed(inner.fn, percent))


_register_all()
