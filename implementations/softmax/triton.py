"""Row-wise softmax in Triton, two kernels picked by row length.

Napkin math (H200: 132 SMs, 64K 32-bit registers and 228 KB shared memory
each, 60 MB L2, ~4.2 TB/s): the fused kernel moves 2*M*N*b bytes.

- Rows that fit on chip (next_pow2(N) <= 32768): ``_softmax_rows`` holds
  ROWS x BLOCK_N values in registers, 16 to 32 float32 a thread, and reads
  and writes each element once.  Short rows are packed several to a program
  (N=128 bf16: 64 rows, 16 KB a program) so that a program still moves enough
  bytes to amortise its launch and reductions.
- Longer rows (131072 float32 is 512 KB, more than an SM holds):
  ``_softmax_online`` walks the row in chunks keeping a per-lane running
  max and sum (one exp2 an element, no reduction inside the loop), then
  walks it again to write.  The first chunk stays in registers across both walks and the second
  walk runs backwards, so the chunks re-read are the ones most recently
  loaded; with ~132 rows in flight of at most 512 KB, of which the re-read
  part is in L2, the HBM traffic stays close to one read and one write.

exp is exp2 of a pre-scaled argument (one FMA and one MUFU op an element):
at 1 T elements/s (bf16 at copy speed) MUFU has room for about four.
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._row_tuning import describe, neighbours, rows_plan, tuned

from suite.backends import dtype_in, interpreting, needs_triton
from suite.workload import Case, itemsize, register

LOG2E = tl.constexpr(1.4426950408889634)  # kernels may read only constexpr globals
MAX_FUSED = 32768  # longest row (power of two) kept whole in registers


# M_BUCKET (next_pow2(M)) is only an autotuning key: one tuning per row width,
# dtype and order of magnitude of M.  Never specialised, so it costs no recompiles.
@triton.jit(do_not_specialize=["M_BUCKET"])
def _softmax_rows(x_ptr, y_ptr, M, N, M_BUCKET, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    # Rows past the end load the last row again (no NaN from all -inf rows,
    # no row mask on the load) and are masked only at the store.
    src = tl.minimum(rows, M - 1).to(tl.int64) * N
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=cmask[None, :], other=float("-inf"),
                eviction_policy="evict_first").to(tl.float32)
    z = (x - tl.max(x, axis=1)[:, None]) * LOG2E
    e = tl.exp2(z)
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    dst = rows.to(tl.int64) * N
    smask = (rows < M)[:, None] & cmask[None, :]
    tl.store(y_ptr + dst[:, None] + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=smask)


@triton.jit(do_not_specialize=["M_BUCKET"])
def _softmax_online(x_ptr, y_ptr, N, M_BUCKET, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * N
    yr = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    mask0 = cols < N
    # Chunk 0 is kept, in its storage type, until the output walk.
    x0 = tl.load(xr + cols, mask=mask0, other=float("-inf"))
    # Per-lane running max m and sum s (in units of 2^(z - m)).  With
    # d = z - m, one of the two rescale factors is 1, so one exp2 an element:
    # d > 0: s = s*2^-d + 1, m = z;  else: s = s + 2^d.  No reduction in the
    # loop, so nothing stalls the stream of loads.  When the loop runs
    # (N > BLOCK) every lane of chunk 0 is valid, so m is finite there.
    m = x0.to(tl.float32) * LOG2E
    s = tl.where(mask0, 1.0, 0.0)
    for start in range(BLOCK, N, BLOCK):
        mask = start + cols < N
        z = tl.load(xr + start + cols, mask=mask, other=float("-inf"),
                    eviction_policy="evict_last").to(tl.float32) * LOG2E
        d = z - m
        e = tl.exp2(-tl.abs(d))
        s = tl.where(d > 0, s * e + 1.0, s + e)
        m = tl.maximum(m, z)
    m_row = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp2(m - m_row), axis=0)
    out_ty = y_ptr.dtype.element_ty
    tl.store(yr + cols, (tl.exp2(x0.to(tl.float32) * LOG2E - m_row) * inv).to(out_ty), mask=mask0,
             cache_modifier=".cs")
    n_chunks = tl.cdiv(N, BLOCK)
    for i in range(1, n_chunks):
        start = (n_chunks - i) * BLOCK  # backwards: the latest loads are the likeliest L2 hits
        mask = start + cols < N
        z = tl.load(xr + start + cols, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32) * LOG2E
        # Streaming stores, so that y does not push the rows still to be
        # re-read out of L2.
        tl.store(yr + start + cols, (tl.exp2(z - m_row) * inv).to(out_ty), mask=mask, cache_modifier=".cs")


def plan(m: int, n: int, dtype_bytes: int, max_fused: int = MAX_FUSED, block: int | None = None) -> dict:
    """Kernel and launch parameters for an m x n softmax; pure, so config() can replay it."""
    block_n = max(16, triton.next_power_of_2(n))  # 16: no degenerate 1-wide layouts
    if block_n <= max_fused:
        # 32 values a thread at the widest rows (32768: 53 registers, no spills
        # for sm_90, one 32-warp program an SM with 128 KB in flight).
        return rows_plan(m, block_n, dtype_bytes)
    # 8192 with 32 warps: 8 values a thread, ~48 registers, one program an SM,
    # so ~132 rows share L2 (fp32 131072: 64 MB, the later chunks fitting).
    chunk = block or min(8192, max_fused)
    return dict(kernel="online", BLOCK=chunk, num_warps=max(1, min(32, chunk // 256)))


def candidates(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """What the autotuner tries on the GPU: the plan and its neighbours.

    Rows kernel: ROWS kept, halved and doubled, each with 16 or 8 values a
    thread, and 32 for single rows at up to 16 warps.  Online kernel: chunks
    of 2048 to 8192 with 8 or 16 values a thread (16384 spilled at 16 or 32
    warps).  The sm_90 compile test checks every one of these for spills.
    """
    return neighbours(plan(m, n, dtype_bytes), m, "online",
                      ((4096, 16), (8192, 32), (8192, 16), (4096, 8), (2048, 8), (2048, 4)))


_rows_tuned = tuned(_softmax_rows, candidates)
_online_tuned = tuned(_softmax_online, candidates)

# (kernel, N, dtype bytes, M bucket) -> the config the autotuner chose, for config()
_CHOSEN: dict[tuple, str] = {}


def softmax_triton(x, *, max_fused: int = MAX_FUSED, block: int | None = None):
    """Softmax over the last dim; ``max_fused``/``block`` force the paths in tests
    (a forced path runs its plan as is, untuned)."""
    import torch

    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.shape[-1]
    m = x.numel() // n if n else 0
    if x.numel() == 0:
        return y
    p = plan(m, n, x.element_size(), max_fused, block)
    bucket = triton.next_power_of_2(m)
    if interpreting() or max_fused != MAX_FUSED or block is not None:
        # One config: the interpreter would run every candidate on the CPU.
        if p["kernel"] == "rows":
            _softmax_rows[(triton.cdiv(m, p["ROWS"]),)](x, y, m, n, bucket, ROWS=p["ROWS"], BLOCK_N=p["BLOCK_N"],
                                                       num_warps=p["num_warps"])
        else:
            _softmax_online[(m,)](x, y, n, bucket, BLOCK=p["BLOCK"], num_warps=p["num_warps"])
        return y
    if p["kernel"] == "rows":
        kernel = _rows_tuned
        kernel[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](x, y, m, n, bucket)
    else:
        kernel = _online_tuned
        kernel[(m,)](x, y, n, bucket)
    best = kernel.best_config
    _CHOSEN[(p["kernel"], n, x.element_size(), bucket)] = describe(p["kernel"], best.kwargs, best.num_warps)
    return y


def _config(case: Case) -> str:
    """The autotuned choice once the case has run on the GPU, else the untuned plan."""
    m, n, b = case["M"], case["N"], itemsize(case.dtype)
    p = plan(m, n, b)
    chosen = _CHOSEN.get((p["kernel"], n, b, triton.next_power_of_2(m)))
    if chosen:
        return chosen + " (autotuned)"
    return describe(p.pop("kernel"), {k: v for k, v in p.items() if k != "num_warps"}, p["num_warps"])


register("softmax", "triton", available=needs_triton,
         supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
         description="rows in registers (several short rows a program); online softmax for long rows")(
    softmax_triton)
