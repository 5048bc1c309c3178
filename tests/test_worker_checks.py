"""The worker's check of what was timed, and its roofs, on the CPU.

The timer is replaced by one that calls every input set's closure a few times
and reports chosen times under a chosen L2 label, so that a cold-L2 row above
its roof and a graph input set gone wrong can be produced without a GPU.
"""
import dataclasses
import math

import pytest
import torch

from suite import roofline, timing, worker
from suite.workload import Case, Implementation, Workload, discover

REG = discover(["tests.fault_impls"])
BANDWIDTHS = {0.0: 80.0, 0.5: 100.0, 2.0 / 3.0: 110.0, 1.0: 120.0}


def _opts(timers=("wall",)):
    return worker.Options(device="cpu", timers=timers, preset="cpu", seed=1, peaks_gbps=100.0,
                          peaks_tflops={"float32": 1.0, "tf32": 2.0, "tf32x3": 1.5, "float16": 1.0, "bfloat16": 1.0},
                          bandwidths=BANDWIDTHS, roofline=True)


def _fake_measure(l2: str, ms_of_bound: float | None = None, ms: float = 1.0):
    """A timer that runs each call three times and reports ``ms`` (or the row's
    bound over ``ms_of_bound``), labelled with ``l2``."""
    state = {}

    def measure(calls, device, timer, protocol=None, **limits):
        for _ in range(3):
            for c in calls:
                c()
        t = state["bound"] / ms_of_bound if ms_of_bound else ms
        return timing.Timing([t, t, t], timer, l2)

    return measure, state


def _run(impl, case, timers=("wall",), **opts):
    wl = REG.workloads[case.workload]
    inputs = wl.make_inputs(case, "cpu", 3)
    ref = wl.reference(case, inputs)
    extra = []

    def more(n):
        while len(extra) < n:
            extra.append(wl.make_inputs(case, "cpu", 4 + len(extra)))
        return extra[:n]

    def reference_of(i):
        sets = [inputs] + extra
        return ref if i == 0 else wl.reference(case, sets[i]), wl.row_condition(case, sets[i])

    return worker.run_impl(wl, case, impl, inputs, ref, dataclasses.replace(_opts(timers), **opts), more, reference_of,
                           wl.row_condition(case, inputs))


def test_each_workload_declares_its_traffic_mix():
    for wl in REG.workloads.values():
        assert type(wl).write_bytes is not Workload.write_bytes, wl.name
        for preset in ("cpu", "quick"):
            for case in wl.cases(preset):
                r, w = wl.read_bytes(case), wl.write_bytes(case)
                assert r > 0 and w > 0 and r + w == pytest.approx(wl.min_bytes(case)), case
    frac = lambda name, **dims: (lambda wl, c: wl.read_bytes(c) / wl.min_bytes(c))(  # noqa: E731
        REG.workloads[name], Case.make(name, "bfloat16", **dims))
    assert frac("gelu", N=1000) == 0.5 and frac("softmax", M=8, N=64) == 0.5
    assert frac("residual_layernorm_gelu", M=32768, N=4096) == pytest.approx(2 / 3, abs=1e-4)
    assert frac("gemm", M=1, N=8192, K=8192) > 0.999
    assert frac("attention", B=1, H=1, S=64, D=64, causal=0) == 0.75


def test_a_row_carries_the_roof_of_its_own_mix(monkeypatch):
    monkeypatch.setattr(worker, "measure", _fake_measure("n/a")[0])
    (row,) = _run(REG.get("residual_layernorm_gelu", "eager"),
                  Case.make("residual_layernorm_gelu", "float32", M=37, N=1000))
    assert row["status"] == "ok"
    expect = roofline.mix_gbps(row["read_bytes"], row["write_bytes"], BANDWIDTHS)
    assert row["peak_gbps"] == pytest.approx(expect) and 110.0 < row["peak_gbps"] < 111.0
    assert (row["copy_gbps"], row["read_gbps"], row["write_gbps"], row["mix21_gbps"]) == (100, 120, 80, 110)
    assert row["bound_ms"] == pytest.approx(roofline.bound_ms(row["flops"], row["min_bytes"],
                                                              row["peak_gbps"], 1.0))
    assert row["math"] == "float32" and row["check"] is None and row["elem_err"] < row["elem_tol"]


def test_tf32_rows_get_the_tf32_roof(monkeypatch):
    monkeypatch.setattr(worker, "measure", _fake_measure("n/a")[0])
    (row,) = _run(REG.get("gemm", "triton:tf32"), Case.make("gemm", "float32", M=37, N=129, K=71))
    assert row["status"] == "ok" and row["math"] == "tf32" and row["peak_tflops"] == 2.0


def test_tf32x3_rows_get_their_roof_and_float32s_check(monkeypatch):
    monkeypatch.setattr(worker, "measure", _fake_measure("n/a")[0])
    impl = REG.get("gemm", "triton:tf32x3")
    (row,) = _run(impl, Case.make("gemm", "float32", M=37, N=129, K=71))
    assert row["status"] == "ok" and row["math"] == "tf32x3" and row["peak_tflops"] == 1.5
    assert impl.tolerance is None  # the workload's float32 tolerance, no TF32 allowance


def test_the_tf32x3_roof_is_a_third_of_tf32s():
    from suite.ceilings import Ceilings

    ceil = Ceilings("cuda", "x", "f", 1.0, {"float32": 50.0, "tf32": 420.0, "bfloat16": 800.0}, 1.0, 1.0, 1.0,
                    "t", 0.0)
    assert ceil.roofs() == {"float32": 50.0, "tf32": 420.0, "bfloat16": 800.0, "tf32x3": 140.0}
    assert "tf32x3" not in Ceilings("cpu", "x", "f", 1.0, {"float32": 1.0}, 1.0, 1.0, 1.0, "t", 0.0).roofs()


@pytest.mark.parametrize("l2,over,status", [("cold-clean", 1.05, "suspect"), ("cold-rotate", 1.03, "suspect"),
                                            ("cold-clean", 1.01, "ok"), ("n/a", 3.0, "ok"),
                                            ("warm", 3.0, "ok")])
def test_a_cold_row_above_its_roof_is_suspect(monkeypatch, l2, over, status):
    measure, state = _fake_measure(l2, ms_of_bound=over)
    monkeypatch.setattr(worker, "measure", measure)
    wl, case = REG.workloads["gelu"], Case.make("gelu", "float32", N=1823)
    state["bound"] = worker.base_row(wl, case, "torch", _opts())["bound_ms"]
    (row,) = _run(REG.get("gelu", "torch"), case)
    assert row["status"] == status and row["sol"] == pytest.approx(over)
    if status == "suspect":
        assert f"SOL {over:.3f} > 1.02 of its memory roof (100 GB/s for 50% reads)" in row["error"]
        assert row["correct"] and not math.isnan(row["ms_median"])
    else:
        assert row["error"] is None


def test_the_last_timed_call_is_checked(monkeypatch):
    monkeypatch.setattr(worker, "measure", _fake_measure("n/a")[0])
    (row,) = _run(REG.get("gelu", "fault:timed-wrong"), Case.make("gelu", "bfloat16", N=1824))
    assert row["status"] == "incorrect" and row["check"] == "timed:normwise"
    assert row["error"].startswith("the last timed call: ") and row.get("ms_median") is None


def test_every_graph_input_set_is_checked(monkeypatch):
    """Right on the checked input set, wrong on the rotation's second set."""
    monkeypatch.setattr(worker, "measure", _fake_measure("cold-rotate")[0])
    case = Case.make("gelu", "bfloat16", N=65537)
    first = {}

    def fn(x):
        first.setdefault("ptr", x.data_ptr())
        y = torch.nn.functional.gelu(x)
        if x.data_ptr() != first["ptr"]:
            y[-1] = -y[-1] - 1.0  # one element of one set
        return y

    (row,) = _run(Implementation("gelu", "probe", fn), case, timers=("graph",))
    assert row["status"] == "incorrect" and row["check"] == "timed:elementwise"
    assert row["error"].startswith("graph input set 1 of 2: element (row 0, column 65536)")


def test_the_checked_call_is_poisoned_in_its_dtype(monkeypatch):
    monkeypatch.setattr(worker, "measure", _fake_measure("n/a")[0])
    for dtype in ("float32", "float16", "bfloat16"):
        (row,) = _run(REG.get("gelu", "fault:skip-last"), Case.make("gelu", dtype, N=3002))
        assert row["status"] == "incorrect" and row["check"] == "finite", row


def test_each_measurement_starts_after_the_settle(monkeypatch):
    """--settle-ms: an idle wait of that length right before every measurement
    (the repeat's too), none by default."""
    events = []
    measure = _fake_measure("n/a")[0]
    monkeypatch.setattr(worker, "measure", lambda *a, **k: events.append("measure") or measure(*a, **k))
    monkeypatch.setattr(timing.time, "sleep", lambda s: events.append(("sleep", s)))
    case = Case.make("gelu", "float32", N=1000)
    (row,) = _run(REG.get("gelu", "eager"), case, protocol=timing.Protocol(settle_ms=250.0), repeat=True)
    assert row["status"] == "ok"
    assert events == [("sleep", 0.25), "measure", ("sleep", 0.25), "measure"]
    events.clear()
    _run(REG.get("gelu", "eager"), case)
    assert events == ["measure"]
