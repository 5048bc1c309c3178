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
on 8-element boundaries, and loaded every element on its own: a fraction of
cuBLAS's rate.  The launcher passes VEC, the largest power of two up to 16
that divides K, N and the row strides, and the kernel rounds those to VEC (a
no-op) so that the compiler knows it: loads and masks stay 16 bytes wide for
every shape whose rows are 16-byte aligned.

The autotuner's key is the half-octave bucket of M, N and K
(implementations._shared.autotune.bucket), passed as arguments the kernel
ignores; the candidates are chosen from the bucket too, so every shape in a
bucket reuses one tuning.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from suite.backends import interpreting
from implementations._shared.autotune import autotune, bucket


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
})
@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 M_KEY, N_KEY, K_KEY,  # the autotuner's key only
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, VEC: tl.constexpr,
                 EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr):
    if VEC > 1:  # what the launcher checked, said so the compiler can vectorise
        K = K // VEC * VEC
        N = N // VEC * VEC
        stride_am = stride_am // VEC * VEC
        stride_bk = stride_bk // VEC * VEC
        stride_cm = stride_cm // VEC * VEC
    pid = tl.program_id(0)
    pid_m, pid_n = tile_coords(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    # No wrap-around on the offsets, so these hints are true for every tile and
    # the loads along the contiguous dimension stay vectorised.
    offs_m = tl.max_contiguous(tl.multiple_of(pid_m * BLOCK_M + tl.arange(0, BLOCK_M), BLOCK_M), BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
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

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _cfg(bm, bn, bk, stages, warps, group=8):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
                         num_stages=stages, num_warps=warps)


# Large problems (M*N >= 4096^2): 128 x 256 or 256 x 128 tiles, two warpgroups
# of 64 x 256 (or 128 x 128) wgmma accumulators, 3-4 stages of 48 KiB; at
# 4096^2 that is 512 tiles, 3.9 waves over 132 SMs.
LARGE = [_cfg(128, 256, 64, 3, 8), _cfg(256, 128, 64, 3, 8), _cfg(128, 256, 64, 4, 8)]
# Mid-sized problems: more, smaller tiles so that every SM gets work.
MID = [_cfg(128, 128, 64, 4, 8), _cfg(128, 128, 64, 4, 4), _cfg(128, 256, 64, 3, 8), _cfg(64, 128, 64, 4, 4)]
LARGE_MN = 4096 * 4096
# M <= 128: B is the traffic; narrow column blocks put more programs on it.
SKINNY = [_cfg(16, 64, 256, 4, 4, 1), _cfg(64, 64, 128, 4, 4, 1), _cfg(128, 64, 64, 4, 4, 1)]
SKINNY_M = 128
# Exact float32 runs on the CUDA cores (FMA): the wgmma tiles above spill there
# (ptxas, sm_90), so it gets smaller per-thread tiles.
FMA = [_cfg(128, 128, 32, 3, 8), _cfg(64, 128, 32, 3, 4), _cfg(128, 64, 32, 3, 4), _cfg(64, 64, 32, 4, 4)]


def tensor_core_configs(m: int, n: int) -> list:
    """The 16-bit (bf16 and fp16 alike) candidates for an m x n output: 3 or 4, chosen by shape."""
    if m <= SKINNY_M:
        return SKINNY
    return LARGE if m * n >= LARGE_MN else MID


def prune(configs, named_args, **kwargs):
    """Only the configs meant for this problem's bucket: at most four are compiled and timed."""
    m = named_args["M_KEY"]
    n = named_args["N_KEY"]
    if named_args["a_ptr"].element_size() == 4:
        if kwargs["PRECISION"] == "ieee":
            return FMA
        # TF32 tiles cost twice the shared memory per stage of 16-bit ones
        return [_cfg(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"] // 2,
                     c.num_stages, c.num_warps, c.kwargs["GROUP_M"]) for c in tensor_core_configs(m, n)]
    return tensor_core_configs(m, n)


# PRECISION is in the key: exact and TF32 float32 pick from different lists; VEC
# too, as a shape whose rows are not 16-byte aligned loads another way
_autotuned = autotune(configs=LARGE + MID + SKINNY + FMA, key=["M_KEY", "N_KEY", "K_KEY", "PRECISION", "VEC"],
                             prune_configs_by={"early_config_prune": prune},
                             # the winner per key is kept in Triton's cache directory (keyed by the
                             # kernel source, the configs and the GPU architecture), so a second run
                             # on this machine compiles the chosen config but does not autotune again
                             cache_results=True)(_gemm_kernel)

# Under TRITON_INTERPRET every config would be run and timed on the CPU: one small one instead.
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}


def describe(kwargs, num_warps=None, num_stages=None) -> str:
    text = (f"BLOCK_M={kwargs['BLOCK_M']} BLOCK_N={kwargs['BLOCK_N']} "
            f"BLOCK_K={kwargs['BLOCK_K']} GROUP_M={kwargs['GROUP_M']}")
    if num_warps is not None:
        text += f" warps={num_warps} stages={num_stages}"
    return text


def vector_width(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> int:
    """The largest power of two up to 16 dividing K, N and the row strides, when
    rows are contiguous and the bases 16-byte aligned; else 1 (nothing assumed)."""
    if a.stride(1) != 1 or b.stride(1) != 1 or c.stride(1) != 1:
        return 1
    if any(t.data_ptr() % 16 for t in (a, b, c)):
        return 1
    values = (a.shape[1], b.shape[1], a.stride(0), b.stride(0), c.stride(0))
    return next(v for v in (16, 8, 4, 2, 1) if all(x % v == 0 for x in values))


def matmul(a: torch.Tensor, b: torch.Tensor, precision: str) -> tuple[torch.Tensor, str]:
    """C = A @ B in A's dtype; returns C and a description of the config used."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"bad shapes for a matmul: {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"mixed dtypes {a.dtype} and {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    if max(M * K, K * N, M * N) >= 2**31:
        raise ValueError("operands of 2^31 elements or more: the kernel's offsets are 32-bit")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            bucket(M), bucket(N), bucket(K))
    # tf32/ieee only matter for float32; 16-bit inputs take the default path
    prec = precision if a.dtype == torch.float32 else "tf32"
    vec = vector_width(a, b, c)
    if interpreting():
        cfg = INTERPRETER_CONFIG
        grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
        _gemm_kernel[grid](*args, PRECISION=prec, UPCAST=a.dtype == torch.bfloat16, VEC=vec, **cfg)
        return c, describe(cfg) + " (interpreter)"

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _autotuned[grid](*args, PRECISION=prec, UPCAST=False, VEC=vec)
    best = _autotuned.best_config
    return c, describe(best.kwargs, best.num_warps, best.num_stages)
