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
from its cycles per microsecond, and the op with the spin is timed against the
op alone (up to CORRECTIONS times) until it is the fraction slower within 15%: the spin runs
at the clock the op leaves behind, and a power-capped op speeds up when given
idle time.  On the CPU the op runs again for
each whole multiple of its time (a spinning wait there would fight the op's
own idle-spinning threads for the cores) and a busy wait covers the fraction.

``slow:work10`` and ``slow:work3`` (gelu, softmax, residual_layernorm_gelu, gemm,
attention) are slower by doing more of the same work instead: after the op,
the op again on a slice of its inputs (leading rows, or columns where a
slice of rows would be too coarse) holding about that fraction of the work.
At a power cap a hold is idle time, in which the clock rises and the op
speeds up (lab/findings/ab_power_cap-9af2779.txt); more of the op's own work
draws the op's own power, so it is what a slower kernel looks like there.
On a GPU the fraction is set at the warm-up call as the hold's length is,
through timed corrections, with the same number of timed bursts whatever
their outcome; without a cache (below) both sides run them (with
``KSUITE_SLOW`` unset or 0 the bursts time the op alone), so that the two
start their samples from the same heat.  On the CPU the slice is the
fraction as is, so that a tiny op, whose second call costs mostly its call
overhead, is slowed by far more.

Each correction times the op and the slowed op call by call, alternating
(ABBA...), and compares the fast ends of the two sets (their 10th percentile,
as ``suite ab`` does): at a power cap the clock moves from one burst to the
next by more than the fraction being set, so two bursts timed one after the
other would set it from the clock's drift rather than from the op.  Where
``KSUITE_SLOW_CACHE`` names a JSON file (set it in the environment of
``suite ab`` itself, so that both sides see it), the first process to
calibrate a case writes its setting there and every later process (each round
of ``suite ab``) uses it, timing no bursts: a setting calibrated again in every
round differs from round to round by more than a 3% slowdown, and bursts
before the timed samples leave a power-capped GPU at a clock that differs from
round to round.
"""
import json
import os
import time
from pathlib import Path

from suite.workload import REGISTRY, register

PERCENT = {"slow:10": 10.0, "slow:3": 3.0}
WORK_PERCENT = {"slow:work10": 10.0, "slow:work3": 3.0}
CORRECTIONS = 4


def _rows_or_cols(rows: int, cols: int, f: float) -> tuple[int, int]:
    """(rows, cols) of a slice of a rows x cols operand holding about ``f`` of it:
    leading rows, or all rows and leading columns, whichever comes closer to f
    (rows at a tie: contiguous)."""
    r, c = max(1, round(f * rows)), max(1, round(f * cols))
    return (r, cols) if abs(r / rows - f) <= abs(c / cols - f) else (rows, c)


_SLICED = ("gelu", "softmax", "residual_layernorm_gelu", "gemm", "attention")


def sliced(workload: str, inputs: dict, f: float) -> dict | None:
    """The inputs of the same op on about a fraction ``f`` of its work (None:
    no rule for this workload).  gemm: rows of A or columns of B; attention: a
    shorter sequence of q, k and v (work ~ S^2)."""
    f = min(max(f, 0.0), 1.0)
    if workload == "gelu":
        x = inputs["x"]
        return dict(inputs, x=x[:max(1, round(f * x.numel()))])
    if workload == "softmax":
        rows, cols = _rows_or_cols(*inputs["x"].shape, f)
        return dict(inputs, x=inputs["x"][:rows, :cols])
    if workload == "residual_layernorm_gelu":
        rows, cols = _rows_or_cols(*inputs["x"].shape, f)
        return dict(inputs, x=inputs["x"][:rows, :cols], r=inputs["r"][:rows, :cols],
                    weight=inputs["weight"][:cols], bias=inputs["bias"][:cols])
    if workload == "gemm":
        a, b = inputs["a"], inputs["b"]
        rows, cols = _rows_or_cols(a.shape[0], b.shape[1], f)
        return dict(inputs, a=a[:rows], b=b[:, :cols])
    if workload == "attention":
        s = inputs["q"].shape[-2]
        keep = max(1, round(f ** 0.5 * s))
        return dict(inputs, **{k: inputs[k][..., :keep, :] for k in "qkv"})
    return None


CACHE_ENV = "KSUITE_SLOW_CACHE"


def _cached(name: str):
    """The setting stored for ``name`` in the KSUITE_SLOW_CACHE file (None: none there, or no file)."""
    path = os.environ.get(CACHE_ENV)
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text()).get(name)
    except (OSError, ValueError, AttributeError):
        return None


def _store(name: str, value) -> None:
    """Writes ``name``'s setting into the KSUITE_SLOW_CACHE file, if one is named (whole-file replace)."""
    path = os.environ.get(CACHE_ENV)
    if not path:
        return
    p = Path(path)
    try:
        held = json.loads(p.read_text())
    except (OSError, ValueError):
        held = {}
    held = held if isinstance(held, dict) else {}
    held[name] = value
    tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(held, sort_keys=True))
    os.replace(tmp, p)


def _paired_excess(base, slowed, budget_s: float = 0.25) -> float:
    """How much slower ``slowed`` is than ``base`` (0.03: 3%): each call timed alone
    with CUDA events, the two alternating ABBA so that both see the same clocks,
    about ``budget_s`` of calls in all; the ratio of the two sets' fast ends."""
    import torch

    from suite.ab import fast_end

    def timed(fns):
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(len(fns) + 1)]
        marks[0].record()
        for fn, mark in zip(fns, marks[1:]):
            fn()
            mark.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]

    base()
    slowed()
    est = sorted(timed([base] * 3))[1]
    pairs = max(20, min(400, int(budget_s * 1e3 / max(2 * est, 1e-3))))
    a, b = [], []
    for i in range(pairs):
        first, second = (base, slowed) if i % 2 == 0 else (slowed, base)
        t = timed([first, second])
        a.append(t[i % 2])
        b.append(t[1 - i % 2])
    return fast_end(b) / fast_end(a) - 1.0


def _name(kind: str, workload: str, percent: float, key: tuple) -> str:
    return f"{kind}|{workload}|{percent:g}|{_scale():g}|{key!r}"


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


def _slowed(workload: str, inner, percent: float):
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
            def with_hold(cycles: int):
                def call():
                    inner(**inputs)
                    torch.cuda._sleep(cycles)
                return call

            name = _name("hold", workload, percent, key)
            cycles = _cached(name)
            if cycles is None:
                ms = timing.measure([lambda: inner(**inputs)], "cuda", "events").median
                if not rate:
                    rate.append(_spin_cycles_per_us())
                cycles = max(1, int(extra * ms * 1e3 * rate[0]))
                # Corrections: the spin runs at the clock the op leaves behind, and at
                # a power cap the op itself speeds up by part of the idle time it is
                # given, so the spin grows until the pair is slower by `extra`.
                for _ in range(CORRECTIONS):
                    got = _paired_excess(lambda: inner(**inputs), with_hold(cycles))
                    if abs(got - extra) <= 0.15 * extra:
                        break
                    cycles = max(1, int(cycles * min(4.0, extra / got))) if got > 0 else 4 * cycles
                _store(name, cycles)
            holds[key] = int(cycles)
        out = inner(**inputs)
        torch.cuda._sleep(holds[key])
        return out

    return fn


def _more_work(workload: str, inner, percent: float):
    fractions = {}  # input signature -> fraction of the work done again

    def fn(**inputs):
        extra = percent / 100.0 * _scale()
        tensors = [v for v in inputs.values() if hasattr(v, "device")]
        key = tuple((k, tuple(getattr(v, "shape", ())), str(getattr(v, "dtype", v))) for k, v in inputs.items())
        if tensors[0].device.type == "cuda" and key not in fractions:
            def with_slice(f: float):
                def call():
                    inner(**inputs)
                    if f > 0:
                        inner(**sliced(workload, inputs, f))
                return call

            name = _name("work", workload, percent, key)
            cached = os.environ.get(CACHE_ENV)
            held = _cached(name) if extra > 0 else None
            frac = extra if held is None else float(held)
            # Corrections, as for the hold.  Without a cache both sides time the same
            # bursts in every process, so that both start their samples from the same
            # heat; with one, only the process that sets the fraction times them, and
            # every later round on either side starts from an idle GPU.
            if held is None and (extra > 0 or not cached):
                for _ in range(CORRECTIONS):
                    got = _paired_excess(with_slice(0.0), with_slice(frac))
                    if extra > 0 and abs(got - extra) > 0.15 * extra:
                        frac = min(1.0, frac * min(4.0, extra / got)) if got > 0 else min(1.0, 4 * frac)
                if extra > 0:
                    _store(name, frac)
            fractions[key] = frac
        out = inner(**inputs)
        frac = fractions.get(key, extra)
        if extra > 0 and frac > 0:
            inner(**sliced(workload, inputs, frac))
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
                     description=f"{base}, then {percent:g}% more (KSUITE_SLOW)")(_slowed(workload, inner.fn, percent))
        if workload not in _SLICED:
            continue
        for name, percent in WORK_PERCENT.items():
            if (workload, name) in REGISTRY.impls:
                continue
            register(workload, name, available=inner.available, supports=inner.supports,
                     tolerance=inner.tolerance, math=inner.math,
                     description=f"{base}, then {base} again on a slice of about {percent:g}% of the work "
                                 f"(KSUITE_SLOW)")(_more_work(workload, inner.fn, percent))


_register_all()
