"""Tiled Triton matmul: one program per BLOCK_M x BLOCK_N tile of C.

Napkin math for the tile choice on an H200 (bf16): a 128 x 256 tile with
BLOCK_K = 64 moves (128 + 256) * 64 * 2 = 48 KiB per k-step for
2 * 128 * 256 * 64 = 4.2 MFLOP, 85 FLOP/byte from shared memory, and 3-4
stages of it (144-192 KiB) fit in the 227 KiB an SM offers; the grouped
ordering keeps GROUP_M row-blocks of A hot in L2 while they sweep B.  Skinny
problems (M <= 128) are bandwidth bound on B, so they get narrow tiles that
spread B's columns over more programs instead.

Triton marks an integer argument as aligned only when it is a multiple of 16,
so with K = 5000 or N = 3000 (multiples of 8, 16-byte rows in bf16) it could
not prove A's or B's rows 16-byte aligned, nor the K and N edges of the masks
on 8-element boundaries, and would load every element on its own.  The
launcher passes VEC_K, the largest power of two up to 16 that divides K and
A's row stride, and VEC_N, the same for N and B's and C's row strides; the
kernel rounds those to them (a no-op) so that the compiler knows it.  Each
operand's loads are as wide as its own rows allow: an odd K narrows A's loads
only, and B, all of the traffic when M is small, stays 16 bytes wide.

Rows that are not 16-byte aligned at all (an odd K or N) leave only
element-by-element loads, a fraction of the tensor cores' feed; when the
problem is large enough for it to pay (implementations.gemm.padding), A and
B are copied into zero-padded aligned rows first and C out of them after,
inside the call.

Tiles that would form a last, ragged wave (all of them when the output has
fewer tiles than the GPU has SMs: decode and skinny shapes, small outputs
with a long K) have their K split into slices run by separate programs, so
that every SM has work to the end (split_plan picks the count per shape at
launch).  The slices leave float32 partials in a workspace, and the last
slice of a tile to finish (a per-tile counter, reset by that slice) sums them
in slice order and writes C: no second kernel, and the same bits whichever
slice finishes last.

The autotuner's key is the half-octave bucket of M, N and K
(implementations._shared.autotune.bucket), passed as arguments the kernel
ignores; the candidates are chosen from the bucket too, so every shape in a
bucket reuses one tuning.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from suite.backends import interpreting
from implementations._shared.autotune import autotune, bucket
from implementations.gemm import padding


@triton.jit
def tile_coords(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering: GROUP_M consecutive row-blocks walk the columns together."""
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    return pid_m, pid_n


@triton.heuristics({
    "EVEN_M": lambda a: a["M"] % a["BLOCK_M"] == 0,
    "EVEN_N": lambda a: a["N"] % a["BLOCK_N"] == 0,
    "EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0,
    "DP_TILES": lambda a: _plan_of(a)[0],
    "SPLIT_K": lambda a: _plan_of(a)[1],
})
@triton.jit(do_not_specialize=["WHOLE_K"])
def _gemm_kernel(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, SMS,
                 M_KEY, N_KEY, K_KEY,  # the autotuner's key only
                 WHOLE_K,  # read by _plan_of only: 1 runs every tile with K whole
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                 VEC_K: tl.constexpr, VEC_N: tl.constexpr,
                 EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr, DP_TILES, SPLIT_K):
    # What the launcher checked, said so that the compiler can vectorise: A's
    # rows along K, B's and C's along N, each as wide as its own alignment.
    if VEC_K > 1:
        K = K // VEC_K * VEC_K
        stride_am = stride_am // VEC_K * VEC_K
    if VEC_N > 1:
        N = N // VEC_N * VEC_N
        stride_bk = stride_bk // VEC_N * VEC_N
        stride_cm = stride_cm // VEC_N * VEC_N
    # Programs below DP_TILES own a whole tile; each of the tiles after them
    # (those that would make a last, ragged wave) is cut into SPLIT_K slices
    # of K run by SPLIT_K programs (see split_plan).
    pid = tl.program_id(0)
    whole = pid < DP_TILES
    tail = tl.maximum(pid - DP_TILES, 0)
    tile = tl.where(whole, pid, DP_TILES + tail // SPLIT_K)
    sid = tl.where(whole, 0, tail % SPLIT_K)
    slices = tl.where(whole, 1, SPLIT_K)
    pid_m, pid_n = tile_coords(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    # No wrap-around on the offsets, so these hints are true for every tile and
    # the loads along the contiguous dimension stay vectorised.
    offs_m = tl.max_contiguous(tl.multiple_of(pid_m * BLOCK_M + tl.arange(0, BLOCK_M), BLOCK_M), BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # slice sid of a tile's K: a whole number of BLOCK_K steps
    steps = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(steps, slices)
    first = sid * per_split
    last = tl.minimum(first + per_split, steps)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (first * BLOCK_K + offs_k[None, :]) * stride_ak
    b_ptrs = b_ptr + (first * BLOCK_K + offs_k[:, None]) * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(first, last):
        k_left = K - k * BLOCK_K
        # Masks are compiled in only where the shape is ragged: aligned shapes
        # (the 4096^3 / 8192^3 headline cases) run a mask-free inner loop.
        if EVEN_M and EVEN_K:
            a = tl.load(a_ptrs)
        else:
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        if EVEN_N and EVEN_K:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if UPCAST:
            # Triton's interpreter multiplies bfloat16 as raw uint16 bits; in
            # float32 the products are exact and the sum is the same float32
            # accumulation the tensor cores do.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    mask_c = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if slices > 1:
        # Every slice leaves its float32 partial in the tile's block of the
        # workspace; the slice that finishes last (a counter per split tile)
        # sums them and writes C, then resets the counter for the next call.
        slot = tile - DP_TILES
        ws = (ws_ptr + slot * SPLIT_K * BLOCK_M * BLOCK_N
              + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :])
        tl.store(ws + sid * BLOCK_M * BLOCK_N, acc)
        tl.debug_barrier()  # every thread's partial stored before the release below
        done = tl.atomic_add(lock_ptr + slot, 1, sem="acq_rel", scope="gpu")
        if done == SPLIT_K - 1:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(SPLIT_K):  # in slice order, whichever slice came last: deterministic
                acc += tl.load(ws + s * BLOCK_M * BLOCK_N, cache_modifier=".cg")
            c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_c)
            tl.atomic_xchg(lock_ptr + slot, 0, sem="relaxed", scope="gpu")
    else:
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_c)


def _cfg(bm, bn, bk, stages, warps, group=8, whole_k=0):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group, "WHOLE_K": whole_k},
                         num_stages=stages, num_warps=warps)


def _whole_k(cfg: triton.Config) -> triton.Config:
    """cfg with every tile run with K whole (no split of the last wave)."""
    kw = cfg.kwargs
    return _cfg(kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], cfg.num_stages, cfg.num_warps, kw["GROUP_M"], 1)


# Large problems (M*N >= 4096^2): 128 x 256 or 256 x 128 tiles, two warpgroups
# of 64 x 256 (or 128 x 128) wgmma accumulators, 3-4 stages of 48 KiB; at
# 4096^2 that is 512 tiles, 3.9 waves over 132 SMs.
LARGE = [_cfg(128, 256, 64, 3, 8), _cfg(256, 128, 64, 3, 8), _cfg(128, 256, 64, 4, 8)]
# Mid-sized problems: more, smaller tiles so that every SM gets work.
MID = [_cfg(128, 128, 64, 4, 8), _cfg(128, 128, 64, 4, 4), _cfg(128, 256, 64, 3, 8), _cfg(64, 128, 64, 4, 4)]
LARGE_MN = 4096 * 4096
# M <= 128: B is the traffic; narrow column blocks put more programs on it,
# and split K (split_plan) puts the rest of the SMs on it when the tiles are few.
# M <= 16 (decode) wastes the least of a 16-row tile.
TINY = [_cfg(16, 64, 256, 3, 4, 1), _cfg(16, 128, 128, 4, 4, 1), _cfg(16, 64, 128, 4, 4, 1)]
TINY_M = 16
SKINNY = [_cfg(32, 64, 128, 4, 4, 1), _cfg(64, 64, 128, 4, 4, 1), _cfg(64, 128, 64, 4, 4, 1),
          _cfg(128, 64, 64, 4, 4, 1)]
SKINNY_M = 128
# Exact float32 runs on the CUDA cores (FMA): the wgmma tiles above spill there
# (ptxas, sm_90), so it gets smaller per-thread tiles.
FMA = [_cfg(128, 128, 32, 3, 8), _cfg(64, 128, 32, 3, 4), _cfg(128, 64, 32, 3, 4), _cfg(64, 64, 32, 4, 4)]
FMA_TINY = [_cfg(16, 64, 64, 4, 4, 1), _cfg(16, 128, 32, 4, 4, 1)]
# float32 as three TF32 products a step (tf32x3: each operand split into a TF32
# head and a TF32 tail, head x head + head x tail + tail x head) holds both
# halves of A's and B's fragments: the 128 x 256 and 256 x 128 tiles spill
# (ptxas, sm_90), 128 x 128 over 8 warps does not.  Below 128 rows the TF32
# SKINNY tiles hold; of TINY's, the BLOCK_K = 128 one spills.
TF32X3 = [_cfg(128, 128, 32, 4, 8), _cfg(128, 128, 32, 3, 8), _cfg(64, 128, 32, 4, 4), _cfg(128, 64, 32, 4, 4)]
TF32X3_TINY = [_cfg(16, 128, 64, 4, 4, 1), _cfg(16, 64, 64, 4, 4, 1)]

SPLIT_MAX = 16


@functools.lru_cache(maxsize=4096)
def split_plan(m: int, n: int, k: int, bm: int, bn: int, bk: int, sms: int,
               min_gain: float = 0.0) -> tuple[int, int]:
    """(whole tiles, slices): the tiles of C that fill whole waves of the SMs
    run as they are; the rest, a last wave that would leave SMs idle, each
    have their K cut into ``slices`` (1: no split) so that the last wave is
    full too.  Chosen to minimise waves x BLOCK_K steps per program, plus the
    last slice's read of the others' float32 partials (in steps' worth of
    bytes, read from L2 at about twice HBM's rate).  Small outputs (fewer
    tiles than SMs: decode, skinny, a long K) are all tail; a shape whose
    tiles fill whole waves is not split.  ``min_gain``: split only if that saves
    at least this fraction of a program's steps (its whole tiles' included)."""
    tiles = -(-m // bm) * -(-n // bn)
    steps = -(-k // bk)
    full, tail = divmod(tiles, sms)
    if tail == 0 or steps < 4:
        return tiles, 1
    per_slice = 0.1 + 0.5 * (bm * bn * 4) / ((bm + bn) * bk * 2)
    best, best_cost = 1, float(steps)
    for s in range(2, min(SPLIT_MAX, steps // 2) + 1):
        cost = -(-tail * s // sms) * -(-steps // s) + per_slice * s
        if cost < best_cost:
            best, best_cost = s, cost
    if steps - best_cost < min_gain * (full + 1) * steps:
        best = 1
    return (tiles, 1) if best == 1 else (tiles - tail, best)


def _plan_of(a: dict) -> tuple[int, int]:
    if a["WHOLE_K"]:
        return -(-a["M"] // a["BLOCK_M"]) * -(-a["N"] // a["BLOCK_N"]), 1
    return split_plan(a["M"], a["N"], a["K"], a["BLOCK_M"], a["BLOCK_N"], a["BLOCK_K"], a["SMS"])


def launched(m: int, n: int, plan: tuple[int, int], bm: int, bn: int) -> int:
    """Programs of a launch: one per whole tile, ``slices`` per split one."""
    tiles = -(-m // bm) * -(-n // bn)
    dp, slices = plan
    return dp + (tiles - dp) * slices


def tensor_core_configs(m: int, n: int) -> list:
    """The 16-bit (bf16 and fp16 alike) candidates for an m x n output: 3 or 4, chosen by shape."""
    if m <= TINY_M:
        return TINY
    if m <= SKINNY_M:
        return SKINNY
    return LARGE if m * n >= LARGE_MN else MID


def candidates(m: int, n: int, itemsize: int, precision: str) -> list:
    """The configs tried for an m x n output of ``itemsize``-byte inputs."""
    if itemsize == 4:
        if precision == "ieee":
            return FMA_TINY if m <= TINY_M else FMA
        if precision == "tf32x3" and m <= TINY_M:
            return TF32X3_TINY
        if precision == "tf32x3" and m > SKINNY_M:
            return TF32X3
        # TF32 tiles cost twice the shared memory per stage of 16-bit ones
        return [_cfg(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"] // 2,
                     c.num_stages, c.num_warps, c.kwargs["GROUP_M"]) for c in tensor_core_configs(m, n)]
    return tensor_core_configs(m, n)


def prune(configs, named_args, **kwargs):
    """Only the configs meant for this problem's bucket, at most four, each
    also with K whole where split_plan would split this shape's last wave:
    split_plan's cost model can favour a split that runs slower (gemm NOTES),
    so the split races its own K-whole twin and a wrong split loses to a
    timing.  The twin compiles to the same kernel (WHOLE_K is not specialized)."""
    base = candidates(named_args["M_KEY"], named_args["N_KEY"], named_args["a_ptr"].element_size(),
                      kwargs["PRECISION"])
    m, n, k, sms = named_args["M"], named_args["N"], named_args["K"], named_args["SMS"]
    out = []
    for cfg in base:
        out.append(cfg)
        kw = cfg.kwargs
        if split_plan(m, n, k, kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], sms)[1] > 1:
            out.append(_whole_k(cfg))
    return out


# PRECISION is in the key: exact, TF32 and 3xTF32 float32 pick from different lists;
# VEC_K and VEC_N too, as a shape whose rows are not 16-byte aligned loads
# another way.  The split of K is not: split_plan plans it per shape at launch,
# and each config that splits races its K-whole twin (prune).
_ALL = LARGE + MID + TINY + SKINNY + FMA + FMA_TINY + TF32X3 + TF32X3_TINY
_autotuned = autotune(configs=_ALL + [_whole_k(c) for c in _ALL],
                      key=["M_KEY", "N_KEY", "K_KEY", "PRECISION", "VEC_K", "VEC_N"],
                      prune_configs_by={"early_config_prune": prune},
                      # the winner per key is kept in Triton's cache directory (keyed by the
                      # kernel source, the configs and the GPU architecture), so a second run
                      # on this machine compiles the chosen config but does not autotune again
                      cache_results=True)(_gemm_kernel)

# Under TRITON_INTERPRET every config would be run and timed on the CPU: one small one instead.
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "WHOLE_K": 0}
# ... on a pretend GPU of this many SMs, so that small shapes split K there too
INTERPRETER_SMS = 4


def describe(kwargs, num_warps=None, num_stages=None, split=1, split_tiles=0, tiles=0) -> str:
    text = (f"BLOCK_M={kwargs['BLOCK_M']} BLOCK_N={kwargs['BLOCK_N']} "
            f"BLOCK_K={kwargs['BLOCK_K']} GROUP_M={kwargs['GROUP_M']}")
    if num_warps is not None:
        text += f" warps={num_warps} stages={num_stages}"
    if split > 1:
        text += f" split_k={split} ({split_tiles} of {tiles} tiles)"
    elif kwargs.get("WHOLE_K"):
        text += " K whole (timed against the split of the last wave)"
    return text


def _pow2_dividing(values) -> int:
    return next(v for v in (16, 8, 4, 2, 1) if all(x % v == 0 for x in values))


def vector_widths(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[int, int]:
    """(VEC_K, VEC_N): the largest powers of two up to 16 that divide A's K and
    row stride, and N with B's and C's row strides, for operands whose rows
    are contiguous and whose bases are 16-byte aligned; else 1 (nothing
    assumed).  Each operand vectorises on its own: an odd K leaves B and C wide."""
    vec_k = vec_n = 1
    if a.stride(1) == 1 and a.data_ptr() % 16 == 0:
        vec_k = _pow2_dividing((a.shape[1], a.stride(0)))
    if b.stride(1) == 1 and c.stride(1) == 1 and b.data_ptr() % 16 == 0 and c.data_ptr() % 16 == 0:
        vec_n = _pow2_dividing((b.shape[1], b.stride(0), c.stride(0)))
    return vec_k, vec_n


_locks: dict[torch.device, torch.Tensor] = {}


def _lock(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed per-tile counters of the split-K kernels; each call leaves them zero.
    One buffer per device, for kernels issued on one stream."""
    lock = _locks.get(device)
    if lock is None or lock.numel() < tiles:
        lock = _locks[device] = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
    return lock


def _padded(a: torch.Tensor, b: torch.Tensor, precision: str, sms: int | None):
    """C through copies of A and B whose rows are padded with zeros to 16 bytes
    (implementations.gemm.padding), or None where the rows are aligned already or
    the problem is too small for the copy to pay."""
    M, K = a.shape
    N = b.shape[1]
    ops = padding.pad_operands(a, b) if padding.pays(M, N, K) else None
    if ops is None:
        return None
    c2, description = matmul(*ops, precision, sms)
    return padding.unpad(c2, N), description + padding.padded_text(K, N, a.element_size())


def _span(t: torch.Tensor) -> int:
    """Elements from a tensor's first to its furthest, plus one (0 for an empty one)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def size_problem(m: int, n: int, k: int) -> str | None:
    """None where A (m x k), B (k x n) and C (m x n) fit the kernel's 32-bit offsets, else why."""
    if max(m * k, k * n, m * n) >= 2**31:
        return "an operand of 2^31 elements or more: the tiled kernel's offsets are 32-bit"
    return None


def matmul(a: torch.Tensor, b: torch.Tensor, precision: str, sms: int | None = None) -> tuple[torch.Tensor, str]:
    """C = A @ B in A's dtype; returns C and a description of the config used.
    ``sms``: the SM count split_plan plans for (default: the device's)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"bad shapes for a matmul: {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"mixed dtypes {a.dtype} and {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    problem = size_problem(M, N, K)
    if problem:
        raise ValueError(problem)
    # a strided view can reach past 2^31 elements from its start with fewer in it
    a, b = (t if _span(t) < 2**31 else t.contiguous() for t in (a, b))
    padded = _padded(a, b, precision, sms)
    if padded is not None:
        return padded
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    # ieee/tf32/tf32x3 only matter for float32; 16-bit inputs take the default path
    prec = precision if a.dtype == torch.float32 else "tf32"
    vec_k, vec_n = vector_widths(a, b, c)
    interp = interpreting()
    if sms is None:
        sms = INTERPRETER_SMS if interp else torch.cuda.get_device_properties(a.device).multi_processor_count
    configs = [INTERPRETER_CONFIG] if interp else [
        dict(cfg.kwargs) for cfg in candidates(bucket(M), bucket(N), a.element_size(), prec)]
    plans = [(cfg, _plan_of(dict(cfg, M=M, N=N, K=K, SMS=sms))) for cfg in configs]

    def split_tiles(cfg, plan):
        return -(-M // cfg["BLOCK_M"]) * -(-N // cfg["BLOCK_N"]) - plan[0]

    # room for the float32 partials of whichever candidate splits the most
    ws = torch.empty(max([split_tiles(c, p) * p[1] * c["BLOCK_M"] * c["BLOCK_N"] for c, p in plans if p[1] > 1],
                         default=1), device=a.device, dtype=torch.float32)
    lock = _lock(a.device, max(split_tiles(c, p) for c, p in plans))
    args = (a, b, c, ws, lock, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1), sms, bucket(M), bucket(N), bucket(K))

    def grid(meta):
        return (launched(M, N, (meta["DP_TILES"], meta["SPLIT_K"]), meta["BLOCK_M"], meta["BLOCK_N"]),)

    if interp:
        cfg, plan = plans[0]
        _gemm_kernel[grid](*args, PRECISION=prec, UPCAST=a.dtype == torch.bfloat16, VEC_K=vec_k, VEC_N=vec_n,
                           **cfg)
        return c, describe(cfg, split=plan[1], split_tiles=split_tiles(cfg, plan),
                           tiles=split_tiles(cfg, (0, 1))) + " (interpreter)"

    _autotuned[grid](*args, PRECISION=prec, UPCAST=False, VEC_K=vec_k, VEC_N=vec_n)
    best = _autotuned.best_config
    cfg = best.kwargs
    plan = _plan_of(dict(cfg, M=M, N=N, K=K, SMS=sms))
    return c, describe(cfg, best.num_warps, best.num_stages, plan[1], split_tiles(cfg, plan), split_tiles(cfg, (0, 1)))
