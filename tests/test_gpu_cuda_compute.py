"""CUDA gemm and attention on the GPU: correctness, edges, and opcheck.

Every case of the cpu and quick presets, plus shapes chosen for the kernels'
edges (ragged tiles, unaligned rows, the large-tile path with ragged edges,
sequences shorter than a tile), with fresh random inputs (the seed is printed
on failure), the caching allocator poisoned with NaN first so that an output
element no thread writes fails, and the workload's float64 reference.
"""
from __future__ import annotations

import random

import pytest
import torch

from suite import verify
from suite.workload import Case, discover
from tests.helpers import preset_params

pytestmark = pytest.mark.gpu
SEED = random.randrange(1 << 30)
IMPLS = (("gemm", "cuda"), ("gemm", "cuda:naive"), ("attention", "cuda"))


def _check(wl_name: str, impl_name: str, case: Case, transform=None) -> None:
    reg = discover()
    wl, impl = reg.workloads[wl_name], reg.get(wl_name, impl_name)
    assert impl.check_available("cuda") is None
    assert impl.supports(case) is None, impl.supports(case)
    inputs = wl.make_inputs(case, "cuda", SEED)
    if transform is not None:
        inputs = transform(inputs)
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", ref.numel() * torch.empty((), dtype=torch_dtype(case)).element_size())
    out = impl.fn(**inputs)
    torch.cuda.synchronize()
    res = verify.check(out, ref, wl.tolerance(case))
    assert out.dtype == torch_dtype(case)
    assert res.correct, f"{impl_name} {case} seed={SEED} config={impl.config(case)}: {res.message}"


def torch_dtype(case: Case) -> torch.dtype:
    return getattr(torch, case.dtype)


@pytest.mark.parametrize("wl_name,impl_name,case", preset_params(IMPLS))
def test_preset(wl_name, impl_name, case):
    _check(wl_name, impl_name, case)
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("m,n,k", [
    (1000, 264, 72),     # aligned, K not a multiple of the 32-wide k-tile
    (129, 8, 8),         # one k-tile, one column fragment
    (4095, 4104, 4096),  # the 128x256 tile with ragged M and N
    (77, 1001, 999),     # unaligned (guarded loads, element stores)
    (5, 3, 2),           # everything smaller than one fragment
])
def test_gemm_edges(m, n, k, dtype):
    _check("gemm", "cuda", Case.make("gemm", dtype, M=m, N=n, K=k))


def _check_gemm_op(op: str, tile: int, m: int, n: int, k: int, dtype: torch.dtype, seed: int) -> None:
    """One tile of a GEMM op (gemm_mma or gemm_mma_ws) on fresh inputs, poisoned output memory."""
    from implementations.gemm.cuda import ops

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, generator=g, device="cuda").to(dtype)
    b = torch.randn(k, n, generator=g, device="cuda").to(dtype)
    verify.poison_allocator("cuda", m * n * 2)
    out = getattr(ops(), op)(a, b, tile)
    torch.cuda.synchronize()
    assert out.dtype == dtype and out.shape == (m, n)
    res = verify.check(out, a.double() @ b.double(), 1e-2)
    assert res.correct, f"{op} tile {tile} {dtype} {m}x{n}x{k} seed={seed}: {res.message}"


@pytest.mark.parametrize("tile", tuple(range(10)))
@pytest.mark.parametrize("m,n,k", [(1000, 264, 72), (515, 1032, 1000), (300, 520, 4104)])
def test_gemm_every_tile(m, n, k, tile):
    """Each tile the op offers (implementations/gemm/cuda/tune.py ranks them), not only the automatic one."""
    _check_gemm_op("gemm_mma", tile, m, n, k, torch.bfloat16, SEED)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("tile", (6, 7, 8, 9))
@pytest.mark.parametrize("m,n,k", [
    (3000, 2048, 1536),  # ragged M, several k-tiles in every copy part
    (129, 264, 72),      # one full k-tile and a partial one (K % 64 == 8)
    (1, 8192, 8192),     # one row: the M mask on every A chunk
    (136, 256, 40),      # K shorter than one k-tile: the pipeline runs past the end
    (520, 136, 4104),    # ragged N and K tails
    (3001, 2047, 1531),  # K, N not multiples of 8: the guarded path, whatever the tile
])
def test_gemm_spread_tiles(m, n, k, tile, dtype):
    """The tiles whose cp.async are issued in parts (the copy-part bookkeeping,
    the pointer advance on the last part), float16 and bfloat16."""
    _check_gemm_op("gemm_mma", tile, m, n, k, dtype, SEED + tile)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("tile", (0, 1, 2, 3))
@pytest.mark.parametrize("m,n,k", [
    (3000, 2048, 1536),  # ragged M: TMA zero-fills the rows past M, the stores are masked
    (2944, 520, 256),    # 23 or 12 tile rows, the last column tile one 8-wide box
    (129, 264, 72),      # one full k-tile and a partial one (K % 64 == 8)
    (136, 256, 40),      # K shorter than one k-tile
    (520, 136, 4104),    # ragged N (a B box past N is not loaded) and K tails
    (4096, 4096, 256),   # 512 or 256 tiles on a persistent grid: stage phases carried across tiles
    (1, 8192, 8192),     # one row
    (4096, 4096, 4096),  # the workload's square
])
def test_gemm_ws_tiles(m, n, k, tile, dtype):
    """The warp-specialised TMA + mma.sync tiles (gemm_mma_ws; the `cuda`
    GEMM's tiles 10 to 13 on Hopper; 2 and 3 store C through shared memory,
    masked a 16-byte chunk at a time)."""
    _check_gemm_op("gemm_mma_ws", tile, m, n, k, dtype, SEED + 100 + tile)


def test_gemm_unaligned_pointers():
    """Views that start 2 bytes into their storage must take the guarded path."""
    def shift(inputs):
        out = {}
        for name, t in inputs.items():
            buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
            view = buf[1:].view(t.shape)
            view.copy_(t)
            out[name] = view
        return out

    _check("gemm", "cuda", Case.make("gemm", "bfloat16", M=300, N=512, K=256), transform=shift)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("d", (64, 128))
@pytest.mark.parametrize("s", (1, 17, 63, 64, 65, 127, 129, 255, 257))
@pytest.mark.parametrize("causal", (0, 1))
def test_attention_short_and_ragged(s, d, causal, dtype):
    _check("attention", "cuda", Case.make("attention", dtype, B=2, H=3, S=s, D=d, causal=causal))


def test_attention_large_logits():
    """Scores of several hundred: the running max must keep exp2 in range."""
    def scale(inputs):
        return dict(inputs, q=inputs["q"] * 8, k=inputs["k"] * 8)

    _check("attention", "cuda", Case.make("attention", "bfloat16", B=1, H=2, S=300, D=64, causal=1),
           transform=scale)


def _attention_variants():
    from implementations.attention.cuda import VARIANTS

    return [(d, v) for d in sorted(VARIANTS) for v in range(len(VARIANTS[d]))]


def _check_attention_variant(variant, d, s, causal, dtype, scale_qk=None):
    from implementations.attention.cuda import ops

    wl = discover().workloads["attention"]
    g = torch.Generator(device="cuda").manual_seed(SEED)
    q, k, v = (torch.randn(2, 3, s, d, generator=g, device="cuda") for _ in range(3))
    if scale_qk is not None:
        q, k = scale_qk(q, k)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    ref = wl.reference(None, {"q": q, "k": k, "v": v, "causal": bool(causal)})
    verify.poison_allocator("cuda", q.numel() * q.element_size())
    out = ops().attention_flash(q, k, v, bool(causal), variant)
    tol = 3e-3 if dtype == torch.float16 else 2e-2
    res = verify.check(out, ref, tol)
    assert res.correct, f"variant {variant} D={d} S={s} causal={causal} {dtype} seed={SEED}: {res.message}"


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("d,variant", _attention_variants())
@pytest.mark.parametrize("s,causal", [(1000, 0), (1000, 1), (77, 0), (77, 1), (333, 1), (2048, 1), (40, 0)])
def test_attention_every_variant(variant, d, s, causal, dtype):
    """Each tiling the op offers (VARIANTS in implementations/attention/cuda), not only the automatic one."""
    _check_attention_variant(variant, d, s, causal, dtype)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("d,variant", _attention_variants())
@pytest.mark.parametrize("s,causal", [(1000, 0), (777, 1)])
def test_attention_every_variant_growing_logits(variant, d, s, causal, dtype):
    """Keys whose scale grows along the sequence: row maxima keep rising tile after tile,
    by more than the lazy rescale's 2^8 margin, so every tiling's rescale path runs mid-row."""
    def grow(q, k):
        ramp = torch.linspace(0.2, 6.0, s, device=q.device).view(1, 1, s, 1)
        return q * 2, k * ramp

    _check_attention_variant(variant, d, s, causal, dtype, scale_qk=grow)


_VARIANT_BOUNDARY = """
import pytest, torch
from implementations.attention.cuda import ops, VARIANTS
for d in (64, 128):
    q = torch.randn(1, 1, 16, d, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="variant must be"):
        ops().attention_flash(q, q, q, False, len(VARIANTS[d]))
    with pytest.raises(RuntimeError, match="variant must be"):
        ops().attention_flash(q, q, q, False, -2)
print("variant check ok")
"""


def test_attention_variant_out_of_range():
    from tests.helpers import run_python

    run_python(_VARIANT_BOUNDARY, expect="variant check ok")


_BOUNDARY = """
import pytest, torch
from implementations.attention.cuda import ops as attention_ops
from implementations.gemm.cuda import ops as gemm_ops
a = torch.randn(64, 64, device="cuda")
with pytest.raises(RuntimeError, match="float16 and bfloat16"):
    gemm_ops().gemm_mma(a, a)
with pytest.raises(RuntimeError, match="tile must be"):
    gemm_ops().gemm_mma(a.bfloat16(), a.bfloat16(), 10)
with pytest.raises(RuntimeError, match="inner dimensions"):
    gemm_ops().gemm_mma(a.bfloat16(), torch.randn(32, 64, device="cuda").bfloat16())
with pytest.raises(RuntimeError, match="inner dimensions"):
    gemm_ops().gemm_naive(a, torch.randn(32, 64, device="cuda"))
with pytest.raises(RuntimeError, match="multiples of 8"):
    gemm_ops().gemm_mma_ws(a.bfloat16(), torch.randn(64, 60, device="cuda").bfloat16())
with pytest.raises(RuntimeError, match="tile must be"):
    gemm_ops().gemm_mma_ws(a.bfloat16(), a.bfloat16(), 4)  # tiles 0..3
with pytest.raises(RuntimeError, match="tile must be"):
    gemm_ops().gemm_mma_ws(a.bfloat16(), a.bfloat16(), -1)
with pytest.raises(RuntimeError, match="float16 and bfloat16"):
    gemm_ops().gemm_mma_ws(a, a)
q = torch.randn(1, 1, 16, 96, device="cuda", dtype=torch.bfloat16)
with pytest.raises(RuntimeError, match="head dim"):
    attention_ops().attention_flash(q, q, q, False)
q = torch.randn(1, 1, 64, 16, device="cuda", dtype=torch.bfloat16).transpose(-1, -2)
with pytest.raises(RuntimeError, match="contiguous"):
    attention_ops().attention_flash(q, q, q, False)
print("boundary checks ok")
"""


def test_boundary_checks_explain_themselves():
    # In a child process, so a check that crashes instead of raising (seen on
    # the H200 image) fails this test without ending the session.
    from tests.helpers import run_python

    run_python(_BOUNDARY, expect="boundary checks ok")


@pytest.mark.parametrize("op,dtype,shape", [
    ("gemm_mma", torch.bfloat16, (40, 24, 48)),
    ("gemm_mma", torch.float16, (33, 17, 11)),
    ("gemm_naive", torch.float32, (33, 17, 11)),
    ("gemm_mma_ws", torch.bfloat16, (40, 24, 48)),
])
def test_opcheck_gemm(op, dtype, shape):
    from implementations.gemm.cuda import ops

    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    torch.library.opcheck(getattr(ops(), op).default, (a, b))


@pytest.mark.parametrize("d,variant", [(64, -1), (64, 1), (128, 4)])
@pytest.mark.parametrize("causal", (False, True))
def test_opcheck_attention(causal, variant, d):
    from implementations.attention.cuda import ops

    q, k, v = (torch.randn(1, 2, 80, d, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.library.opcheck(ops().attention_flash.default, (q, k, v, causal, variant))
