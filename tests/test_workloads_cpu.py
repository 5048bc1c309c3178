"""Every PyTorch-level implementation that runs on the CPU, at every `cpu`
shape and dtype it claims, against the float64 reference under the runner's
whole rule (suite.verify.check_case: dtype, normwise and elementwise)."""
import pytest
import torch

from suite import verify
from suite.workload import DTYPES, Case, discover

REG = discover()
CHEAP = ("eager", "torch")


def _params(backends):
    out = []
    for name in sorted(REG.workloads):
        wl = REG.workloads[name]
        for impl in REG.for_workload(name):
            if impl.backend not in backends or impl.check_available("cpu"):
                continue
            for case in wl.cases("cpu"):
                if impl.supports(case) is None:
                    out.append(pytest.param(impl, case, id=f"{impl.name}-{case.workload}-{case.label}-{case.dtype}"))
    return out


def _check(impl, case, seed=1234):
    wl = REG.workloads[case.workload]
    inputs = wl.make_inputs(case, "cpu", seed)
    ref = wl.reference(case, inputs)
    impl.fn(**inputs)  # warm-up, as the runner does: compilation happens outside the poison
    with verify.poisoned_empty():
        out = impl.fn(**inputs)
    # normwise, elementwise and dtype, as the runner checks
    result = verify.check_case(wl, case, out, ref, impl)
    assert result.correct, f"{impl.name} {case}: {result.check}: {result.message}"


@pytest.mark.parametrize("impl,case", _params(CHEAP))
def test_library_and_eager_backends(impl, case):
    _check(impl, case)


# torch.compile costs seconds per graph on the CPU: one shape per workload,
# and two shapes for the dynamic variant to show one artifact serving both.
@pytest.mark.parametrize("workload", sorted(REG.workloads))
def test_compile_default(workload):
    case = REG.workloads[workload].cases("cpu", ["float32"])[1]
    _check(REG.get(workload, "compile"), case)


def test_compile_dynamic_serves_two_shapes():
    impl = REG.get("softmax", "compile:dynamic")
    for case in REG.workloads["softmax"].cases("cpu", ["float32"])[2:4]:
        _check(impl, case)


def test_compile_max_autotune_one_case():
    _check(REG.get("gelu", "compile:max-autotune"), Case.make("gelu", "float32", N=1823))


def test_inputs_are_random_and_fresh_per_seed():
    for wl in REG.workloads.values():
        case = wl.cases("cpu")[-1]
        a = wl.make_inputs(case, "cpu", 1)
        b = wl.make_inputs(case, "cpu", 2)
        tensors = [k for k, v in a.items() if isinstance(v, torch.Tensor)]
        assert tensors
        for k in tensors:
            assert a[k].dtype in (torch.float32, torch.float16, torch.bfloat16)
            assert a[k].float().abs().sum() > 0, "inputs must never be zeros"
            assert not torch.equal(a[k], b[k])


def test_reference_is_float64_and_catches_a_wrong_answer():
    for wl in REG.workloads.values():
        case = wl.cases("cpu", ["float32"])[-1]
        inputs = wl.make_inputs(case, "cpu", 7)
        ref = wl.reference(case, inputs)
        assert ref.dtype == torch.float64
        assert not verify.check((ref * 1.05).float(), ref, wl.tolerance(case)).correct


def test_every_workload_has_every_dtype_and_irregular_cpu_shapes():
    for wl in REG.workloads.values():
        assert set(wl.dtypes) == set(DTYPES)
        sizes = [v for s in wl.presets["cpu"] for v in s.values()]
        assert any(v > 1 and v & (v - 1) for v in sizes), f"{wl.name}: no non-power-of-two size"
        for preset in ("quick", "full"):
            assert wl.presets[preset], f"{wl.name}: empty {preset} preset"
