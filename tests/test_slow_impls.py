"""The gate's test plugin (tests/slow_impls.py): its slices of the work, and the extra call."""
from __future__ import annotations

import json
import math

import pytest
import torch

from suite.workload import Case, discover

CASES = [("gemm", dict(M=640, N=48, K=32)), ("gemm", dict(M=1, N=4096, K=64)), ("gelu", dict(N=10007)),
         ("softmax", dict(M=300, N=96)), ("softmax", dict(M=7, N=3000)),
         ("residual_layernorm_gelu", dict(M=400, N=64)), ("residual_layernorm_gelu", dict(M=3, N=4096)),
         ("attention", dict(B=1, H=2, S=400, D=32, causal=1))]


def _work(workload: str, inputs: dict) -> float:
    """Multiply-adds (gemm), score entries (attention) or elements (the row ops)."""
    if workload == "gemm":
        return inputs["a"].shape[0] * inputs["a"].shape[1] * inputs["b"].shape[1]
    if workload == "attention":
        q = inputs["q"]
        return math.prod(q.shape[:-2]) * q.shape[-2] ** 2
    return inputs["x"].numel()


@pytest.mark.parametrize("workload,shape", CASES)
@pytest.mark.parametrize("f", (0.03, 0.1, 0.5))
def test_slices_hold_about_the_fraction_of_the_work(workload, shape, f):
    from tests import slow_impls

    reg = discover()
    case = Case.make(workload, "float32", **shape)
    inputs = reg.workloads[workload].make_inputs(case, "cpu", 3)
    part = slow_impls.sliced(workload, inputs, f)
    got = _work(workload, part) / _work(workload, inputs)
    assert abs(got - f) <= 0.1 * f, (workload, shape, f, got)
    for k, v in inputs.items():  # the same tensors' leading data, never new ones
        if hasattr(v, "data_ptr"):
            assert part[k].data_ptr() == v.data_ptr()


@pytest.mark.parametrize("scale,calls", (("0", 1), ("1", 2)))
def test_work_slowdown_runs_the_op_again_on_a_slice_only_when_on(monkeypatch, scale, calls):
    """With KSUITE_SLOW on, the op runs twice: whole (its output returned) and on
    the slice; off, once."""
    from tests import slow_impls

    seen = []

    def op(**inputs):
        seen.append(inputs["x"].shape)
        return torch.softmax(inputs["x"], -1)

    monkeypatch.setenv("KSUITE_SLOW", scale)
    fn = slow_impls._more_work("softmax", op, 10.0)
    x = torch.randn(200, 64)
    out = fn(x=x)
    assert torch.equal(out, torch.softmax(x, -1))
    assert seen[0] == (200, 64) and len(seen) == calls
    if calls == 2:
        assert seen[1] == (20, 64)


def test_every_sliced_workload_has_work_variants():
    reg = discover()
    from tests import slow_impls

    slow_impls._register_all()  # into the registry discover() returned
    names = {(w, n) for (w, n) in reg.impls}
    for workload in slow_impls._SLICED:
        assert {(workload, "slow:work10"), (workload, "slow:work3")} <= names


class _Cuda:
    type = "cuda"


class _FakeCudaTensor:
    """Just enough of a CUDA tensor for the plugin's calibration path."""
    device = _Cuda()
    shape = (1000, 64)
    dtype = "bfloat16"


def _fake_gpu(monkeypatch, slice_cost: float):
    """The plugin's GPU path on the CPU: the op costs 1 per whole call and
    ``slice_cost`` x f per slice of fraction f; a paired timing returns the cost
    ratio.  Returns the op and the list of fractions it was called on (1.0: whole)."""
    from tests import slow_impls

    seen, cost = [], []

    def op(**inputs):
        f = inputs.get("f", 1.0)
        seen.append(f)
        cost.append(1.0 if f == 1.0 else slice_cost * f)

    def paired(base, slowed):
        cost.clear()
        base()
        a = sum(cost)
        cost.clear()
        slowed()
        return sum(cost) / a - 1.0

    monkeypatch.setattr(slow_impls, "sliced", lambda workload, inputs, f: dict(inputs, f=f))
    monkeypatch.setattr(slow_impls, "_paired_excess", paired)
    return op, seen


def test_a_calibrated_work_fraction_is_kept_for_later_processes(monkeypatch, tmp_path):
    """The first process calibrates the slice to 3% of the op's time and writes it to
    KSUITE_SLOW_CACHE; a later one (a later round of suite ab), where the op's
    timings would calibrate differently, uses the stored fraction and times no
    bursts, nor does the base side (KSUITE_SLOW off).  Without a cache, each
    process calibrates its own, and the base side times the same bursts."""
    from tests import slow_impls

    monkeypatch.setenv("KSUITE_SLOW", "1")
    monkeypatch.setenv(slow_impls.CACHE_ENV, str(tmp_path / "slow.json"))
    op, seen = _fake_gpu(monkeypatch, slice_cost=1.5)
    slow_impls._more_work("gemm", op, 3.0)(x=_FakeCudaTensor())
    frac = seen[-1]
    assert abs(frac * 1.5 - 0.03) <= 0.15 * 0.03, frac  # calibrated: 1.5 x f is 3% of the op
    stored = json.loads((tmp_path / "slow.json").read_text())
    assert list(stored.values()) == [frac]

    op, seen = _fake_gpu(monkeypatch, slice_cost=3.0)  # would calibrate to 0.01
    slow_impls._more_work("gemm", op, 3.0)(x=_FakeCudaTensor())
    assert seen == [1.0, frac]  # the call itself: the op, then the stored slice

    monkeypatch.setenv("KSUITE_SLOW", "0")
    op, seen = _fake_gpu(monkeypatch, slice_cost=3.0)
    slow_impls._more_work("gemm", op, 3.0)(x=_FakeCudaTensor())
    assert seen == [1.0]

    monkeypatch.delenv(slow_impls.CACHE_ENV)  # no cache: bursts on both sides
    op, seen = _fake_gpu(monkeypatch, slice_cost=3.0)
    slow_impls._more_work("gemm", op, 3.0)(x=_FakeCudaTensor())
    base_calls = len(seen)
    assert base_calls == 1 + 2 * slow_impls.CORRECTIONS
    monkeypatch.setenv("KSUITE_SLOW", "1")
    op, seen = _fake_gpu(monkeypatch, slice_cost=3.0)
    slow_impls._more_work("gemm", op, 3.0)(x=_FakeCudaTensor())
    assert abs(seen[-1] * 3.0 - 0.03) <= 0.15 * 0.03, seen[-1]
    assert len([f for f in seen if f == 1.0]) == base_calls  # as many whole calls as the base


def test_a_calibrated_hold_is_kept_for_later_processes(monkeypatch, tmp_path):
    from tests import slow_impls

    monkeypatch.setenv("KSUITE_SLOW", "1")
    monkeypatch.setenv(slow_impls.CACHE_ENV, str(tmp_path / "slow.json"))
    name = slow_impls._name("hold", "gemm", 3.0, (("x", (1000, 64), "bfloat16"),))
    slow_impls._store(name, 12345)
    slept = []
    monkeypatch.setattr(torch.cuda, "_sleep", slept.append)
    fn = slow_impls._slowed("gemm", lambda **inputs: "out", 3.0)
    assert fn(x=_FakeCudaTensor()) == "out" and slept == [12345]


def test_the_cache_survives_a_corrupt_file(monkeypatch, tmp_path):
    from tests import slow_impls

    path = tmp_path / "slow.json"
    path.write_text("{not json")
    monkeypatch.setenv(slow_impls.CACHE_ENV, str(path))
    assert slow_impls._cached("a") is None
    slow_impls._store("a", 0.5)
    slow_impls._store("b", 7)
    assert slow_impls._cached("a") == 0.5 and json.loads(path.read_text()) == {"a": 0.5, "b": 7}


def test_paired_excess_alternates_so_that_a_drifting_clock_cancels(monkeypatch):
    """The paired timing on fake CUDA events: every call takes longer than the one
    before (a clock that falls as the GPU heats), and the slowed op costs 3% more
    than the op at the same moment.  Timed ABBA, the drift cancels and the excess
    comes out 3%; both ops are called equally often."""
    from tests import slow_impls

    now = [0.0]
    calls = {"base": 0, "slowed": 0}

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = now[0]

        def elapsed_time(self, end):
            return end.t - self.t

    def op(name, cost):
        def call():
            calls[name] += 1
            now[0] += cost * (1.0 + 1e-3 * sum(calls.values()))  # 0.1% slower a call
        return call

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    got = slow_impls._paired_excess(op("base", 1.0), op("slowed", 1.03), budget_s=0.04)
    assert abs(got - 0.03) < 0.003, got
    assert calls["base"] == calls["slowed"] + 3  # the three calls that size the run
