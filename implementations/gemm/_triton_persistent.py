"""Persistent Triton matmul on Hopper: TMA tensor descriptors, about one program per SM.

Each program walks tiles tile, tile + NUM_SMS, ... so launch and prologue costs
are paid once per SM, not once per tile, and with the tile and k loops
flattened the next tile's first TMA loads overlap this tile's epilogue.  TMA
moves whole boxes between global and shared memory and fills out-of-bounds
elements with zeros (and drops out-of-bounds stores), so ragged M, N and K need
no masks; the price is that every row stride must be a multiple of 16 bytes.

No tile size divides every output evenly among the SMs (1792 x 5304 is 294
tiles of 128 x 256: 2.2 waves over 132 SMs, the third with 102 SMs idle).
So the tiles that fill whole waves run as they are, and the rest (the
ragged last wave) have their K cut into SPLIT_K slices that the programs
take after their whole tiles, chosen per shape at launch by the tiled
kernel's split_plan: the slices leave float32 partials in a workspace and
the last slice of a tile to finish (a per-tile counter, reset by that
slice) sums them in slice order and stores C, so the result does not depend
on which slice finishes last.  Here a split costs more than split_plan's
model says (the partials cross L2 through registers, and the slices run
after the flattened loop of whole tiles, their pipeline cold), so it is
taken only where the model saves at least SPLIT_MIN_GAIN of a program's
steps (the measurements behind that figure: NOTES.md).

A box row of A or B that starts off a 128-byte line (K or N not a multiple
of 64 elements in 16 bits) straddles two L2 lines, so each box asks L2 for
more lines than it has rows.  Where the GEMM is large enough that copies
cost little beside it (padding.pays), A and B are also copied onto rows a
whole number of lines apart (padding.onto_lines; TMA still sees the
original shape, so the columns past K and N read as zeros), and the two
forms race, copies included, once per key: the faster is kept.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from implementations._shared import autotune as _autotune
from implementations._shared.autotune import autotune, bucket
from implementations.gemm import padding
from implementations.gemm._triton_tiled import LARGE_MN, SKINNY_M, _lock, describe, split_plan, tile_coords
from suite.backends import interpreting


SPLIT_MIN_GAIN = 0.18


def plan(m: int, n: int, k: int, bm: int, bn: int, bk: int, sms: int) -> tuple[int, int]:
    """(whole tiles, slices of each other tile): split_plan, taken only for a gain of SPLIT_MIN_GAIN."""
    return split_plan(m, n, k, bm, bn, bk, sms, SPLIT_MIN_GAIN)


def _plan_of(a: dict) -> tuple[int, int]:
    return plan(a["M"], a["N"], a["K"], a["BLOCK_M"], a["BLOCK_N"], a["BLOCK_K"], a["NUM_SMS"])


@triton.heuristics({"DP_TILES": lambda a: _plan_of(a)[0], "SPLIT_K": lambda a: _plan_of(a)[1]})
@triton.jit
def _persistent_kernel(a_desc, b_desc, c_desc, ws_ptr, lock_ptr, M, N, K,
                       M_KEY, N_KEY, K_KEY, LINED_KEY,  # the autotuner's key only (LINED_KEY: 1 on lined copies)
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, UPCAST: tl.constexpr,
                       DTYPE: tl.constexpr, DP_TILES, SPLIT_K):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # Whole tiles: tiles [0, DP_TILES), full waves of the SMs.
    # The epilogue finds its tile from a second counter rather than reusing
    # the loop's: after flattening, that keeps the store's coordinates free of
    # the next tile's prologue so the two can overlap.
    tile_c = start - NUM_SMS
    for tile in tl.range(start, DP_TILES, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            if UPCAST:  # see _triton_tiled: the interpreter's bfloat16 dot is wrong
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        tile_c += NUM_SMS
        pid_m, pid_n = tile_coords(tile_c, num_pid_m, num_pid_n, GROUP_M)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
    # The ragged last wave: each remaining tile as SPLIT_K slices of its K steps.
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    for unit in range(start, (num_tiles - DP_TILES) * SPLIT_K, NUM_SMS):
        slot = unit // SPLIT_K
        sid = unit - slot * SPLIT_K
        pid_m, pid_n = tile_coords(DP_TILES + slot, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(sid * per_split, tl.minimum(sid * per_split + per_split, k_tiles)):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        ws = ws_ptr + slot.to(tl.int64) * (SPLIT_K * BLOCK_M * BLOCK_N) + offs
        tl.store(ws + sid * (BLOCK_M * BLOCK_N), acc)
        tl.debug_barrier()  # every thread's partial stored before the release below
        done = tl.atomic_add(lock_ptr + slot, 1, sem="acq_rel", scope="gpu")
        if done == SPLIT_K - 1:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(SPLIT_K):  # in slice order, whichever slice came last: deterministic
                acc += tl.load(ws + s * (BLOCK_M * BLOCK_N), cache_modifier=".cg")
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
            tl.atomic_xchg(lock_ptr + slot, 0, sem="relaxed", scope="gpu")


def _set_block_shapes(nargs):
    """Host descriptors carry the box size, which depends on the config being tried."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


def _cfg(bm, bn, bk, stages, warps, group=8):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
                         num_stages=stages, num_warps=warps, pre_hook=_set_block_shapes)


# Shared memory: stages * (BM + BN) * BK * 2 plus a BM x BN staging tile for the
# TMA store; 128x256x64 with 3 stages is 208 KiB of the 227 KiB available.
LARGE = [_cfg(128, 256, 64, 3, 8), _cfg(256, 128, 64, 3, 8), _cfg(128, 128, 64, 4, 8)]
MID = [_cfg(128, 128, 64, 4, 8), _cfg(128, 128, 64, 4, 4), _cfg(128, 256, 64, 3, 8)]
SKINNY = [_cfg(64, 64, 128, 4, 4, 1), _cfg(64, 128, 64, 4, 4, 1)]


def _prune(configs, named_args, **kwargs):
    m, n = named_args["M_KEY"], named_args["N_KEY"]  # the same candidates across a bucket
    if m <= SKINNY_M:
        return SKINNY
    return LARGE if m * n >= LARGE_MN else MID


# Descriptors carry no .dtype for the autotuner's key, hence the DTYPE argument.
_autotuned = autotune(configs=LARGE + MID + SKINNY, key=["M_KEY", "N_KEY", "K_KEY", "LINED_KEY", "DTYPE"],
                             prune_configs_by={"early_config_prune": _prune})(_persistent_kernel)

INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2}
INTERPRETER_SMS = 3  # small, so the interpreter walks several tiles per program


@functools.lru_cache(maxsize=None)
def _num_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def alignment_problem(k: int, n: int, itemsize: int) -> str | None:
    """TMA needs 16-byte row strides: A's is K elements, B's and C's N."""
    for name, extent in (("K", k), ("N", n)):
        if extent * itemsize % 16:
            return (f"TMA needs 16-byte aligned row strides: {name}={extent} x {itemsize} bytes "
                    f"is not a multiple of 16")
    return None


def off_lines(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, bool]:
    """Whether A's and B's rows start off 128-byte lines."""
    return not padding.on_lines(a), not padding.on_lines(b)


def matmul(a: torch.Tensor, b: torch.Tensor, lined: bool | None = None) -> tuple[torch.Tensor, str]:
    """C = A @ B and the config that ran.  ``lined``: run on copies of A and B
    whose rows start on 128-byte lines (True), on A and B as they are (False),
    or (None) the faster of the two at this key, raced at its first call where
    a row is off lines and the copies pay."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(f"bad operands: {tuple(a.shape)} {a.dtype} @ {tuple(b.shape)} {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    problem = alignment_problem(K, N, a.element_size())
    if problem:
        raise ValueError(problem)
    # TMA also needs 16-byte aligned bases: a view that starts mid-row gets a copy
    a, b = (t if t.is_contiguous() and t.data_ptr() % 16 == 0 else t.clone(memory_format=torch.contiguous_format)
            for t in (a, b))
    off = off_lines(a, b)
    raced = ""
    if lined is None:
        lined = False
        if any(off) and padding.pays(M, N, K) and not interpreting():
            key = (bucket(M), bucket(N), bucket(K), a.dtype, off)
            if key not in _LINED:
                _LINED[key] = _race_lines(a, b)
            lined, raced = _LINED[key]
    if lined and any(off):
        c, text = _launch(padding.onto_lines(a), padding.onto_lines(b), 1)
        text += "; rows copied onto 128-byte lines: " + " and ".join(n for n, o in zip("AB", off) if o)
    else:
        c, text = _launch(a, b, 0)
    return c, text + raced


def _race_lines(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, str]:
    """Whether the lined copies win at this shape (each form tuned first, then
    both timed with their copies in alternating passes), and the race as text."""
    runs = {False: lambda: _launch(a, b, 0), True: lambda: _launch(padding.onto_lines(a), padding.onto_lines(b), 1)}
    for run in runs.values():
        run()  # tunes and compiles each form's configs before the race
    times = _autotune.race(runs)
    if not times:
        return False, ""
    won = min(times, key=times.get)
    return won, "; raced " + ", ".join(("on lines" if k else "as is") + f":{t * 1000:.0f}us"
                                       for k, t in sorted(times.items(), key=lambda kv: kv[1]))


_LINED: dict[tuple, tuple[bool, str]] = {}


def _launch(a: torch.Tensor, b: torch.Tensor, lined_key: int) -> tuple[torch.Tensor, str]:
    """The kernel on row-major A and B (row strides of 16-byte multiples) into a new C."""
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    interp = interpreting()
    num_sms = INTERPRETER_SMS if interp else _num_sms(
        a.device.index if a.device.index is not None else torch.cuda.current_device())
    configs = [INTERPRETER_CONFIG] if interp else [cfg.kwargs for cfg in _prune(
        None, {"M_KEY": bucket(M), "N_KEY": bucket(N)})]
    plans = [(cfg, plan(M, N, K, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], num_sms)) for cfg in configs]

    def split_tiles(cfg, plan):
        return triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]) - plan[0]

    # room for the float32 partials of whichever candidate splits the most
    ws = torch.empty(max([split_tiles(c, p) * p[1] * c["BLOCK_M"] * c["BLOCK_N"] for c, p in plans if p[1] > 1],
                         default=1), device=a.device, dtype=torch.float32)
    lock = _lock(a.device, max(split_tiles(c, p) for c, p in plans))

    def grid(meta):
        dp, slices = meta["DP_TILES"], meta["SPLIT_K"]
        tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
        return (max(1, min(num_sms, dp + (tiles - dp) * slices)),)

    if interp:
        cfg, chosen = plans[0]
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
                 TensorDescriptor.from_tensor(c, [bm, bn]))
        _persistent_kernel[grid](*descs, ws, lock, M, N, K, bucket(M), bucket(N), bucket(K), lined_key,
                                 NUM_SMS=INTERPRETER_SMS, UPCAST=a.dtype == torch.bfloat16, DTYPE=str(a.dtype),
                                 **cfg)
        return c, (describe(cfg, split=chosen[1], split_tiles=split_tiles(cfg, chosen),
                            tiles=split_tiles(cfg, (0, 1))) + " (interpreter)")

    # placeholder boxes; the config's pre_hook sets the real ones before each launch
    descs = (TensorDescriptor.from_tensor(a, [64, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
             TensorDescriptor.from_tensor(c, [64, 64]))
    _autotuned[grid](*descs, ws, lock, M, N, K, bucket(M), bucket(N), bucket(K), lined_key, NUM_SMS=num_sms,
                     UPCAST=False,
                     DTYPE=str(a.dtype))
    best = _autotuned.best_config
    cfg = best.kwargs
    chosen = plan(M, N, K, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], num_sms)
    return c, describe(cfg, best.num_warps, best.num_stages, chosen[1], split_tiles(cfg, chosen),
                       split_tiles(cfg, (0, 1))) + f" programs<={num_sms}"
