"""The fitted rows kernel of residual_layernorm_gelu (Triton): a row held whole in
registers as PARTS parts of Q columns (2 <= PARTS <= 8), so that the tile follows the
row's width rather than its next power of two; ROWS rows a program.

One power-of-two block a row gives 5093 float32 columns 8192 lanes; the idle 38% still
hold registers, so fewer rows fit an SM and fewer bytes are in flight.  Here 5093 is
five parts of 1024 (0.6% idle).  The row's body of whole 16-byte granules (any
alignment; see implementations/_shared/granules.py) moves in 16-byte vectors, its head
and tail of fewer than VEC elements element by element, in lanes 0..2*VEC-1 of one more
Q-wide tile.  The parts are added before the two block reductions (mean, then squared
deviations: exact two-pass statistics over the held values), and each part is
normalised and stored on its own, w and b loaded then (L1 and L2 hits).

Tried (fit_tried) on rows that are not a whole number of 16-byte vectors, in the race
with the row's other kernels, which keeps the fastest:
- of 2049 to 32768 columns, one a program, where the rows kernel's block is a power
  of two read element by element or as granules, and the team kernel meets at a
  counter;
- of 64..2048 columns that parts of 64..512 cover in at least an eighth fewer lanes
  than the next power of two (609: five of 128, against 1024), 2 or 8 rows a program,
  on the warps that give a thread one 16-byte vector of a part.
Long-row forms of 8 or 16 warps whose registers hold one program an SM are also tried
with the registers capped so that two do (two_an_sm): one row's loads then cover the
other's reductions, as the capped rows kernel does for whole-vector rows.
Rows of whole 16-byte vectors are left to the rows kernel, whose block moves in
16-byte vectors there too (NOTES.md has what the race measured).
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._shared.gelu_math import gelu_f32
from implementations._shared.granules import granule_lanes
from implementations._shared.row_tuning import row_align

# (Q, warps): 4 to 16 columns of a part a thread
FORMS = ((512, 2), (1024, 2), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (2048, 16), (4096, 8), (4096, 16),
         (4096, 32))
MAX_PARTS = 8
# columns of the row a thread holds, all parts together: fewer leave the
# loads too narrow to cover a row's reductions, more hold one program an SM
HELD = (16, 48)
MAX_CANDIDATES = 4
# registers a thread that let two programs of 8 or 16 warps share an SM (64K
# registers): a form whose uncapped build needs more (about 1.5 a held column
# plus 50) is also tried capped there, if it holds at most CAP_ROOM fewer
# columns than the cap, by dtype size (more spill for sm_90: float32 80 at a
# cap of 128, 16-bit 32 at 64)
CAP_WARPS = (8, 16)
CAP_ROOM = {2: 36, 4: 52}
MAX_CAPPED = 3
# short rows: part widths, and rows a program
SHORT_Q = (64, 128, 256, 512)
SHORT_ROWS = (2, 8)


@triton.jit
def _part(x_ptr, r_ptr, body, nb, p: tl.constexpr, Q: tl.constexpr, cols, EVICT: tl.constexpr):
    c = p * Q + cols
    m = c < nb  # nb is a multiple of VEC: constant over each granule
    return (tl.load(x_ptr + body + c, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
            + tl.load(r_ptr + body + c, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32))


@triton.jit
def _dev(h, mean, nb, p: tl.constexpr, Q: tl.constexpr, cols):
    return tl.where(p * Q + cols < nb, h - mean, 0.0)


@triton.jit
def _out(d, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, p: tl.constexpr, Q: tl.constexpr, cols,
         EXACT: tl.constexpr):
    c = p * Q + cols
    m = c < nb
    w = tl.load(w_ptr + wofs + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + wofs + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + body + c, gelu_f32(d * rstd * w + b, EXACT).to(y_ptr.dtype.element_ty), mask=m & live)


@triton.jit(do_not_specialize=["M_BUCKET"])
def _rlg_fit(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, M_BUCKET, ROWS: tl.constexpr, PARTS: tl.constexpr,
             Q: tl.constexpr, EXACT: tl.constexpr, EVICT: tl.constexpr):
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    # rows past the end re-load the last row and are masked only at the stores
    start = tl.minimum(rows, M - 1).to(tl.int64) * N
    cols = tl.arange(0, Q)[None, :]
    # the body, and the head and tail in lanes 0..2*VEC-1 of a Q-wide tile
    body, tail, eo, em = granule_lanes(start, N, cols, VEC)
    em = (cols < 2 * VEC) & em  # lanes past 2*VEC off by their index, not only by their address
    nb = tail - body
    wofs = body - start
    live = rows < M
    he = (tl.load(x_ptr + eo, mask=em, other=0.0).to(tl.float32)
          + tl.load(r_ptr + eo, mask=em, other=0.0).to(tl.float32))
    # the parts are written out one by one: a Triton kernel holds no list of tensors
    h0 = _part(x_ptr, r_ptr, body, nb, 0, Q, cols, EVICT)
    acc = he + h0
    if PARTS > 1:
        h1 = _part(x_ptr, r_ptr, body, nb, 1, Q, cols, EVICT)
        acc += h1
    if PARTS > 2:
        h2 = _part(x_ptr, r_ptr, body, nb, 2, Q, cols, EVICT)
        acc += h2
    if PARTS > 3:
        h3 = _part(x_ptr, r_ptr, body, nb, 3, Q, cols, EVICT)
        acc += h3
    if PARTS > 4:
        h4 = _part(x_ptr, r_ptr, body, nb, 4, Q, cols, EVICT)
        acc += h4
    if PARTS > 5:
        h5 = _part(x_ptr, r_ptr, body, nb, 5, Q, cols, EVICT)
        acc += h5
    if PARTS > 6:
        h6 = _part(x_ptr, r_ptr, body, nb, 6, Q, cols, EVICT)
        acc += h6
    if PARTS > 7:
        h7 = _part(x_ptr, r_ptr, body, nb, 7, Q, cols, EVICT)
        acc += h7
    mean = (tl.sum(acc, axis=1) / N)[:, None]
    de = tl.where(em, he - mean, 0.0)
    d0 = _dev(h0, mean, nb, 0, Q, cols)
    sq = de * de + d0 * d0
    if PARTS > 1:
        d1 = _dev(h1, mean, nb, 1, Q, cols)
        sq += d1 * d1
    if PARTS > 2:
        d2 = _dev(h2, mean, nb, 2, Q, cols)
        sq += d2 * d2
    if PARTS > 3:
        d3 = _dev(h3, mean, nb, 3, Q, cols)
        sq += d3 * d3
    if PARTS > 4:
        d4 = _dev(h4, mean, nb, 4, Q, cols)
        sq += d4 * d4
    if PARTS > 5:
        d5 = _dev(h5, mean, nb, 5, Q, cols)
        sq += d5 * d5
    if PARTS > 6:
        d6 = _dev(h6, mean, nb, 6, Q, cols)
        sq += d6 * d6
    if PARTS > 7:
        d7 = _dev(h7, mean, nb, 7, Q, cols)
        sq += d7 * d7
    rstd = tl.math.rsqrt(tl.sum(sq, axis=1) / N + eps)[:, None]
    ec = eo - start
    we = tl.load(w_ptr + ec, mask=em, other=0.0).to(tl.float32)
    be = tl.load(b_ptr + ec, mask=em, other=0.0).to(tl.float32)
    tl.store(y_ptr + eo, gelu_f32(de * rstd * we + be, EXACT).to(y_ptr.dtype.element_ty), mask=em & live)
    _out(d0, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 0, Q, cols, EXACT)
    if PARTS > 1:
        _out(d1, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 1, Q, cols, EXACT)
    if PARTS > 2:
        _out(d2, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 2, Q, cols, EXACT)
    if PARTS > 3:
        _out(d3, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 3, Q, cols, EXACT)
    if PARTS > 4:
        _out(d4, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 4, Q, cols, EXACT)
    if PARTS > 5:
        _out(d5, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 5, Q, cols, EXACT)
    if PARTS > 6:
        _out(d6, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 6, Q, cols, EXACT)
    if PARTS > 7:
        _out(d7, rstd, w_ptr, b_ptr, y_ptr, body, wofs, nb, live, 7, Q, cols, EXACT)


def _short_cover(n: int) -> int:
    """The fewest lanes that 2..8 parts of SHORT_Q cover n with (0: none)."""
    covers = [triton.cdiv(n, q) * q for q in SHORT_Q if 2 <= triton.cdiv(n, q) <= MAX_PARTS]
    return min(covers, default=0)


def fit_tried(n: int, dtype_bytes: int) -> bool:
    """Rows the fitted kernel races at (see the module's docstring)."""
    if row_align(n, dtype_bytes) * dtype_bytes == 16:
        return False
    if 64 <= n <= 2048:
        cover = _short_cover(n)
        return 0 < cover and 8 * cover <= 7 * triton.next_power_of_2(n)
    return 2048 < n <= MAX_PARTS * FORMS[-1][0]


def fit_candidates(m: int, n: int, dtype_bytes: int, limit: int = MAX_CANDIDATES) -> list[dict]:
    """The fitted kernel's autotuning candidates (none outside fit_tried), the tightest
    cover first, at most ``limit``; 16-bit rows keep the evict_first hint on x and
    r, float32 none (as the rows kernel's first hints).

    Rows of 2049..32768: one a program, in the forms of part_forms, then up to
    MAX_CAPPED forms of FORMS capped to two programs an SM (two_an_sm), the tightest
    cover first.  Rows of at most 2048: SHORT_ROWS rows a program, parts of SHORT_Q
    that cover the row in fewer lanes than its next power of two, on as many warps
    as give each thread one 16-byte vector of a part (at most 16; then the fewer
    rows)."""
    if not fit_tried(n, dtype_bytes):
        return []
    evict = "" if dtype_bytes == 4 else "evict_first"
    out = []
    if n <= 2048:
        vec = 16 // dtype_bytes
        for q in SHORT_Q:
            parts = triton.cdiv(n, q)
            if 2 <= parts <= MAX_PARTS and parts * q < triton.next_power_of_2(n):
                for rows in SHORT_ROWS:
                    out.append(dict(kernel="fit", ROWS=rows, PARTS=parts, Q=q, EVICT=evict,
                                    num_warps=min(16, max(1, rows * q // (32 * vec)))))
        out.sort(key=lambda c: (c["PARTS"] * c["Q"], c["ROWS"]))
        return out[:limit]
    out = [dict(kernel="fit", ROWS=1, PARTS=parts, Q=q, EVICT=evict, num_warps=w)
           for parts, q, w in part_forms(n)][:limit]
    capped = [dict(kernel="fit", ROWS=1, PARTS=parts, Q=q, EVICT=evict, num_warps=w, maxnreg=cap)
              for q, w in FORMS if 2 <= (parts := triton.cdiv(n, q)) <= MAX_PARTS
              and (cap := two_an_sm(parts * q, w, dtype_bytes))]
    capped.sort(key=lambda c: (c["PARTS"] * c["Q"], -c["Q"], c["num_warps"]))  # as part_forms orders them
    return out + capped[:MAX_CAPPED]


def two_an_sm(lanes: int, warps: int, dtype_bytes: int) -> int:
    """The register cap at which two programs of ``warps`` warps holding ``lanes``
    columns share an SM, where the uncapped build holds one and the cap leaves room
    (see CAP_ROOM); else 0."""
    if warps not in CAP_WARPS:
        return 0
    cap = 65536 // (2 * 32 * warps)
    held = lanes // (32 * warps)
    return cap if 1.5 * held + 50 > cap and held <= cap - CAP_ROOM[dtype_bytes] else 0


def part_forms(n: int) -> list[tuple[int, int, int]]:
    """(PARTS, Q, warps) of FORMS that cover n columns in 2..MAX_PARTS parts of Q, a thread
    holding HELD columns: the tightest cover first, then the wider parts, then fewer warps."""
    out = []
    for q, w in FORMS:
        parts = triton.cdiv(n, q)
        if 2 <= parts <= MAX_PARTS and HELD[0] <= parts * q // (32 * w) <= HELD[1]:
            out.append((parts, q, w))
    return sorted(out, key=lambda f: (f[0] * f[1], -f[1], f[2]))
