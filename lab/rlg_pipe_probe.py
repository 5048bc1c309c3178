"""residual_layernorm_gelu over wide rows by a persistent grid: a one-off device comparison.

``python3 -m lab.rlg_pipe_probe`` on the H200 (its output
is in lab/findings/).  At 4096 x 32768 the shipped Triton kernel
gives a row to one program that fills an SM and idles through its
reductions (0.76-0.80 of copy).  ``_rlg_pipe`` carries the Triton softmax's
pipe kernel over: a persistent grid whose programs take chunks of a row from
a ticket and hold two, h = x + r in float32; each publishes its chunk's sum
and squared deviations about the chunk's own mean (merged per row by Chan's
formula, exact in the held values), and writes the older chunk, normalised,
scaled, shifted and through GELU, while the newer one's loads are in flight
when the older one's row is already complete (else it publishes first and
waits, so that it never waits on an unpublished chunk).  Register caps set
the programs an SM and so the grid.

Each variant is checked against float64 (into a NaN-filled output) and
timed with the suite's events timer (L2 flushed) beside the shipped kernel
as the suite calls it, the copy rate measured in the same run.
"""
import torch
import triton
import triton.language as tl

from lab._probe import fit, print_table, rlg_shipped, variant_row

from implementations._shared.gelu_math import gelu_f32
from implementations.softmax.triton import _split_buffers, pipe_release


@triton.jit
def _load_h(x_ptr, r_ptr, k, total, N, BLOCK: tl.constexpr):
    """h = x + r of chunk k in float32 (0 past the row; nothing read if k >= total)."""
    p = tl.cdiv(N, BLOCK)
    row = k // p
    idx = (k - row * p) * BLOCK + tl.arange(0, BLOCK)
    mask = (idx < N) & (k < total)
    off = row.to(tl.int64) * N + idx
    return (tl.load(x_ptr + off, mask=mask, other=0.0).to(tl.float32)
            + tl.load(r_ptr + off, mask=mask, other=0.0).to(tl.float32))


@triton.jit
def _publish(h, stats_ptr, count_ptr, k, total, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr):
    """Chunk k's sum and squared deviations about its own mean, then one count at its row's counter."""
    p = tl.cdiv(N, BLOCK)
    row = k // p
    c = k - row * p
    n_c = tl.minimum(N - c * BLOCK, BLOCK)
    s = tl.sum(h, axis=0)
    idx = c * BLOCK + tl.arange(0, BLOCK)
    d = tl.where(idx < N, h - s / n_c, 0.0)
    pipe_release(s, tl.sum(d * d, axis=0), stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX)


@triton.jit
def _write(h, w_ptr, b_ptr, y_ptr, stats_ptr, k, N, eps, BLOCK: tl.constexpr, P_MAX: tl.constexpr,
           EXACT: tl.constexpr):
    """y of the held chunk k from its row's statistics (all published)."""
    p = tl.cdiv(N, BLOCK)
    row = k // p
    st = stats_ptr + row.to(tl.int64) * (2 * P_MAX)
    kk = tl.arange(0, P_MAX)
    sums = tl.load(st + kk, mask=kk < p, other=0.0, cache_modifier=".cg")
    m2s = tl.load(st + P_MAX + kk, mask=kk < p, other=0.0, cache_modifier=".cg")
    n_k = tl.maximum(tl.minimum(N - kk * BLOCK, BLOCK), 1).to(tl.float32)
    mean = tl.sum(sums, axis=0) / N
    dev = tl.where(kk < p, sums / n_k - mean, 0.0)
    var = (tl.sum(m2s, axis=0) + tl.sum(n_k * dev * dev, axis=0)) / N
    rstd = tl.math.rsqrt(var + eps)
    idx = (k - row * p) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < N
    w = tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    y = gelu_f32((h - mean) * rstd * w + b, EXACT)
    tl.store(y_ptr + row.to(tl.int64) * N + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rlg_pipe(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, count_ptr, M, N, eps, BLOCK: tl.constexpr,
              P_MAX: tl.constexpr, EXACT: tl.constexpr, EARLY: tl.constexpr):
    """Chunks of BLOCK columns from the ticket count_ptr[0]; count_ptr[1 + row]
    counts the row's published chunks; stats_ptr holds each row's chunk sums,
    then squared deviations, P_MAX apart.  EARLY as in the softmax pipe kernel."""
    p = tl.cdiv(N, BLOCK)
    total = M * p
    k = tl.atomic_add(count_ptr, 1, sem="relaxed")
    h = _load_h(x_ptr, r_ptr, k, total, N, BLOCK)
    _publish(h, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX)
    while k < total:
        kn = tl.atomic_add(count_ptr, 1, sem="relaxed")
        hn = _load_h(x_ptr, r_ptr, kn, total, N, BLOCK)
        row = k // p
        seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
        if EARLY and seen >= p:
            tl.debug_barrier()
            _write(h, w_ptr, b_ptr, y_ptr, stats_ptr, k, N, eps, BLOCK, P_MAX, EXACT)
            _publish(hn, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX)
        else:
            _publish(hn, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX)
            while seen < p:
                seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
            tl.debug_barrier()
            _write(h, w_ptr, b_ptr, y_ptr, stats_ptr, k, N, eps, BLOCK, P_MAX, EXACT)
        h = hn
        k = kn


_FIT = {}  # (dtype, N, launch meta) -> programs an SM holds


def pipe(x, r, w, b, eps, block, warps, maxnreg=None, early=True, out=None, programs=None):
    """y = gelu(layernorm(x + r) * w + b) by _rlg_pipe on as many programs as
    the GPU holds at once (or ``programs``), into ``out`` if given; returns y
    and the compiled kernel."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    p = triton.cdiv(n, block)
    pmax = triton.next_power_of_2(p)
    stats, count = _split_buffers(x, m, pmax)
    args = (x, r, w, b, y, stats, count, m, n, float(eps))
    meta = dict(BLOCK=block, P_MAX=pmax, EXACT=x.element_size() == 4, EARLY=early, num_warps=warps,
                **({"maxnreg": maxnreg} if maxnreg else {}))
    if programs is None:
        key = (x.dtype, n, tuple(sorted(meta.items())))
        if key not in _FIT:
            _FIT[key] = fit(_rlg_pipe.warmup(*args, grid=(1,), **meta), warps)
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count * _FIT[key]
    h = _rlg_pipe[(min(m * p, programs),)](*args, **meta)
    return y, h


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("rlg_pipe_probe needs a CUDA GPU (it times kernels; see lab/findings)")
    rows = []
    for dtype, m, n in [("bfloat16", 4096, 32768), ("float32", 4096, 32768)]:
        (x, r, w, b, eps), gb, rel, shipped = rlg_shipped(dtype, m, n, 62)
        rows.append(shipped)
        cfgs = [(4096, 4, None), (4096, 4, 96), (4096, 4, 80), (8192, 8, None), (8192, 8, 96), (8192, 8, 80),
                (2048, 4, None), (2048, 2, None)]
        for early in (True, False):
            for blk, warps, mr in cfgs if early else cfgs[:2]:
                rows.append(variant_row(
                    dtype, f"{m}x{n}", f"pipe chunk {blk}, {warps} warps{f', maxnreg {mr}' if mr else ''}"
                    f"{', early' if early else ''}", x, gb, rel,
                    lambda out=None: pipe(x, r, w, b, eps, blk, warps, mr, early, out=out),
                    lambda h: f"{h.n_regs} regs {h.n_spills} spills, {fit(h, warps)}/SM fit"))
    print_table(rows, "rel err")


if __name__ == "__main__":
    bench()
