"""Hopper CUDA GEMM ``cuda:wgmma``: TMA loads, an mbarrier pipeline and wgmma.mma_async.

The kernel is implementations/gemm/cuda/gemm_wgmma.cu (PTX wrappers in
wgmma_ptx.cuh and hopper.cuh, tensor maps in tma_map.h, beside it), built for
sm_90a by implementations._shared.cuda_ext and called as
``torch.ops.kernel_suite.gemm_wgmma(a, b, tile=-1)``.  One CTA per SM walks
output tiles persistently: a producer warpgroup issues TMA loads into a ring of
128-byte-swizzled shared-memory stages, two consumer warpgroups run
m64nNk16 wgmma on them straight from shared memory and write the 16-bit
result, from registers (tiles 0-2) or through shared memory in 16-byte
stores (tiles 3-5, the same shapes; tile 9, 128 x 192, whose wave count
falls between theirs).  Tiles 6-8 and 10 are tiles 3-5 and 9 with a
stream-K last wave: where the tiles would leave a ragged last wave, the k-steps
of the last wave's tiles and one wave more are dealt evenly over the SMs, and
the CTA that ran a cut tile from k = 0 adds the other pieces' fp32 partial sums
(sk_plan mirrors the cut).  Tiles 11 and 12 are tiles 3 and 9 on clusters
of two CTAs that run vertically adjacent tiles and share B: each loads half
of every B box and TMA multicasts it into both, so B is read from L2 once a
pair.  The tile is timed at the first call of
each key (the shape in whole tiles, and M to a half-octave below one
tile: _key) and the fastest kept
(implementations/_shared/cuda_variants).  float16
and bfloat16 only.  TMA needs 16-byte rows: where K or N is not a multiple of 8
(or a base is not 16-byte aligned) A and B are copied into zero-padded rows
first and C out of them after (implementations.gemm.padding), inside the call.
Rows that are 16-byte but not 128-byte multiples feed the TMA boxes slower
(each 128-byte box row straddles two lines; the maps promote L2 fills to
128 bytes only, so a straddling row pulls in no lines beyond its own two,
and the pairs read B once for two tiles).  Where the GEMM is large enough
for a copy to pay, the tuner also times every tile on a copy of A and B
whose rows lie whole lines apart (variants 100 + tile; the op takes the
row strides, so C needs no copy).
"""
from __future__ import annotations

from pathlib import Path

from implementations._shared import cuda_ext
from implementations._shared.autotune import bucket
from implementations._shared.cuda_variants import VariantTuner
from implementations.gemm import padding
from suite.backends import needs_hopper
from suite.workload import Case, register

SOURCES = [Path(__file__).parent / "cuda" / "gemm_wgmma.cu"]
BM = 128

# The `tile` argument of gemm_wgmma: (BN, stages, description); BM = 128, BK = 64.
_SHAPES = {0: (256, 4, "128x256x64, 4 stages, 2 consumer warpgroups of m64n256k16"),
           1: (128, 6, "128x128x64, 6 stages, 2 consumer warpgroups of m64n128k16"),
           2: (64, 8, "128x64x64, 8 stages, 2 consumer warpgroups of m64n64k16")}
TILES = {**_SHAPES,
         **{t + 3: (bn, st, d + ", C through shared memory in 16-byte stores")
            for t, (bn, st, d) in _SHAPES.items()}}
TILES[9] = (192, 5, "128x192x64, 5 stages, 2 consumer warpgroups of m64n192k16, "
                    "C through shared memory in 16-byte stores")
# The stream-K tiles, each the tile it cuts plus a stream-K last wave.
STREAM_K = {6: 3, 7: 4, 8: 5, 10: 9}
TILES.update({t: (TILES[w][0], TILES[w][1], TILES[w][2] + ", stream-K last wave") for t, w in STREAM_K.items()})
# The tiles on clusters of two CTAs that share B (multicast), each the tile it pairs.
PAIRS = {11: 3, 12: 9}
TILES.update({t: (TILES[w][0], TILES[w][1], TILES[w][2] + ", clusters of 2 CTAs sharing B by TMA multicast")
              for t, w in PAIRS.items()})
TILES = dict(sorted(TILES.items()))
SK_MIN_STEPS = 4  # as in gemm_wgmma.cu


def sk_plan(tiles: int, k_tiles: int, sms: int) -> tuple[int, int]:
    """(tiles cut along K, CTAs) of a stream-K tile (mirrors sk_plan in
    gemm_wgmma.cu): none where the tiles fill whole waves; else the last partial
    wave's tiles and one wave more over one CTA an SM, or, with fewer tiles
    than SMs, all of them over as many CTAs as give each SK_MIN_STEPS k-steps
    (none where that is no more CTAs than tiles)."""
    grid = min(tiles, sms)
    if tiles % sms == 0:
        return 0, grid
    if tiles > sms:
        return tiles % sms + sms, sms
    ctas = min(sms, tiles * k_tiles // SK_MIN_STEPS)
    return (tiles, ctas) if ctas > tiles else (0, grid)
# The tiles auto_tile weighs, widest first, with the relative cost of one
# tile per wave (gemm_wgmma.cu).
_WEIGHT = {0: 40, 9: 31, 1: 22, 2: 13}


LINED = 100  # variant LINED + t: tile t on copies of A and B with rows on 128-byte lines
TILES.update({LINED + t: (bn, st, d + "; A and B copied onto 128-byte lines first")
              for t, (bn, st, d) in list(TILES.items())})


def _fakes() -> None:
    import torch

    def out_like(a, b, tile=-1):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "a and b must be matrices")
        torch._check(a.shape[1] == b.shape[0], lambda: "inner dimensions differ")
        return a.new_empty((a.shape[0], b.shape[1]))

    torch.library.register_fake("kernel_suite::gemm_wgmma")(out_like)


def ops():
    return cuda_ext.load("gemm_wgmma", SOURCES, hopper=True, fakes=_fakes)


def auto_tile(m: int, n: int, sms: int) -> int:
    """The tile gemm_wgmma picks with tile=-1 (mirrors auto_tile in the .cu):
    fewest waves of tiles over the SMs, weighted by the tile's cost."""
    best, best_cost = 0, None
    for t in _WEIGHT:
        tiles = -(-m // BM) * -(-n // TILES[t][0])
        cost = -(-tiles // sms) * _WEIGHT[t]
        if best_cost is None or cost < best_cost:
            best, best_cost = t, cost
    return best


def _available(device: str) -> str | None:
    err = needs_hopper(device)
    if err:
        return err if "Hopper" in err else f"needs a Hopper GPU (sm_90: TMA, wgmma): {err}"
    return cuda_ext.cuda_available(device)


def _supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return f"wgmma here takes 16-bit inputs only, not {case.dtype}"
    return None


# At a tie (cuda_variants.TIE) the wider tile is kept, staged epilogue first,
# and a tile whole before its stream-K form:
# 128x256 streams 3/4 of 128x128's bytes from L2 a FLOP, and at 8192^3, where
# every fast GEMM holds the card at its power cap, that is clock.  Tiles 3 and
# 4 can tie in the tuner's short bursts, but back to back for 4 s
# (lab/gemm_clocks.py) they do the same FLOP a clock and 4 settles
# 7-10% lower: 622 against 679 TFLOP/s in bf16, 594 against 655 in fp16.
_PREFER = (3, 11, 0, 9, 12, 4, 1, 5, 2, 6, 10, 7, 8)


def _sms() -> int:
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def _runs(tile: int, key: tuple) -> bool:
    """Whether the tuner times ``tile`` for ``key``: a stream-K tile only where it
    cuts (else it is its tile 3-5 or 9); a tile on lined copies only where a row
    stride is off 128-byte lines and the GEMM is large enough for the copy
    to pay."""
    _, m, _, n, k, lined = key
    m, n, k = m * BM, n * 64, k * 64  # the key's largest shape: the same tiles and k-steps
    if tile >= LINED:
        if not (lined and padding.pays(m, n, k)):
            return False
        tile -= LINED
    if tile not in STREAM_K:
        return True
    bn = TILES[tile][0]
    return sk_plan(-(-m // BM) * -(-n // bn), -(-k // 64), _sms())[0] > 0


_TUNER = VariantTuner(tuple(TILES), {t: d for t, (_, _, d) in TILES.items()}, runs=_runs,
                      prefer=_PREFER + tuple(LINED + t for t in _PREFER))


def _key(dtype: str, m: int, n: int, k: int, lined: bool) -> tuple:
    """The tuning key: the shape in 128 rows, 64 columns and 64 k (every
    tile's count, every stream-K cut and the k-steps are the same across it:
    128 x 192 tiles are ceil(ceil(n / 64) / 3) wide), M below one tile to a
    half-octave (bucket), and whether lined copies are an option (some row
    stride is off 128-byte lines).  A sweep of shapes that differ inside one
    tile tunes once; below one tile, how many of its rows are real changes
    which tile wins (lab/findings/gemm_stream_k_wgmma-179b5c8.txt)."""
    return (dtype, -(-m // BM), min(bucket(m), BM), -(-n // 64), -(-k // 64), lined)


def _config(case: Case) -> str:
    m, (k, n) = case["M"], padding.padded_dims(case["K"], case["N"], 2)
    note = padding.padded_text(case["K"], case["N"], 2)
    # as _run decides for contiguous rows: A's rows K apart, B's N apart
    lined = not (padding.stride_on_lines(m, k, 2) and padding.stride_on_lines(k, n, 2))
    tuned = _TUNER.config(_key(case.dtype, m, n, k, lined), at=f"{m}x{n}x{k}")
    if tuned:
        return tuned + note

    sms = _sms()
    t = auto_tile(m, n, sms)
    bn = TILES[t][0]
    tiles = -(-m // BM) * -(-n // bn)
    return (f"tile {t}: {TILES[t][2]}, TMA producer warpgroup, persistent grid of "
            f"{min(tiles, sms)} CTAs for {tiles} tiles{note}")


@register("gemm", "cuda:wgmma", available=_available, supports=_supports, config=_config,
          description="CUDA on Hopper: TMA into 128B-swizzled stages, mbarrier pipeline, "
                      "wgmma.mma_async from shared memory, warp-specialised persistent CTAs; needs sm_90")
def gemm_cuda_wgmma(a, b):
    n = b.shape[-1]
    padded = padding.pad_operands(a, b)
    if padded is not None:
        return padding.unpad(_run(*padded), n)
    return _run(a, b)


def _run(a, b):
    (m, k), n = a.shape, b.shape[-1]
    lined = not (padding.on_lines(a) and padding.on_lines(b))
    key = _key(str(a.dtype).removeprefix("torch."), m, n, k, lined)

    def call(v):
        if v >= LINED:
            return ops().gemm_wgmma(padding.onto_lines(a), padding.onto_lines(b), v - LINED)
        return ops().gemm_wgmma(a, b, v)

    return _TUNER.run(key, call, at=f"{m}x{n}x{k}")
