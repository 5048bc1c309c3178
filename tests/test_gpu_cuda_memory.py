"""The hand-written CUDA kernels of the memory-bound workloads, on the GPU.

Every shape of the cpu and quick presets plus shapes picked to reach each
plan of ksuite::plan_rows (registers, shared memory, two reads) with odd
sizes and misaligned base pointers; fresh random inputs, allocator poisoned
with NaN so an unwritten output element fails; opcheck for every op.
"""
from __future__ import annotations

import zlib

import pytest
import torch

from suite import cuda_build
from suite.verify import check, poison_allocator
from suite.workload import Case, discover

pytestmark = pytest.mark.gpu

IMPLS = [("gelu", "cuda"), ("gelu", "cuda:scalar"), ("residual_layernorm_gelu", "cuda"),
         ("softmax", "cuda")]
DTYPES = ("float32", "float16", "bfloat16")
# Beyond the presets: every plan (registers, cluster/shared memory, streaming),
# odd widths, and the boundaries between plans.
EXTRA = {
    "gelu": [{"N": 3}, {"N": 4099}, {"N": 1 << 20}],
    "softmax": [{"M": 7, "N": 20000}, {"M": 5, "N": 70001}, {"M": 300, "N": 65536},
                {"M": 2, "N": 1_000_003}, {"M": 3, "N": 600_000},
                {"M": 33, "N": 1024}, {"M": 9, "N": 1025}, {"M": 3, "N": 16385}],
    "residual_layernorm_gelu": [{"M": 5, "N": 50000}, {"M": 3, "N": 100003}, {"M": 130, "N": 65536},
                                {"M": 2, "N": 500_001}, {"M": 3, "N": 600_000},
                                {"M": 33, "N": 1024}, {"M": 9, "N": 1025}, {"M": 3, "N": 16385}],
}


def _cases():
    registry = discover()
    out = []
    for wl_name, impl_name in IMPLS:
        wl = registry.workloads[wl_name]
        shapes = wl.presets["cpu"] + wl.presets["quick"] + EXTRA[wl_name]
        for shape in shapes:
            for dtype in DTYPES:
                case = Case.make(wl_name, dtype, **shape)
                out.append(pytest.param(impl_name, case, id=f"{impl_name}-{case}"))
    return out


def _run_and_check(impl_name: str, case: Case, inputs: dict):
    registry = discover()
    wl = registry.workloads[case.workload]
    impl = registry.get(case.workload, impl_name)
    assert impl.check_available("cuda") is None
    assert impl.supports(case) is None
    poison_allocator("cuda", wl.min_bytes(case))
    out = impl.fn(**inputs)
    torch.cuda.synchronize()
    result = check(out, wl.reference(case, inputs), wl.tolerance(case))
    assert result.correct, f"{impl_name} {case}: {result.message}"
    assert out.dtype == next(v for v in inputs.values() if isinstance(v, torch.Tensor)).dtype


@pytest.mark.parametrize("impl_name,case", _cases())
def test_matches_reference(impl_name, case):
    wl = discover().workloads[case.workload]
    seed = zlib.crc32(f"{impl_name}|{case}".encode())
    _run_and_check(impl_name, case, wl.make_inputs(case, "cuda", seed))


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values at a base address 1 element past a 16-byte boundary."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


MISALIGNED = [("gelu", "cuda", {"N": 100_000}), ("softmax", "cuda", {"M": 64, "N": 512}),
              ("softmax", "cuda", {"M": 4, "N": 40000}),
              ("residual_layernorm_gelu", "cuda", {"M": 64, "N": 1024})]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wl_name,impl_name,shape", MISALIGNED)
def test_misaligned_inputs_fall_back(wl_name, impl_name, shape, dtype):
    case = Case.make(wl_name, dtype, **shape)
    wl = discover().workloads[wl_name]
    inputs = {k: _misaligned(v) if isinstance(v, torch.Tensor) else v
              for k, v in wl.make_inputs(case, "cuda", 7).items()}
    assert inputs["x"].data_ptr() % 16 != 0
    _run_and_check(impl_name, case, inputs)


OPCHECK = [
    ("gelu", "gelu", {"N": 1000}),
    ("gelu", "gelu_scalar", {"N": 1000}),
    ("softmax", "softmax", {"M": 37, "N": 300}),
    ("residual_layernorm_gelu", "residual_layernorm_gelu", {"M": 37, "N": 300}),
]


@pytest.mark.parametrize("wl_name,op,shape", OPCHECK, ids=[o for _, o, _ in OPCHECK])
def test_opcheck(wl_name, op, shape):
    registry = discover()
    impl = registry.get(wl_name, "cuda")
    wl = registry.workloads[wl_name]
    inputs = wl.make_inputs(Case.make(wl_name, "float32", **shape), "cuda", 3)
    impl.fn(**inputs)  # builds and registers the fake implementation
    assert cuda_build.last_build_seconds(wl_name) is not None
    overload = getattr(torch.ops.kernel_suite, op).default
    torch.library.opcheck(overload, tuple(inputs.values()))


_BOUNDARY = """
import pytest, torch
from suite.workload import discover
registry = discover()
gelu = registry.get("gelu", "cuda")
x = torch.randn(64, 64, device="cuda")
gelu.fn(x)
with pytest.raises(RuntimeError, match="contiguous"):
    torch.ops.kernel_suite.gelu(x.t())
with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
    torch.ops.kernel_suite.gelu(x.double())
rlg = registry.get("residual_layernorm_gelu", "cuda")
w, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
rlg.fn(x, x, w, b, 1e-5)
with pytest.raises(RuntimeError, match="weight must have shape"):
    torch.ops.kernel_suite.residual_layernorm_gelu(x, x, torch.randn(63, device="cuda"), b, 1e-5)
with pytest.raises(RuntimeError, match="one dtype"):
    torch.ops.kernel_suite.residual_layernorm_gelu(x, x.half(), w, b, 1e-5)
print("boundary checks ok")
"""


def test_boundary_checks_speak_plainly():
    # In a child process: a check that crashes instead of raising (seen on the
    # H200 image) then fails this test rather than ending the whole session.
    from tests.helpers import run_python

    run_python(_BOUNDARY, expect="boundary checks ok")


def test_runs_under_torch_compile():
    registry = discover()
    softmax = registry.get("softmax", "cuda")
    x = torch.randn(100, 700, device="cuda")
    softmax.fn(x)
    compiled = torch.compile(lambda t: torch.ops.kernel_suite.softmax(t) * 2.0, fullgraph=True)
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 2.0)
