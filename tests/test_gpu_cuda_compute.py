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
IMPLS = (("gemm", "cuda"), ("gemm", "cuda:tf32x3"), ("gemm", "cuda:naive"), ("attention", "cuda"))


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
    res = verify.check_case(wl, case, out, ref, impl, inputs)  # the suite's own verdict, elementwise included
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
    (1030, 1031, 1029),  # unaligned and large: padded copies to the tuned tiles
    (5, 3, 2),           # everything smaller than one fragment
])
def test_gemm_edges(m, n, k, dtype):
    _check("gemm", "cuda", Case.make("gemm", dtype, M=m, N=n, K=k))


# cuda:tf32x3 (on Hopper gemm_tf32x3_wgmma at the tile height it picks): one
# fragment, one tile, tiles ragged in M, N and K (16-byte chunks), K or N off a
# multiple of 4 (4-byte chunks), odd N (single stores), K shorter than one
# k-tile and one of many k-tiles with a ragged last one, and long K, where
# accumulating on the tensor cores alone drifts past the elementwise bound.
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (16, 8, 8), (128, 128, 32), (300, 260, 100), (129, 136, 4100),
                                   (77, 1001, 999), (1000, 333, 64), (2048, 2052, 2045), (4097, 1023, 515),
                                   (27, 256, 5959), (1733, 136, 2912), (333, 717, 3697), (7757, 2032, 7389)])
def test_gemm_tf32x3_edges(m, n, k):
    _check("gemm", "cuda:tf32x3", Case.make("gemm", "float32", M=m, N=n, K=k))


def _tf32x3_kernels():
    """(name, op) of both 3xTF32 kernels, called directly: mma.sync everywhere, wgmma at both tile heights on Hopper."""
    from implementations.gemm.cuda import _hopper, ops

    lib = ops()
    kernels = [("mma.sync", lib.gemm_tf32x3)]
    if _hopper():
        kernels += [(f"wgmma {rows}", lambda a, b, rows=rows: lib.gemm_tf32x3_wgmma(a, b, rows)) for rows in (64, 128)]
    return kernels


@pytest.mark.parametrize("m,n,k", [(200, 264, 132), (1, 129, 33), (130, 5, 7000), (517, 300, 4099)])
def test_gemm_tf32x3_kernels_on_unaligned_views(m, n, k):
    """Every 3xTF32 kernel, on operands that start 4 bytes into their storage
    (the 4-byte copies) and on aligned ones, against float64 elementwise."""
    wl = discover().workloads["gemm"]
    case = Case.make("gemm", "float32", M=m, N=n, K=k)
    g = torch.Generator(device="cuda").manual_seed(SEED)
    views = torch.randn(m * k + 1, generator=g, device="cuda")[1:].view(m, k), \
        torch.randn(k * n + 1, generator=g, device="cuda")[1:].view(k, n)
    for name, op in _tf32x3_kernels():
        for a, b in (views, tuple(t.contiguous() for t in views)):
            verify.poison_allocator("cuda", m * n * 4)
            out = op(a, b)
            res = verify.check_case(wl, case, out, a.double() @ b.double())
            assert res.correct, f"{name} {case} seed={SEED}: {res.message}"


def test_gemm_tf32x3_kernels_on_empty_operands():
    for name, op in _tf32x3_kernels():
        zeros = op(torch.randn(4, 0, device="cuda"), torch.randn(0, 9, device="cuda"))
        assert torch.equal(zeros, torch.zeros(4, 9, device="cuda")), name
        assert op(torch.randn(0, 5, device="cuda"), torch.randn(5, 9, device="cuda")).shape == (0, 9), name


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
    wl = discover().workloads["gemm"]
    case = Case.make("gemm", str(dtype).removeprefix("torch."), M=m, N=n, K=k)
    res = verify.check_case(wl, case, out, a.double() @ b.double(), inputs={"a": a, "b": b})
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


# gemm_skinny (A with at most 16 rows): every M from 1 to 16 at one decode
# shape, then M in (1, 3, 5, 8, 13, 16) against every N with K rotating, so
# each (M, N) and each (M, K) pair occurs; N covers one column, fewer than a
# pack, one pack, one block, ragged blocks with N % 8 != 0 (2379, 7577: the
# 2-byte path) and == 0; K covers shorter than one 8-row group, one split
# (no workspace) and many splits with a ragged last one.
SKINNY_NS = (1, 7, 8, 256, 1288, 2379, 4096, 7577)
SKINNY_KS = (1, 7, 281, 1427, 3449, 5888)
# Shapes that split K (on 132 SMs; skinny_plan's figures), for M = 1, 5, 8
# and 16, short K and long, N % 8 == 0 and not: the workspace, the arrival
# counters and the last block's sum in split order.
SKINNY_SPLIT_SHAPES = ((1, 4096, 16384), (1, 2379, 281), (5, 1536, 808), (5, 2048, 5888),
                       (8, 7577, 281), (8, 1847, 3712), (16, 2048, 5888), (16, 255, 3000),
                       (16, 4096, 281))
SKINNY_SHAPES = sorted(
    {(m, 1288, 3449) for m in range(1, 17)}
    | {(m, n, SKINNY_KS[(i + j) % len(SKINNY_KS)])
       for i, m in enumerate((1, 3, 5, 8, 13, 16)) for j, n in enumerate(SKINNY_NS)}
    | {(4, 67592, 300),   # more column blocks than one wave: one split over a long K
       (2, 2379, 1427)}
    | set(SKINNY_SPLIT_SHAPES))


def _skinny_splits(m, n, k):
    from implementations.gemm.cuda import skinny_blocks_per_sm, skinny_plan

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return skinny_plan(m, n, k, sms, skinny_blocks_per_sm(m))[1]


def _skinny_mma_splits(m, n, k):
    from implementations.gemm.cuda import skinny_mma_plan

    return skinny_mma_plan(m, n, k, torch.cuda.get_device_properties(0).multi_processor_count)[1]


def _skinny_tma_splits(m, n, k):
    from implementations.gemm.cuda import skinny_tma_plan

    return skinny_tma_plan(m, n, k, torch.cuda.get_device_properties(0).multi_processor_count)[1]


def _skinny_inputs(m, n, k, dtype, seed, shift=(0, 0)):
    """Fresh random a (m x k) and b (k x n); shift[i] > 0 starts that operand
    shift[i] elements into its storage (a 2-byte offset: no 16-byte loads)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for (rows, cols), off in zip(((m, k), (k, n)), shift):
        buf = torch.randn(rows * cols + off, generator=g, device="cuda").to(dtype)
        out.append(buf[off:].view(rows, cols))
    return out


def _check_skinny(fn, m, n, k, dtype, seed, shift=(0, 0)):
    """fn(a, b) on fresh inputs against the float64 product, the output and the
    fp32 workspace sizes poisoned (NaN in the output's dtype and in float32):
    an element of C no block writes, or a partial read before it is written,
    fails."""
    wl = discover().workloads["gemm"]
    case = Case.make("gemm", str(dtype).removeprefix("torch."), M=m, N=n, K=k)
    a, b = _skinny_inputs(m, n, k, dtype, seed, shift)
    ref = a.double() @ b.double()
    verify.poison_allocator("cuda", m * n * 2, dtype)
    splits = _skinny_splits(m, n, k)
    if splits > 1:  # the fp32 partials [column blocks, splits, m, 256] (the FMA form)
        verify.poison_allocator("cuda", -(-n // 256) * splits * m * 256 * 4)
    mma_splits = _skinny_mma_splits(m, n, k)
    if mma_splits > 1:  # [column blocks, splits, m, 64] (the tensor-core form)
        verify.poison_allocator("cuda", -(-n // 64) * mma_splits * m * 64 * 4)
    tma_splits = _skinny_tma_splits(m, n, k)
    if tma_splits > 1:  # [column blocks, splits, m, 64] (gemm_skinny_tma)
        verify.poison_allocator("cuda", -(-n // 64) * tma_splits * m * 64 * 4)
    out = fn(a, b)
    torch.cuda.synchronize()
    assert out.dtype == dtype and out.shape == (m, n)
    res = verify.check_case(wl, case, out, ref)
    assert res.correct, f"{m}x{n}x{k} {dtype} shift={shift} seed={seed}: {res.message}"
    return a, b, out


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16, torch.float32))
@pytest.mark.parametrize("m,n,k", SKINNY_SHAPES)
def test_gemm_skinny(m, n, k, dtype):
    from implementations.gemm.cuda import ops

    _check_skinny(ops().gemm_skinny, m, n, k, dtype, SEED + m * 7 + n + k)


# Where N % 8 == 0 the op runs the tensor-core form (M <= 8: rows 8-15 of the
# operand zero; M > 8; one split and many; stages cut short by K or by a
# split's end), so the FMA form's 16-byte path is checked through variant 1.
@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("m,n,k", [s for s in SKINNY_SHAPES if s[1] % 8 == 0])
def test_gemm_skinny_fma_form_of_16_byte_rows(m, n, k, dtype):
    from implementations.gemm.cuda import ops

    _check_skinny(lambda a, b: ops().gemm_skinny_v(a, b, 1), m, n, k, dtype, SEED + m * 5 + n + k)


# gemm_skinny_tma (Hopper; K and N multiples of 8): the 16-byte shapes above,
# then ones that split K into several stages' worth (16 x 256 x 3000: 8
# splits, the last short), a split's last stage cut short by K (808, 200,
# 136), fewer columns than one CTA's 64, and more column blocks than SMs.
SKINNY_TMA_SHAPES = sorted(
    {s for s in SKINNY_SHAPES if s[1] % 8 == 0 and s[2] % 8 == 0}
    | {(16, 4608, 3584), (13, 5120, 4752), (12, 3496, 5224), (5, 1536, 808), (16, 256, 3000),
       (3, 512, 200), (1, 8, 8), (16, 72, 136), (7, 984, 2712), (2, 11008, 4096), (9, 2288, 10408)})


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("m,n,k", SKINNY_TMA_SHAPES)
def test_gemm_skinny_tma(m, n, k, dtype):
    from implementations.gemm.cuda import _hopper, ops

    if not _hopper():
        pytest.skip("gemm_skinny_tma needs a Hopper GPU (TMA)")
    _check_skinny(ops().gemm_skinny_tma, m, n, k, dtype, SEED + m * 11 + n + k)


def test_gemm_skinny_tma_splits_in_a_row_and_deterministic():
    """Split calls back to back over grids of different column-block counts
    (each must find its counters at zero), the same inputs giving the same
    bits, K = 0 zeros and an empty M; K or N off 8 is refused."""
    from implementations.gemm.cuda import _hopper, ops

    if not _hopper():
        pytest.skip("gemm_skinny_tma needs a Hopper GPU (TMA)")
    lib = ops()
    for i, (m, n, k) in enumerate([(16, 256, 3000), (5, 1536, 808), (16, 256, 3000), (12, 3496, 5224)]):
        assert _skinny_tma_splits(m, n, k) > 1
        a, b, first = _check_skinny(lib.gemm_skinny_tma, m, n, k, torch.bfloat16, SEED + 400 + i)
        assert torch.equal(lib.gemm_skinny_tma(a, b), first)
    a, b = _skinny_inputs(4, 16, 0, torch.float16, SEED)
    verify.poison_allocator("cuda", 4 * 16 * 2, torch.float16)
    assert torch.equal(lib.gemm_skinny_tma(a, b), torch.zeros(4, 16, device="cuda", dtype=torch.float16))
    assert lib.gemm_skinny_tma(*_skinny_inputs(0, 16, 8, torch.float16, SEED)).shape == (0, 16)
    with pytest.raises(RuntimeError, match="multiples of 8"):
        lib.gemm_skinny_tma(*_skinny_inputs(4, 12, 7, torch.float16, SEED))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16", "float32"))
@pytest.mark.parametrize("m,n,k", [(1, 8, 7), (3, 1288, 3449), (8, 7577, 281), (13, 5120, 4751),
                                   (16, 2379, 1427), (16, 4096, 5888)])
def test_gemm_cuda_routes_skinny(m, n, k, dtype):
    """The registered `cuda` GEMM on skinny shapes (it calls gemm_skinny)."""
    _check("gemm", "cuda", Case.make("gemm", dtype, M=m, N=n, K=k))


@pytest.mark.parametrize("shift", [(0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("m,n,k", [(3, 1288, 3449), (16, 4096, 1427), (1, 256, 7)])
def test_gemm_skinny_unaligned(m, n, k, shift):
    """Views that start 2 bytes into their storage: N % 8 == 0 but B is not
    16-byte aligned, so the 2-byte path must run; A is read per element."""
    from implementations.gemm.cuda import ops

    _check_skinny(ops().gemm_skinny, m, n, k, torch.bfloat16, SEED + 1, shift)
    gemm_cuda = discover().get("gemm", "cuda").fn
    _check_skinny(gemm_cuda, m, n, k, torch.float16, SEED + 2, shift)


def test_gemm_skinny_split_shapes_split():
    """The split shapes above do run several splits on an H200's 132 SMs,
    and the decode shape at M = 4 over 67592 columns runs one."""
    if torch.cuda.get_device_properties(0).multi_processor_count < 132:
        pytest.skip("the split counts are figured for 132 SMs")
    for m, n, k in SKINNY_SPLIT_SHAPES:
        assert _skinny_splits(m, n, k) > 1, (m, n, k)
    assert _skinny_splits(4, 67592, 300) == 1


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
def test_gemm_skinny_calls_in_a_row(dtype):
    """Split calls back to back with fresh inputs, over grids of different
    column-block counts: each call must find its counters at zero (the last
    block of each column block resets its own), else no block counts to S,
    C keeps its poison and the check fails."""
    from implementations.gemm.cuda import ops

    order = [(5, 1536, 808), (8, 7577, 281), (5, 1536, 808), (5, 1536, 808),
             (16, 4096, 281), (1, 4096, 16384), (8, 7577, 281)]
    for i, (m, n, k) in enumerate(order):
        _check_skinny(ops().gemm_skinny, m, n, k, dtype, SEED + 100 + i)


def test_gemm_skinny_deterministic_and_empty():
    """The same inputs give the same bits (partials added in a fixed order);
    K = 0 gives zeros, M = 0 or N = 0 an empty result."""
    from implementations.gemm.cuda import ops

    for m, n, k in ((5, 2048, 5888), (13, 2379, 4751), (16, 255, 3000)):
        a, b, first = _check_skinny(ops().gemm_skinny, m, n, k, torch.bfloat16, SEED + 3)
        assert _skinny_splits(m, n, k) > 1
        for _ in range(3):
            assert torch.equal(ops().gemm_skinny(a, b), first)
    a, b = _skinny_inputs(4, 9, 0, torch.float16, SEED)
    verify.poison_allocator("cuda", 4 * 9 * 2, torch.float16)
    assert torch.equal(ops().gemm_skinny(a, b), torch.zeros(4, 9, device="cuda", dtype=torch.float16))
    assert ops().gemm_skinny(*_skinny_inputs(0, 9, 5, torch.float16, SEED)).shape == (0, 9)
    assert ops().gemm_skinny(*_skinny_inputs(3, 0, 5, torch.float16, SEED)).shape == (3, 0)


# gemm_mma split-K (implementations/gemm/cuda: split_plan mirrors the .cu's
# split_slices).  Shapes of few tiles and a long K, where the plan splits
# (most guarded: K or N odd), then irregular ones: K not a
# multiple of the k-tile, N and K odd, M from 17 to 600, a last row tile of
# fewer than 16 rows (its fragments past M are neither stored nor read).
SPLIT_CLIFF = ((27, 256, 5959), (101, 911, 3719), (256, 179, 1813), (32, 768, 1877), (333, 717, 3697),
               (479, 241, 1584), (39, 2376, 6711), (67, 1928, 4493), (403, 256, 5768))
SPLIT_IRREGULAR = ((17, 8, 4104), (600, 136, 4136), (129, 1001, 2049), (511, 263, 3333), (200, 520, 1000),
                   (130, 7, 9999), (257, 384, 2056), (33, 1024, 8200), (450, 250, 777))


def _mma_tile_shape(tile: int, aligned: bool):
    from implementations.gemm.cuda import TILE_SHAPES

    return TILE_SHAPES[tile if aligned else 0]


def _mma_aligned(a, b) -> bool:
    """gemm_mma's 16-byte path: K and N multiples of 8, both bases 16-byte aligned."""
    return a.shape[1] % 8 == 0 and b.shape[1] % 8 == 0 and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0


def _mma_plan(m, n, k, tile, aligned, dtype, splits) -> tuple[int, int]:
    """(tile, slices) gemm_mma runs: tile -1 is auto_tile's (the guarded path
    runs tile 0); slices are `splits` clamped to the k-tiles, or (0) the
    device's own plan."""
    from implementations.gemm.cuda import auto_tile, ops

    tile = (tile if tile >= 0 else auto_tile(m, n, k, _sms())) if aligned else 0
    if splits > 0:
        return tile, max(1, min(splits, -(-k // _mma_tile_shape(tile, aligned)[2]), 65535))
    return tile, ops().gemm_mma_split_plan(m, n, k, tile, aligned, dtype)[0]


def _check_mma_split(m, n, k, dtype, seed, tile=-1, splits=0, shift=(0, 0), want_split=None):
    """gemm_mma(a, b, tile, splits) on fresh inputs against the float64
    product, its output (NaN of the dtype) and its fp32 workspace (NaN of
    float32) poisoned: an element of C that no CTA writes, or a partial read
    that no slice wrote, fails.  want_split: assert the launch splits (or not)."""
    from implementations.gemm.cuda import ops

    wl = discover().workloads["gemm"]
    case = Case.make("gemm", str(dtype).removeprefix("torch."), M=m, N=n, K=k)
    a, b = _skinny_inputs(m, n, k, dtype, seed, shift)
    aligned = _mma_aligned(a, b)
    run_tile, slices = _mma_plan(m, n, k, tile, aligned, dtype, splits)
    if want_split is not None:
        assert (slices > 1) == want_split, (m, n, k, tile, splits, run_tile, slices)
    ref = a.double() @ b.double()
    verify.poison_allocator("cuda", m * n * 2, dtype)
    bm, bn, _, _ = _mma_tile_shape(run_tile, aligned)
    if slices > 1:  # the fp32 partials: tiles x slices x BM x BN
        verify.poison_allocator("cuda", -(-m // bm) * -(-n // bn) * slices * bm * bn * 4)
    out = ops().gemm_mma(a, b, tile, splits)
    torch.cuda.synchronize()
    assert out.dtype == dtype and out.shape == (m, n)
    res = verify.check_case(wl, case, out, ref)
    assert res.correct, (f"{m}x{n}x{k} {dtype} tile={tile} ({run_tile}) splits={splits} ({slices}) "
                         f"shift={shift} seed={seed}: {res.message}")
    return a, b, out


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("m,n,k", SPLIT_CLIFF + SPLIT_IRREGULAR)
def test_gemm_mma_split_plan_runs(m, n, k, dtype):
    """The automatic tile and split (tile -1, splits 0): the cliff shapes
    split on an H200 (132 SMs), and every shape matches float64."""
    want = True if (m, n, k) in SPLIT_CLIFF and _sms() >= 132 else None
    _check_mma_split(m, n, k, dtype, SEED + m + n + k, want_split=want)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("m,n,k", SPLIT_CLIFF)
def test_gemm_cuda_cliff_shapes(m, n, k, dtype):
    """The registered `cuda` GEMM at the cliff shapes (the guarded path, or
    the tile tuner over split tiles), and its config names the split."""
    _check("gemm", "cuda", Case.make("gemm", dtype, M=m, N=n, K=k))
    config = discover().get("gemm", "cuda").config(Case.make("gemm", dtype, M=m, N=n, K=k))
    if _sms() >= 132 and (k % 8 or n % 8):
        assert "split-K" in config, config


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("tile", tuple(range(10)))
@pytest.mark.parametrize("m,n,k,splits", [
    (300, 520, 4104, 3),     # ragged M and N, K % 64 == 8: the last slice's partial k-tile
    (17, 264, 2056, 7),      # one row past a fragment: most fragments skipped
    (600, 1032, 1000, 2),    # K % 32 == 8, two slices
    (129, 256, 3000, 64),    # more slices than k-tiles allow for BK = 64: clamped to 47
    (257, 136, 520, 5),      # short slices of 1-2 k-tiles
    (40, 48, 40, 4),         # one or two k-tiles in all: at most that many slices
])
def test_gemm_mma_split_every_tile(m, n, k, splits, tile, dtype):
    """Each aligned tile with a forced split count (splits=n), whatever the plan says."""
    _check_mma_split(m, n, k, dtype, SEED + 7 * tile + splits, tile=tile, splits=splits,
                     want_split=-(-k // _mma_tile_shape(tile, True)[2]) > 1)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("m,n,k,splits", [
    (27, 256, 5959, 2), (27, 256, 5959, 37), (101, 911, 3719, 9), (479, 241, 1584, 50),
    (333, 717, 3697, 3), (18, 1001, 999, 31), (600, 9, 4097, 5), (65, 263, 33, 2), (5, 3, 1000, 8),
])
def test_gemm_mma_split_guarded(m, n, k, splits, dtype):
    """The guarded path (K or N odd) with forced split counts, up to one
    slice a k-tile, and M from 5 to 600."""
    _check_mma_split(m, n, k, dtype, SEED + splits, splits=splits, want_split=True)


@pytest.mark.parametrize("shift", [(0, 1), (1, 0), (1, 1)])
def test_gemm_mma_split_unaligned_pointers(shift):
    """Views starting 2 bytes into their storage: aligned dims, guarded path, split."""
    _check_mma_split(256, 512, 4096, torch.bfloat16, SEED + 5, shift=shift,
                     want_split=True if _sms() >= 132 else None)
    _check_mma_split(256, 512, 4096, torch.float16, SEED + 6, splits=6, shift=shift, want_split=True)


def test_gemm_mma_split_deterministic():
    """The same inputs give the same bits call after call (the partials are
    added in slice order whichever slice finishes last), for the plan's
    split and forced ones, guarded and aligned."""
    from implementations.gemm.cuda import ops

    for (m, n, k), tile, splits in (((27, 256, 5959), -1, 0), ((403, 256, 5768), 4, 0), ((403, 256, 5768), 2, 9),
                                    ((333, 717, 3697), -1, 13), ((600, 136, 4136), 0, 40)):
        a, b, first = _check_mma_split(m, n, k, torch.bfloat16, SEED + 11, tile=tile, splits=splits,
                                       want_split=True if (splits or _sms() >= 132) else None)
        for _ in range(5):
            assert torch.equal(ops().gemm_mma(a, b, tile, splits), first), (m, n, k, tile, splits)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
def test_gemm_mma_split_calls_in_a_row(dtype):
    """Split calls back to back over grids of different tile and slice counts,
    with gemm_skinny's split calls (which share the counter buffer) between
    them: each call must find its counters at zero (the last slice of each
    tile resets its own), else no CTA counts to S and C keeps its poison."""
    from implementations.gemm.cuda import ops

    order = [((27, 256, 5959), -1, 0), ((333, 717, 3697), -1, 0), ((27, 256, 5959), -1, 0),
             ((403, 256, 5768), 4, 0), ((39, 2376, 6711), -1, 0), ((403, 256, 5768), 4, 3),
             ((1000, 1000, 2048), 0, 2), ((27, 256, 5959), -1, 5), ((17, 8, 4104), 0, 0)]
    for i, ((m, n, k), tile, splits) in enumerate(order):
        _check_mma_split(m, n, k, dtype, SEED + 200 + i, tile=tile, splits=splits)
        if i % 3 == 1:
            _check_skinny(ops().gemm_skinny, 5, 1536, 808, dtype, SEED + 300 + i)


def test_gemm_mma_split_plan_mirrors_the_device():
    """split_plan (the config's mirror, with TILE_SHAPES' CTAs an SM) gives
    the slices gemm_mma_split_plan reports from this device's occupancy API,
    for every tile and the guarded path, over seeded random shapes."""
    import random as _random

    from implementations.gemm.cuda import TILE_SHAPES, ops, split_plan

    rng = _random.Random(SEED)
    sms = _sms()
    shapes = list(SPLIT_CLIFF + SPLIT_IRREGULAR) + [
        (rng.randint(17, 4096), rng.randint(1, 8192), rng.choice([rng.randint(1, 512), rng.randint(512, 32768)]))
        for _ in range(150)]
    for dtype in (torch.float16, torch.bfloat16):
        for m, n, k in shapes:
            for tile, aligned in [(t, True) for t in range(10)] + [(0, False)]:
                slices, tiles, per_sm = ops().gemm_mma_split_plan(m, n, k, tile, aligned, dtype)
                bm, bn, _, want_per_sm = TILE_SHAPES[tile]
                assert per_sm == want_per_sm, (tile, aligned, dtype, per_sm)
                assert tiles == -(-m // bm) * -(-n // bn)
                assert slices == split_plan(m, n, k, tile, aligned, sms, per_sm), (m, n, k, tile, aligned)


def test_gemm_mma_split_small_and_empty():
    """M of 1 and 16 rows split (gemm_mma takes them; `cuda` sends them to
    gemm_skinny), K = 0 gives zeros, and splits must not be negative."""
    from implementations.gemm.cuda import ops

    _check_mma_split(1, 512, 4096, torch.bfloat16, SEED, tile=0, splits=8, want_split=True)
    _check_mma_split(16, 77, 3001, torch.float16, SEED, splits=8, want_split=True)
    a, b = _skinny_inputs(40, 24, 0, torch.float16, SEED)
    assert torch.equal(ops().gemm_mma(a, b, 0, 4), torch.zeros(40, 24, device="cuda", dtype=torch.float16))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("d", (64, 96, 128))
@pytest.mark.parametrize("s", (1, 17, 63, 64, 65, 127, 129, 255, 257))
@pytest.mark.parametrize("causal", (0, 1))
def test_attention_short_and_ragged(s, d, causal, dtype):
    _check("attention", "cuda", Case.make("attention", dtype, B=2, H=3, S=s, D=d, causal=causal))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_attention_more_heads_than_a_grid_holds(dtype):
    """65,545 heads: two launches of flash_attention.cu's loop, the second of 10 heads."""
    _check("attention", "cuda", Case.make("attention", dtype, B=6554, H=10, S=19, D=64, causal=1))


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
    inputs = {"q": q, "k": k, "v": v, "causal": bool(causal)}
    case = Case.make("attention", str(dtype).removeprefix("torch."), B=2, H=3, S=s, D=d, causal=int(causal))
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", q.numel() * q.element_size())
    out = ops().attention_flash(q, k, v, bool(causal), variant)
    res = verify.check_case(wl, case, out, ref, inputs=inputs)
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
for d in (64, 96, 128):
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
with pytest.raises(RuntimeError, match="splits must be"):
    gemm_ops().gemm_mma(a.bfloat16(), a.bfloat16(), 0, -1)
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
with pytest.raises(RuntimeError, match="at most 16 rows"):
    gemm_ops().gemm_skinny(torch.randn(17, 64, device="cuda").bfloat16(), a.bfloat16())
with pytest.raises(RuntimeError, match="float16 and bfloat16"):
    gemm_ops().gemm_skinny(a[:4], a)
with pytest.raises(RuntimeError, match="inner dimensions"):
    gemm_ops().gemm_skinny(a[:4].bfloat16(), torch.randn(32, 64, device="cuda").bfloat16())
q = torch.randn(1, 1, 16, 80, device="cuda", dtype=torch.bfloat16)
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
    ("gemm_skinny", torch.bfloat16, (5, 24, 300)),
    ("gemm_skinny", torch.float16, (16, 17, 11)),
])
def test_opcheck_gemm(op, dtype, shape):
    from implementations.gemm.cuda import ops

    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    torch.library.opcheck(getattr(ops(), op).default, (a, b))


@pytest.mark.parametrize("dtype,shape,tile,splits", [
    (torch.bfloat16, (40, 264, 1032), 0, 5),   # aligned, split
    (torch.float16, (33, 17, 1111), -1, 3),    # guarded, split
    (torch.bfloat16, (300, 256, 4096), -1, 0),  # the plan
])
def test_opcheck_gemm_mma_split(dtype, shape, tile, splits):
    from implementations.gemm.cuda import ops

    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    torch.library.opcheck(ops().gemm_mma.default, (a, b, tile, splits))


@pytest.mark.parametrize("d,variant", [(64, -1), (64, 1), (96, 3), (128, 4)])
@pytest.mark.parametrize("causal", (False, True))
def test_opcheck_attention(causal, variant, d):
    from implementations.attention.cuda import ops

    q, k, v = (torch.randn(1, 2, 80, d, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.library.opcheck(ops().attention_flash.default, (q, k, v, causal, variant))


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_tuner_races_whole_k_against_the_split(dtype):
    """At 149 x 5448 x 2048 tile 9's plan splits K in 3: the tuner times its whole-K
    variant (23) beside it, and every variant it timed, the winner included, computes
    the product (poisoned output, float64 reference)."""
    from implementations.gemm import cuda as g

    m, n, k = 149, 5448, 2048
    case = Case.make("gemm", dtype, M=m, N=n, K=k)
    wl = discover().workloads["gemm"]
    inputs = wl.make_inputs(case, "cuda", 149)
    ref = wl.reference(case, inputs)
    out = g.gemm_cuda(inputs["a"], inputs["b"])
    torch.cuda.synchronize()
    assert verify.check_case(wl, case, out, ref, inputs=inputs).correct
    key = g._key(dtype, m, n, k)
    assert g.WHOLE_K_FIRST + 9 in g._TUNER.times[key] and 9 in g._TUNER.times[key]
    for tile in g._TUNER.times[key]:
        verify.poison_allocator("cuda", m * n * 2)
        res = verify.check_case(wl, case, g.gemm_tile(inputs["a"], inputs["b"], tile), ref, inputs=inputs)
        assert res.correct, f"tile {tile}: {res.message}"
