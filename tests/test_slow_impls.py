"""The gate's test plugin (tests/slow_impls.py): its slices of the work, and the extra call."""
from __future__ import annotations

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
