"""The hand-written CUDA kernels of the memory-bound workloads, on the GPU.

Every shape of the cpu and quick presets plus shapes picked to reach each
plan (registers, cluster shared memory, two reads) with odd sizes and
misaligned base pointers; every run-time variant (gelu_v, softmax_v,
residual_layernorm_gelu_v); fresh random inputs, allocator poisoned with NaN
so an unwritten output element fails; opcheck for every op; boundary checks
that must raise, each in a child process.
"""
from __future__ import annotations

import math
import zlib
from importlib import import_module

import pytest
import torch

from suite import cuda_build
from suite.verify import check_case, poison_allocator
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
    result = check_case(wl, case, out, wl.reference(case, inputs), inputs=inputs)
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
              ("softmax", "cuda", {"M": 4, "N": 40000}), ("softmax", "cuda", {"M": 3, "N": 90533}),
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
    ("gelu", "gelu", {"N": 1000}, ()),
    ("gelu", "gelu_v", {"N": 1000}, (2,)),
    ("gelu", "gelu_scalar", {"N": 1000}, ()),
    ("softmax", "softmax", {"M": 37, "N": 300}, ()),
    ("softmax", "softmax_v", {"M": 37, "N": 1024}, (4,)),
    ("softmax", "softmax_v", {"M": 37, "N": 300}, (15,)),
    ("softmax", "softmax_v", {"M": 37, "N": 128}, (11,)),
    ("softmax", "softmax_v", {"M": 37, "N": 7}, (35,)),
    ("residual_layernorm_gelu", "residual_layernorm_gelu", {"M": 37, "N": 300}, ()),
    ("residual_layernorm_gelu", "residual_layernorm_gelu_v", {"M": 37, "N": 304}, (2,)),
    ("residual_layernorm_gelu", "residual_layernorm_gelu_v", {"M": 37, "N": 301}, (18,)),
    ("residual_layernorm_gelu", "residual_layernorm_gelu_v", {"M": 5, "N": 8193}, (20,)),
]


@pytest.mark.parametrize("wl_name,op,shape,extra", OPCHECK, ids=[o for _, o, _, _ in OPCHECK])
def test_opcheck(wl_name, op, shape, extra):
    registry = discover()
    impl = registry.get(wl_name, "cuda")
    wl = registry.workloads[wl_name]
    inputs = wl.make_inputs(Case.make(wl_name, "float32", **shape), "cuda", 3)
    impl.fn(**inputs)  # builds and registers the fake implementation
    assert cuda_build.last_build_seconds(wl_name) is not None
    overload = getattr(torch.ops.kernel_suite, op).default
    torch.library.opcheck(overload, tuple(inputs.values()) + extra)


# Every op's boundary checks must raise RuntimeError (not crash) for a wrong
# dtype, a wrong shape, a non-contiguous input and a tensor on the CPU.  On
# the H200 image a check whose message streamed a number segfaulted; the
# checks now build their messages with ksuite::msg (no std::ostream).  Each
# case runs in a child process, so a crash fails this test with the case's
# name instead of ending the pytest session.
_BOUNDARY = """
import importlib
import torch
for wl in ("gelu", "softmax", "residual_layernorm_gelu"):
    importlib.import_module(f"implementations.{wl}.cuda").ops()  # builds (or finds) and loads
ks = torch.ops.kernel_suite
x = torch.randn(64, 64, device="cuda")
w, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
cases = {
    "gelu dtype": (lambda: ks.gelu(x.double()), "float32, float16 or bfloat16"),
    "gelu int dtype": (lambda: ks.gelu(x.int()), "float32, float16 or bfloat16"),
    "gelu contiguous": (lambda: ks.gelu(x.t()), "contiguous"),
    # a lone CPU input never reaches the op: the dispatcher has no CPU kernel
    "gelu cpu": (lambda: ks.gelu(x.cpu()), "'CPU' backend"),
    "gelu_v variant": (lambda: ks.gelu_v(x, 99), "variant must be"),
    "gelu_v variant 3": (lambda: ks.gelu_v(x, 3), "variant must be"),  # a number no design has
    "gelu_v contiguous": (lambda: ks.gelu_v(x.t(), 1), "contiguous"),
    "gelu_scalar dtype": (lambda: ks.gelu_scalar(x.double()), "float32, float16 or bfloat16"),
    "gelu_scalar contiguous": (lambda: ks.gelu_scalar(x.t()), "contiguous"),
    "softmax dtype": (lambda: ks.softmax(x.double()), "float32, float16 or bfloat16"),
    "softmax shape": (lambda: ks.softmax(torch.tensor(1.0, device="cuda")), "at least one dimension"),
    "softmax contiguous": (lambda: ks.softmax(x.t()), "contiguous"),
    "softmax cpu": (lambda: ks.softmax(x.cpu()), "'CPU' backend"),
    "softmax_v variant": (lambda: ks.softmax_v(x, -1), "variant must be"),
    "softmax_v variant high": (lambda: ks.softmax_v(x, 37), "variant must be"),
    "rlg dtype": (lambda: ks.residual_layernorm_gelu(x.double(), x.double(), w.double(), b.double(), 1e-5),
                  "float32, float16 or bfloat16"),
    "rlg mixed dtype": (lambda: ks.residual_layernorm_gelu(x, x.half(), w, b, 1e-5), "one dtype"),
    "rlg weight shape": (lambda: ks.residual_layernorm_gelu(x, x, torch.randn(63, device="cuda"), b, 1e-5),
                         "weight must have shape"),
    "rlg bias shape": (lambda: ks.residual_layernorm_gelu(x, x, w, torch.randn(2, 64, device="cuda"), 1e-5),
                       "bias must have shape"),
    "rlg r shape": (lambda: ks.residual_layernorm_gelu(x, x[:32], w, b, 1e-5), "r has shape"),
    "rlg contiguous": (lambda: ks.residual_layernorm_gelu(x.t(), x, w, b, 1e-5), "contiguous"),
    "rlg cpu": (lambda: ks.residual_layernorm_gelu(x.cpu(), x, w, b, 1e-5), "CUDA tensor"),
    "rlg device": (lambda: ks.residual_layernorm_gelu(x, x.cpu(), w, b, 1e-5), "is on cpu"),
    "rlg eps": (lambda: ks.residual_layernorm_gelu(x, x, w, b, -1.0), "eps must be positive"),
    "rlg_v variant": (lambda: ks.residual_layernorm_gelu_v(x, x, w, b, 1e-5, 22), "variant must be"),
    "rlg_v shape": (lambda: ks.residual_layernorm_gelu_v(x, x, torch.randn(63, device="cuda"), b, 1e-5, 1),
                    "weight must have shape"),
}
for name, (call, match) in cases.items():
    print("case", name, flush=True)
    try:
        call()
    except RuntimeError as exc:
        assert match in str(exc), (name, str(exc)[:300])
    else:
        raise AssertionError(name + ": no error")
# The ops still work after all those errors.
torch.testing.assert_close(ks.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
print("boundary checks ok")
"""


def test_boundary_checks_raise_not_crash():
    # In a child process: a check that crashes instead of raising (seen on the
    # H200 image) then fails this test, naming the last case, rather than
    # ending the whole session.
    from tests.helpers import run_python

    run_python(_BOUNDARY, expect="boundary checks ok")


# Every run-time variant of the three row/elementwise ops against the float64
# reference: the plans they exist for, plus shapes that make a variant fall
# back (rows too long for registers, odd widths, misaligned rows).
VARIANT_SHAPES = {
    "gelu": [{"N": 7}, {"N": 4099}, {"N": 3_000_017}, {"N": (1 << 22) + 5}],
    "softmax": [{"M": 300, "N": 128}, {"M": 1823, "N": 781}, {"M": 257, "N": 4096}, {"M": 7, "N": 131073},
                {"M": 5, "N": 131072}, {"M": 3, "N": 40000}, {"M": 2, "N": 600_000}, {"M": 4096, "N": 1000},
                # persistent plans (8-10): several rows a cluster, uneven slices (bf16 4 x 2049 packs, the
                # last 2046; float32 8 x 2049, the last 2043), buffers and exchange slots reused
                {"M": 521, "N": 65544}],
    "residual_layernorm_gelu": [{"M": 37, "N": 1000}, {"M": 1823, "N": 781}, {"M": 130, "N": 1024},
                                {"M": 33, "N": 8192}, {"M": 5, "N": 50000}, {"M": 3, "N": 100003},
                                {"M": 9, "N": 16385}, {"M": 11, "N": 7}, {"M": 64, "N": 4099},
                                {"M": 17, "N": 4104},
                                # persistent TMA (8-12): several rows a CTA with a ragged last pass (bf16 32768
                                # on one CTA; float32 on clusters of 2), a partial last pack round (16392: 2049
                                # packs bf16, float32 2 x 2049), uneven cluster slices (98312: 4 x 3073 bf16,
                                # the last 3070; 8 x 3073 float32, the last 3067), too wide for plan 9 (300000)
                                {"M": 300, "N": 32768}, {"M": 7, "N": 16392}, {"M": 140, "N": 98312},
                                {"M": 2, "N": 300000},
                                # plans 13-16: a full row in float32 (one-round statistics), 2048 of
                                # 4096 packs in bf16 (the two-pass fallback)
                                {"M": 150, "N": 16384}],
}
VARIANTS = {"gelu": (0, 1, 2, 4, 5, 6, 7, 8), "softmax": range(0, 37), "residual_layernorm_gelu": range(0, 22)}
SOFTMAX_HALF2 = (28, 29, 30, 31, 32, 33)  # exps kept as half2: 16-bit rows only


def _variant_call(wl_name: str, variant: int):
    ks = torch.ops.kernel_suite
    if wl_name == "gelu":
        return lambda x: ks.gelu_v(x, variant)
    if wl_name == "softmax":
        return lambda x: ks.softmax_v(x, variant)
    return lambda x, r, weight, bias, eps: ks.residual_layernorm_gelu_v(x, r, weight, bias, float(eps), variant)


def _variant_cases():
    out = []
    for wl_name, shapes in VARIANT_SHAPES.items():
        for variant in VARIANTS[wl_name]:
            # (softmax's half2 plans take max.f16x2 for float16 where bf16 takes max.bf16x2)
            half2 = wl_name == "softmax" and variant in SOFTMAX_HALF2
            for shape in shapes:
                for dtype in ("float32", "bfloat16") + (("float16",) if half2 else ()):
                    case = Case.make(wl_name, dtype, **shape)
                    out.append(pytest.param(wl_name, variant, case, id=f"{wl_name}-v{variant}-{case}"))
    return out


@pytest.mark.parametrize("wl_name,variant,case", _variant_cases())
def test_variants_match_reference(wl_name, variant, case):
    wl = discover().workloads[wl_name]
    import_module(f"implementations.{wl_name}.cuda").ops()  # builds, registers the variant ops
    inputs = wl.make_inputs(case, "cuda", zlib.crc32(f"v{variant}|{case}".encode()))
    poison_allocator("cuda", wl.min_bytes(case))
    out = _variant_call(wl_name, variant)(**inputs)
    torch.cuda.synchronize()
    result = check_case(wl, case, out, wl.reference(case, inputs), inputs=inputs)
    assert result.correct, f"variant {variant} {case}: {result.message}"


# A row whose every element is -inf has no softmax: torch and the float64
# reference give NaN, and so must every plan; rows beside it keep their softmax.
# Shapes that reach every plan: the variant shapes, short unaligned rows
# (tiles, 34 and 35), an unaligned row past the register plans (36).
MASKED_ROW_SHAPES = VARIANT_SHAPES["softmax"] + [{"M": 37, "N": 7}, {"M": 1237, "N": 25}, {"M": 37, "N": 781},
                                                 {"M": 9, "N": 20003}, {"M": 7, "N": 90533}]


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("variant", VARIANTS["softmax"])
def test_softmax_rows_of_minus_inf_are_nan(variant, dtype):
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    for shape in MASKED_ROW_SHAPES:
        case = Case.make("softmax", dtype, **shape)
        x = wl.make_inputs(case, "cuda", zlib.crc32(f"masked v{variant}|{case}".encode()))["x"]
        masked = torch.arange(shape["M"], device="cuda") % 3 == 1
        x[masked] = -math.inf
        # Finite poison: an output element left unwritten reads 0.25, not NaN.
        blocks = [torch.full_like(x, 0.25) for _ in range(4)]
        del blocks
        out = torch.ops.kernel_suite.softmax_v(x, variant)
        torch.cuda.synchronize()
        assert out[masked].isnan().all(), f"variant {variant} {case}: a row of -inf gave numbers"
        kept = Case.make("softmax", dtype, M=int((~masked).sum()), N=shape["N"])
        xk = x[~masked]
        result = check_case(wl, kept, out[~masked], wl.reference(kept, {"x": xk}), inputs={"x": xk})
        assert result.correct, f"variant {variant} {case}, rows beside the -inf ones: {result.message}"

# softmax's short-row (11-14) and any-alignment (15-17, 26) plans at irregular
# shapes in all three dtypes: tiny rows, rows of one element, rows a pack
# short of or past a boundary of the short-row plans (128 packs) and of the
# lane-group sizes, unaligned rows up to the longest that fit registers,
# rows too long for them (auto runs), fewer rows than a block holds.
SOFTMAX_NEW_VARIANTS = (*range(11, 18), 26)
SOFTMAX_NEW_SHAPES = [{"M": 7, "N": 7}, {"M": 1823, "N": 781}, {"M": 3, "N": 127}, {"M": 1000, "N": 128},
                      {"M": 5, "N": 513}, {"M": 2, "N": 1}, {"M": 33, "N": 8}, {"M": 19, "N": 24},
                      {"M": 67, "N": 264}, {"M": 11, "N": 1000}, {"M": 9, "N": 1024}, {"M": 3, "N": 1032},
                      {"M": 6, "N": 4097}, {"M": 5, "N": 16383}, {"M": 3, "N": 32767}, {"M": 2, "N": 65537}]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SOFTMAX_NEW_SHAPES, ids=lambda s: f"M{s['M']}xN{s['N']}")
@pytest.mark.parametrize("variant", SOFTMAX_NEW_VARIANTS)
def test_softmax_short_and_unaligned_variants(variant, shape, dtype):
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    case = Case.make("softmax", dtype, **shape)
    inputs = wl.make_inputs(case, "cuda", zlib.crc32(f"new v{variant}|{case}".encode()))
    poison_allocator("cuda", wl.min_bytes(case))
    out = torch.ops.kernel_suite.softmax_v(inputs["x"], variant)
    torch.cuda.synchronize()
    result = check_case(wl, case, out, wl.reference(case, inputs), inputs=inputs)
    assert result.correct, f"variant {variant} {case}: {result.message}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", SOFTMAX_NEW_VARIANTS)
def test_softmax_new_variants_misaligned_base(variant, dtype):
    """x one element past a 16-byte boundary, y from the allocator: the rows
    of x and y are misaligned differently, so every plan here runs auto."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    for shape in ({"M": 64, "N": 512}, {"M": 37, "N": 781}):
        case = Case.make("softmax", dtype, **shape)
        x = _misaligned(wl.make_inputs(case, "cuda", 11)["x"])
        assert x.data_ptr() % 16 != 0
        poison_allocator("cuda", wl.min_bytes(case))
        out = torch.ops.kernel_suite.softmax_v(x, variant)
        torch.cuda.synchronize()
        result = check_case(wl, case, out, wl.reference(case, {"x": x}), inputs={"x": x})
        assert result.correct, f"variant {variant} {case} misaligned: {result.message}"


# softmax's shared-memory tile plans (34: a tile a block, 35: persistent
# blocks, the next tile in flight) for rows of 1..256 columns at any
# alignment, against the float64 reference under the harness's rule
# (normwise and elementwise): every lane-group width (1 to 32 lanes a row)
# and columns a lane (1 to 8, all slots full or the last one ragged), one
# row, fewer rows than a tile's 16-byte unit, a partial last tile (prime
# M), 100003 rows, and 257 columns (past the plans: auto runs).
SOFTMAX_TILE_VARIANTS = (34, 35)
SOFTMAX_TILE_SHAPES = ([{"M": m, "N": n} for n in (1, 2, 3, 4, 5, 6, 7, 8, 25, 31, 33, 63, 64)
                        for m in (1, 3, 1237, 100003)]
                       + [{"M": m, "N": n} for n in (100, 128, 200, 255, 256, 257) for m in (3, 1237)])


def _softmax_v_check(variant: int, case: Case, x: torch.Tensor, what: str = ""):
    """softmax_v(x, variant) into poisoned memory, checked against float64; returns the output."""
    wl = discover().workloads["softmax"]
    poison_allocator("cuda", wl.min_bytes(case))
    out = torch.ops.kernel_suite.softmax_v(x, variant)
    torch.cuda.synchronize()
    result = check_case(wl, case, out, wl.reference(case, {"x": x}), inputs={"x": x})
    assert result.correct, (f"variant {variant} {case}{what} (x at {x.data_ptr() % 16} mod 16): "
                            f"{result.message}")
    return out


def _softmax_v_run(variant: int, shape: dict, dtype: str, tag: str):
    """softmax_v at a shape on fresh inputs seeded by the test, checked as _softmax_v_check does."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    case = Case.make("softmax", dtype, **shape)
    x = wl.make_inputs(case, "cuda", zlib.crc32(f"{tag} v{variant}|{case}".encode()))["x"]
    _softmax_v_check(variant, case, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SOFTMAX_TILE_SHAPES, ids=lambda s: f"M{s['M']}xN{s['N']}")
@pytest.mark.parametrize("variant", SOFTMAX_TILE_VARIANTS)
def test_softmax_tile_variants(variant, shape, dtype):
    _softmax_v_run(variant, shape, dtype, "tile")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (7, 25))
@pytest.mark.parametrize("variant", SOFTMAX_TILE_VARIANTS)
def test_softmax_tile_variants_many_tiles(variant, n, dtype):
    """The fuzz preset's millions of short rows (3021808 x 7): thousands of tiles, several
    for each persistent block of plan 35 (its buffers and copy groups
    reused), the last one partial."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    case = Case.make("softmax", dtype, M=3021808 if n == 7 else 1_000_003, N=n)
    x = wl.make_inputs(case, "cuda", zlib.crc32(f"tiles v{variant}|{case}".encode()))["x"]
    _softmax_v_check(variant, case, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", SOFTMAX_TILE_VARIANTS)
def test_softmax_tile_variants_misaligned_base(variant, dtype):
    """x 1 to VEC - 1 elements past a 16-byte boundary, y from the allocator:
    every tile has a head and a tail by x's boundaries, and y's packs are
    gathered from the buffer element by element."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for shape in ({"M": 1, "N": 5}, {"M": 1237, "N": 7}, {"M": 1237, "N": 8}, {"M": 3, "N": 25},
                  {"M": 1237, "N": 64}, {"M": 100003, "N": 3}, {"M": 1237, "N": 200}):
        case = Case.make("softmax", dtype, **shape)
        x = wl.make_inputs(case, "cuda", zlib.crc32(f"tile misaligned v{variant}|{case}".encode()))["x"]
        for offset in range(1, vec):
            buf = torch.empty(x.numel() + offset, dtype=x.dtype, device=x.device)
            view = buf[offset:].view(x.shape)
            view.copy_(x)
            assert view.data_ptr() % 16 != 0
            _softmax_v_check(variant, case, view)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (2, 7, 25, 64, 255))
@pytest.mark.parametrize("variant", SOFTMAX_TILE_VARIANTS)
def test_softmax_tile_variants_inf_and_large_values(variant, n, dtype):
    """Rows with -inf entries, one huge entry (a one-hot output), entries
    offset by 1e4 (the max subtracted exactly), both extremes of the dtype
    in one row, and all entries at half the dtype's maximum (a uniform
    output: exp(v - max) must not overflow where v log2 e would)."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    case = Case.make("softmax", dtype, M=1237, N=n)
    x = wl.make_inputs(case, "cuda", zlib.crc32(f"tile special v{variant}|{case}".encode()))["x"].float()
    big = torch.finfo(getattr(torch, dtype)).max / 2
    x[0::5, 0] = -math.inf
    if n > 2:
        x[0::5, n - 1] = -math.inf
    x[1::5, n // 2] = big
    x[2::5] += 1e4
    x[3::5, 0], x[3::5, n - 1] = -big, big
    x[4::5] = big
    _softmax_v_check(variant, case, x.to(getattr(torch, dtype)))


# softmax's plan 36 (the cluster of plan 6 at any alignment: a scalar head
# and tail on rank 0, the body's 16-byte packs over the CTAs), and auto,
# which runs it for unaligned rows too long for registers: N % VEC of 1 to
# VEC - 1 (and 0: no head or tail), more rows than VEC with odd N (a row
# start at every offset within a pack), N just past the register plans'
# 8192 (a cluster of 1), the slow shapes it is for (191 x 90533, 999 x
# 50257, 1567 x 19945), uneven slices on 2-8 CTAs (131073), slices near a
# block's shared memory (bf16 900001: 8 x 220 KB; float32 450001), past it
# (1000003: two reads), a body of no packs (7).
# (the first ones: every N % VEC; row starts at every offset in a pack, just past 8192)
CLUSTER_ALIGNMENTS = [{"M": 9, "N": 20000 + r} for r in range(8)] + [{"M": 17, "N": n} for n in
                                                                     (8193, 8195, 8197, 8199, 8207)]
SOFTMAX_SPLIT_SHAPES = (CLUSTER_ALIGNMENTS
                        + [{"M": 7, "N": 131073}, {"M": 191, "N": 90533}, {"M": 999, "N": 50257},
                           {"M": 1567, "N": 19945}, {"M": 3, "N": 450_001}, {"M": 3, "N": 900_001},
                           {"M": 2, "N": 1_000_003}, {"M": 5, "N": 65536}, {"M": 11, "N": 7}, {"M": 37, "N": 781}])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SOFTMAX_SPLIT_SHAPES, ids=lambda s: f"M{s['M']}xN{s['N']}")
@pytest.mark.parametrize("variant", (36, 0))
def test_softmax_cluster_any_alignment(variant, shape, dtype):
    _softmax_v_run(variant, shape, dtype, "split")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (8193, 20003, 90533, 131073))
@pytest.mark.parametrize("variant", (36, 0))
def test_softmax_cluster_any_alignment_one_finite_element(variant, n, dtype):
    """Rows of -inf but one element: at column 0 (the head, where the row
    starts off a boundary), n // 2 (the body, on a CTA other than rank 0
    where the cluster has several, so rank 0 holds only -inf) or n - 1 (the
    tail).  48 rows of odd n: rows 3k + c (c: the column's case) start at
    every offset within a pack.  The output is one-hot."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    rows = 48
    case = Case.make("softmax", dtype, M=rows, N=n)
    x = torch.full((rows, n), -math.inf, device="cuda")
    cols = torch.tensor([(0, n // 2, n - 1)[r % 3] for r in range(rows)], device="cuda")
    x[torch.arange(rows, device="cuda"), cols] = torch.randn(rows, device="cuda")
    x = x.to(getattr(torch, dtype))
    out = _softmax_v_check(variant, case, x, " (one finite element a row)")
    assert torch.equal(out.float().argmax(-1), cols)
    assert torch.equal(out.float().sum(-1), torch.ones(rows, device="cuda"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cluster_any_alignment_misaligned_base(dtype):
    """x 1 to VEC - 1 elements past a 16-byte boundary, y from the allocator:
    x and y split differently, so plan 36 refuses and auto's one element a
    load cluster (or two reads) runs."""
    wl = discover().workloads["softmax"]
    import_module("implementations.softmax.cuda").ops()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for shape in ({"M": 4, "N": 40000}, {"M": 5, "N": 20001}, {"M": 3, "N": 90533}):
        case = Case.make("softmax", dtype, **shape)
        x = wl.make_inputs(case, "cuda", zlib.crc32(f"split misaligned|{case}".encode()))["x"]
        for offset in range(1, vec):
            buf = torch.empty(x.numel() + offset, dtype=x.dtype, device=x.device)
            view = buf[offset:].view(x.shape)
            view.copy_(x)
            assert view.data_ptr() % 16 != 0
            _softmax_v_check(36, case, view)


@pytest.mark.parametrize("variant", (8, 12, 14, 15, 16, 17))
@pytest.mark.parametrize("dtype,n,shift", (("bfloat16", 32768, 300.0), ("bfloat16", 131072, 300.0),
                                           ("float32", 16384, 30.0)))
def test_rlg_statistics_of_offset_rows(variant, dtype, n, shift):
    """Rows far from zero mean (x + r around `shift` with unit spread): sums
    of squares about zero would lose the variance; the two-pass and the
    merged one-round statistics (plans 14-17) must not.  Full rows, so that
    the one-round path runs (plan 16 on clusters of 2, 8 and 2 CTAs).  (A
    float32 shift of 300 costs ~1e-5 in rounding x + r alone.)"""
    _check_rlg_offset_rows(variant, dtype, n, shift)


def _check_rlg_offset_rows(variant, dtype, n, shift):
    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    case = Case.make("residual_layernorm_gelu", dtype, M=140, N=n)
    inputs = wl.make_inputs(case, "cuda", zlib.crc32(f"offset v{variant}|{case}".encode()))
    inputs["x"] = (inputs["x"].float() + shift).to(inputs["x"].dtype)
    poison_allocator("cuda", wl.min_bytes(case))
    out = torch.ops.kernel_suite.residual_layernorm_gelu_v(
        inputs["x"], inputs["r"], inputs["weight"], inputs["bias"], float(inputs["eps"]), variant)
    torch.cuda.synchronize()
    result = check_case(wl, case, out, wl.reference(case, inputs), inputs=inputs)
    assert result.correct, f"variant {variant} {case} offset rows: {result.message}"


# residual_layernorm_gelu's any-alignment plans (18, 19) at irregular shapes
# in all three dtypes, checked elementwise (one wrong head or tail element a
# row fails): rows of 1 .. VEC - 1 elements (all head, or head and tail with
# no body), a pack and one (VEC + 1, 2 VEC + 1), a pack short of one, odd
# widths whose rows start at every misalignment (many rows), the widths where
# lane groups give way to a block (bf16 1031 / 1033 at 4 packs), the fuzz
# preset's slow unaligned shapes (float32 4721 and 5093; bf16 13437 to
# 25905, fewer rows), the longest rows that fit (bf16 32775 at both pack
# counts, float32 16387) and ones a column past them (auto runs), one row, and
# 16-byte rows (they run there too).  Plan 21 (rows streamed through shared
# memory) takes the same rows.
RLG_UNALIGNED_VARIANTS = (18, 19, 21)
RLG_UNALIGNED_SHAPES = [{"M": 1, "N": 1}, {"M": 7, "N": 1}, {"M": 5, "N": 2}, {"M": 9, "N": 3},
                        {"M": 3, "N": 5}, {"M": 11, "N": 7}, {"M": 37, "N": 9}, {"M": 33, "N": 17},
                        {"M": 19, "N": 15}, {"M": 1, "N": 781}, {"M": 1823, "N": 781}, {"M": 4099, "N": 257},
                        {"M": 67, "N": 1031}, {"M": 67, "N": 1033}, {"M": 300, "N": 4721}, {"M": 129, "N": 5093},
                        {"M": 41, "N": 13437}, {"M": 23, "N": 19379}, {"M": 17, "N": 25905}, {"M": 1, "N": 25905},
                        {"M": 5, "N": 32767}, {"M": 3, "N": 32775}, {"M": 3, "N": 32777}, {"M": 9, "N": 16387},
                        {"M": 9, "N": 16389}, {"M": 33, "N": 1024}, {"M": 5, "N": 8192}]


def _rlg_v(inputs: dict, variant: int) -> torch.Tensor:
    return torch.ops.kernel_suite.residual_layernorm_gelu_v(
        inputs["x"], inputs["r"], inputs["weight"], inputs["bias"], float(inputs["eps"]), variant)


def _check_rlg(case: Case, inputs: dict, out: torch.Tensor, what: str):
    from suite.verify import check_case

    torch.cuda.synchronize()
    wl = discover().workloads["residual_layernorm_gelu"]
    result = check_case(wl, case, out, wl.reference(case, inputs), inputs=inputs)
    assert result.correct, f"{what} {case}: {result.message}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", RLG_UNALIGNED_SHAPES, ids=lambda s: f"M{s['M']}xN{s['N']}")
@pytest.mark.parametrize("variant", RLG_UNALIGNED_VARIANTS)
def test_rlg_unaligned_variants(variant, shape, dtype):
    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    case = Case.make("residual_layernorm_gelu", dtype, **shape)
    inputs = wl.make_inputs(case, "cuda", zlib.crc32(f"unaligned v{variant}|{case}".encode()))
    poison_allocator("cuda", wl.min_bytes(case), inputs["x"].dtype)  # every unwritten element a NaN
    _check_rlg(case, inputs, _rlg_v(inputs, variant), f"variant {variant}")


def _offset(t: torch.Tensor, elems: int) -> torch.Tensor:
    """The same values at a base address `elems` elements past a 16-byte boundary."""
    buf = torch.empty(t.numel() + 16, dtype=t.dtype, device=t.device)
    assert buf.data_ptr() % 16 == 0
    view = buf[elems:elems + t.numel()].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", RLG_UNALIGNED_VARIANTS)
def test_rlg_unaligned_variants_misaligned_base(variant, dtype):
    """w and b at every offset from a 16-byte boundary (each its own, so
    their words sit differently from the rows' and from each other's): the
    plans run, reading them a word at a time.  x alone, or x and r, one
    element off a boundary: y (a fresh tensor) is not misaligned with them,
    so the plans decline and auto runs."""
    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for shape in ({"M": 37, "N": 781}, {"M": 64, "N": 1024}, {"M": 9, "N": 13437}):
        case = Case.make("residual_layernorm_gelu", dtype, **shape)
        base = wl.make_inputs(case, "cuda", zlib.crc32(f"misaligned v{variant}|{case}".encode()))
        for k in range(vec):
            inputs = {**base, "weight": _offset(base["weight"], k), "bias": _offset(base["bias"], (k + 3) % vec)}
            _check_rlg(case, inputs, _rlg_v(inputs, variant), f"variant {variant} w +{k}, b +{(k + 3) % vec}")
        for names in (("x",), ("x", "r")):
            inputs = {**base, **{k: _offset(base[k], 1) for k in names}}
            assert inputs["x"].data_ptr() % 16 != 0
            _check_rlg(case, inputs, _rlg_v(inputs, variant), f"variant {variant} {'+'.join(names)} misaligned")


@pytest.mark.parametrize("variant", RLG_UNALIGNED_VARIANTS)
@pytest.mark.parametrize("dtype,n,shift", (("bfloat16", 25905, 300.0), ("bfloat16", 32768, 300.0),
                                           ("float32", 4721, 30.0), ("float32", 16387, 30.0)))
def test_rlg_unaligned_statistics_of_offset_rows(variant, dtype, n, shift):
    """test_rlg_statistics_of_offset_rows for the any-alignment plans: the
    head and tail elements take part in both passes of the statistics."""
    _check_rlg_offset_rows(variant, dtype, n, shift)


def test_rlg_unaligned_plans_run_where_the_tuner_says():
    """The tuner's mirror (_runs) against the launcher at widths that are not
    16-byte multiples: where it says plan 18 or 19 runs as itself,
    rlg_unaligned_kernel is what the GPU ran, and where it says not (the row
    does not fit), something else ran."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from implementations.residual_layernorm_gelu.cuda import _runs

    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    seen = {}
    for dtype, n in (("bfloat16", 781), ("bfloat16", 32775), ("bfloat16", 32777), ("float32", 16387),
                     ("float32", 16389)):
        case = Case.make("residual_layernorm_gelu", dtype, M=3, N=n)
        inputs = wl.make_inputs(case, "cuda", 1)
        for variant in (18, 19):  # (plan 21: test_rlg_streamed_plan_runs_where_shared_memory_holds_two_rows)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                _rlg_v(inputs, variant)
                torch.cuda.synchronize()
            names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
            assert names, "the profiler saw no kernel"
            ran = any("rlg_unaligned_kernel" in name for name in names)
            seen[(dtype, n, variant)] = ran
            assert ran == _runs(variant, dtype, n, 4), (dtype, n, variant, names)
    assert any(seen.values()) and not all(seen.values())


def test_rlg_streamed_plan_runs_where_shared_memory_holds_two_rows():
    """Plan 21 runs as itself wherever two buffers of a row's 2 (n // vec)
    16-byte packs fit a block's opt-in shared memory (3616 packs: bf16 28935
    columns, float32 14467), at 16-byte rows too, and declines a pack past
    that (auto runs); the tuner's mirror races it at unaligned rows from 512
    packs up to there.  At M = 600 each persistent block takes several rows."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from implementations.residual_layernorm_gelu.cuda import _runs

    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    for dtype, n, fits, raced in (("bfloat16", 28935, True, True), ("bfloat16", 28937, False, False),
                                  ("float32", 14467, True, True), ("float32", 14469, False, False),
                                  ("bfloat16", 19379, True, True), ("float32", 4721, True, True),
                                  ("bfloat16", 8192, True, False), ("bfloat16", 4095, True, False)):
        case = Case.make("residual_layernorm_gelu", dtype, M=600 if n < 20000 else 3, N=n)
        inputs = wl.make_inputs(case, "cuda", 1)
        poison_allocator("cuda", wl.min_bytes(case), inputs["x"].dtype)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = _rlg_v(inputs, 21)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
        assert any("rlg_stream_kernel" in name for name in names) == fits, (dtype, n, names)
        assert _runs(21, dtype, n, 4) == raced, (dtype, n)
        _check_rlg(case, inputs, out, "variant 21")


def test_rlg_tuner_times_the_unaligned_plans():
    """The registered op at an unaligned shape: the any-alignment plans are
    among the candidates timed, and the choice is correct."""
    from implementations.residual_layernorm_gelu.cuda import _TUNER, _key, _runs

    registry = discover()
    case = Case.make("residual_layernorm_gelu", "bfloat16", M=1823, N=781)
    key = _key(1823, 781, "bfloat16")
    assert [v for v in _TUNER.variants if _runs(v, *key)] == [1, 2, 3, 4, 5, 6, 7, 18, 19, 20]
    _run_and_check("cuda", case, registry.workloads["residual_layernorm_gelu"].make_inputs(case, "cuda", 5))
    assert set(_TUNER.times[key]) == {1, 2, 3, 4, 5, 6, 7, 18, 19, 20}


# residual_layernorm_gelu's plan 20 (plan 4's cluster at any alignment: a
# scalar head and tail on rank 0, the body's 16-byte packs over the CTAs,
# w and b by words), and auto, which runs it for unaligned rows too long for
# registers; checked elementwise: N % VEC of 1 to VEC - 1 (and 0: no head or
# tail), more rows than VEC with odd N (a row start at every offset within a
# pack), N just past the register plans' 8192 (a cluster of 1), the slow
# shapes it is for (656 x 19379, 760 x 25905, 1075 x 14749), uneven slices
# on 8 CTAs (131073), the longest rows whose slices fit a block's shared
# memory (226 KB: bf16 462855, 8 x 7232 packs of 32 B; float32 462851, 8 x
# 14464 of 16 B; float32 462855 a pack past it runs two reads, as 524291 does
# in every dtype), bodies of no packs (1, 7) and rows shorter than the
# cluster's threads (781).
RLG_SPLIT_SHAPES = (CLUSTER_ALIGNMENTS
                    + [{"M": 7, "N": 131073}, {"M": 656, "N": 19379}, {"M": 760, "N": 25905},
                       {"M": 1075, "N": 14749}, {"M": 3, "N": 462_851}, {"M": 3, "N": 462_855},
                       {"M": 2, "N": 524_291}, {"M": 5, "N": 1}, {"M": 11, "N": 7}, {"M": 37, "N": 781}])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", RLG_SPLIT_SHAPES, ids=lambda s: f"M{s['M']}xN{s['N']}")
@pytest.mark.parametrize("variant", (20, 0))
def test_rlg_cluster_any_alignment(variant, shape, dtype):
    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    case = Case.make("residual_layernorm_gelu", dtype, **shape)
    inputs = wl.make_inputs(case, "cuda", zlib.crc32(f"split v{variant}|{case}".encode()))
    poison_allocator("cuda", wl.min_bytes(case), inputs["x"].dtype)  # every unwritten element a NaN
    _check_rlg(case, inputs, _rlg_v(inputs, variant), f"variant {variant}")


@pytest.mark.parametrize("dtype,n,shift", (("bfloat16", 25905, 300.0), ("bfloat16", 131073, 300.0),
                                           ("float32", 19379, 30.0), ("float16", 8193, 30.0)))
def test_rlg_cluster_any_alignment_statistics_of_offset_rows(dtype, n, shift):
    """test_rlg_statistics_of_offset_rows for plan 20: the head and tail
    elements are in rank 0's count, mean and squared deviations."""
    _check_rlg_offset_rows(20, dtype, n, shift)


def _rlg_split_ran(inputs: dict, variant: int) -> bool:
    """Whether residual_layernorm_gelu_v ran the cluster kernel's SPLIT form."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _rlg_v(inputs, variant)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
    assert names, "the profiler saw no kernel"
    return any("rlg_cluster_kernel<" in name and ", true>" in name for name in names)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rlg_cluster_any_alignment_misaligned_base(dtype):
    """w and b at every offset from a 16-byte boundary: plan 20 runs as
    itself, reading them a word at a time.  x alone, or x and r, 1 to VEC - 1
    elements off a boundary, y from the allocator: x and y split
    differently, so plan 20 refuses and auto's one-element-a-load cluster
    runs; the result is right either way."""
    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for shape in ({"M": 5, "N": 19379}, {"M": 4, "N": 40000}, {"M": 3, "N": 8193}):
        case = Case.make("residual_layernorm_gelu", dtype, **shape)
        base = wl.make_inputs(case, "cuda", zlib.crc32(f"split misaligned|{case}".encode()))
        for k in range(vec):
            inputs = {**base, "weight": _offset(base["weight"], k), "bias": _offset(base["bias"], (k + 3) % vec)}
            _check_rlg(case, inputs, _rlg_v(inputs, 20), f"variant 20 w +{k}, b +{(k + 3) % vec}")
            # (40000 is a 16-byte multiple, but w or b off a boundary sends auto to the same plan)
            assert _rlg_split_ran(inputs, 20) and _rlg_split_ran(inputs, 0)
        for offset in range(1, vec):
            for names in (("x",), ("x", "r")):
                inputs = {**base, **{k: _offset(base[k], offset) for k in names}}
                assert inputs["x"].data_ptr() % 16 != 0
                what = f"variant 20 {'+'.join(names)} at +{offset}"
                _check_rlg(case, inputs, _rlg_v(inputs, 20), what)
                assert not _rlg_split_ran(inputs, 20), what


def test_rlg_cluster_any_alignment_runs_where_the_tuner_says():
    """The tuner's mirror (_runs) and the auto plan's (_auto_plan) against
    the launcher: plan 20 runs the SPLIT cluster kernel at unaligned widths
    whose slices fit and not past them (two reads); auto runs it where the
    row is too long for registers and fits, not where registers hold it."""
    from implementations.residual_layernorm_gelu.cuda import _auto_plan, _runs

    wl = discover().workloads["residual_layernorm_gelu"]
    import_module("implementations.residual_layernorm_gelu.cuda").ops()
    seen = {}
    for dtype, n in (("bfloat16", 781), ("bfloat16", 8191), ("bfloat16", 8193), ("bfloat16", 19379),
                     ("bfloat16", 462_855), ("bfloat16", 524_291), ("float32", 25905), ("float32", 462_851),
                     ("float32", 462_855)):
        case = Case.make("residual_layernorm_gelu", dtype, M=2, N=n)
        inputs = wl.make_inputs(case, "cuda", 1)
        ran = _rlg_split_ran(inputs, 20)
        assert ran == _runs(20, dtype, n, 2), (dtype, n)
        auto = _rlg_split_ran(inputs, 0)
        assert auto == ("16-byte body" in _auto_plan(case)), (dtype, n, _auto_plan(case))
        seen[(dtype, n)] = (ran, auto)
    assert {v for v in seen.values()} == {(True, False), (True, True), (False, False)}


def test_softmax_tuner_picks_among_plans_that_run():
    """The registered op at an unaligned shape: auto (0) and the
    any-alignment plans (36, the cluster, included: its body fits) are the
    candidates, and the choice is correct."""
    from implementations.softmax.cuda import _TUNER, _key, _runs

    registry = discover()
    case = Case.make("softmax", "bfloat16", M=1823, N=781)
    key = _key(1823, 781, "bfloat16")
    assert [v for v in _TUNER.variants if _runs(v, *key)] == [0, 15, 16, 17, 26, 36]
    _run_and_check("cuda", case, registry.workloads["softmax"].make_inputs(case, "cuda", 5))
    assert set(_TUNER.times[key]) == {0, 15, 16, 17, 26, 36}


def test_runs_under_torch_compile():
    registry = discover()
    softmax = registry.get("softmax", "cuda")
    x = torch.randn(100, 700, device="cuda")
    softmax.fn(x)
    compiled = torch.compile(lambda t: torch.ops.kernel_suite.softmax(t) * 2.0, fullgraph=True)
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 2.0)
