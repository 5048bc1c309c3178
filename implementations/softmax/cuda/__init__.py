"""Hand-written CUDA softmax: rows in registers (lanes of a warp or a block a
row, all loads before the one (max, sum) reduction; short rows several to a
lane group; rows off 16-byte boundaries as a scalar head, 16-byte body and
scalar tail), tiles of whole short rows (<= 256 columns, any alignment)
copied through shared memory with 16-byte accesses, split over a
thread-block cluster's shared memory loaded by TMA bulk copies (sm_90) or
register loads (rows at any alignment too: head, body and tail), or online
(running max and sum, two reads) for rows longer than that.

``softmax_v(x, variant)`` runs one plan by number (see softmax.cu; 0 = auto,
what ``softmax`` runs), for device benchmarks that compare them.

Built by implementations._shared.cuda_ext on first use; called as torch.ops.kernel_suite.softmax.
"""
from __future__ import annotations

from pathlib import Path

from implementations._shared import cuda_ext, cuda_variants, row_plans
from implementations._shared.cuda_variants import VariantTuner
from suite.backends import dtype_in
from suite.workload import itemsize, register

SOURCES = [Path(__file__).with_name("softmax.cu")]


def _fakes() -> None:
    import torch

    torch.library.register_fake("kernel_suite::softmax")(lambda x: torch.empty_like(x))
    torch.library.register_fake("kernel_suite::softmax_v")(lambda x, variant: torch.empty_like(x))


def ops():
    return cuda_ext.load("softmax", SOURCES, fakes=_fakes)


def _plan(n: int, size: int) -> str:
    """Mirror of softmax.cu's launch_auto: 2 packs a thread for float32 and
    for short 16-bit rows, else 4; long rows to a register-load cluster
    (float32) or TMA slices of <= 64 KB (16-bit); rows that are not 16-byte
    multiples and too long for registers to the cluster with a 16-byte body
    (plan 36; x and y as torch allocates them)."""
    packs = (2, 4) if size == 4 or n <= 1024 else (4,)
    long_rows = "cluster" if size == 4 else "tma"
    limits = cuda_variants.device()
    plan = row_plans.row_plan_first_fit(n, size, size, packs, limits=limits, long_rows=long_rows,
                                        tma_slice=64 * 1024)
    vec = 16 // size
    if n % vec and not plan.startswith("registers") and limits.clusters:
        ctas = row_plans.cluster_ctas(n // vec, 16, limits.smem_optin)
        if ctas:
            return f"cluster of {ctas} x 512 threads, row in shared memory, scalar head and tail, 16-byte body"
    return plan


# softmax.cu's plans (softmax_v); one that cannot run a shape runs auto's.
# 0 (auto) is a candidate only where it is a design of its own: rows that
# are not a multiple of 16 bytes, which it runs one element a load (in
# registers, or past plan 36's cluster, two reads a row).
_TUNER = VariantTuner(tuple(range(37)), {
    0: "auto plan: row in registers, one element a load (unaligned rows)",
    1: "row in registers, 4 packs of 16 B a thread",
    2: "row in registers, 2 packs a thread",
    3: "row in registers, 8 packs a thread",
    4: "cluster, TMA slices of the row in shared memory (<= 32 KB)",
    5: "cluster, TMA slices of the row in shared memory (<= 64 KB)",
    6: "cluster, register loads, row in shared memory",
    7: "streaming: online (max, sum) pass, then a backwards output pass",
    8: "persistent cluster, TMA into 2 slice buffers (<= 64 KB) a CTA, next row in flight",
    9: "persistent cluster, TMA into 2 slice buffers (<= 32 KB) a CTA, next row in flight",
    10: "persistent cluster, TMA into 3 slice buffers (<= 64 KB) a CTA, next 2 rows in flight",
    11: "short rows: lane groups of several rows, 2 packs a lane, 4-warp blocks, plain loads",
    12: "short rows: lane groups of several rows, 1 pack a lane, 4-warp blocks, plain loads",
    13: "short rows: lane groups of several rows, 4 packs a lane, 1-warp blocks, plain loads",
    14: "short rows: lane groups of several rows, 2 packs a lane, 4-warp blocks, ld.global.nc",
    15: "any alignment: scalar head and tail, 16-byte body, 4 packs a thread",
    16: "any alignment: scalar head and tail, 16-byte body, 2 packs a thread",
    17: "any alignment: scalar head and tail, 16-byte body, 8 packs a thread",
    18: "persistent cluster, TMA, slice in registers (512 threads x 4 packs), buffer refilled before the reductions",
    19: "persistent cluster, TMA, slice in registers (256 threads x 8 packs), buffer refilled before the reductions",
    20: "persistent cluster, TMA, slice in registers (1024 threads x 4 packs), buffer refilled before the reductions",
    21: "persistent cluster, TMA, slice in registers (256 threads x 8 packs), 3 buffers: 2 rows in flight",
    22: "persistent cluster, TMA, slice in registers (512 threads x 4 packs), 3 buffers: 2 rows in flight",
    23: "row (a cluster: a slice) in registers as raw 16-byte packs, 512 threads x 8 packs, exp twice",
    24: "row (a cluster: a slice) in registers as raw 16-byte packs, 256 threads x 8 packs, exp twice",
    25: "row (a cluster: a slice) in registers as raw 16-byte packs, 1024 threads x 8 packs, exp twice",
    26: "any alignment, 4 packs a thread kept raw (exp twice), <= 48 registers",
    27: "row (a cluster: a slice) in registers as raw 16-byte packs, 512 threads x 8 packs, exp twice, plain loads",
    28: "as 27, each pack's exps kept in its registers as half2 (one exp an element; 16-bit only)",
    29: "as 19, the slice's exps kept in registers as half2, three CTAs an SM (16-bit only)",
    30: "as 29 at 512 threads x 8 packs (half the CTAs a cluster), one CTA an SM (16-bit only)",
    31: "as 30 with one buffer (16-bit only)",
    32: "as 31 at 512 threads x 16 packs (clusters of half as many CTAs; 16-bit only)",
    33: "as 31 at 1024 threads x 8 packs (clusters of half as many CTAs; 16-bit only)",
    34: "short rows, any alignment: a tile of whole rows a block (<= 16 KB), copied into shared memory "
        "by 16-byte cp.async, a row a lane group",
    35: "as 34 with persistent blocks, two 8 KB tile buffers each: the next tile's copies in flight",
    36: "cluster, register loads into shared memory, any alignment: scalar head and tail, 16-byte body"},
    runs=lambda v, key: _runs(v, *key))

# softmax.cu's persistent plans: slice target (bytes), buffers a CTA
_PERSISTENT = {8: (64 * 1024, 2), 9: (32 * 1024, 2), 10: (64 * 1024, 3)}
# softmax.cu's slice-in-registers plans: threads, packs a thread
_IN_REGISTERS = {18: (512, 4), 19: (256, 8), 20: (1024, 4), 21: (256, 8), 22: (512, 4), 29: (256, 8),
                 30: (512, 8), 31: (512, 8), 32: (512, 16), 33: (1024, 8)}
# softmax.cu's short-row plans (kWarpRowsMaxPacks) and any-alignment plans: packs a thread
_SHORT_MAX_PACKS = 128
_UNALIGNED_PACKS = {15: 4, 16: 2, 17: 8, 26: 4}
_UNALIGNED_RAW = (26,)  # packs kept raw, blocks of <= 256 threads
# softmax.cu's shared-memory tile plans (kTileMaxCols): rows of 1..256 columns, any alignment
_TILES = (34, 35)
_TILE_MAX_COLS = 256
# softmax.cu's cluster plan at any alignment (x and y equally misaligned, as allocated)
_CLUSTER_SPLIT = 36
# softmax.cu's raw-pack plans (23-25): threads, packs a thread
_RAW = {23: (512, 8), 24: (256, 8), 25: (1024, 8), 27: (512, 8), 28: (512, 8)}
# the plans on thread-block clusters or TMA, whose launchers refuse devices before sm_90
_SM90 = frozenset((4, 5, 6, 8, 9, 10, _CLUSTER_SPLIT, *_IN_REGISTERS, *_RAW))


def _runs(variant: int, dtype: str, n: int, _bucket: int) -> bool:
    """Mirror of softmax.cu's launch() on this machine's GPU (cuda_variants.device):
    which plans run as themselves (for inputs allocated by torch: base pointers
    on 16-byte boundaries)."""
    size = itemsize(dtype)
    vec = 16 // size
    clusters = cuda_variants.device().clusters
    if variant in _SM90 and not clusters:
        return False
    if variant in _TILES:  # any alignment (x and y equally misaligned, as allocated)
        return 1 <= n <= _TILE_MAX_COLS
    if variant in _UNALIGNED_PACKS:  # any n whose row fits K packs a thread
        packs = _UNALIGNED_PACKS[variant]  # threads for the body's n // vec packs
        bound = 256 if variant in _UNALIGNED_RAW or vec * packs > 32 else 1024
        return row_plans.regs_fit(n // vec * vec, vec, packs, bound)
    if variant == _CLUSTER_SPLIT:  # any n whose body (at most n // vec packs) fits 8 CTAs' slices
        return row_plans.cluster_ctas(n // vec, 16) > 0
    if n % vec:
        # unaligned rows: plans 1-14 are not used, auto runs: one element a load in
        # registers (8 a thread, <= 1024 threads), else plan 36, else two reads
        return variant == 0 and (row_plans.regs_fit(n, 1, 8, 1024) or not clusters
                                 or row_plans.cluster_ctas(n // vec, 16) == 0)
    if variant == 0:
        return False  # auto runs one of plans 1-7 here
    if variant in (1, 2, 3):
        packs = {1: 4, 2: 2, 3: 8}[variant]
        return row_plans.regs_fit(n, vec, packs, 1024 if vec * packs <= 32 else 256)
    if variant in (11, 12, 13, 14):
        return 1 <= n // vec <= _SHORT_MAX_PACKS
    # (the launchers also refuse rows of more than 2^31 - 1 elements, which no case has)
    if variant in (4, 5):
        return row_plans.tma_ctas(n // vec, 32 * 1024 if variant == 4 else 64 * 1024) > 0
    if variant == 6:
        return row_plans.cluster_ctas(n // vec, 16) > 0
    if variant in _PERSISTENT:
        target, stages = _PERSISTENT[variant]
        return row_plans.tma_ctas(n // vec, target, stages=stages) > 0
    if variant in (28, 29, 30, 31, 32, 33) and size != 2:
        return False  # half2 exps: 16-bit rows only
    if variant in _IN_REGISTERS or variant in _RAW:  # at most 8 CTAs of threads x packs packs
        threads, packs = _IN_REGISTERS.get(variant) or _RAW[variant]
        return -(-(n // vec) // 8) <= threads * packs
    return True


def _key(m: int, n: int, dtype: str) -> tuple:
    return (dtype, n, 1 << max(0, m - 1).bit_length())


def _config(case) -> str:
    return (_TUNER.config(_key(case["M"], case["N"], case.dtype), at=f"{case['M']}x{case['N']}")
            or _plan(case["N"], itemsize(case.dtype)) + " (auto plan)")


@register("softmax", "cuda", available=cuda_ext.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
          description="CUDA: rows in registers (one (max, sum) reduction), TMA cluster shared memory for "
                      "long rows, online beyond; plan autotuned among softmax.cu's variants")
def softmax_cuda(x):
    n = x.shape[-1]
    m = x.numel() // max(n, 1)
    key = _key(m, n, str(x.dtype).removeprefix("torch."))
    return _TUNER.run(key, lambda v: ops().softmax_v(x, v), at=f"{m}x{n}")
