"""h = x + r; y = gelu(layernorm(h) * w + b), one Triton kernel, one read of x and r.

Napkin math (H200: 132 SMs, 64K registers each, 60 MB L2, ~4.2 TB/s): the
fused kernel moves (3*M*N + 2*N)*b bytes; 32768 x 4096 bf16 is 768 MiB, about
190 us at the copy rate.  The GELU costs ~20 float32 FLOPs an element, ~13
TFLOP/s at 0.63 T elements/s (bf16 at copy speed); 16-bit outputs take
gelu_f32's branch-free erf, so that instruction issue stays under the limit.

- ``_rlg_rows`` (next_pow2(N) <= 16384): ROWS x BLOCK_N of h in registers
  (about 16 float32 a thread), exact two-pass mean and variance over the
  held values (no second read), then normalise, scale, shift and GELU, one
  store.  Short rows (N=1024) are packed several to a program; rows of at
  most 16 columns are also tried in blocks as narrow as the row, sized by
  their real bytes (tiny_rows).  float32 rows that are not a whole number of
  16-byte vectors are also tried in the GRANULES form (``_rlg_granules``:
  16-byte accesses for the body of each row).  Rows of at most 1024 that a
  warp's accesses do not cover in one pass are also tried one or two to a
  warp (``_rlg_warp_rows``, row_tuning.warp_rows): reductions without a
  barrier, several rows a program.  16-bit rows of 4097..16384 whole
  16-byte vectors are also tried one a program with w and b loaded after the
  reductions and the registers capped at 64 (``_capped``): two or four
  programs an SM where the uncapped configs hold one to three, so one row's
  loads cover another's reductions.
- ``_rlg_split`` (wider rows, any N): one row a program, in BLOCK-wide
  chunks.  Chunk 0's h stays in registers; its mean K is the shift for
  per-lane sums of (h - K) and (h - K)^2 over the rest of the row, which keeps
  the one-read variance free of cancellation.  The output walk writes chunk 0
  from registers and re-reads the others backwards, newest first, from L2
  rather than HBM: 32768 float32 columns are 256 KB of x and r a row, and
  ~264 rows in flight re-read at most 3/4 of that.
- Rows of 16385..32768 in any dtype (parts_raced): ``_rlg_parts`` holds the
  whole row in one 32-warp program as two or four parts, each loaded, and
  later normalised and stored, on its own: float32 fits 64 registers (one
  32768-wide block spills), and the first parts' stores drain while the
  later ones compute.  Candidates may also prefetch a later program's x and
  r into L2 (implementations/_shared/l2_prefetch.py), so that HBM streams on
  while this program reduces.  The first call races the tuned parts kernel against
  the tuned split kernel (one read against two; one program an SM that idles
  through its reductions against several) and keeps the faster: at 4096 x
  32768 on the H200, 0.92 (bf16) and 0.91 (float32) of copy.
- ``_rlg_team`` (rows of 4097..65536, team_tried): a row's chunks on a team of
  programs that hold them in registers, publish (count, mean, squared
  deviations), meet at a per-row counter and combine (one read, several
  programs an SM; 16-byte granules for unaligned rows).  The first call races
  it against the row's other kernel(s) and keeps the fastest.  A cluster of
  CTAs, as in the CUDA kernels, does not compile for sm_90 in triton 3.6 (a
  Triton reduction over a cluster); NOTES.md has what such forms measured.
- ``_rlg_fit`` (_triton_fit.py; rows that are not whole 16-byte vectors, of
  2049..32768 columns, or of 64..2048 that parts cover in an eighth fewer lanes
  than a power of two): rows held as 2..8 parts of Q columns that cover them to
  within a part rather than to the next power of two, the body in 16-byte
  granules, one row a program (2 or 8 when short), long rows also with the
  registers capped so that two programs share an SM; raced against the row's
  other kernels.
- Short rows that are not whole 16-byte vectors, where a group of them fits
  a thread, also race the group kernel (_shared/row_groups.py, Gluon,
  sm_90): N=7 bf16 rows as groups of 8 in seven 16-byte vectors, each group
  owned by one thread for its reductions.
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._shared.l2_prefetch import prefetch_l2
from implementations._shared.row_tuning import (Raced, device_index, live_cols, neighbours, row_align, rows_plan,
                                                sm_count, tiny_rows, tuned, warp_rows)
from implementations._shared.row_tuning import time_ms as _time_ms

from implementations._shared.gelu_math import gelu_f32
from implementations._shared.granules import granule_row
from implementations._shared.row_teams import team_buffers, team_chunk, team_meet
from implementations.residual_layernorm_gelu._triton_fit import _rlg_fit, fit_candidates, fit_tried
from suite.backends import dtype_in, interpreting, needs_triton
from suite.workload import Case, itemsize, register

MAX_FUSED = 16384  # widest row (power of two) held whole in registers


# M_BUCKET (next_pow2(M)) is only an autotuning key: one tuning per row width,
# dtype and order of magnitude of M.  Never specialised, so it costs no recompiles.
@triton.jit(do_not_specialize=["M_BUCKET"])
def _rlg_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, M_BUCKET,
              ROWS: tl.constexpr, BLOCK_N: tl.constexpr, EXACT: tl.constexpr, EVEN_N: tl.constexpr,
              ALIGN: tl.constexpr, WB_EARLY: tl.constexpr, EVICT: tl.constexpr, GRANULES: tl.constexpr = False,
              LANES: tl.constexpr = 0, LIVE: tl.constexpr = 0):
    # LIVE (0: none): the row's width rounded up to a warp's pass (live_cols in
    # row_tuning.py); columns past it are masked at compile time, so the parts
    # of the block past the row cost no registers or instructions.
    if GRANULES:
        _rlg_granules(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, ROWS, BLOCK_N, EXACT, EVICT, WB_EARLY, LIVE)
        return
    if LANES:
        _rlg_warp_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, ROWS, BLOCK_N, EXACT, ALIGN, WB_EARLY, EVICT,
                       LANES, LIVE)
        return
    # ALIGN divides N (see row_align), so n == N, but written so that the
    # compiler sees the factor: row starts and the column mask then come in
    # ALIGN-element groups, and N = 1000 still gets 16-byte accesses.
    n = (N // ALIGN) * ALIGN
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < n
    if LIVE:
        cmask = cmask & (cols < LIVE)
    # x and r first; w and b too unless the config says WB_EARLY=False (see
    # candidates): a load issued after a barrier is one more serial L2 round
    # trip with nothing else in flight.  Weight and bias are tiny and shared
    # by every program: L2 hits.
    # Rows past the end re-load the last row and are masked only at the store.
    row0 = tl.program_id(0) * ROWS
    base = row0.to(tl.int64) * n  # the program's first element; in-block offsets in 32 bits
    src = ((tl.minimum(rows, M - 1) - row0) * n)[:, None] + cols[None, :]
    xb = x_ptr + base
    rb = r_ptr + base
    # EVICT: the L2 eviction hint of the x and r loads (a config choice; see candidates).
    if EVEN_N:  # N == BLOCK_N: no column mask, no zero-fill
        x = tl.load(xb + src, eviction_policy=EVICT)
        r = tl.load(rb + src, eviction_policy=EVICT)
    else:
        x = tl.load(xb + src, mask=cmask[None, :], other=0.0, eviction_policy=EVICT)
        r = tl.load(rb + src, mask=cmask[None, :], other=0.0, eviction_policy=EVICT)
    if WB_EARLY:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
    h = x.to(tl.float32) + r.to(tl.float32)
    mean = tl.sum(h, axis=1) / n
    if EVEN_N:
        d = h - mean[:, None]
    else:
        d = tl.where(cmask[None, :], h - mean[:, None], 0.0)
    rstd = tl.math.rsqrt(tl.sum(d * d, axis=1) / n + eps)
    if not WB_EARLY:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
    y = gelu_f32(d * rstd[:, None] * w.to(tl.float32)[None, :] + b.to(tl.float32)[None, :], EXACT)
    dst = ((rows - row0) * n)[:, None] + cols[None, :]
    tl.store(y_ptr + base + dst, y.to(y_ptr.dtype.element_ty), mask=(rows < M)[:, None] & cmask[None, :])


@triton.jit
def _rlg_warp_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                   EXACT: tl.constexpr, ALIGN: tl.constexpr, WB_EARLY: tl.constexpr, EVICT: tl.constexpr,
                   LANES: tl.constexpr, LIVE: tl.constexpr):
    """_rlg_rows with each row on one warp (rows of at most 1024; see
    warp_rows in row_tuning.py): the tile is ROWS x BLOCK_N // LANES x LANES,
    LANES columns across a warp's lanes and the rest in each thread's
    registers, the warps along the rows, so that a row's sums are in-thread
    adds and shuffles, never a barrier (Triton lays a ROWS x BLOCK_N tile out
    with its warps along the row first)."""
    n = (N // ALIGN) * ALIGN
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N // LANES)[None, :, None] * LANES + tl.arange(0, LANES)[None, None, :]
    cmask = cols < n
    if LIVE:
        cmask = cmask & (cols < LIVE)
    src = (tl.minimum(rows, M - 1).to(tl.int64) * n)[:, None, None] + cols
    x = tl.load(x_ptr + src, mask=cmask, other=0.0, eviction_policy=EVICT)
    r = tl.load(r_ptr + src, mask=cmask, other=0.0, eviction_policy=EVICT)
    if WB_EARLY:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
    h = x.to(tl.float32) + r.to(tl.float32)
    mean = tl.sum(tl.sum(h, axis=1), axis=1) / n  # each thread's values first, then the lanes
    d = tl.where(cmask, h - mean[:, None, None], 0.0)
    rstd = tl.math.rsqrt(tl.sum(tl.sum(d * d, axis=1), axis=1) / n + eps)
    if not WB_EARLY:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last")
    y = gelu_f32(d * rstd[:, None, None] * w.to(tl.float32) + b.to(tl.float32), EXACT)
    dst = (rows.to(tl.int64) * n)[:, None, None] + cols
    tl.store(y_ptr + dst, y.to(y_ptr.dtype.element_ty), mask=(rows < M)[:, None, None] & cmask)


@triton.jit
def _rlg_granules(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                  EXACT: tl.constexpr, EVICT: tl.constexpr, WB_EARLY: tl.constexpr, LIVE: tl.constexpr):
    """_rlg_rows for rows whose width is not a whole number of 16-byte vectors
    (N = 13437 bf16): each row of x, r and y is split at the 16-byte
    boundaries inside it into a body of whole granules, which starts at a
    multiple of VEC elements from the (16-byte aligned) base and is masked a
    granule at a time, so that it moves in 16-byte vectors whatever N is; and
    a head and a tail of fewer than VEC elements each, accessed element by
    element.  BLOCK_N holds the body only (at most N // VEC * VEC).  Weight
    and bias are indexed by column, which is not granule-aligned with the
    body: they are read element by element (the same columns for every row,
    so L1 and L2 hits).
    """
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    # rows past the end re-load the last row and are masked only at the store
    start = tl.minimum(rows, M - 1).to(tl.int64) * N
    end = start + N
    body = (start + (VEC - 1)) // VEC * VEC  # first 16-byte boundary at or after the row start
    tail = tl.maximum(end // VEC * VEC, body)  # last one at or before its end (body: none inside)
    n_body = tail - body  # a multiple of VEC: the mask is constant over each granule
    bmask = cols[None, :] < n_body[:, None]
    if LIVE:  # n_body <= N <= LIVE
        bmask = bmask & (cols < LIVE)[None, :]
    boffs = body[:, None] + cols[None, :]
    # head [start, min(body, end)) in the first VEC lanes, tail [tail, end) in the next VEC
    k = tl.arange(0, 2 * VEC)[None, :]
    eoffs = tl.where(k < VEC, start[:, None] + k, tail[:, None] + (k - VEC))
    emask = eoffs < tl.where(k < VEC, tl.minimum(body, end)[:, None], end[:, None])
    hb = (tl.load(x_ptr + boffs, mask=bmask, other=0.0, eviction_policy=EVICT).to(tl.float32)
          + tl.load(r_ptr + boffs, mask=bmask, other=0.0, eviction_policy=EVICT).to(tl.float32))
    he = (tl.load(x_ptr + eoffs, mask=emask, other=0.0).to(tl.float32)
          + tl.load(r_ptr + eoffs, mask=emask, other=0.0).to(tl.float32))
    bcol = (body - start)[:, None] + cols[None, :]  # the body's columns in w and b
    ecol = eoffs - start[:, None]
    if WB_EARLY:
        wb = tl.load(w_ptr + bcol, mask=bmask, other=0.0, eviction_policy="evict_last")
        bb = tl.load(b_ptr + bcol, mask=bmask, other=0.0, eviction_policy="evict_last")
    we = tl.load(w_ptr + ecol, mask=emask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    be = tl.load(b_ptr + ecol, mask=emask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    mean = (tl.sum(hb, axis=1) + tl.sum(he, axis=1)) / N
    db = tl.where(bmask, hb - mean[:, None], 0.0)
    de = tl.where(emask, he - mean[:, None], 0.0)
    rstd = tl.math.rsqrt((tl.sum(db * db, axis=1) + tl.sum(de * de, axis=1)) / N + eps)
    if not WB_EARLY:
        wb = tl.load(w_ptr + bcol, mask=bmask, other=0.0, eviction_policy="evict_last")
        bb = tl.load(b_ptr + bcol, mask=bmask, other=0.0, eviction_policy="evict_last")
    wb = wb.to(tl.float32)
    bb = bb.to(tl.float32)
    out_ty = y_ptr.dtype.element_ty
    live = (rows < M)[:, None]
    tl.store(y_ptr + boffs, gelu_f32(db * rstd[:, None] * wb + bb, EXACT).to(out_ty), mask=bmask & live)
    tl.store(y_ptr + eoffs, gelu_f32(de * rstd[:, None] * we + be, EXACT).to(out_ty), mask=emask & live)


@triton.jit(do_not_specialize=["M_BUCKET"])
def _rlg_split(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, N, eps, M_BUCKET, BLOCK: tl.constexpr, EXACT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * N
    rr = r_ptr + row * N
    yr = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    mask0 = cols < N
    h0 = (tl.load(xr + cols, mask=mask0, other=0.0).to(tl.float32)
          + tl.load(rr + cols, mask=mask0, other=0.0).to(tl.float32))
    # chunk 0's weight and bias now, so that no load waits behind the reductions
    w0 = tl.load(w_ptr + cols, mask=mask0, other=0.0)
    b0 = tl.load(b_ptr + cols, mask=mask0, other=0.0)
    shift = tl.sum(h0, axis=0) / tl.minimum(N, BLOCK)
    d0 = tl.where(mask0, h0 - shift, 0.0)
    s1 = d0
    s2 = d0 * d0
    for start in range(BLOCK, N, BLOCK):
        mask = start + cols < N
        h = (tl.load(xr + start + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
             + tl.load(rr + start + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32))
        d = tl.where(mask, h - shift, 0.0)
        s1 += d
        s2 += d * d
    mu = tl.sum(s1, axis=0) / N
    var = tl.maximum(tl.sum(s2, axis=0) / N - mu * mu, 0.0)
    mean = shift + mu
    rstd = tl.math.rsqrt(var + eps)
    out_ty = y_ptr.dtype.element_ty
    tl.store(yr + cols, gelu_f32((h0 - mean) * rstd * w0.to(tl.float32) + b0.to(tl.float32), EXACT).to(out_ty),
             mask=mask0,
             cache_modifier=".cs")
    n_chunks = tl.cdiv(N, BLOCK)
    for i in range(1, n_chunks):
        start = (n_chunks - i) * BLOCK  # backwards: the latest loads are the likeliest L2 hits
        mask = start + cols < N
        h = (tl.load(xr + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
             + tl.load(rr + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32))
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(yr + start + cols, gelu_f32((h - mean) * rstd * w + b, EXACT).to(out_ty), mask=mask,
                 cache_modifier=".cs")  # streaming: keep L2 for the rows still to re-read


@triton.jit
def _h_part(x_ptr, r_ptr, base, off, cols, n, EVEN: tl.constexpr, CACHE: tl.constexpr):
    """h = x + r (float32) of the Q columns from ``off`` of the row at ``base``; 0 past the row.
    CACHE: the loads' cache modifier (".cg": cached in L2 only)."""
    if EVEN:
        return (tl.load(x_ptr + base + off + cols, cache_modifier=CACHE).to(tl.float32)
                + tl.load(r_ptr + base + off + cols, cache_modifier=CACHE).to(tl.float32))
    m = off + cols < n
    return (tl.load(x_ptr + base + off + cols, mask=m, other=0.0, cache_modifier=CACHE).to(tl.float32)
            + tl.load(r_ptr + base + off + cols, mask=m, other=0.0, cache_modifier=CACHE).to(tl.float32))


@triton.jit
def _y_part(d, rstd, w_ptr, b_ptr, y_ptr, base, off, cols, n, EXACT: tl.constexpr, EVEN: tl.constexpr):
    """y of one part from its deviations d = h - mean."""
    if EVEN:
        w = tl.load(w_ptr + off + cols, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + off + cols, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + base + off + cols, gelu_f32(d * rstd * w + b, EXACT).to(y_ptr.dtype.element_ty))
    else:
        m = off + cols < n
        w = tl.load(w_ptr + off + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + off + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + base + off + cols, gelu_f32(d * rstd * w + b, EXACT).to(y_ptr.dtype.element_ty),
                 mask=m)


@triton.jit
def _dev(h, mean, off, cols, n, EVEN: tl.constexpr):
    if EVEN:
        return h - mean
    return tl.where(off + cols < n, h - mean, 0.0)


@triton.jit
def _prefetch_ahead(x_ptr, r_ptr, M, n, NUM_SMS, PF_DIV: tl.constexpr):
    """x and r of the row NUM_SMS / PF_DIV programs ahead into L2: about the one
    this SM runs next, since a program fills an SM."""
    ahead = tl.program_id(0) + NUM_SMS // PF_DIV
    start = ahead.to(tl.int64) * n
    prefetch_l2(x_ptr + start, r_ptr + start, tl.where(ahead < M, n, 0))


@triton.jit(do_not_specialize=["M_BUCKET", "NUM_SMS"])
def _rlg_parts(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, M_BUCKET, NUM_SMS, PARTS: tl.constexpr,
               Q: tl.constexpr, EXACT: tl.constexpr, EVEN: tl.constexpr, ALIGN: tl.constexpr,
               PF_AT: tl.constexpr, PF_DIV: tl.constexpr, CACHE: tl.constexpr = ".cg"):
    """One row a program, held in registers as PARTS (2 or 4) Q-wide parts (EVEN: N == PARTS * Q).

    Each part's h is loaded and added on its own, and its y computed and
    stored on its own, so that float32 rows of 32768 fit 32 warps at 64
    registers (one 32768-wide block spills) and the first parts' stores
    drain while the later ones compute; the parts are added before the
    block reductions, so that there are two of them, not 2 * PARTS.  x and r
    are loaded with CACHE=".cg" (cached in L2 only), so that the 64-128 KB of
    them a row does not push w and b, which every row reads, out of L1
    (rlg_prefetch_probe times both).  PF_AT > 0:
    after loading part PF_AT (1-based), the x and r of the program NUM_SMS /
    PF_DIV ahead are prefetched into L2 (see implementations/_shared/l2_prefetch.py).
    """
    n = (N // ALIGN) * ALIGN  # == N; see _rlg_rows
    base = tl.program_id(0).to(tl.int64) * n
    cols = tl.arange(0, Q)
    h0 = _h_part(x_ptr, r_ptr, base, 0, cols, n, EVEN, CACHE)
    if PF_AT == 1:
        _prefetch_ahead(x_ptr, r_ptr, M, n, NUM_SMS, PF_DIV)
    h1 = _h_part(x_ptr, r_ptr, base, Q, cols, n, EVEN, CACHE)
    if PF_AT == 2:
        _prefetch_ahead(x_ptr, r_ptr, M, n, NUM_SMS, PF_DIV)
    if PARTS == 4:
        h2 = _h_part(x_ptr, r_ptr, base, 2 * Q, cols, n, EVEN, CACHE)
        if PF_AT == 3:
            _prefetch_ahead(x_ptr, r_ptr, M, n, NUM_SMS, PF_DIV)
        h3 = _h_part(x_ptr, r_ptr, base, 3 * Q, cols, n, EVEN, CACHE)
        if PF_AT == 4:
            _prefetch_ahead(x_ptr, r_ptr, M, n, NUM_SMS, PF_DIV)
        mean = tl.sum(h0 + h1 + h2 + h3, axis=0) / n
        d0 = _dev(h0, mean, 0, cols, n, EVEN)
        d1 = _dev(h1, mean, Q, cols, n, EVEN)
        d2 = _dev(h2, mean, 2 * Q, cols, n, EVEN)
        d3 = _dev(h3, mean, 3 * Q, cols, n, EVEN)
        rstd = tl.math.rsqrt(tl.sum(d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3, axis=0) / n + eps)
        _y_part(d0, rstd, w_ptr, b_ptr, y_ptr, base, 0, cols, n, EXACT, EVEN)
        _y_part(d1, rstd, w_ptr, b_ptr, y_ptr, base, Q, cols, n, EXACT, EVEN)
        _y_part(d2, rstd, w_ptr, b_ptr, y_ptr, base, 2 * Q, cols, n, EXACT, EVEN)
        _y_part(d3, rstd, w_ptr, b_ptr, y_ptr, base, 3 * Q, cols, n, EXACT, EVEN)
    else:
        mean = tl.sum(h0 + h1, axis=0) / n
        d0 = _dev(h0, mean, 0, cols, n, EVEN)
        d1 = _dev(h1, mean, Q, cols, n, EVEN)
        rstd = tl.math.rsqrt(tl.sum(d0 * d0 + d1 * d1, axis=0) / n + eps)
        _y_part(d0, rstd, w_ptr, b_ptr, y_ptr, base, 0, cols, n, EXACT, EVEN)
        _y_part(d1, rstd, w_ptr, b_ptr, y_ptr, base, Q, cols, n, EXACT, EVEN)


@triton.jit(do_not_specialize=["M_BUCKET"])
def _rlg_team(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, count_ptr, N, eps, M_BUCKET, BLOCK: tl.constexpr,
              P_MAX: tl.constexpr, MODE: tl.constexpr, EXACT: tl.constexpr, ALIGN: tl.constexpr,
              EVICT: tl.constexpr, GRANULES: tl.constexpr):
    """A row of P = cdiv(N, BLOCK) chunks done by a team of P programs, one chunk each, held
    in registers from the load of x and r to the store of y: one read, one write, and
    several programs an SM, so that one's loads cover another's reductions.

    MODE 0: each program publishes its chunk's (count, mean, sum of squared deviations
    from that mean), counts itself in at the row's counter and waits until the whole team
    has; then every program combines the P triples (Chan's pairwise formula: no
    cancellation, whatever the row's offset) and writes its chunk.  Programs take their
    chunk from a ticket counter in the order they start, so the waited-for ones have
    started or start as soon as a slot frees (needs room for P programs at once; the
    launcher checks).  MODE 1 and 2: the same as two launches, statistics then output (x
    and r read twice, no waiting, so the interpreter can run it).
    GRANULES (rows not known to be 16-byte aligned): the chunks cut the row's body of
    whole 16-byte granules (see _rlg_granules), so that x, r and y move in 16-byte vectors
    whatever N is; chunk 0 also takes the head and tail of fewer than VEC elements each.
    Weight and bias, indexed by column, are read element by element there (L2 hits).
    Otherwise ALIGN divides N, as in _rlg_rows.
    count_ptr: int32 [1 + M], zero at launch (ticket, then one counter a row).
    stats_ptr: float32 [M, 3, P_MAX].
    """
    n = (N // ALIGN) * ALIGN  # == N
    row, c, p = team_chunk(count_ptr, n, BLOCK, MODE)
    base = row.to(tl.int64) * n
    stats = stats_ptr + row.to(tl.int64) * (3 * P_MAX)
    cols = c * BLOCK + tl.arange(0, BLOCK)
    if GRANULES:
        body, tail, eoffs, emask = granule_row(base, n, 128 // x_ptr.dtype.element_ty.primitive_bitwidth)
        mask = cols < tail - body  # a multiple of VEC: constant over each granule
        offs = body + cols
        wcol = (body - base) + cols
        emask = emask & (c == 0)  # the head and tail are chunk 0's
        he = (tl.load(x_ptr + eoffs, mask=emask, other=0.0).to(tl.float32)
              + tl.load(r_ptr + eoffs, mask=emask, other=0.0).to(tl.float32))
    else:
        mask = cols < n
        offs = base + cols
        wcol = cols
    h = (tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
         + tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32))
    if MODE != 2:
        cnt = tl.sum(mask.to(tl.float32), axis=0)
        s = tl.sum(h, axis=0)
        if GRANULES:
            cnt += tl.sum(emask.to(tl.float32), axis=0)
            s += tl.sum(he, axis=0)
        mc = s / tl.maximum(cnt, 1.0)  # an empty chunk (a granule row's last) counts 0 with mean 0
        d = tl.where(mask, h - mc, 0.0)
        q = tl.sum(d * d, axis=0)
        if GRANULES:
            de = tl.where(emask, he - mc, 0.0)
            q += tl.sum(de * de, axis=0)
        tl.store(stats + c, cnt)
        tl.store(stats + P_MAX + c, mc)
        tl.store(stats + 2 * P_MAX + c, q)
    if MODE == 0:
        team_meet(count_ptr, row, p)
    if MODE != 1:
        kk = tl.arange(0, P_MAX)
        live = kk < p
        cs = tl.load(stats + kk, mask=live, other=0.0, cache_modifier=".cg")
        ms = tl.load(stats + P_MAX + kk, mask=live, other=0.0, cache_modifier=".cg")
        qs = tl.load(stats + 2 * P_MAX + kk, mask=live, other=0.0, cache_modifier=".cg")
        mean = tl.sum(cs * ms, axis=0) / n
        dm = ms - mean
        rstd = tl.math.rsqrt((tl.sum(qs, axis=0) + tl.sum(cs * dm * dm, axis=0)) / n + eps)
        out_ty = y_ptr.dtype.element_ty
        w = tl.load(w_ptr + wcol, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + wcol, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + offs, gelu_f32((h - mean) * rstd * w + b, EXACT).to(out_ty), mask=mask)
        if GRANULES:
            ecol = eoffs - base
            we = tl.load(w_ptr + ecol, mask=emask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            be = tl.load(b_ptr + ecol, mask=emask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_ptr + eoffs, gelu_f32((he - mean) * rstd * we + be, EXACT).to(out_ty), mask=emask)


def plan(m: int, n: int, dtype_bytes: int, max_fused: int = MAX_FUSED, block: int | None = None) -> dict:
    """Kernel and launch parameters for an m x n problem; pure, so config() can replay it."""
    block_n = max(16, triton.next_power_of_2(n))  # 16: no degenerate 1-wide layouts
    if block_n <= max_fused:
        # 16384 takes 32 warps (49 registers for sm_90, no spills); 32768
        # would spill, so it goes to the split path.
        return dict(_with_wb(rows_plan(m, block_n, dtype_bytes)), EVICT=_hints(dtype_bytes)[0])
    # 4096 with 16 warps: 8 values a thread, ~55 registers, two programs an SM.
    chunk = block or min(4096, max_fused)
    return dict(kernel="split", BLOCK=chunk, num_warps=max(1, min(16, chunk // 256)))


def parts_raced(n: int) -> bool:
    """Widths where the parts kernel (one whole row on 32 warps) races the split one."""
    return triton.next_power_of_2(n) == 2 * MAX_FUSED


# (PARTS, PF_AT, PF_DIV) tried for rows of parts_raced, by dtype size: halves and
# quarters, without the L2 prefetch and with it some of the SMs ahead, issued
# where it pays on the H200 (lab/rlg_prefetch_probe.py): after the last
# part's loads and a half or a quarter of the SMs ahead in 16 bits; after the
# first to third quarter's loads and mostly a quarter of the SMs ahead in
# float32.  An eighth of the SMs ahead is 18-20% slower.  float32 quarters
# with it after the last part spill for sm_90, and so do halves with it after
# either half.  float32 halves without it are tried although they spill (see
# SPILL_OK): they are the fastest float32 form in the probe (0.943-0.958 of copy).
PARTS_FORMS = {2: ((4, 0, 0), (4, 4, 2), (4, 4, 4), (2, 0, 0), (2, 2, 2), (2, 2, 4)),
               4: ((4, 0, 0), (4, 2, 4), (4, 2, 2), (4, 1, 4), (4, 3, 4), (2, 0, 0))}
# (dtype bytes, PARTS, PF_AT, PF_DIV) -> spill bytes allowed for sm_90 (the compile
# test holds every other candidate to none).  float32 halves without the
# prefetch: ptxas issues all 16 of the halves' 16-byte loads before the first
# add (64 registers of loads in flight) and keeps two 4-byte values in local
# memory across the reductions, stored and reloaded once a row.
SPILL_OK = {(4, 2, 0, 0): 8}


def parts_candidates(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """The parts kernel's autotuning candidates at the widths of parts_raced (none elsewhere)."""
    if not parts_raced(n):
        return []
    out = []
    for parts, at, div in PARTS_FORMS[4 if dtype_bytes == 4 else 2]:
        q = triton.next_power_of_2(triton.cdiv(n, parts))
        out.append(dict(kernel="parts", PARTS=parts, Q=q, EVEN=parts * q == n, PF_AT=at, PF_DIV=div, num_warps=32))
    return out


# The team kernel: chunks of at least TEAM_MIN_CHUNK columns, at most TEAM_MAX_P a row.
TEAM_MIN_CHUNK = 2048
TEAM_MAX_P = 32
# (BLOCK, num_warps): 16 or 8 values a thread, 2 to 32 programs a row
TEAM_FORMS = ((4096, 8), (2048, 4), (8192, 16), (2048, 8), (4096, 16), (8192, 32))


def team_tried(n: int) -> bool:
    """Widths where a team of programs a row (_rlg_team) races the other kernels:
    rows of more than 4096 columns (at least two chunks), up to TEAM_MAX_P chunks of
    TEAM_MIN_CHUNK.  There a row held by one program leaves its SM idle through the
    row's reductions, or is walked twice."""
    return 4096 < n <= TEAM_MAX_P * TEAM_MIN_CHUNK


def team_candidates(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """The team kernel's autotuning candidates (none outside team_tried): chunks of
    2048-8192 columns, fewer than the row's next power of two (at least two a row), in
    the GRANULES form when rows are not a whole number of 16-byte vectors."""
    if not team_tried(n):
        return []
    gran = row_align(n, dtype_bytes) * dtype_bytes < 16
    return [dict(kernel="team", BLOCK=blk, EVICT="evict_first", GRANULES=gran, num_warps=w)
            for blk, w in TEAM_FORMS
            if blk < triton.next_power_of_2(n) and triton.cdiv(n, blk) <= TEAM_MAX_P]


def candidates(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """What the autotuner tries on the GPU: the plan and its neighbours.

    Rows up to 2048 wide (the plan packs several): one row a program at 1 to
    8 warps (1024 float32: 32 down to 4 values a thread, fewer when a row is
    not a whole number of 16-byte vectors; Inductor's
    persistent reduction runs one row on one warp, whose reductions are
    shuffles only, no barrier), then the plan's ROWS and half of it at 16 or
    8 values a thread (packed rows at 32 warps are slower on the H200).
    Wider rows: ROWS kept, halved and
    doubled, 16 or 8 values a thread, 32 for one row (includes Inductor's one
    row of 16 warps at 4096 and 8192).  Split kernel: chunks of 2048 to 8192
    with 8 or 16 values a thread.  At most 8 designs, the first four in both
    eviction hints (see _with_hints); the sm_90 compile test checks every one
    for spills.
    """
    base = plan(m, n, dtype_bytes)
    if base["kernel"] != "rows" or base["BLOCK_N"] > 2048:
        out = []
        for c in neighbours(base, m, "split",
                            ((4096, 16), (4096, 8), (2048, 8), (2048, 4), (8192, 16), (8192, 32))):
            c = _with_wb(c)
            if c in out:
                continue
            out.append(c)
            # 32 values a thread (one 8192-wide row on 8 warps): x, r, w and b
            # held together double the registers live across both reductions,
            # so that config is also tried with w and b loaded after them
            if c["kernel"] == "rows" and c["ROWS"] * c["BLOCK_N"] >= 32 * 32 * c["num_warps"] \
                    and c["BLOCK_N"] >= 8192:
                out.append(dict(c, WB_EARLY=False))
        return _with_hints(_with_granules(out[:8], n, dtype_bytes), dtype_bytes, 4) + _capped(n, dtype_bytes)
    bn, r0 = base["BLOCK_N"], base["ROWS"]
    tiny = tiny_rows(m, n, dtype_bytes)
    if tiny:
        # rows of at most 16 columns: the plan, then blocks as narrow as the
        # row holding 8-32 KB of real row bytes (see tiny_rows)
        return _with_hints(list(map(_with_wb, [base] + tiny[:5])), dtype_bytes, 4)
    vec = 16 // dtype_bytes  # values a thread for one 16-byte access
    # Rows not a whole number of 16-byte vectors (N = 781) are read one
    # element an instruction, a register and an address each: 16-bit rows at
    # 16 or 32 values a thread spill for sm_90, so they stop at 8.
    top = 32 if row_align(n, dtype_bytes) == vec else (16 if dtype_bytes == 4 else 8)
    out = [base]
    for ept in (32, 16, 8, 4):  # one row a program
        warps = bn // (32 * ept)
        if vec <= ept <= top and 1 <= warps <= 16:
            out.append(dict(kernel="rows", ROWS=1, BLOCK_N=bn, num_warps=warps))
    for rows, ept in ((r0, 8), (r0 // 2, 16), (r0 // 2, 8), (min(2 * r0, triton.next_power_of_2(m)), 16),
                      (min(2 * r0, triton.next_power_of_2(m)), 8)):
        warps = rows * bn // (32 * ept)
        if rows >= 1 and 1 <= warps <= 16:
            out.append(dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps))
    unique: list[dict] = []
    for c in map(_with_wb, out):
        if c not in unique:
            unique.append(c)
    # and each row on one warp (ALIGN comes from the launcher)
    warp = [dict({k: v for k, v in c.items() if k != "ALIGN"}, EVICT=_hints(dtype_bytes)[0])
            for c in warp_rows(m, n, dtype_bytes, bn, wb=True)]
    return _with_hints(_with_granules(unique[:8], n, dtype_bytes), dtype_bytes, 4) + warp


def _capped(n: int, dtype_bytes: int) -> list[dict]:
    """One row of 8192 < N <= 16384 (or 4096 < N <= 8192) a program, on 16 (8)
    warps, w and b loaded after the reductions and the registers capped at 64
    a thread: two (four) programs an SM, where the uncapped rows configs at
    these widths hold one (two or three), so a second row's loads cover one
    row's reductions.  16-bit rows of whole 16-byte vectors only: for sm_90
    they compile without spills, while float32 rows spill 8-212 bytes under
    the cap (212 wherever N % 16 == 0) and the granule forms hundreds."""
    bn = triton.next_power_of_2(n)
    if dtype_bytes != 2 or bn not in (8192, 16384) or row_align(n, dtype_bytes) * dtype_bytes != 16:
        return []
    return [dict(kernel="rows", ROWS=1, BLOCK_N=bn, num_warps=bn // 1024, WB_EARLY=False, EVICT=hint,
                 maxnreg=64) for hint in _hints(dtype_bytes)]


def granule_block(n: int, dtype_bytes: int) -> int:
    """BLOCK_N of the GRANULES form: the body of whole 16-byte granules, at
    most N // VEC * VEC elements (13437 bf16: 16384; 4100 float32: 4096)."""
    vec = 16 // dtype_bytes
    return max(16, triton.next_power_of_2(n // vec * vec))


def _with_granules(out: list[dict], n: int, dtype_bytes: int) -> list[dict]:
    """float32 rows not a whole number of 16-byte vectors (row_align below one
    vector) and at least 64 wide: the first three rows designs, plus the same
    three in the GRANULES form (_rlg_granules) over its body-only block, with
    the warps scaled to it; the autotuner times both forms.  Others: ``out``.
    (16-bit rows are left out: the element-wise w and b of eight-element
    granules take a 64-bit address a value, and every such form spills for
    sm_90, 244 bytes at bf16 16384 on 32 warps.)"""
    if row_align(n, dtype_bytes) * dtype_bytes == 16 or n < 64 or dtype_bytes != 4:
        return out
    gb = granule_block(n, dtype_bytes)
    rows = [c for c in out if c["kernel"] == "rows"]
    gran = []
    for c in rows[:3]:
        warps = max(1, c["num_warps"] * gb // c["BLOCK_N"])
        # w and b read element by element beside h: after the reductions at 16 or more values a thread
        early = c["WB_EARLY"] and c["ROWS"] * gb < 16 * 32 * warps
        g = dict(c, BLOCK_N=gb, GRANULES=True, num_warps=warps, WB_EARLY=early)
        if g not in gran:
            gran.append(g)
    return (rows[:3] + gran + [c for c in out if c["kernel"] != "rows"] + rows[3:])[:8]


def _with_wb(c: dict) -> dict:
    """A rows config loads w and b before the reductions unless it says
    otherwise, and x and r with the evict_first hint."""
    if c["kernel"] != "rows":
        return c
    c = dict(c)
    c.setdefault("WB_EARLY", True)
    c.setdefault("EVICT", "evict_first")
    return c


def _hints(dtype_bytes: int) -> tuple[str, str]:
    """The x/r eviction hints, the one tried first (and planned) first."""
    return ("", "evict_first") if dtype_bytes == 4 else ("evict_first", "")


def _with_hints(out: list[dict], dtype_bytes: int, limit: int) -> list[dict]:
    """Rows configs in both eviction hints for x and r, the dtype's first.

    On the H200 (a one-off sweep), float32 rows of 1024 to 8192 run 3-8%
    faster with no hint than with evict_first (4255 against 4071 GB/s at
    65536 x 1024, 4338 against 3929 at 32768 x 4096), enough to beat
    Inductor's kernel; for 16-bit rows the hint is 0-1.5% ahead.  The first
    ``limit`` configs get both.
    """
    first, second = _hints(dtype_bytes)
    rows = []
    for c in out:
        if c["kernel"] == "rows" and dict(c, EVICT=first) not in rows:
            rows.append(dict(c, EVICT=first))
    both = rows[:limit] + [dict(c, EVICT=second) for c in rows[:limit]]
    return both + [c for c in out if c["kernel"] != "rows"] + rows[limit:]


_rows_tuned = tuned(_rlg_rows, candidates)
_split_tuned = tuned(_rlg_split, candidates)
_parts_tuned = tuned(_rlg_parts, parts_candidates)
# each timing run needs the ticket and row counters at zero
_team_tuned = tuned(_rlg_team, team_candidates, reset_to_zero=["count_ptr"])
_fit_tuned = tuned(_rlg_fit, fit_candidates)


def _team_buffers(x, m: int, p_max: int):
    return team_buffers(x, m, 3, p_max)  # (count, mean, squared deviations) a chunk

# (kernel, N, dtype bytes, M bucket) -> the config the autotuner chose, for
# config(); and the parts/split races of parts_raced
_CHOSEN = Raced(plan)


def _groups_tried(x, r, n: int) -> bool:
    """Rows that are not whole 16-byte vectors (the rows kernel's accesses are
    then narrower, see row_align) whose group of rows fits a thread
    (implementations/_shared/row_groups.py), x and r of one dtype (they share
    its shared-memory tile)."""
    from implementations._shared import row_groups

    b = x.element_size()
    return (r.dtype == x.dtype and row_align(n, b) * b < 16 and row_groups.group_fits(n, b)
            and row_groups.available(x))


def residual_layernorm_gelu_triton(x, r, weight, bias, eps, *, max_fused: int = MAX_FUSED,
                                   block: int | None = None, team: bool = False, fit: bool = False):
    """``max_fused``/``block`` force the split path in tests, ``team`` (with ``block``
    as its chunk) the team kernel, ``fit`` (with ``block`` as its part) the fitted
    kernel (a forced path runs its plan as is, untuned; the team as two launches in the
    interpreter)."""
    import torch

    x, r, weight, bias = (t.contiguous() for t in (x, r, weight, bias))
    if r.shape != x.shape or weight.shape != x.shape[-1:] or bias.shape != x.shape[-1:]:
        raise ValueError(f"shapes x {tuple(x.shape)}, r {tuple(r.shape)}, weight {tuple(weight.shape)}, "
                         f"bias {tuple(bias.shape)} do not match")
    y = torch.empty_like(x)
    n = x.shape[-1]
    if x.numel() == 0:
        return y
    m = x.numel() // n
    p = plan(m, n, x.element_size(), max_fused, block)
    exact = x.element_size() == 4  # libdevice erf for float32; see gelu_f32
    bucket = triton.next_power_of_2(m)
    args = (x, r, weight, bias, y)
    b = x.element_size()
    if team:
        chunk = block or TEAM_FORMS[0][0]
        chunks = triton.cdiv(n, chunk)
        if not interpreting() and chunks > sm_count(device_index(x)):
            raise ValueError(f"team=True: {chunks} chunks a row need as many programs at once as this GPU has SMs")
        stats, count = _team_buffers(x, m, triton.next_power_of_2(chunks))
        for mode in ((1, 2) if interpreting() else (0,)):
            _rlg_team[(m * chunks,)](*args, stats, count, n, float(eps), bucket, BLOCK=chunk,
                                     P_MAX=triton.next_power_of_2(chunks), MODE=mode, EXACT=exact,
                                     ALIGN=row_align(n, b), EVICT="evict_first",
                                     GRANULES=row_align(n, b) * b < 16, num_warps=max(1, min(16, chunk // 512)))
        return y
    if fit:
        if block is None and not fit_tried(n, b):
            raise ValueError(f"fit=True: no fitted form for {n} columns of {b} bytes; name a part width (block)")
        q = block or fit_candidates(m, n, b)[0]["Q"]
        parts = triton.cdiv(n, q)
        if not 1 <= parts <= 8:
            raise ValueError(f"fit=True: {n} columns are {parts} parts of {q}; the fitted kernel holds 1 to 8")
        rows = 1 if n > 2048 else 4  # short rows several a program, as the candidates
        _rlg_fit[(triton.cdiv(m, rows),)](*args, m, n, float(eps), bucket, ROWS=rows, PARTS=parts, Q=q,
                                          EXACT=exact, EVICT="" if b == 4 else "evict_first",
                                          num_warps=max(1, min(16, q // 256)))
        return y
    if interpreting() or max_fused != MAX_FUSED or block is not None:
        # One config: the interpreter would run every candidate on the CPU.
        if p["kernel"] == "rows":
            _rlg_rows[(triton.cdiv(m, p["ROWS"]),)](*args, m, n, float(eps), bucket, ROWS=p["ROWS"],
                                                    BLOCK_N=p["BLOCK_N"], EXACT=exact, EVEN_N=n == p["BLOCK_N"],
                                                    ALIGN=row_align(n, x.element_size()),
                                                    WB_EARLY=p["WB_EARLY"], EVICT=p["EVICT"],
                                                    LIVE=live_cols(n, b), num_warps=p["num_warps"])
        else:
            _rlg_split[(m,)](*args, n, float(eps), bucket, BLOCK=p["BLOCK"], EXACT=exact,
                             num_warps=p["num_warps"])
        return y

    def run_rows() -> None:
        _rows_tuned[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](*args, m, n, float(eps), bucket, EXACT=exact,
                                                                  EVEN_N=n == p["BLOCK_N"], ALIGN=row_align(n, b),
                                                                  LIVE=live_cols(n, b))
        _CHOSEN.record("rows", _rows_tuned, n, b, bucket)

    def run_parts() -> None:
        _parts_tuned[(m,)](*args, m, n, float(eps), bucket, sm_count(device_index(x)), EXACT=exact,
                           ALIGN=row_align(n, b))
        _CHOSEN.record("parts", _parts_tuned, n, b, bucket)

    def run_split() -> None:
        _split_tuned[(m,)](*args, n, float(eps), bucket, EXACT=exact)
        _CHOSEN.record("split", _split_tuned, n, b, bucket)

    def run_team() -> None:
        p_max = triton.next_power_of_2(triton.cdiv(n, TEAM_MIN_CHUNK))  # every candidate's chunks
        stats, count = _team_buffers(x, m, p_max)
        _team_tuned[lambda meta: (m * triton.cdiv(n, meta["BLOCK"]),)](
            *args, stats, count, n, float(eps), bucket, P_MAX=p_max, MODE=0, EXACT=exact, ALIGN=row_align(n, b))
        _CHOSEN.record("team", _team_tuned, n, b, bucket)

    def run_fit() -> None:
        _fit_tuned[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](*args, m, n, float(eps), bucket, EXACT=exact)
        _CHOSEN.record("fit", _fit_tuned, n, b, bucket)

    runs = {"rows": run_rows} if p["kernel"] == "rows" else (
        {"parts": run_parts, "split": run_split} if parts_raced(n) else {"split": run_split})
    if team_tried(n) and sm_count(device_index(x)) >= TEAM_MAX_P:  # room for a whole team at once
        runs["team"] = run_team
    if fit_tried(n, b):
        runs["fit"] = run_fit
    if _groups_tried(x, r, n):
        from implementations._shared import row_groups

        for warps in row_groups.WARPS:
            runs[row_groups.label(n, b, warps)] = lambda w=warps: row_groups.launch(x, y, w, r, weight, bias, eps)
    if len(runs) == 1:
        next(iter(runs.values()))()
    else:
        _CHOSEN.run_or_race(n, str(x.dtype).removeprefix("torch."), b, bucket, runs, _time_ms)
    return y


def _config(case: Case) -> str:
    """The autotuned choice once the case has run on the GPU, else the untuned plan."""
    return _CHOSEN.config_for(case["M"], case["N"], case.dtype, itemsize(case.dtype))


register("residual_layernorm_gelu", "triton", available=needs_triton,
         supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
         description="one kernel: rows in registers, or chunked rows with chunk 0 held on chip (raced against "
                     "a whole row held in parts on 32 warps, up to 32768 columns, above 4096 columns against a "
                     "team of programs a row that meet at a counter, rows of unaligned width against a row held "
                     "as parts that fit its width, and short unaligned rows against groups of rows a thread in "
                     "16-byte vectors, Gluon, sm_90)")(
    residual_layernorm_gelu_triton)
