"""Persistent Triton matmul on Hopper: TMA tensor descriptors, about one program per SM.

Each program walks tiles tile, tile + NUM_SMS, ... so launch and prologue costs
are paid once per SM, not once per tile, and with the tile and k loops
flattened the next tile's first TMA loads overlap this tile's epilogue.  TMA
moves whole boxes between global and shared memory and fills out-of-bounds
elements with zeros (and drops out-of-bounds stores), so ragged M, N and K need
no masks; the price is that every row stride must be a multiple of 16 bytes.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from implementations.gemm._triton_tiled import LARGE_MN, SKINNY_M, describe, tile_coords
from suite.backends import interpreting
from implementations._shared.autotune import autotune, bucket


@triton.jit
def _persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                       M_KEY, N_KEY, K_KEY,  # the autotuner's key only
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, UPCAST: tl.constexpr,
                       DTYPE: tl.constexpr):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # The epilogue finds its tile from a second counter rather than reusing
    # the loop's: after flattening, that keeps the store's coordinates free of
    # the next tile's prologue so the two can overlap.
    tile_c = start - NUM_SMS
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=True):
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
_autotuned = autotune(configs=LARGE + MID + SKINNY, key=["M_KEY", "N_KEY", "K_KEY", "DTYPE"],
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


def matmul(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
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
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if interpreting():
        cfg = INTERPRETER_CONFIG
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
                 TensorDescriptor.from_tensor(c, [bm, bn]))
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        grid = (min(INTERPRETER_SMS, tiles),)
        _persistent_kernel[grid](*descs, M, N, K, bucket(M), bucket(N), bucket(K), NUM_SMS=INTERPRETER_SMS,
                                 UPCAST=a.dtype == torch.bfloat16, DTYPE=str(a.dtype), **cfg)
        return c, describe(cfg) + f" programs={grid[0]} (interpreter)"

    num_sms = _num_sms(a.device.index if a.device.index is not None else torch.cuda.current_device())
    # placeholder boxes; the config's pre_hook sets the real ones before each launch
    descs = (TensorDescriptor.from_tensor(a, [64, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
             TensorDescriptor.from_tensor(c, [64, 64]))

    def grid(meta):
        return (min(num_sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)

    _autotuned[grid](*descs, M, N, K, bucket(M), bucket(N), bucket(K), NUM_SMS=num_sms, UPCAST=False,
                     DTYPE=str(a.dtype))
    best = _autotuned.best_config
    return c, describe(best.kwargs, best.num_warps, best.num_stages) + f" programs<={num_sms}"
