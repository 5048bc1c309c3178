"""Hand-written CUDA GEMM: ``cuda`` (tensor cores), ``cuda:tf32x3`` and ``cuda:naive`` (the baseline).

``cuda`` is gemm_mma.cu (kernel in gemm_mma_kernel.cuh): mma.sync m16n8k16
fed by ldmatrix from padded (bank conflict free) shared memory, filled by a
3- or 4-stage cp.async pipeline, 64x64 of C per warp, fragments double
buffered in registers, one barrier per k-tile, C stored through shared memory
in 16-byte rows; float16 and bfloat16, since mma.sync has no float32
inputs (float32 goes to gemm_skinny's FMA form at M <= 16, else to
cuda:tf32x3).  On Hopper four more tiles
(10 to 13) run the same mma.sync math warp-specialised (gemm_ws.cu, kernel in
gemm_ws_kernel.cuh): a producer warpgroup issues TMA loads into swizzled
stages, 8 mma warps wait only on mbarriers, the grid is persistent; 12 and
13 store C through shared memory in 16-byte pieces rather than 4-byte ones.
Where the tiles of C fill less than half a wave of the GPU and K is long,
gemm_mma splits K (tiles 0 to 9 and the guarded path): S slices of K per
tile run as separate CTAs, each leaves its fp32 partial in a workspace, and
the last of a tile's slices to finish adds the S partials in slice order
(deterministic) and writes C, in the same launch; S comes from a cost model
over one wave of the split kernel's resident CTAs (split_plan mirrors it).
Rows whose width is not a multiple of 16 bytes (K or N not a multiple of 8)
go through zero-padded copies of A and B to the tuned tiles where the GEMM is
large enough for the copy to pay (implementations.gemm.padding), and else
through gemm_mma's guarded tile, which loads 2 bytes at a time.
When A has at most 16 rows (decode and other skinny shapes) ``cuda`` runs
gemm_skinny.cu instead: those shapes are a stream over B, which one row of
128-row tiles would read with most SMs idle and mostly padded tensor-core
tiles.  Where B's rows are 16-byte packs (N % 8 == 0) A's rows are the
16-row operand of mma.sync and each warp streams 64 columns of B through its
own ring of shared memory (cp.async, ldmatrix.trans); otherwise each thread
owns 8 columns of C with M x 8 fp32 accumulators on the FMA units and
2-byte loads of B.  Both split K over the grid so that it fills one wave of
the SMs (the occupancy API) whatever N is, and in the same launch the last
split of each column block to finish adds the splits' fp32 partials in
split order (deterministic).  On Hopper, where K and N are multiples of 8,
the tuner races that tensor-core form against gemm_skinny_tma.cu (one CTA an
SM whose four mma warps share one deep TMA-fed ring, so each SM keeps more of
B in flight), per key of M, N and K to a half-octave.  float32 at most 16
rows runs the FMA form one element a load (exact float32: the products are
bandwidth-bound there, so the CUDA cores keep up); larger float32 GEMMs
are cuda:tf32x3's.
``cuda:tf32x3`` is float32 on the tensor cores as three TF32 products a step,
each operand split into a TF32 head and tail, held to float32's tolerance: on
Hopper gemm_tf32x3_wgmma.cu (each k-tile split once a CTA into swizzled
shared memory, wgmma m64n128k8 from there, 64- or 128-row tiles), elsewhere
gemm_tf32x3.cu (mma.sync m16n8k8, split a fragment at a time).  Both add each
k-tile's products to their float32 accumulators outside the tensor cores.
``cuda:naive`` is gemm_naive.cu: one thread per element of C, no tiling, all
three dtypes; the pair shows what tiling and tensor cores buy.  Built by
implementations._shared.cuda_ext on first use; called as torch.ops.kernel_suite.gemm_mma /
gemm_mma_ws / gemm_skinny / gemm_skinny_tma / gemm_tf32x3 / gemm_tf32x3_wgmma / gemm_naive.
"""
from __future__ import annotations

import functools
from pathlib import Path

from implementations._shared import cuda_ext, cuda_variants
from implementations._shared.autotune import bucket
from implementations._shared.cuda_variants import VariantTuner
from implementations.gemm import padding
from suite.backends import dtype_in
from suite.workload import Case, register

_HERE = Path(__file__).parent
SOURCES = [_HERE / "gemm_mma.cu", _HERE / "gemm_naive.cu", _HERE / "gemm_skinny.cu", _HERE / "gemm_tf32x3.cu"]
WS_SOURCES = [_HERE / "gemm_ws.cu", _HERE / "gemm_skinny_tma.cu", _HERE / "gemm_tf32x3_wgmma.cu"]  # sm_90a: its own extension


def _fakes() -> None:
    import torch

    def out_like(a, b):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "a and b must be matrices")
        torch._check(a.shape[1] == b.shape[0], lambda: "inner dimensions differ")
        return a.new_empty((a.shape[0], b.shape[1]))

    torch.library.register_fake("kernel_suite::gemm_mma")(lambda a, b, tile=-1, splits=0: out_like(a, b))
    torch.library.register_fake("kernel_suite::gemm_naive")(out_like)
    torch.library.register_fake("kernel_suite::gemm_tf32x3")(out_like)
    torch.library.register_fake("kernel_suite::gemm_skinny")(out_like)
    torch.library.register_fake("kernel_suite::gemm_skinny_v")(lambda a, b, variant: out_like(a, b))


def _ws_fakes() -> None:
    import torch

    def out_like(a, b):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "a and b must be matrices")
        torch._check(a.shape[1] == b.shape[0], lambda: "inner dimensions differ")
        return a.new_empty((a.shape[0], b.shape[1]))

    torch.library.register_fake("kernel_suite::gemm_mma_ws")(lambda a, b, tile=0: out_like(a, b))
    torch.library.register_fake("kernel_suite::gemm_skinny_tma")(out_like)
    torch.library.register_fake("kernel_suite::gemm_tf32x3_wgmma")(lambda a, b, rows: out_like(a, b))


@functools.cache
def _hopper() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def ops():
    """Build (once) and load gemm_mma, gemm_skinny and gemm_naive, and on Hopper gemm_mma_ws."""
    lib = cuda_ext.load("gemm", SOURCES, fakes=_fakes)
    if _hopper():
        cuda_ext.load("gemm_ws", WS_SOURCES, hopper=True, fakes=_ws_fakes)
    return lib


# The `tile` argument of gemm_mma: BM x BN x BK, warps (each 64x64 of C), stages.
TILES = {0: "128x128x32, 4 warps, 4 stages, 2 CTAs/SM",
         1: "128x256x32, 8 warps, 4 stages",
         2: "128x256x64, 8 warps, 3 stages",
         3: "256x128x64, 8 warps, 3 stages",
         4: "128x128x64, 4 warps, 3 stages, 2 CTAs/SM",
         5: "128x256x64, 8 warps, 4 stages",
         # 6..9: tiles 3, 2, 5, 4 with each k-tile's cp.async split over its
         # first three k16 slices, so no ldmatrix lands right before its mma
         6: "256x128x64, 8 warps, 3 stages, copies spread over k16 slices",
         7: "128x256x64, 8 warps, 3 stages, copies spread over k16 slices",
         8: "128x256x64, 8 warps, 4 stages, copies spread over k16 slices",
         9: "128x128x64, 4 warps, 3 stages, 2 CTAs/SM, copies spread over k16 slices",
         # 10..13: gemm_mma_ws tiles 0..3 (Hopper only)
         10: "256x128x64, 8 mma warps + a TMA producer warpgroup, 4 stages, persistent",
         11: "128x256x64, 8 mma warps + a TMA producer warpgroup, 4 stages, persistent",
         12: "256x128x64, 8 mma warps + a TMA producer warpgroup, 4 stages, persistent, "
             "C through shared memory in 16-byte stores",
         13: "128x256x64, 8 mma warps + a TMA producer warpgroup, 4 stages, persistent, "
             "C through shared memory in 16-byte stores"}
WS_FIRST = 10
# 14..23: tiles 0..9 with K whole (gemm_mma's splits=1), timed beside them wherever
# split_plan would split that tile: the plan is a cost model, the tuner measures.
WHOLE_K_FIRST = 14
TILES.update({WHOLE_K_FIRST + t: TILES[t] + ", K whole (no split-K)" for t in range(WS_FIRST)})


# A with at most this many rows goes to gemm_skinny.
SKINNY_ROWS = 16
SKINNY_COLS = 256   # columns of C per block
SKINNY_KROUND = 8   # a K split's rows are a multiple of this
SKINNY_KMIN = 64    # and, with more than one split, at least this many


def skinny_blocks_per_sm(m: int) -> int:
    """Blocks of gemm_skinny an SM holds for m rows of A.  The .cu asks
    cudaOccupancyMaxActiveBlocksPerMultiprocessor for the kernel it launches;
    this is the figure that gives on sm_90, from the register budget each
    instantiation is compiled to (kMinBlocks in gemm_skinny.cu: 64 registers
    a thread for MB <= 2, 128 for MB = 4 and 8, up to 255 for MB = 16, where
    MB is the power of two at or above m), for the `config` text only."""
    return 4 if m <= 2 else 2 if m <= 8 else 1


def skinny_plan(m: int, n: int, k: int, sms: int, per_sm: int) -> tuple[int, int]:
    """(K rows per split, splits) of gemm_skinny (mirrors split_rows in
    gemm_skinny.cu), for a grid of one wave of sms * per_sm blocks over the
    ceil(n / 256) column blocks: splits = that wave // column blocks, at most
    k // 64 (each warp of a split gets an 8-row group) and with splits^2 * m
    <= k (the partials the last block of a column block adds, splits * m * 256
    fp32, at most twice the B bytes a split reads); at least one; rows
    rounded up to a multiple of 8."""
    return _split_rows(m, n, k, sms * per_sm, SKINNY_COLS, SKINNY_KMIN, SKINNY_KROUND)


def _split_rows(m: int, n: int, k: int, wave: int, cols: int, kmin: int, kround: int) -> tuple[int, int]:
    """The rule both skinny plans share (plan_split_rows in gemm_skinny.cu)."""
    splits = min(wave // -(-n // cols), k // kmin)
    while splits > 1 and splits * splits * m > k:
        splits -= 1
    rows = -(-k // max(splits, 1))
    rows = -(-rows // kround) * kround
    return rows, -(-k // rows)


SKINNY_MMA_COLS = 64     # the tensor-core form: columns of C per block
SKINNY_MMA_STAGE = 32    # rows of B a ring slot holds; a split is a multiple of it
SKINNY_MMA_WARPS = 8     # and, with more than one split, at least one slot a warp
SKINNY_MMA_PER_SM = 2    # blocks an SM holds (96 KB of rings each, <= 128 registers)


def skinny_mma_plan(m: int, n: int, k: int, sms: int, per_sm: int = SKINNY_MMA_PER_SM) -> tuple[int, int]:
    """(K rows per split, splits) of gemm_skinny's tensor-core form (mirrors
    mma_split_rows in gemm_skinny.cu): skinny_plan's rule over ceil(n / 64)
    column blocks, at most k // 256 splits, rows a multiple of 32."""
    return _split_rows(m, n, k, sms * per_sm, SKINNY_MMA_COLS, SKINNY_MMA_STAGE * SKINNY_MMA_WARPS, SKINNY_MMA_STAGE)


# BM, BN, BK and the CTAs an SM holds of each gemm_mma tile (TileConfig in
# gemm_mma.cu): on sm_90 the split kernels hold as many as their launch bounds
# ask (registers and shared memory; tests/test_cuda_compile.py checks it
# against ptxas's figures).  The guarded path runs tile 0.
TILE_SHAPES = {0: (128, 128, 32, 2), 1: (128, 256, 32, 1), 2: (128, 256, 64, 1), 3: (256, 128, 64, 1),
               4: (128, 128, 64, 2), 5: (128, 256, 64, 1), 6: (256, 128, 64, 1), 7: (128, 256, 64, 1),
               8: (128, 256, 64, 1), 9: (128, 128, 64, 2)}
# cp.async stages of tiles 0..9 (gemm_mma.cu's TileConfig), for their shared memory
TILE_STAGES = {0: 4, 1: 4, 2: 3, 3: 3, 4: 3, 5: 4, 6: 3, 7: 3, 8: 4, 9: 3}


def tile_smem(tile: int) -> int:
    """Mirror of gemm_mma_kernel.cuh's TileConfig::SMEM_BYTES: the stages of A
    (BM x BK) and B (BK x BN) with rows padded by 8 elements, or C's staging
    tile (BM x BN + 8) if larger; 2-byte elements."""
    bm, bn, bk, _ = TILE_SHAPES[tile]
    pipe = TILE_STAGES[tile] * (bm * (bk + 8) + bk * (bn + 8)) * 2
    return max(pipe, bm * (bn + 8) * 2)


SPLIT_MIN_KTILES = 4   # a slice has at least this many k-tiles
SPLIT_GUARDED_KTILE = 4  # a guarded k-tile costs this many aligned ones in the model


def split_plan(m: int, n: int, k: int, tile: int, aligned: bool, sms: int, per_sm: int) -> int:
    """Slices of K per tile that gemm_mma runs (mirrors split_slices in
    gemm_mma.cu; 1: no split).  In units of a tenth of an aligned k-tile's
    bytes, (BM + BN) * BK * 2: a slice walks ceil(kt / s) k-tiles (kt =
    ceil(k / BK)), each 10 units aligned (times the CTAs sharing an SM,
    ceil(tiles * s / sms)) or 10 * SPLIT_GUARDED_KTILE guarded; the last slice
    of a tile then moves s + 1 partials (its own out, all s back), each one
    unit plus 5 times its bytes over the k-tile's (the fp32 fragments inside m
    and n, at twice the walk's rate).  s = the cheapest from 1 up to one wave
    (sms * per_sm // tiles) and to kt // SPLIT_MIN_KTILES."""
    bm, bn, bk, _ = TILE_SHAPES[tile if aligned else 0]
    tiles = -(-m // bm) * -(-n // bn)
    kt = -(-k // bk)
    most = min(sms * per_sm // tiles, kt // SPLIT_MIN_KTILES)
    if most < 2:
        return 1
    ktile_bytes = (bm + bn) * bk * 2
    rows, cols = min(bm, -(-m // 16) * 16), min(bn, -(-n // 8) * 8)
    step = 10 * ktile_bytes * (1 if aligned else SPLIT_GUARDED_KTILE)
    partial = ktile_bytes + 5 * rows * cols * 4

    def cost(s: int) -> int:
        share = -(-tiles * s // sms) if aligned else 1
        return step * -(-kt // s) * share + ((s + 1) * partial if s > 1 else 0)

    best, best_cost = 1, cost(1)
    for s in range(2, most + 1):
        if cost(s) < best_cost:
            best, best_cost = s, cost(s)
    return best


def split_text(m: int, n: int, k: int, tile: int, aligned: bool, sms: int) -> str:
    """The split part of a gemm_mma config: '' without one."""
    bm, bn, bk, per_sm = TILE_SHAPES[tile if aligned else 0]
    s = split_plan(m, n, k, tile, aligned, sms, per_sm)
    if s == 1:
        return ""
    kt = -(-k // bk)
    tiles = -(-m // bm) * -(-n // bn)
    sizes = f"{kt // s}" if kt % s == 0 else f"{kt // s}-{kt // s + 1}"
    return (f", split-K: {s} slices of {sizes} k-tiles a tile ({tiles} tiles x {s} = {tiles * s} CTAs, "
            f"a wave {sms * per_sm}), fp32 partials added in slice order")


def _sms() -> int:
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


SKINNY_TMA_COLS = 64    # gemm_skinny_tma: columns of C a CTA (one CTA an SM)
SKINNY_TMA_STAGE = 128  # rows of B a stage; a split is a multiple of it, at least two


def skinny_tma_plan(m: int, n: int, k: int, sms: int) -> tuple[int, int]:
    """(K rows per split, splits) of gemm_skinny_tma (mirrors skinny_tma_rows in
    gemm_skinny_tma.cu): splits only over the SMs that the ceil(n / 64) column
    blocks leave idle, at most k // 256, with splits^2 * m <= k; rows a multiple of 128."""
    splits = max(1, min(sms // -(-n // SKINNY_TMA_COLS), k // (2 * SKINNY_TMA_STAGE)))
    while splits > 1 and splits * splits * m > k:
        splits -= 1
    per_split = -(-k // splits)
    rows = -(-per_split // SKINNY_TMA_STAGE) * SKINNY_TMA_STAGE
    return rows, -(-k // rows)


# At most 16 rows of A, on Hopper, with 16-byte rows (K, N multiples of 8): the
# two skinny forms race per key; elsewhere gemm_skinny runs alone.
SKINNY_FORMS = {0: "gemm_skinny's tensor-core form: mma.sync m16n8k16, 64 columns a block, "
                   "B through a 3-slot cp.async ring a warp, two blocks an SM",
                1: "gemm_skinny_tma: mma.sync m16n8k16, 64 columns a CTA, B and A by TMA through "
                   "a 6-stage ring of 20 KB that 4 warps share, one CTA an SM"}
_SKINNY_TUNER = VariantTuner(tuple(SKINNY_FORMS), SKINNY_FORMS)


def _skinny_key(dtype: str, m: int, n: int, k: int) -> tuple:
    """The skinny race's key: M, N and K each to a half-octave (bucket)."""
    return ("skinny", dtype, bucket(m), bucket(n), bucket(k))


def _skinny_races(m: int, n: int, k: int, dtype: str) -> bool:
    return m <= SKINNY_ROWS and n % 8 == 0 and k % 8 == 0 and dtype != "float32" and _hopper()


def _skinny_config(case: Case) -> str:
    m, n, k = case["M"], case["N"], case["K"]
    sms = _sms()
    if _skinny_races(m, n, k, case.dtype):
        key = _skinny_key(case.dtype, m, n, k)
        tuned = _SKINNY_TUNER.config(key, at=f"{m}x{n}x{k}")
        if tuned:
            plan = skinny_tma_plan if _SKINNY_TUNER.best[key] == 1 else skinny_mma_plan
            rows, splits = plan(m, n, k, sms)
            return f"skinny: {tuned}, {splits} K splits of {rows} rows"
    if n % 8 == 0 and case.dtype != "float32":
        rows, splits = skinny_mma_plan(m, n, k, sms)
        return (f"skinny: mma.sync m16n8k16 ({m} of 16 rows), 64 columns a block x {splits} K splits "
                f"of {rows} rows, B through a 3-slot cp.async ring a warp")
    rows, splits = skinny_plan(m, n, k, sms, skinny_blocks_per_sm(m))
    bound = 1 << max(0, m - 1).bit_length()
    loads = "4-byte loads of B (float32, exact)" if case.dtype == "float32" else "2-byte loads of B"
    return (f"skinny: FMA, {bound}x8 fp32 accumulators a thread, 256 columns x {splits} K splits "
            f"of {rows} rows, {loads}")


def _tile(m: int, n: int, k: int) -> str:
    """The tile gemm_mma.cu picks for this shape (mirrors its auto_tile) and its split."""
    sms = _sms()
    if k % 8 or n % 8:
        return (TILES[0] + ", guarded 2-byte loads (K or N not a multiple of 8)"
                + split_text(m, n, k, 0, False, sms))
    tile = auto_tile(m, n, k, sms)
    return TILES[tile] + split_text(m, n, k, tile, True, sms)


def auto_tile(m: int, n: int, k: int, sms: int) -> int:
    """gemm_mma's tile without a choice (auto_tile in gemm_mma.cu)."""
    if -(-m // 128) * -(-n // 256) >= 2 * sms and k >= 256:
        return 2
    return 4 if k >= 256 else 0


# The tile is timed at the first call of each key (the shape in whole tiles:
# _key) and the fastest kept (implementations/_shared/cuda_variants); shapes
# with K or N not a multiple of 8 have one (guarded) tile.
def _runs(tile: int, key: tuple) -> bool:
    """Whether the tuner times ``tile`` for ``key``: the ws tiles on Hopper only; a
    mma.sync tile only where the device's shared memory a block holds it (tiles
    1-9 need 105-204 KB: not on GPUs of 99 KB, 5 and 8 not on an A100's 163); a
    whole-K variant only where its tile's plan splits K (else it is that tile)."""
    if tile < WS_FIRST or tile >= WHOLE_K_FIRST:
        base = tile - WHOLE_K_FIRST if tile >= WHOLE_K_FIRST else tile
        if tile_smem(base) > cuda_variants.device().smem_optin:
            return False
    if tile >= WHOLE_K_FIRST:
        _, m, n, k = key
        m, n, k = m * 128, n * 128, k * 32  # the key's largest shape: the same tiles and k-tiles
        t = tile - WHOLE_K_FIRST
        return split_plan(m, n, k, t, True, _sms(), TILE_SHAPES[t][3]) > 1
    return tile < WS_FIRST or _hopper()


_TUNER = VariantTuner(tuple(TILES), TILES, runs=_runs)


def _key(dtype: str, m: int, n: int, k: int) -> tuple:
    """The tuning key: the shape in 128 rows, 128 columns and 32 k, across
    which every tile's count (BM, BN 128 or 256, BK 32 or 64) and k-tiles are
    the same.  A sweep of shapes that differ inside one tile tunes once."""
    return (dtype, -(-m // 128), -(-n // 128), -(-k // 32))


def _config(case: Case) -> str:
    if case["M"] <= SKINNY_ROWS:
        return _skinny_config(case)
    m, n, k = case["M"], case["N"], case["K"]
    note = ""
    if (k % 8 or n % 8) and padding.pays(m, n, k):
        note = padding.padded_text(k, n, 2)
        k, n = padding.padded_dims(k, n, 2)
    if k % 8 == 0 and n % 8 == 0:
        key = _key(case.dtype, m, n, k)
        tuned = _TUNER.config(key, at=f"{m}x{n}x{k}")
        if tuned:
            tile = _TUNER.best[key]
            split = split_text(m, n, k, tile, True, _sms()) if tile < WS_FIRST else ""  # whole K: none
            return tuned + split + note
    return _tile(m, n, k) + note


def _supports(case: Case) -> str | None:
    if case.dtype == "float32" and case["M"] > SKINNY_ROWS:
        return (f"float32 only at M <= {SKINNY_ROWS} (gemm_skinny's FMA form): the tiled kernels are "
                f"mma.sync on 16-bit inputs (cuda:tf32x3 takes float32 at any M)")
    return dtype_in("float32", "float16", "bfloat16")(case)


@register("gemm", "cuda", available=cuda_ext.cuda_available,
          supports=_supports, config=_config,
          description="CUDA: mma.sync tensor cores, ldmatrix from padded shared memory, "
                      "multi-stage cp.async pipeline, register double-buffered fragments; on Hopper also "
                      "TMA-fed warp-specialised tiles; tile autotuned; K split over the SMs where the "
                      "tiles leave most idle; at most 16 rows of A: split-K kernels streaming B (A's rows "
                      "the mma operand where B's rows are 16-byte packs, else FMA), on Hopper raced "
                      "against a TMA-fed one; float32 at most 16 rows only (FMA, exact)")
def gemm_cuda(a, b):
    (m, k), n = a.shape, b.shape[-1]
    if m <= SKINNY_ROWS:
        dtype = str(a.dtype).removeprefix("torch.")
        if _skinny_races(m, n, k, dtype) and all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (a, b)):
            key = _skinny_key(dtype, m, n, k)
            return _SKINNY_TUNER.run(key, lambda form: skinny_form(a, b, form), at=f"{m}x{n}x{k}")
        return ops().gemm_skinny(a, b)
    if padding.rows_aligned(a) and padding.rows_aligned(b):
        return _tuned(a, b)
    if padding.pays(m, n, k):
        return padding.unpad(_tuned(*padding.pad_operands(a, b)), n)
    return ops().gemm_mma(a, b)  # the guarded path (one tile); TMA needs 16-byte rows


def _tuned(a, b):
    (m, k), n = a.shape, b.shape[-1]
    key = _key(str(a.dtype).removeprefix("torch."), m, n, k)
    return _TUNER.run(key, lambda tile: gemm_tile(a, b, tile), at=f"{m}x{n}x{k}")


def skinny_form(a, b, form: int):
    """C = a @ b for at most 16 rows of a with one form of SKINNY_FORMS (1: Hopper only)."""
    lib = ops()
    return lib.gemm_skinny_tma(a, b) if form == 1 else lib.gemm_skinny(a, b)


def gemm_tile(a, b, tile: int):
    """C = a @ b with one tile of TILES (10..13: gemm_mma_ws, Hopper only; 14..23: tiles
    0..9 with K whole)."""
    lib = ops()
    if tile >= WHOLE_K_FIRST:
        return lib.gemm_mma(a, b, tile - WHOLE_K_FIRST, 1)
    if tile >= WS_FIRST:
        return lib.gemm_mma_ws(a, b, tile - WS_FIRST)
    return lib.gemm_mma(a, b, tile)


TF32X3_TILE = ("128x128x32 tiles, 8 warps of 64x32, 3 stages of cp.async ({chunk}), "
               "each operand a TF32 head and tail, 3 mma.sync m16n8k8 a product")
TF32X3_WGMMA_TILE = ("{rows}x128x32 tiles, {groups} warpgroup{s}, 2 stages of cp.async ({chunk}), each k-tile split "
                     "once into swizzled TF32 heads and tails, 3 wgmma m64n128k8 a product")


def tf32x3_rows(m: int, n: int) -> int:
    """gemm_tf32x3_wgmma's tile height: 128 rows (two warpgroups) unless the
    128-row tiles would leave SMs idle in the one wave there is, then 64."""
    return 64 if -(-m // 128) * -(-n // 128) < _sms() else 128


def _tf32x3_config(case: Case) -> str:
    vec = case["K"] % 4 == 0 and case["N"] % 4 == 0
    chunk = "16-byte chunks" if vec else "4-byte chunks: K or N not a multiple of 4"
    if _hopper():
        rows = tf32x3_rows(case["M"], case["N"])
        return TF32X3_WGMMA_TILE.format(rows=rows, groups=rows // 64, s="s" if rows > 64 else "", chunk=chunk)
    return TF32X3_TILE.format(chunk=chunk)


TF32X3_SMEM = 3 * (128 * (32 + 4) + 32 * (128 + 8)) * 4  # gemm_tf32x3.cu's SMEM_BYTES (mma.sync form)


def _tf32x3_available(device: str) -> str | None:
    """The mma.sync form (GPUs other than Hopper) needs TF32 tensor cores and 105 KB
    of shared memory a block."""
    err = cuda_ext.cuda_available(device)
    if err or _hopper():
        return err
    limits = cuda_variants.device()
    if limits.major < 8:
        return f"needs TF32 tensor cores (sm_80 or newer); this GPU is sm_{limits.major}x"
    if limits.smem_optin < TF32X3_SMEM:
        return (f"needs {TF32X3_SMEM} bytes of shared memory a block; this GPU offers "
                f"{limits.smem_optin}")
    return None


@register("gemm", "cuda:tf32x3", available=_tf32x3_available, supports=dtype_in("float32"),
          config=_tf32x3_config, math="tf32x3",
          description="CUDA: float32 on TF32 tensor cores as three products (each operand a TF32 head "
                      "plus a TF32 tail, tail x tail dropped): wgmma on Hopper, mma.sync elsewhere; "
                      "checked at float32's tolerance")
def gemm_cuda_tf32x3(a, b):
    if _hopper():
        return ops().gemm_tf32x3_wgmma(a, b, tf32x3_rows(a.shape[0], b.shape[1]))
    return ops().gemm_tf32x3(a, b)


@register("gemm", "cuda:naive", available=cuda_ext.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"),
          config=lambda case: "one thread per output, 32x8 blocks, fp32 FMA",
          description="CUDA: one thread per output element, no tiling, no tensor cores")
def gemm_cuda_naive(a, b):
    return ops().gemm_naive(a, b)
