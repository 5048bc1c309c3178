"""residual_layernorm_gelu over wide rows, later rows' x and r prefetched into L2: a one-off device comparison.

``PYTHONPATH=. python3 benchmarks/rlg_prefetch_probe.py`` on the H200.  At 4096 x 32768
one program holds a whole row and fills an SM; while it reduces, the SM has no
loads in flight, and HBM idles (ncu: 67% of DRAM peak,
results/h200/diagnostics/ncu-rlg-triton-rows-ca4e325.txt).  Holding the next
row's loads in registers ran out of registers (rlg_pipe_probe).  A prefetch
into L2 holds no registers: implementations/_l2_prefetch.py has a program
ask L2 for the x and r of the program NUM_SMS / PF_DIV ahead, about the one
its SM runs next, so that HBM keeps streaming across the reductions.

Timed here, beside the shipped (raced, autotuned) kernel:
- bf16: the shipped whole-row kernel (``_rlg_rows``, one row on 32 warps) at
  PF_DIV 0 (none), 2, 3, 4 and 8, and ``_rlg_onepass``, the same with the
  mean and variance in one two-value reduction (sums shifted by the row's
  first h) instead of two;
- float32: a whole row held as four 8192-wide quarters (64 registers, see
  rlg_wide_rows), the prefetch issued before its loads (after them, it
  spills), at 16 to 66 rows ahead;
- both: ``_rlg_rot``, one persistent program an SM that loads the next row
  quarter by quarter into the registers each written quarter frees.

The first runs (results/h200/diagnostics/rlg_prefetch-5e0a70d.txt and
-f79fef0.txt, with the probe's own copy of the whole-row kernel) also tried
a per-line ``prefetch.global.L2`` from every thread (0.816 of copy at best
against the bulk form's 0.831), the prefetch issued before the program's
own loads (0.757 at best), and prefetching one and two waves ahead (0.810
and 0.664).
"""
import torch
import triton
import triton.language as tl

from benchmarks._probe import print_table, rlg_shipped, variant_row
from implementations._l2_prefetch import prefetch_l2
from implementations.gelu.triton import gelu_f32
from implementations.residual_layernorm_gelu.triton import _rlg_rows


@triton.jit
def _prefetch_row(x_ptr, r_ptr, row, M, N):
    """x and r of ``row`` into L2 (nothing past the last row)."""
    start = row.to(tl.int64) * N
    prefetch_l2(x_ptr + start, r_ptr + start, tl.where(row < M, N, 0))


@triton.jit
def _add2(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _rlg_onepass(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DIST, BLOCK_N: tl.constexpr, EXACT: tl.constexpr):
    """One row a program (N == BLOCK_N), mean and variance from one reduction of (h - K, (h - K)^2), K the
    row's first h; row + DIST prefetched after the loads."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    src = row.to(tl.int64) * N + cols
    x = tl.load(x_ptr + src)
    r = tl.load(r_ptr + src)
    k = tl.load(x_ptr + row.to(tl.int64) * N).to(tl.float32) + tl.load(r_ptr + row.to(tl.int64) * N).to(tl.float32)
    if DIST > 0:
        _prefetch_row(x_ptr, r_ptr, row + DIST, M, N)
    h = x.to(tl.float32) + r.to(tl.float32)
    s = h - k
    s1, s2 = tl.reduce((s, s * s), 0, _add2)
    mu = s1 / N
    rstd = tl.math.rsqrt(tl.maximum(s2 / N - mu * mu, 0.0) + eps)
    w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, eviction_policy="evict_last").to(tl.float32)
    y = gelu_f32((s - mu) * rstd * w + b, EXACT)
    tl.store(y_ptr + src, y.to(y_ptr.dtype.element_ty))


@triton.jit
def _part(x_ptr, r_ptr, base, off, cols, N):
    m = off + cols < N
    return (tl.load(x_ptr + base + off + cols, mask=m, other=0.0).to(tl.float32)
            + tl.load(r_ptr + base + off + cols, mask=m, other=0.0).to(tl.float32))


@triton.jit
def _dev(h, mean, off, cols, N):
    return tl.where(off + cols < N, h - mean, 0.0)


@triton.jit
def _out(d, rstd, w_ptr, b_ptr, y_ptr, base, off, cols, N, EXACT: tl.constexpr):
    m = off + cols < N
    w = tl.load(w_ptr + off + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + off + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + base + off + cols, gelu_f32(d * rstd * w + b, EXACT).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rlg_quarters_pf(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DIST, Q: tl.constexpr, EXACT: tl.constexpr):
    """A whole row (N <= 4Q) held as four Q-wide quarters, so that float32 fits 64 registers; row + DIST
    prefetched first."""
    row = tl.program_id(0)
    if DIST > 0:
        _prefetch_row(x_ptr, r_ptr, row + DIST, M, N)
    base = row.to(tl.int64) * N
    cols = tl.arange(0, Q)
    h0 = _part(x_ptr, r_ptr, base, 0, cols, N)
    h1 = _part(x_ptr, r_ptr, base, Q, cols, N)
    h2 = _part(x_ptr, r_ptr, base, 2 * Q, cols, N)
    h3 = _part(x_ptr, r_ptr, base, 3 * Q, cols, N)
    mean = (tl.sum(h0, 0) + tl.sum(h1, 0) + tl.sum(h2, 0) + tl.sum(h3, 0)) / N
    d0 = _dev(h0, mean, 0, cols, N)
    d1 = _dev(h1, mean, Q, cols, N)
    d2 = _dev(h2, mean, 2 * Q, cols, N)
    d3 = _dev(h3, mean, 3 * Q, cols, N)
    rstd = tl.math.rsqrt((tl.sum(d0 * d0, 0) + tl.sum(d1 * d1, 0) + tl.sum(d2 * d2, 0) + tl.sum(d3 * d3, 0)) / N
                         + eps)
    _out(d0, rstd, w_ptr, b_ptr, y_ptr, base, 0, cols, N, EXACT)
    _out(d1, rstd, w_ptr, b_ptr, y_ptr, base, Q, cols, N, EXACT)
    _out(d2, rstd, w_ptr, b_ptr, y_ptr, base, 2 * Q, cols, N, EXACT)
    _out(d3, rstd, w_ptr, b_ptr, y_ptr, base, 3 * Q, cols, N, EXACT)



@triton.jit
def _ld(p, row, off, cols, N, ok):
    return tl.load(p + row.to(tl.int64) * N + off + cols, mask=(off + cols < N) & ok, other=0.0)


@triton.jit
def _emit_q(d, rstd, w_ptr, b_ptr, y_ptr, row, off, cols, N, EXACT: tl.constexpr):
    _out(d, rstd, w_ptr, b_ptr, y_ptr, row.to(tl.int64) * N, off, cols, N, EXACT)


@triton.jit
def _rlg_rot(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DISTP, Q: tl.constexpr, EXACT: tl.constexpr,
             FENCE: tl.constexpr, EAGER: tl.constexpr):
    """One persistent program an SM, a row held as four Q-wide quarters: quarter k's y is written, then
    the next row's quarter k is loaded into the registers it held, while quarter k + 1's GELU runs.
    DISTP > 0: row + DISTP * P prefetched into L2 at the top of each row.  FENCE: a barrier between
    quarters, so the compiler keeps that order.  EAGER: the next row's quarter k - 1 added into h as
    soon as quarter k's loads are issued (fewer registers in flight)."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    cols = tl.arange(0, Q)
    ok = pid < M
    h0 = _ld(x_ptr, pid, 0, cols, N, ok).to(tl.float32) + _ld(r_ptr, pid, 0, cols, N, ok).to(tl.float32)
    h1 = _ld(x_ptr, pid, Q, cols, N, ok).to(tl.float32) + _ld(r_ptr, pid, Q, cols, N, ok).to(tl.float32)
    h2 = _ld(x_ptr, pid, 2 * Q, cols, N, ok).to(tl.float32) + _ld(r_ptr, pid, 2 * Q, cols, N, ok).to(tl.float32)
    h3 = _ld(x_ptr, pid, 3 * Q, cols, N, ok).to(tl.float32) + _ld(r_ptr, pid, 3 * Q, cols, N, ok).to(tl.float32)
    for row in range(pid, M, P):
        if DISTP > 0:
            _prefetch_row(x_ptr, r_ptr, row + DISTP * P, M, N)
        mean = (tl.sum(h0, 0) + tl.sum(h1, 0) + tl.sum(h2, 0) + tl.sum(h3, 0)) / N
        d0 = _dev(h0, mean, 0, cols, N)
        d1 = _dev(h1, mean, Q, cols, N)
        d2 = _dev(h2, mean, 2 * Q, cols, N)
        d3 = _dev(h3, mean, 3 * Q, cols, N)
        rstd = tl.math.rsqrt((tl.sum(d0 * d0, 0) + tl.sum(d1 * d1, 0) + tl.sum(d2 * d2, 0)
                              + tl.sum(d3 * d3, 0)) / N + eps)
        nxt = row + P
        ok = nxt < M
        _emit_q(d0, rstd, w_ptr, b_ptr, y_ptr, row, 0, cols, N, EXACT)
        if FENCE:
            tl.debug_barrier()
        x0 = _ld(x_ptr, nxt, 0, cols, N, ok)
        r0 = _ld(r_ptr, nxt, 0, cols, N, ok)
        _emit_q(d1, rstd, w_ptr, b_ptr, y_ptr, row, Q, cols, N, EXACT)
        if FENCE:
            tl.debug_barrier()
        x1 = _ld(x_ptr, nxt, Q, cols, N, ok)
        r1 = _ld(r_ptr, nxt, Q, cols, N, ok)
        if EAGER:
            h0 = x0.to(tl.float32) + r0.to(tl.float32)
        _emit_q(d2, rstd, w_ptr, b_ptr, y_ptr, row, 2 * Q, cols, N, EXACT)
        if FENCE:
            tl.debug_barrier()
        x2 = _ld(x_ptr, nxt, 2 * Q, cols, N, ok)
        r2 = _ld(r_ptr, nxt, 2 * Q, cols, N, ok)
        if EAGER:
            h1 = x1.to(tl.float32) + r1.to(tl.float32)
        _emit_q(d3, rstd, w_ptr, b_ptr, y_ptr, row, 3 * Q, cols, N, EXACT)
        if FENCE:
            tl.debug_barrier()
        x3 = _ld(x_ptr, nxt, 3 * Q, cols, N, ok)
        r3 = _ld(r_ptr, nxt, 3 * Q, cols, N, ok)
        if not EAGER:
            h0 = x0.to(tl.float32) + r0.to(tl.float32)
            h1 = x1.to(tl.float32) + r1.to(tl.float32)
        h2 = x2.to(tl.float32) + r2.to(tl.float32)
        h3 = x3.to(tl.float32) + r3.to(tl.float32)


def rot(x, r, w, b, eps, distp, fence, eager, out=None):
    """y by _rlg_rot on one program an SM; returns y and the kernel."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    k = _rlg_rot[(min(m, sms),)](x, r, w, b, y, m, n, float(eps), distp, Q=triton.next_power_of_2(triton.cdiv(n, 4)),
                                 EXACT=x.element_size() == 4, FENCE=fence, EAGER=eager, num_warps=32)
    return y, k

def whole(x, r, w, b, eps, pf_div, out=None):
    """y by the shipped whole-row kernel as one 16-bit row on 32 warps at ``pf_div``; returns y and the kernel."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    k = _rlg_rows[(m,)](x, r, w, b, y, m, n, float(eps), triton.next_power_of_2(m),
                        torch.cuda.get_device_properties(x.device).multi_processor_count, ROWS=1,
                        BLOCK_N=triton.next_power_of_2(n), EXACT=False, EVEN_N=n == triton.next_power_of_2(n),
                        ALIGN=8 if n % 8 == 0 else 1, WB_EARLY=False, EVICT="", PF_DIV=pf_div, num_warps=32)
    return y, k


def onepass(x, r, w, b, eps, dist, out=None):
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    return y, _rlg_onepass[(m,)](x, r, w, b, y, m, n, float(eps), dist, BLOCK_N=n, EXACT=False, num_warps=32)


def quarters(x, r, w, b, eps, dist, out=None):
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    return y, _rlg_quarters_pf[(m,)](x, r, w, b, y, m, n, float(eps), dist,
                                     Q=triton.next_power_of_2(triton.cdiv(n, 4)), EXACT=True, num_warps=32)


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("rlg_prefetch_probe needs a CUDA GPU (it times kernels; see results/h200/diagnostics)")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    res = lambda k: f"{k.n_regs} regs {k.n_spills} spills"  # noqa: E731
    for dtype, m, n in [("bfloat16", 4096, 32768), ("float32", 4096, 32768), ("bfloat16", 300, 30000),
                        ("float32", 1000, 20000)]:
        (x, r, w, b, eps), gb, rel, shipped = rlg_shipped(dtype, m, n, 62)
        rows.append(shipped)
        full = m == 4096
        shape = f"{m}x{n}"

        def add(label, fn):
            rows.append(variant_row(dtype, shape, label, x, gb, rel, fn, res))

        if dtype == "bfloat16":
            for div in ((0, 2, 3, 4, 8) if full else (0, 2)):
                add(f"whole row, PF_DIV {div}", lambda out=None: whole(x, r, w, b, eps, div, out=out))
            if full:
                for div in (0, 2, 3):
                    dist = sms // div if div else 0
                    add(f"one-pass stats, +{dist}", lambda out=None: onepass(x, r, w, b, eps, dist, out=out))
        else:
            for dist in ((0, 16, 33, 66) if full else (0, 33)):
                add(f"quarters, +{dist}", lambda out=None: quarters(x, r, w, b, eps, dist, out=out))
        for distp in ((0, 1) if full else (1,)):
            for eager in ((False, True) if full else (True,)):
                add(f"rotating quarters, prefetch {distp}P{', eager' if eager else ''}",
                    lambda out=None: rot(x, r, w, b, eps, distp, False, eager, out=out))
    print_table(rows, "rel err")


if __name__ == "__main__":
    bench()
