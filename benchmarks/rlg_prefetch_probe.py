"""residual_layernorm_gelu over wide rows, the next rows' x and r prefetched into L2: a one-off device comparison.

``PYTHONPATH=. python3 benchmarks/rlg_prefetch_probe.py`` on the H200.  At 4096 x 32768
one program holds a whole row and fills an SM; while it reduces, the SM has no
loads in flight, and HBM idles (ncu: 67% of DRAM peak,
results/h200/diagnostics/ncu-rlg-triton-rows-ca4e325.txt).  Holding the next
row's loads in registers ran out of registers (rlg_pipe_probe).  A prefetch
into L2 holds no registers: each program, on starting row i, asks L2 for row
i + DIST's x and r (``DIST`` about one wave of programs ahead, so about the
row this SM takes next), so that HBM keeps streaming across the reductions
and the program's own loads mostly hit L2.

Two prefetch forms: ``bulk`` has a few threads each issue one TMA bulk L2
prefetch (``cp.async.bulk.prefetch.L2``) of a slice of the row; ``lines`` has
every thread issue ``prefetch.global.L2`` for its 128-byte lines.  The
kernels are the shipped whole-row kernel's shape: bf16 as one 32768-wide
block on 32 warps, float32 as four 8192-wide quarters (rlg_wide_rows).
"""
import torch
import triton
import triton.language as tl

from benchmarks._probe import print_table, rlg_shipped, variant_row
from implementations.gelu.triton import gelu_f32

# $1, $2: x and r row addresses; $3: bytes a slice (a multiple of 16); $4: row bytes.
# Thread t < ceil(row / slice) prefetches slice t of both rows.
_BULK = tl.constexpr("""{
.reg .pred p;
.reg .u32 t, off, sz;
.reg .u64 o, a;
mov.u32 t, %tid.x;
mul.lo.u32 off, t, $3;
setp.lt.u32 p, off, $4;
sub.u32 sz, $4, off;
min.u32 sz, sz, $3;
cvt.u64.u32 o, off;
add.u64 a, $1, o;
@p cp.async.bulk.prefetch.L2.global [a], sz;
add.u64 a, $2, o;
@p cp.async.bulk.prefetch.L2.global [a], sz;
mov.u32 $0, 0;
}""")

# Thread t prefetches lines t, t + T, t + 2T, t + 3T (T threads, 128 bytes a line) of both rows.
_LINES = tl.constexpr("""{
.reg .pred p;
.reg .u32 t, nt, off;
.reg .u64 o, a;
mov.u32 t, %tid.x;
mov.u32 nt, %ntid.x;
shl.b32 nt, nt, 7;
shl.b32 off, t, 7;
setp.lt.u32 p, off, $4;
cvt.u64.u32 o, off;
add.u64 a, $1, o;
@p prefetch.global.L2 [a];
add.u64 a, $2, o;
@p prefetch.global.L2 [a];
add.u32 off, off, nt;
setp.lt.u32 p, off, $4;
cvt.u64.u32 o, off;
add.u64 a, $1, o;
@p prefetch.global.L2 [a];
add.u64 a, $2, o;
@p prefetch.global.L2 [a];
add.u32 off, off, nt;
setp.lt.u32 p, off, $4;
cvt.u64.u32 o, off;
add.u64 a, $1, o;
@p prefetch.global.L2 [a];
add.u64 a, $2, o;
@p prefetch.global.L2 [a];
add.u32 off, off, nt;
setp.lt.u32 p, off, $4;
cvt.u64.u32 o, off;
add.u64 a, $1, o;
@p prefetch.global.L2 [a];
add.u64 a, $2, o;
@p prefetch.global.L2 [a];
mov.u32 $0, 0;
}""")


@triton.jit
def _prefetch_rows(x_ptr, r_ptr, row, M, N, DIST, KIND: tl.constexpr, SLICES: tl.constexpr):
    """Ask L2 for row ``row + DIST``'s x and r (nothing past the last row, nothing when DIST is 0)."""
    nxt = row + DIST
    if (DIST > 0) & (nxt < M):
        nbytes = N * (x_ptr.dtype.element_ty.primitive_bitwidth // 8)
        xa = (x_ptr + nxt.to(tl.int64) * N).to(tl.int64, bitcast=True) + tl.zeros([1], tl.int64)
        ra = (r_ptr + nxt.to(tl.int64) * N).to(tl.int64, bitcast=True) + tl.zeros([1], tl.int64)
        sl = ((nbytes + SLICES * 16 - 1) // (SLICES * 16)) * 16
        tl.inline_asm_elementwise(_BULK if KIND == 0 else _LINES, "=r,l,l,r,r",
                                  [xa, ra, sl + tl.zeros([1], tl.int32), nbytes + tl.zeros([1], tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _rlg_whole_pf(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DIST, BLOCK_N: tl.constexpr, EXACT: tl.constexpr,
                  EVICT: tl.constexpr, KIND: tl.constexpr, SLICES: tl.constexpr, LATE: tl.constexpr):
    """The shipped whole-row kernel (_rlg_rows, ROWS=1, w and b after the reductions) with the prefetch."""
    row = tl.program_id(0)
    if not LATE:
        _prefetch_rows(x_ptr, r_ptr, row, M, N, DIST, KIND, SLICES)
    cols = tl.arange(0, BLOCK_N)
    cm = cols < N
    src = row.to(tl.int64) * N + cols
    x = tl.load(x_ptr + src, mask=cm, other=0.0, eviction_policy=EVICT)
    r = tl.load(r_ptr + src, mask=cm, other=0.0, eviction_policy=EVICT)
    if LATE:
        _prefetch_rows(x_ptr, r_ptr, row, M, N, DIST, KIND, SLICES)
    h = x.to(tl.float32) + r.to(tl.float32)
    mean = tl.sum(h, axis=0) / N
    d = tl.where(cm, h - mean, 0.0)
    rstd = tl.math.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = gelu_f32(d * rstd * w + b, EXACT)
    tl.store(y_ptr + src, y.to(y_ptr.dtype.element_ty), mask=cm)


@triton.jit
def _part(x_ptr, r_ptr, base, off, cols, N, EVICT: tl.constexpr):
    m = off + cols < N
    return (tl.load(x_ptr + base + off + cols, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
            + tl.load(r_ptr + base + off + cols, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32))


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
def _rlg_quarters_pf(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DIST, Q: tl.constexpr, EXACT: tl.constexpr,
                     EVICT: tl.constexpr, KIND: tl.constexpr, SLICES: tl.constexpr, LATE: tl.constexpr):
    """A whole row (N <= 4Q) held as four Q-wide quarters, so that float32 fits 64 registers, with the prefetch."""
    row = tl.program_id(0)
    if not LATE:
        _prefetch_rows(x_ptr, r_ptr, row, M, N, DIST, KIND, SLICES)
    base = row.to(tl.int64) * N
    cols = tl.arange(0, Q)
    h0 = _part(x_ptr, r_ptr, base, 0, cols, N, EVICT)
    h1 = _part(x_ptr, r_ptr, base, Q, cols, N, EVICT)
    h2 = _part(x_ptr, r_ptr, base, 2 * Q, cols, N, EVICT)
    h3 = _part(x_ptr, r_ptr, base, 3 * Q, cols, N, EVICT)
    if LATE:
        _prefetch_rows(x_ptr, r_ptr, row, M, N, DIST, KIND, SLICES)
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
             KIND: tl.constexpr, SLICES: tl.constexpr, FENCE: tl.constexpr, EAGER: tl.constexpr):
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
        _prefetch_rows(x_ptr, r_ptr, row, M, N, DISTP * P, KIND, SLICES)
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


def rot(x, r, w, b, eps, distp, fence, eager, kind=0, slices=8, out=None):
    """y by _rlg_rot on one program an SM; returns y and the kernel."""
    m, n = x.shape
    if (n * x.element_size()) % 16:
        distp = 0
    y = torch.empty_like(x) if out is None else out
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    k = _rlg_rot[(min(m, sms),)](x, r, w, b, y, m, n, float(eps), distp, Q=triton.next_power_of_2(triton.cdiv(n, 4)),
                                 EXACT=x.element_size() == 4, KIND=kind, SLICES=slices, FENCE=fence, EAGER=eager,
                                 num_warps=32)
    return y, k

def run(x, r, w, b, eps, dist, kind, late, evict, slices=8, out=None):
    """y by the dtype's whole-row kernel with row + ``dist`` prefetched (0: none); returns y and the kernel."""
    m, n = x.shape
    if (n * x.element_size()) % 16:
        dist = 0  # bulk prefetches take 16-byte multiples
    y = torch.empty_like(x) if out is None else out
    meta = dict(EXACT=x.element_size() == 4, EVICT=evict, KIND=kind, SLICES=slices, LATE=late, num_warps=32)
    if x.element_size() == 2:
        k = _rlg_whole_pf[(m,)](x, r, w, b, y, m, n, float(eps), dist, BLOCK_N=triton.next_power_of_2(n), **meta)
    else:
        k = _rlg_quarters_pf[(m,)](x, r, w, b, y, m, n, float(eps), dist,
                                   Q=triton.next_power_of_2(triton.cdiv(n, 4)), **meta)
    return y, k


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("rlg_prefetch_probe needs a CUDA GPU (it times kernels; see results/h200/diagnostics)")
    rows = []
    res = lambda k: f"{k.n_regs} regs {k.n_spills} spills"  # noqa: E731
    for dtype, m, n in [("bfloat16", 4096, 32768), ("float32", 4096, 32768), ("bfloat16", 300, 30000),
                        ("float32", 1000, 20000)]:
        (x, r, w, b, eps), gb, rel, shipped = rlg_shipped(dtype, m, n, 62)
        rows.append(shipped)
        full = m == 4096
        shape = f"{m}x{n}"
        rows.append(variant_row(dtype, shape, "whole row, no prefetch", x, gb, rel,
                                lambda out=None: run(x, r, w, b, eps, 0, 0, False, "", out=out), res))
        late = dtype == "bfloat16"  # float32's quarters spill with the prefetch after their loads
        for dist in ((16, 33, 44, 66) if full else (44,)):
            rows.append(variant_row(dtype, shape, f"whole row, bulk +{dist}{' late' if late else ''}", x, gb, rel,
                                    lambda out=None: run(x, r, w, b, eps, dist, 0, late, "", out=out), res))
        for distp in ((0, 1, 2) if full else (1,)):
            for fence in ((False, True) if full else (True,)):
                for eager in ((False, True) if full else (True,)):
                    rows.append(variant_row(
                        dtype, shape, f"rotating quarters, prefetch {distp}P{', fence' if fence else ''}"
                        f"{', eager' if eager else ''}", x, gb, rel,
                        lambda out=None: rot(x, r, w, b, eps, distp, fence, eager, out=out), res))
    print_table(rows, "rel err")


if __name__ == "__main__":
    bench()
