"""gelu in Triton: one streaming pass, y = x * 0.5 * (1 + erf(x / sqrt(2))).

Napkin math (H200, ~4.2 TB/s read + write): bf16 at 2^28 elements moves
1 GiB, about 256 us at the copy rate.  To keep HBM busy each SM needs tens of
KB of loads in flight (Little's law: ~32 GB/s per SM x ~1 us latency), so a
program covers 16 KB of input (4096 float32 or 8192 16-bit elements) with 8
warps: each thread issues four 16-byte loads back to back, and with eight
such programs resident per SM there is ~128 KB in flight, well past the need.
The arithmetic is done in float32 whatever the storage type; see gelu_f32
(implementations/_shared/gelu_math.py) for why 16-bit outputs use a
branch-free erf.  From a million elements up the block, warps and eviction
hint are autotuned over a short list that includes what Inductor launches
(see candidates()).

Full blocks take an unmasked path so the loads stay 16 bytes wide whatever N
is; only the one ragged block at the end is masked.
"""
from __future__ import annotations

import triton
import triton.language as tl

from suite.backends import dtype_in, interpreting, needs_triton
from suite.workload import Case, itemsize, register

from implementations._shared import cuda_variants
from implementations._shared.autotune import autotune
from implementations._shared.gelu_math import gelu_f32


# N_BUCKET (next_pow2(n)) is only an autotuning key; never specialised.
@triton.jit(do_not_specialize=["N_BUCKET"])
def _gelu_kernel(x_ptr, y_ptr, n, N_BUCKET, BLOCK: tl.constexpr, EXACT: tl.constexpr, EVICT: tl.constexpr):
    # 64-bit block start: 2^31 elements must not wrap.
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = tl.arange(0, BLOCK)
    xs = x_ptr + start
    ys = y_ptr + start
    if start + BLOCK <= n:
        x = tl.load(xs + offs, eviction_policy=EVICT).to(tl.float32)
        tl.store(ys + offs, gelu_f32(x, EXACT).to(y_ptr.dtype.element_ty))
    else:
        mask = offs < n - start
        x = tl.load(xs + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(ys + offs, gelu_f32(x, EXACT).to(y_ptr.dtype.element_ty), mask=mask)


def plan(n: int, dtype_bytes: int, sms: int | None = None) -> tuple[int, int]:
    """(BLOCK, num_warps) for n elements of dtype_bytes each on a GPU of ``sms`` SMs
    (default: the current device's)."""
    block = 16384 // dtype_bytes  # 16 KB of input per program
    # Small inputs: shrink the block so that every SM gets at least two
    # programs rather than leaving most of the chip idle.
    sms = cuda_variants.device().sms if sms is None else sms
    while block > 1024 and triton.cdiv(n, block) < 2 * sms:
        block //= 2
    return block, (8 if block >= 4096 else 4)


def candidates(dtype_bytes: int) -> list[tuple[int, int, str]]:
    """(BLOCK, num_warps, eviction policy) tried at HBM-bound sizes.

    2 to 16 KB of input a program, one to four 16-byte accesses a thread.
    One access a thread (the most programs) suits mid sizes such as 3M
    float32 elements on the H200, where a 12 MB kernel lasts ~11 us and the
    last wave's tail is a visible share; 1024 float32 on 4 warps with no
    eviction hint is what Inductor launches for a pointwise op; 4 KB on 8
    warps is the CUDA op's tile at 1M float32; 16 KB on 8 warps with
    evict_first is plan().  The sm_90 compile test checks each for spills.
    """
    e = 4 // dtype_bytes
    return [(512 * e, 4, ""), (1024 * e, 4, ""), (1024 * e, 8, ""), (2048 * e, 4, ""), (2048 * e, 8, ""),
            (4096 * e, 8, ""), (4096 * e, 8, "evict_first")]


TUNE_MIN = 1_000_000  # elements


def tuned_here(n: int, dtype_bytes: int) -> bool:
    """Sizes of at least a million elements are tuned; smaller ones keep plan().

    plan()'s fixed 2048-element evict_first blocks are too slow from there
    up: 7.4 us at 1M float32 elements on the H200, torch 6.8-7.1 us.
    """
    return n >= TUNE_MIN


def _prune(configs, named_args, **kwargs):
    return [triton.Config({"BLOCK": b, "EVICT": e}, num_warps=w)
            for b, w, e in candidates(named_args["x_ptr"].element_size())]


# The candidates come from _prune; two placeholders make the list long enough to tune.
_tuned = autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)],
                         key=["N_BUCKET", "EXACT"], prune_configs_by={"early_config_prune": _prune})(_gelu_kernel)
_CHOSEN: dict[tuple, tuple[int, int, str]] = {}  # (N bucket, dtype bytes) -> (BLOCK, num_warps, EVICT)


def gelu_triton(x, *, block: int | None = None, exact: bool | None = None):
    """``exact`` picks libdevice's erf (default: float32 only; the polynomial
    is for 16-bit outputs, see gelu_f32).  ``block`` forces the block size (untuned)."""
    import torch

    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    b = x.element_size()
    bucket = triton.next_power_of_2(n)
    if exact is None:
        exact = b == 4
    if block is None and tuned_here(n, b) and not interpreting():
        _tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, bucket, EXACT=exact)
        best = _tuned.best_config
        _CHOSEN[(bucket, b)] = (best.kwargs["BLOCK"], best.num_warps, best.kwargs["EVICT"])
        return y
    blk, warps = plan(n, b, cuda_variants.limits_of(x.device).sms)
    if block is not None:
        blk = block
    _gelu_kernel[(triton.cdiv(n, blk),)](x, y, n, bucket, BLOCK=blk, EXACT=exact, EVICT="evict_first",
                                         num_warps=warps)
    return y


def _config(case: Case) -> str:
    b = itemsize(case.dtype)
    blk, warps = plan(case["N"], b)
    evict = "evict_first"
    erf = "libdevice" if case.dtype == "float32" else "A&S-7.1.26"
    tuned = ""
    chosen = _CHOSEN.get((triton.next_power_of_2(case["N"]), b)) if tuned_here(case["N"], b) else None
    if chosen:
        blk, warps, evict = chosen
        tuned = " (autotuned)"
    return f"BLOCK={blk} warps={warps} evict={evict or 'none'} erf={erf}{tuned}"


register("gelu", "triton", available=needs_triton,
         supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
         description="one streaming pass, 16-byte accesses, float32 math")(gelu_triton)
