"""Short rows (N <= 1024) on one warp each, several warps a program: does it beat the shipped Triton rows kernels?

``python3 -m lab.warp_rows_probe`` on the H200.  The shipped rows kernels
hold a [ROWS, BLOCK_N] tile; Triton lays it out with the warps along the row
first (a row of 512 float32 spans four warps at 16-byte accesses, two in
bf16, and every unaligned row of 64 or more elements spans several), so each
row's reductions cross warps through shared memory and a barrier.  Where that
is avoided by one-warp programs, a program holds one row and the grid is one
block a row (35712 blocks of 32 threads at softmax 35712 x 319), which ran at
24% achieved occupancy under Nsight Compute.  Here the tile is
[ROWS, BLOCK_N // LANES, LANES]: LANES columns across a warp's lanes (32 a
16-byte vector wide where the rows are aligned, else 32), the rest in each
thread's registers, and the warps along the rows, so that a row's reductions
are in-thread adds and five shuffles, and a program holds several rows.
Each variant is checked on a NaN-poisoned output against float64 and timed by
the suite's events timer (L2 flushed before every sample), beside the
registered triton, compile and cuda implementations.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from implementations._shared.gelu_math import gelu_f32
from implementations._shared.triton_math import exp2
from lab._probe import check_poisoned, time_us
from suite.workload import Case, discover

LOG2E = tl.constexpr(1.4426950408889634)

SOFTMAX = ((35712, 319), (45943, 307), (16033, 232), (1823, 781), (65536, 512), (8192, 1000))
RLG = ((48768, 83), (183392, 41), (19661, 640), (33104, 609), (49157, 384), (65536, 1024), (32768, 256))
DESIGNS = ((1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 4), (8, 8), (16, 8), (16, 16))  # (ROWS, warps)


@triton.jit
def _tile(M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, LANES: tl.constexpr, ALIGN: tl.constexpr):
    n = (N // ALIGN) * ALIGN
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = (tl.arange(0, BLOCK_N // LANES)[None, :, None] * LANES + tl.arange(0, LANES)[None, None, :])
    src = (tl.minimum(rows, M - 1).to(tl.int64) * n)[:, None, None] + cols
    return n, rows, cols, src


@triton.jit
def _softmax_warp_rows(x_ptr, y_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, LANES: tl.constexpr,
                       ALIGN: tl.constexpr):
    n, rows, cols, src = _tile(M, N, ROWS, BLOCK_N, LANES, ALIGN)
    cmask = cols < n
    x = tl.load(x_ptr + src, mask=cmask, other=float("-inf"), eviction_policy="evict_first").to(tl.float32)
    mx = tl.max(tl.max(x, axis=1), axis=1)  # in-thread first, then the lanes
    e = exp2((x - mx[:, None, None]) * LOG2E)
    inv = 1.0 / tl.sum(tl.sum(e, axis=1), axis=1)
    dst = (rows.to(tl.int64) * n)[:, None, None] + cols
    tl.store(y_ptr + dst, (e * inv[:, None, None]).to(y_ptr.dtype.element_ty),
             mask=cmask & (rows < M)[:, None, None])


@triton.jit
def _rlg_warp_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                   LANES: tl.constexpr, ALIGN: tl.constexpr, EXACT: tl.constexpr):
    n, rows, cols, src = _tile(M, N, ROWS, BLOCK_N, LANES, ALIGN)
    cmask = cols < n
    h = (tl.load(x_ptr + src, mask=cmask, other=0.0).to(tl.float32)
         + tl.load(r_ptr + src, mask=cmask, other=0.0).to(tl.float32))
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    mean = tl.sum(tl.sum(h, axis=1), axis=1) / n
    d = tl.where(cmask, h - mean[:, None, None], 0.0)
    rstd = tl.math.rsqrt(tl.sum(tl.sum(d * d, axis=1), axis=1) / n + eps)
    y = gelu_f32(d * rstd[:, None, None] * w + b, EXACT)
    dst = (rows.to(tl.int64) * n)[:, None, None] + cols
    tl.store(y_ptr + dst, y.to(y_ptr.dtype.element_ty), mask=cmask & (rows < M)[:, None, None])


def align(n: int, dtype_bytes: int) -> int:
    return min(16 // dtype_bytes, n & -n)


def lanes(n: int, dtype_bytes: int, block_n: int) -> int:
    return min(block_n, 32 * align(n, dtype_bytes))


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("warp_rows_probe needs a CUDA GPU (it times kernels; see lab/findings)")
    reg = discover()
    table = []
    for wl_name, shapes in (("softmax", SOFTMAX), ("residual_layernorm_gelu", RLG)):
        wl = reg.workloads[wl_name]
        for m, n in shapes:
            for dtype in ("bfloat16", "float32"):
                case = Case.make(wl_name, dtype, M=m, N=n)
                inputs = wl.make_inputs(case, "cuda", 11)
                ref = wl.reference(case, inputs)
                tol = wl.tolerance(case)
                x = inputs["x"]
                b = x.element_size()
                bn = max(16, triton.next_power_of_2(n))
                times = {}
                for name in ("triton", "compile", "cuda"):
                    impl = reg.get(wl_name, name)
                    if impl.check_available("cuda") or impl.supports(case):
                        continue
                    fn = lambda impl=impl: impl.fn(**inputs)  # noqa: E731
                    fn()
                    check_poisoned(name, fn, ref, tol, x.dtype)
                    times[name] = time_us(fn)
                for rows, warps in DESIGNS:
                    if rows > triton.next_power_of_2(m) or bn * rows // (32 * warps) > 64:
                        continue
                    ln = lanes(n, b, bn)
                    grid = (triton.cdiv(m, rows),)
                    if wl_name == "softmax":
                        def fn(rows=rows, warps=warps, ln=ln, grid=grid):
                            y = torch.empty_like(x)
                            _softmax_warp_rows[grid](x, y, m, n, ROWS=rows, BLOCK_N=bn, LANES=ln,
                                                     ALIGN=align(n, b), num_warps=warps)
                            return y
                    else:
                        def fn(rows=rows, warps=warps, ln=ln, grid=grid):
                            y = torch.empty_like(x)
                            _rlg_warp_rows[grid](x, inputs["r"], inputs["weight"], inputs["bias"], y, m, n,
                                                 float(inputs["eps"]), ROWS=rows, BLOCK_N=bn, LANES=ln,
                                                 ALIGN=align(n, b), EXACT=b == 4, num_warps=warps)
                            return y
                    label = f"warp R{rows} w{warps}"
                    fn()
                    check_poisoned(label, fn, ref, tol, x.dtype)
                    times[label] = time_us(fn)
                best_peer = min(t for k, t in times.items() if k == "compile") if "compile" in times else None
                warp = {k: t for k, t in times.items() if k.startswith("warp")}
                wbest = min(warp, key=warp.get)
                line = (f"{wl_name[:7]:7s} {dtype:8s} {m}x{n}".ljust(34)
                        + "  ".join(f"{k} {t:.1f}" for k, t in times.items() if not k.startswith("warp"))
                        + f"  | best warp {wbest} {warp[wbest]:.1f}"
                        + (f"  warp/compile {best_peer / warp[wbest]:.3f}x" if best_peer else "")
                        + f"  warp/triton {times['triton'] / warp[wbest]:.3f}x")
                print(line, flush=True)
                print("      all warp: " + ", ".join(f"{k[5:]} {t:.1f}" for k, t in warp.items()), flush=True)
                table.append(line)
    print("\nsummary (us; ratios are speed-ups of the best warp-rows design)")
    print("\n".join(table))


if __name__ == "__main__":
    bench()
