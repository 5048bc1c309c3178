"""The Hopper GEMM ``cuda:wgmma`` (TMA + mbarriers + wgmma): correctness on the GPU.

Fresh random inputs (the seed is printed on failure), the caching allocator
poisoned with NaN so an output element no thread writes fails, and a float64
reference.  Shapes cover ragged M and N against every tile width (256, 192,
128, 64), ragged K against the 64-wide k step, K shorter than one step, a single
row, and skinny/large cases; each tile is checked, not only the automatic one.
The .cu itself is compiled for sm_90a by tests/test_cuda_compile.py (a glob).
"""
from __future__ import annotations

import random

import pytest
import torch

from suite import verify
from suite.workload import Case, discover

SEED = random.randrange(1 << 30)
IMPL = "cuda:wgmma"
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
gpu = pytest.mark.gpu


def _inputs(m, n, k, dtype, seed=SEED):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, generator=g, device="cuda").to(dtype)
    b = torch.randn(k, n, generator=g, device="cuda").to(dtype)
    return a, b


def _rel_err(out, ref):
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def _check_op(m, n, k, dtype, tile):
    from implementations.gemm.cuda_wgmma import ops

    a, b = _inputs(m, n, k, dtype)
    ref = a.double() @ b.double()
    verify.poison_allocator("cuda", m * n * 2)
    out = ops().gemm_wgmma(a, b, tile)
    torch.cuda.synchronize()
    assert out.dtype == dtype and tuple(out.shape) == (m, n)
    bad = int((~torch.isfinite(out)).sum().item())
    assert bad == 0, f"tile {tile} {m}x{n}x{k} {dtype} seed={SEED}: {bad} non-finite outputs (unwritten?)"
    err = _rel_err(out, ref)
    assert err <= TOL[dtype], f"tile {tile} {m}x{n}x{k} {dtype} seed={SEED}: rel err {err:.3g}"


# ------------------------------------------------------------------ CPU

def test_registered_and_gated():
    reg = discover()
    impl = reg.get("gemm", IMPL)
    assert impl.backend == "cuda"
    assert impl.check_available("cpu")
    assert impl.supports(Case.make("gemm", "bfloat16", M=3001, N=2047, K=1531)) is None  # padded
    assert "16-bit" in impl.supports(Case.make("gemm", "float32", M=64, N=64, K=64))
    assert impl.supports(Case.make("gemm", "float16", M=3001, N=2048, K=1536)) is None


def test_auto_tile_mirror():
    from implementations.gemm.cuda_wgmma import auto_tile

    assert auto_tile(4096, 4096, 132) == 0
    assert auto_tile(8192, 8192, 132) == 0
    assert auto_tile(3000, 2048, 132) == 9      # 264 tiles of 128 x 192: two whole waves
    assert auto_tile(1792, 5304, 132) == 9      # 2.97 waves, against 2.2 of 128 x 256
    assert auto_tile(7771, 4440, 132) == 0
    assert auto_tile(1, 8192, 132) == 2
    assert auto_tile(128, 8192, 132) == 2


def test_stream_k_plan():
    """Which tiles the stream-K tiles cut, and over how many CTAs; the .cu's
    minimum share is the mirror's."""
    import re
    from pathlib import Path

    from implementations.gemm.cuda_wgmma import SK_MIN_STEPS, SOURCES, sk_plan

    assert sk_plan(264, 18, 132) == (0, 132)     # two whole waves: nothing cut
    assert sk_plan(266, 18, 132) == (134, 132)   # the 2 of a third wave and one wave more
    assert sk_plan(25, 32, 132) == (25, 132)     # fewer tiles than SMs: K spread over every SM
    assert sk_plan(4, 16, 132) == (4, 16)        # ... at SK_MIN_STEPS k-steps a CTA at least
    assert sk_plan(4, 4, 132) == (0, 4)          # no more CTAs than tiles: nothing to gain
    assert sk_plan(1, 1, 132) == (0, 1)
    src = Path(SOURCES[0]).read_text()
    assert f"constexpr int SK_MIN_STEPS = {SK_MIN_STEPS};" in src
    assert re.search(r"sk_tiles = static_cast<int>\(tiles % sms \+ sms\);", src)


def test_tile_table_mirror():
    """The .cu's tile count, widths and stream-K tiles are the mirror's."""
    import re
    from pathlib import Path

    from implementations.gemm.cuda_wgmma import LINED, PAIRS, SOURCES, STREAM_K, TILES

    src = Path(SOURCES[0]).read_text()
    kernel = sorted(t for t in TILES if t < LINED)
    assert f"constexpr int NUM_TILES = {len(kernel)};" in src
    assert kernel == list(range(len(kernel)))
    assert sorted(TILES) == kernel + [LINED + t for t in kernel]
    listed = re.findall(r"^//\s+(\d+): 128 x\s+(\d+) x 64", src, re.M)
    assert {int(t): int(bn) for t, bn in listed} == {t: TILES[t][0] for t in (0, 1, 2, 9)}
    assert "bool tile_stream_k(int tile) { return (tile >= 6 && tile <= 8) || tile == 10; }" in src
    assert sorted(STREAM_K) == [6, 7, 8, 10]
    assert all(TILES[t][0] == TILES[w][0] for t, w in STREAM_K.items())
    assert "bool tile_pair(int tile) { return tile >= 11; }" in src
    assert sorted(PAIRS) == [11, 12] and all(TILES[t][:2] == TILES[w][:2] for t, w in PAIRS.items())


# ------------------------------------------------------------------ GPU

def _preset_params():
    reg = discover()
    impl = reg.get("gemm", IMPL)
    params = []
    for preset in ("cpu", "quick"):
        for case in reg.workloads["gemm"].cases(preset, ("float16", "bfloat16")):
            if impl.supports(case) is None:
                params.append(pytest.param(case, id=f"{preset}-{case.label}-{case.dtype}"))
    return params


def _unaligned_params():
    return [pytest.param(Case.make("gemm", dt, M=m, N=n, K=k), id=f"{m}x{n}x{k}-{dt}")
            for m, n, k in ((77, 1001, 999), (5, 3, 2), (1030, 1031, 1029), (300, 512, 100))
            for dt in ("float16", "bfloat16")]


@gpu
@pytest.mark.parametrize("case", _preset_params() + _unaligned_params())
def test_preset(case):
    """The registered op on the presets, and on rows that are not 16-byte
    aligned (copied into padded ones), poisoned output memory."""
    reg = discover()
    wl, impl = reg.workloads["gemm"], reg.get("gemm", IMPL)
    assert impl.check_available("cuda") is None
    inputs = wl.make_inputs(case, "cuda", SEED)
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", ref.numel() * 2)
    out = impl.fn(**inputs)
    torch.cuda.synchronize()
    res = verify.check_case(wl, case, out, ref, impl, inputs)
    assert res.correct, f"{case} seed={SEED} config={impl.config(case)}: {res.message}"
    torch.cuda.empty_cache()


SHAPES = [
    (128, 256, 64),      # exactly one tile, one k step
    (1000, 264, 72),     # ragged M, N (vs 256/128/64) and K (vs 64)
    (300, 392, 136),     # N two 192-wide tiles and 8 columns: one box of the last tile in range
    (129, 8, 8),         # one row over a tile, K shorter than a k step
    (1, 520, 1032),      # a single row
    (77, 1000, 1000),    # ragged everything, N not a multiple of 64
    (515, 1032, 2000),
    (4095, 4104, 1024),  # large with ragged M and N
]


@gpu
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=("bf16", "fp16"))
@pytest.mark.parametrize("tile", (-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_every_tile(m, n, k, tile, dtype):
    _check_op(m, n, k, dtype, tile)


@gpu
@pytest.mark.parametrize("tile", (6, 7, 8, 10))
@pytest.mark.parametrize("m,n,k", [(1699, 2328, 1152), (515, 1032, 2000), (2048 + 64, 4096, 192)])
def test_stream_k_is_deterministic(m, n, k, tile):
    """A cut tile's pieces are added in one order: two calls give the same bits."""
    from implementations.gemm.cuda_wgmma import ops

    g = torch.Generator(device="cuda").manual_seed(SEED + tile)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    first = ops().gemm_wgmma(a, b, tile)
    verify.poison_allocator("cuda", first.numel() * 2)
    assert torch.equal(first, ops().gemm_wgmma(a, b, tile))


@gpu
@pytest.mark.parametrize("tile", (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))
def test_many_tiles_per_cta(tile):
    """More tiles than SMs: every CTA walks several tiles and the pipeline's
    phases carry over tile boundaries (K of 3 steps: not a multiple of the stage count)."""
    _check_op(2048 + 64, 4096, 192, torch.bfloat16, tile)


@gpu
@pytest.mark.parametrize("tile", (-1, 3, 9, 10, 11, 12))
@pytest.mark.parametrize("pad_a,pad_b", [(8, 0), (0, 56), (64, 120)])
def test_rows_further_apart_than_their_width(pad_a, pad_b, tile):
    """A and B as views of wider rows (as the lined copies are): the op reads
    only their own columns; the memory past them holds NaN."""
    from implementations.gemm.cuda_wgmma import ops

    m, n, k = 1000, 392, 2376
    a, b = _inputs(m, n, k, torch.bfloat16)
    wa = torch.full((m, k + pad_a), float("nan"), device="cuda", dtype=torch.bfloat16)
    wb = torch.full((k, n + pad_b), float("nan"), device="cuda", dtype=torch.bfloat16)
    va, vb = wa[:, :k], wb[:, :n]
    va.copy_(a)
    vb.copy_(b)
    verify.poison_allocator("cuda", m * n * 2)
    out = ops().gemm_wgmma(va, vb, tile)
    err = _rel_err(out, a.double() @ b.double())
    assert err <= TOL[torch.bfloat16], f"tile {tile} pads {pad_a},{pad_b} seed={SEED}: rel err {err:.3g}"


@gpu
def test_zero_sized():
    from implementations.gemm.cuda_wgmma import ops

    a, b = _inputs(0, 64, 64, torch.bfloat16)
    assert ops().gemm_wgmma(a, b).shape == (0, 64)
    a, b = _inputs(16, 64, 0, torch.bfloat16)
    out = ops().gemm_wgmma(a, b)
    assert out.shape == (16, 64) and bool((out == 0).all())


_BOUNDARY = """
import pytest, torch
from implementations.gemm.cuda_wgmma import ops
a = torch.randn(64, 64, device="cuda")
with pytest.raises(RuntimeError, match="float16 and bfloat16"):
    ops().gemm_wgmma(a, a)
h = a.bfloat16()
with pytest.raises(RuntimeError, match="tile must be"):
    ops().gemm_wgmma(h, h, 13)
with pytest.raises(RuntimeError, match="multiples of 8"):
    ops().gemm_wgmma(torch.randn(30, 24, device="cuda").bfloat16(), torch.randn(24, 20, device="cuda").bfloat16())
with pytest.raises(RuntimeError, match="inner dimensions"):
    ops().gemm_wgmma(h, torch.randn(32, 64, device="cuda").bfloat16())
with pytest.raises(RuntimeError, match="row-major"):
    ops().gemm_wgmma(h, h.t())
with pytest.raises(RuntimeError, match="row strides must be multiples of 8"):
    ops().gemm_wgmma(torch.randn(64, 68, device="cuda").bfloat16()[:, :64], h)
buf = torch.randn(64 * 64 + 1, device="cuda").bfloat16()
with pytest.raises(RuntimeError, match="16-byte aligned"):
    ops().gemm_wgmma(buf[1:].view(64, 64), h)
print("boundary checks ok")
"""


@gpu
def test_boundary_checks_explain_themselves():
    # A child process: a check that crashes instead of raising must not end the session.
    from tests.helpers import run_python

    run_python(_BOUNDARY, expect="boundary checks ok")


@gpu
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
def test_opcheck(dtype):
    from implementations.gemm.cuda_wgmma import ops

    a, b = _inputs(40, 24, 48, dtype)
    torch.library.opcheck(ops().gemm_wgmma.default, (a, b))
