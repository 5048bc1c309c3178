"""Row-wise softmax in Triton: rows, split and pipe kernels, picked by row length.

Napkin math (H200: 132 SMs, 64K 32-bit registers and 228 KB shared memory
each, 60 MB L2, ~4.2 TB/s): the fused kernel moves 2*M*N*b bytes.  exp is exp2
of a pre-scaled argument (one FMA and one MUFU op, the .ftz form: see
_shared/triton_math.py); at 1 T elements/s (bf16 at copy speed) MUFU has room for ~4.

- Rows that fit on chip (next_pow2(N) <= 32768): ``_softmax_rows`` holds
  ROWS x BLOCK_N values in registers, 16 to 32 float32 a thread: one read, one
  write.  Short rows go several to a program (N=128 bf16: 64 rows, 16 KB), so
  a program moves enough bytes to amortise its launch and reductions; rows
  of at most 16 columns are also tried in blocks as narrow as the row, sized
  by their real bytes rather than by 16 padded columns (tiny_rows).
- Unaligned rows (N % 16 != 0: Triton cannot prove a row start 16-byte
  aligned): the element-masked block is one 2- or 4-byte access an element
  (65521 x 2053 bf16: 0.65 of copy).  The GRANULES form addresses a row as
  the whole 16-byte granules between its first and last boundary plus fewer
  than 2 * VEC head and tail elements: ld/st.global.v4 (the tests check the
  PTX) on a block of at most N // VEC * VEC.  The autotuner times both forms.
- Rows of at most 1024 that one pass of a warp's accesses does not cover are
  also tried one or two to a warp, several warps a program (LANES; see
  row_tuning.warp_rows): Triton puts a ROWS x BLOCK_N tile's warps along the
  row, so every row's reductions would cross warps through a barrier.
- 8192 < N <= 32768: a one-row program of up to 32 warps fills an SM that
  then idles through the row's reductions (4096 x 32768 bf16: 0.73 of copy),
  so the first call also tunes ``_softmax_split`` (2 to 8 programs a row,
  several an SM) and keeps the faster kernel.
- Longer rows: ``_softmax_split`` gives a row to P = N / BLOCK programs that
  hold their chunks in registers, publish (max, sum of exp), meet at a
  per-row counter, then scale and write: one read, one write.  Rows too long
  for that take ``_softmax_online``, one program walking its row twice (the
  re-read misses L2: ~2/3 of copy).
- Unaligned short rows (at most 256 bytes of a group a thread) also race the
  group kernel (_shared/row_groups.py): G rows whose elements fill whole
  16-byte vectors (N=7 bf16: 8 rows in 7 vectors) are one group, read and
  written in vectors and owned by one thread for the reductions.
- 16-bit rows with N % 16 == 0 (PAIRS): rows or chunks held as 32-bit words
  of two elements, half the registers, exp computed twice (bf16 4096 x 32768:
  0.93 of copy, two 16-warp programs an SM).
- Rows longer than 32768, of any type and width, also race
  ``_softmax_pipe``: persistent programs hold two chunks and write the older
  while the newer one loads, hiding the split kernel's wait at the row
  counter: a split grid runs in waves that each read, wait and write, and
  the persistent one overlaps them.  Plans and candidates: _triton_plan.py.
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._shared.row_tuning import Raced, live_cols, tuned
from implementations._shared.row_tuning import device_index as _device_index
from implementations._shared.row_tuning import sm_count as _sm_count
from implementations._shared.row_tuning import time_ms as _time_ms

from implementations._shared.granules import granule_row
from implementations._shared.row_teams import team_buffers, team_chunk, team_meet
from implementations._shared.triton_math import PTX, exp2
from suite.backends import dtype_in, interpreting, needs_triton
from suite.workload import Case, itemsize, register

# which kernel and launch parameters a shape gets, and the autotuner's candidates
from implementations.softmax._triton_plan import (MAX_FUSED, SPLIT_MIN_CHUNK, candidates, pipe_candidates, pipe_fits,
                                                  pipe_room, plan, split_candidates, split_tried, unaligned)

LOG2E = tl.constexpr(1.4426950408889634)  # kernels may read only constexpr globals


# M_BUCKET (next_pow2(M)) is only an autotuning key: one tuning per row width,
# dtype and order of magnitude of M.  Never specialised, so it costs no recompiles.
@triton.jit
def _pair_unpack(v, BF16: tl.constexpr, HOW: tl.constexpr):
    """The two 16-bit floats of each 32-bit word v (element 2k in the low
    half) as float32.  bf16 on the GPU: bit moves spelled three ways (HOW 0:
    shift and mask; 1: the same as inline PTX; 2: prmt), so that the compiler
    sees three different computations and keeps v, not its floats, from one
    pass over the row to the next.  float16: plain conversions."""
    if BF16:
        if PTX and HOW == 1:
            lo = tl.inline_asm_elementwise("shl.b32 $0, $1, 16;", "=r,r", [v], dtype=tl.float32, is_pure=True,
                                           pack=1)
            hi = tl.inline_asm_elementwise("and.b32 $0, $1, 0xffff0000;", "=r,r", [v], dtype=tl.float32,
                                           is_pure=True, pack=1)
        elif PTX and HOW == 2:
            lo = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0, 0x1044;", "=r,r", [v], dtype=tl.float32,
                                           is_pure=True, pack=1)
            hi = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0, 0x3244;", "=r,r", [v], dtype=tl.float32,
                                           is_pure=True, pack=1)
        else:
            lo = (v << 16).to(tl.float32, bitcast=True)
            hi = (v & -65536).to(tl.float32, bitcast=True)
    else:
        lo = v.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        hi = (v >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _max_bf16x2(a, b):
    return tl.inline_asm_elementwise("max.bf16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32, is_pure=True,
                                     pack=1)


@triton.jit
def _max_f16x2(a, b):
    return tl.inline_asm_elementwise("max.f16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32, is_pure=True,
                                     pack=1)


@triton.jit
def _pair_max(v, BF16: tl.constexpr, AXIS: tl.constexpr):
    """The max along AXIS of the 16-bit floats in the 32-bit words v, as
    float32.  On the GPU the words are reduced as they are, two elements an
    instruction (max.bf16x2 / max.f16x2), and only the last word is widened:
    half the instructions of widening every element (sm_90 SASS of the bf16
    split chunk: 864 instructions a thread against 960)."""
    if PTX:
        if BF16:
            w = tl.reduce(v, AXIS, _max_bf16x2)
        else:
            w = tl.reduce(v, AXIS, _max_f16x2)
        lo, hi = _pair_unpack(w, BF16, 0)
        return tl.maximum(lo, hi)
    else:
        lo, hi = _pair_unpack(v, BF16, 0)
        return tl.max(tl.maximum(lo, hi), axis=AXIS)


@triton.jit
def _pair_pack(lo, hi, BF16: tl.constexpr):
    """Two float32 tensors rounded to 16 bits and packed into 32-bit words (lo in the low half)."""
    if BF16 and PTX:
        return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        ty = tl.bfloat16 if BF16 else tl.float16
        lo16 = lo.to(ty).to(tl.int16, bitcast=True).to(tl.int32) & 65535
        hi16 = hi.to(ty).to(tl.int16, bitcast=True).to(tl.int32) << 16
        return lo16 | hi16


@triton.jit(do_not_specialize=["M_BUCKET"])
def _softmax_rows(x_ptr, y_ptr, M, N, M_BUCKET, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, EVICT: tl.constexpr,
                  GRANULES: tl.constexpr = False, PAIRS: tl.constexpr = False, LANES: tl.constexpr = 0,
                  ALIGN: tl.constexpr = 1, LIVE: tl.constexpr = 0):
    """ROWS rows a program, each held whole in registers.

    LANES (rows of at most 1024, see warp_rows in row_tuning.py): each
    row on one warp, LANES columns across its lanes and the rest in each
    thread's registers, so that a row's reductions are in-thread adds and
    shuffles, never a barrier; ALIGN (a power of two dividing N) gives the
    accesses their width.  Otherwise Triton lays the ROWS x BLOCK_N tile out
    with the warps along the row first.

    GRANULES: each row is split at the 16-byte boundaries inside it into a
    body of whole 16-byte granules, which starts on a boundary the compiler
    can prove (a multiple of VEC elements from the 16-byte aligned base) and
    is masked a granule at a time, so that it is loaded and stored in 16-byte
    vectors whatever N is; and a head and a tail of fewer than VEC elements
    each (the parts before the first and after the last boundary), loaded and
    stored element by element.  Every access lies inside the row.  BLOCK_N
    then only needs to hold the body (N // VEC * VEC at most).  Otherwise the
    row is one element-masked block of BLOCK_N >= N, whose accesses are 16
    bytes wide only when N is known to be a multiple of 16.

    LIVE (0: none): N rounded up to a warp's pass (live_cols in
    row_tuning.py); columns past it are masked at compile time, so the parts
    of the block past the row cost no registers or instructions.
    """
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    # Rows past the end load the last row again (no NaN from all -inf rows,
    # no row mask on the load) and are masked only at the store.
    start = tl.minimum(rows, M - 1).to(tl.int64) * N
    out_ty = y_ptr.dtype.element_ty
    if PAIRS:
        # 16-bit rows with N % 16 == 0, read and written as 32-bit words of two
        # elements, and kept so (BLOCK_N / 2 words a row, not BLOCK_N floats)
        # from the load to the store; exp is computed twice (sum, output).
        # bf16 32768: 32 registers a thread on 16 warps, 64 in all, so two
        # programs share an SM and one's loads cover the other's reductions.
        BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
        HALF: tl.constexpr = BLOCK_N // 2
        pc = tl.arange(0, HALF)
        pmask = (pc < N // 2)[None, :]
        if LIVE:
            pmask = pmask & (pc < LIVE // 2)[None, :]
        xw = (x_ptr + start[:, None]).to(tl.pointer_type(tl.int32))
        v = tl.load(xw + pc[None, :], mask=pmask, other=-8323200 if BF16 else -67044352,  # -inf pairs
                    eviction_policy=EVICT)
        ml = _pair_max(v, BF16, 1) * LOG2E
        lo, hi = _pair_unpack(v, BF16, 1)
        ssum = tl.sum(exp2(lo * LOG2E - ml[:, None]) + exp2(hi * LOG2E - ml[:, None]), axis=1)
        c = ml + tl.log2(ssum)
        lo, hi = _pair_unpack(v, BF16, 2)
        out = _pair_pack(exp2(lo * LOG2E - c[:, None]), exp2(hi * LOG2E - c[:, None]), BF16)
        yw = (y_ptr + rows.to(tl.int64)[:, None] * N).to(tl.pointer_type(tl.int32))
        tl.store(yw + pc[None, :], out, mask=pmask & (rows < M)[:, None])
    elif LANES:
        n = (N // ALIGN) * ALIGN  # == N, written so that the compiler sees the factor
        cols = tl.arange(0, BLOCK_N // LANES)[None, :, None] * LANES + tl.arange(0, LANES)[None, None, :]
        cmask = cols < n
        if LIVE:
            cmask = cmask & (cols < LIVE)
        src = (tl.minimum(rows, M - 1).to(tl.int64) * n)[:, None, None] + cols
        x = tl.load(x_ptr + src, mask=cmask, other=float("-inf"), eviction_policy=EVICT).to(tl.float32)
        mx = tl.max(tl.max(x, axis=1), axis=1)  # each thread's values first, then the lanes
        e = exp2((x - mx[:, None, None]) * LOG2E)
        inv = 1.0 / tl.sum(tl.sum(e, axis=1), axis=1)
        dst = (rows.to(tl.int64) * n)[:, None, None] + cols
        tl.store(y_ptr + dst, (e * inv[:, None, None]).to(out_ty), mask=cmask & (rows < M)[:, None, None])
    elif GRANULES:
        VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
        end = start + N
        body = (start + (VEC - 1)) // VEC * VEC  # first 16-byte boundary at or after the row start
        tail = tl.maximum(end // VEC * VEC, body)  # last one at or before its end (body: none inside)
        n_body = tail - body  # a multiple of VEC: the mask below is constant over each granule
        bmask = cols[None, :] < n_body[:, None]
        if LIVE:  # n_body <= N <= LIVE
            bmask = bmask & (cols < LIVE)[None, :]
        xb = tl.load(x_ptr + body[:, None] + cols[None, :], mask=bmask, other=float("-inf"),
                     eviction_policy=EVICT).to(tl.float32)
        # head [start, min(body, end)) in the first VEC lanes, tail [tail, end) in the next VEC
        k = tl.arange(0, 2 * VEC)[None, :]
        eoffs = tl.where(k < VEC, start[:, None] + k, tail[:, None] + (k - VEC))
        emask = eoffs < tl.where(k < VEC, tl.minimum(body, end)[:, None], end[:, None])
        xe = tl.load(x_ptr + eoffs, mask=emask, other=float("-inf")).to(tl.float32)
        mx = tl.maximum(tl.max(xb, axis=1), tl.max(xe, axis=1))
        eb = exp2((xb - mx[:, None]) * LOG2E)
        ee = exp2((xe - mx[:, None]) * LOG2E)
        inv = 1.0 / (tl.sum(eb, axis=1) + tl.sum(ee, axis=1))
        live = (rows < M)[:, None]
        tl.store(y_ptr + body[:, None] + cols[None, :], (eb * inv[:, None]).to(out_ty), mask=bmask & live)
        tl.store(y_ptr + eoffs, (ee * inv[:, None]).to(out_ty), mask=emask & live)
    else:
        cmask = cols < N
        if LIVE:
            cmask = cmask & (cols < LIVE)
        x = tl.load(x_ptr + start[:, None] + cols[None, :], mask=cmask[None, :], other=float("-inf"),
                    eviction_policy=EVICT).to(tl.float32)
        z = (x - tl.max(x, axis=1)[:, None]) * LOG2E
        e = exp2(z)
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
        dst = rows.to(tl.int64) * N
        smask = (rows < M)[:, None] & cmask[None, :]
        tl.store(y_ptr + dst[:, None] + cols[None, :], y.to(out_ty), mask=smask)


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
        d = tl.where(z == m, 0.0, z - m)  # -inf twice in a lane: 0, not NaN (its m stays -inf)
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


@triton.jit(do_not_specialize=["M_BUCKET"])
def _softmax_split(x_ptr, y_ptr, stats_ptr, count_ptr, N, M_BUCKET, BLOCK: tl.constexpr, SUB: tl.constexpr,
                   P_MAX: tl.constexpr, MODE: tl.constexpr, EVICT: tl.constexpr, PAIRS: tl.constexpr = False,
                   GRANULES: tl.constexpr = False):
    """A row of P = cdiv(N, BLOCK) chunks is done by P programs, one chunk each.

    SUB == BLOCK: the chunk is held in registers (as float32, whatever the
    input type) from its load to its store.  SUB < BLOCK: the chunk is
    streamed SUB at a time for its statistics and re-read, SUB at a time,
    for the output (an L2 hit: a few MB of chunks are in flight against a
    50 MB L2), so a program's bytes no longer cost registers and a 16-bit
    program can own 32-64 KB (4-8 programs a row) like a float32 one.
    MODE 0: one pass.  Each program publishes its chunk's (max, sum of exp),
    counts itself in at the row's counter and waits until all P have, then
    scales and writes its chunk: x is read once from HBM.  Programs take
    their chunk from a ticket counter in the order they start, so the
    waited-for ones have always started or will start as soon as any slot
    frees (needs room for P programs on the GPU at once; the launcher checks).
    MODE 1 and 2: the same as two launches, statistics then output (x read
    twice); no waiting, so the interpreter can run it.
    PAIRS (SUB == BLOCK, 16-bit rows with N % 16 == 0): the chunk is read,
    held and written as 32-bit words of two elements (see _softmax_rows), so
    a 16-bit chunk of 16384 costs a program the registers of 8192 float32
    elements, and moves the same bytes.
    GRANULES (SUB == BLOCK, rows not known to be 16-byte aligned): the chunks
    cut the row's body of whole 16-byte granules (see _softmax_rows), so that
    they are loaded and stored in 16-byte vectors whatever N is; chunk 0 also
    takes the head and tail of fewer than VEC elements each, element by
    element.  Without it such a row is one 2- or 4-byte access an element.
    count_ptr: int32 [1 + M], zero at launch (ticket, then one counter a row).
    stats_ptr: float32 [M, 2, P_MAX].
    """
    row, c, p = team_chunk(count_ptr, N, BLOCK, MODE)
    base = row.to(tl.int64) * N
    stats = stats_ptr + row.to(tl.int64) * (2 * P_MAX)
    if PAIRS:
        BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
        pc = c * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
        pmask = pc < N // 2
        v = tl.load((x_ptr + base).to(tl.pointer_type(tl.int32)) + pc, mask=pmask,
                    other=-8323200 if BF16 else -67044352, eviction_policy=EVICT)  # -inf pairs
        m = _pair_max(v, BF16, 0) * LOG2E
        safe = tl.where(m == float("-inf"), 0.0, m)  # a chunk of -inf only gives zeros, not NaN
        lo, hi = _pair_unpack(v, BF16, 1)
        s = tl.sum(exp2(lo * LOG2E - safe) + exp2(hi * LOG2E - safe), axis=0)
    elif GRANULES:
        body, tail, eoffs, emask = granule_row(base, N, 128 // x_ptr.dtype.element_ty.primitive_bitwidth)
        cols = c * BLOCK + tl.arange(0, BLOCK)
        mask = cols < tail - body  # a multiple of VEC: constant over each granule
        z = tl.load(x_ptr + body + cols, mask=mask, other=float("-inf"),
                    eviction_policy=EVICT).to(tl.float32) * LOG2E
        emask = emask & (c == 0)  # the head and tail are chunk 0's
        ze = tl.load(x_ptr + eoffs, mask=emask, other=float("-inf")).to(tl.float32) * LOG2E
        m = tl.maximum(tl.max(z, axis=0), tl.max(ze, axis=0))
        safe = tl.where(m == float("-inf"), 0.0, m)  # a chunk of -inf only gives zeros, not NaN
        e = exp2(z - safe)
        ee = exp2(ze - safe)
        s = tl.sum(e, axis=0) + tl.sum(ee, axis=0)
    elif SUB == BLOCK:
        cols = c * BLOCK + tl.arange(0, BLOCK)
        mask = cols < N
        z = tl.load(x_ptr + base + cols, mask=mask, other=float("-inf"),
                    eviction_policy=EVICT).to(tl.float32) * LOG2E
        m = tl.max(z, axis=0)
        e = exp2(z - tl.where(m == float("-inf"), 0.0, m))  # a chunk of -inf only gives zeros, not NaN
        s = tl.sum(e, axis=0)
    elif MODE != 2:
        # Statistics in SUB-wide steps, as VEC-element groups (one 16-byte
        # access a thread): each thread keeps the running max and sum of its
        # own groups, so the loop needs no shuffle and no barrier.
        VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
        gr = tl.arange(0, SUB // VEC)[:, None] * VEC + tl.arange(0, VEC)[None, :]
        mg = tl.full([SUB // VEC], float("-inf"), tl.float32)
        sg = tl.zeros([SUB // VEC], tl.float32)
        for k in range(0, BLOCK, SUB):
            cols = c * BLOCK + k + gr
            z = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf"),
                        eviction_policy="evict_last").to(tl.float32) * LOG2E
            mn = tl.maximum(mg, tl.max(z, axis=1))
            safe = tl.where(mn == float("-inf"), 0.0, mn)  # a group of -inf so far: sum stays 0, not NaN
            sg = sg * exp2(mg - safe) + tl.sum(exp2(z - safe[:, None]), axis=1)
            mg = mn
        m = tl.max(mg, axis=0)
        s = tl.sum(sg * exp2(mg - tl.where(m == float("-inf"), 0.0, m)), axis=0)
    if MODE != 2:
        tl.store(stats + c, m)
        tl.store(stats + P_MAX + c, s)
    if MODE == 0:
        team_meet(count_ptr, row, p)
    if MODE != 1:
        k = tl.arange(0, P_MAX)
        ms = tl.load(stats + k, mask=k < p, other=float("-inf"), cache_modifier=".cg")
        ss = tl.load(stats + P_MAX + k, mask=k < p, other=0.0, cache_modifier=".cg")
        m_row = tl.max(ms, axis=0)
        inv = 1.0 / tl.sum(ss * exp2(ms - m_row), axis=0)
        out_ty = y_ptr.dtype.element_ty
        if PAIRS:
            cy = m_row - tl.log2(inv)  # y = 2^(z - cy)
            lo, hi = _pair_unpack(v, BF16, 2)
            out = _pair_pack(exp2(lo * LOG2E - cy), exp2(hi * LOG2E - cy), BF16)
            tl.store((y_ptr + base).to(tl.pointer_type(tl.int32)) + pc, out, mask=pmask)
        elif GRANULES:
            # <= 0 whenever m is finite; capped, a chunk of -inf (safe = 0) is not scaled by 2^-m_row = inf
            scale = exp2(tl.minimum(safe - m_row, 0.0)) * inv
            tl.store(y_ptr + body + cols, (e * scale).to(out_ty), mask=mask)
            tl.store(y_ptr + eoffs, (ee * scale).to(out_ty), mask=emask)
        elif SUB == BLOCK:
            tl.store(y_ptr + base + cols, (e * (exp2(m - m_row) * inv)).to(out_ty), mask=mask)
        else:
            for k in range(0, BLOCK, SUB):
                cols = c * BLOCK + k + tl.arange(0, SUB)
                z = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0,
                            eviction_policy="evict_first").to(tl.float32) * LOG2E
                tl.store(y_ptr + base + cols, (exp2(z - m_row) * inv).to(out_ty), mask=cols < N,
                         cache_modifier=".cs")  # streaming: keep L2 for the chunks still to re-read


@triton.jit
def _pipe_span(k, N, BLOCK: tl.constexpr, GRANULES: tl.constexpr, VEC: tl.constexpr):
    """Chunk k's row, its index in the row, and the part of the row that the
    chunks cut: its start (elements from the tensor's start) and length.
    GRANULES: the row's body of whole 16-byte granules (see granule_row),
    whose head and tail chunk 0 also takes; else the whole row."""
    p = tl.cdiv(N, BLOCK)
    row = k // p
    base = row.to(tl.int64) * N
    if GRANULES:
        start, tail, _, _ = granule_row(base, N, VEC)
        span = tail - start
    else:
        start = base
        span = base * 0 + N  # int64, as in the GRANULES branch
    return row, k - row * p, start, span


@triton.jit
def _pipe_load(x_ptr, k, total, N, BLOCK: tl.constexpr, PAIRS: tl.constexpr, GRANULES: tl.constexpr):
    """Chunk k of BLOCK columns (nothing read if k >= total): 16-bit ones as
    BLOCK/2 32-bit pairs (-inf pairs past the span), others as float32 (-inf past it)."""
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    row, c, start, span = _pipe_span(k, N, BLOCK, GRANULES, VEC)
    if PAIRS:
        BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
        idx = c * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
        return tl.load((x_ptr + start).to(tl.pointer_type(tl.int32)) + idx,
                       mask=(idx < span // 2) & (k < total), other=-8323200 if BF16 else -67044352)
    else:
        cols = c * BLOCK + tl.arange(0, BLOCK)
        return tl.load(x_ptr + start + cols, mask=(cols < span) & (k < total),
                       other=float("-inf")).to(tl.float32)


@triton.jit
def _pipe_publish(v, x_ptr, stats_ptr, count_ptr, k, total, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr,
                  PAIRS: tl.constexpr, GRANULES: tl.constexpr):
    """Chunk k's max and sum of exp (in units of 2^max) into its row's
    statistics, then one count at the row's counter; GRANULES: chunk 0's
    with its row's head and tail."""
    BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    if PAIRS:
        m = _pair_max(v, BF16, 0) * LOG2E
    else:
        m = tl.max(v, axis=0) * LOG2E
    if GRANULES:
        row, c, start, span = _pipe_span(k, N, BLOCK, GRANULES, VEC)
        _, _, eoffs, emask = granule_row(row.to(tl.int64) * N, N, VEC)
        ze = tl.load(x_ptr + eoffs, mask=emask & (c == 0) & (k < total), other=float("-inf")).to(tl.float32) * LOG2E
        m = tl.maximum(m, tl.max(ze, axis=0))
    safe = tl.where(m == float("-inf"), 0.0, m)  # a chunk of -inf only gives zeros, not NaN
    if PAIRS:
        lo, hi = _pair_unpack(v, BF16, 1)
        s = tl.sum(exp2(lo * LOG2E - safe) + exp2(hi * LOG2E - safe), axis=0)
    else:
        s = tl.sum(exp2(v * LOG2E - safe), axis=0)
    if GRANULES:
        s += tl.sum(exp2(ze - safe), axis=0)
    pipe_release(m, s, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX)


@triton.jit
def pipe_release(m, s, stats_ptr, count_ptr, k, total, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr):
    """Chunk k's two statistics into its row's slots (P_MAX apart), then one
    count at the row's counter, released after every thread's stores."""
    p = tl.cdiv(N, BLOCK)
    row = k // p
    st = stats_ptr + row.to(tl.int64) * (2 * P_MAX) + (k - row * p)
    tl.store(st, m, mask=k < total)
    tl.store(st + P_MAX, s, mask=k < total)
    tl.debug_barrier()  # every thread's part of the stores before the release
    tl.atomic_add(count_ptr + 1 + row, 1, sem="release", mask=k < total)


@triton.jit
def pipe_row_log2sum(stats_ptr, row, p, P_MAX: tl.constexpr):
    """cy such that softmax = 2^(z - cy) (z = x log2 e) from a row's p chunk maxima and sums of exp."""
    st = stats_ptr + row.to(tl.int64) * (2 * P_MAX)
    kk = tl.arange(0, P_MAX)
    ms = tl.load(st + kk, mask=kk < p, other=float("-inf"), cache_modifier=".cg")
    ss = tl.load(st + P_MAX + kk, mask=kk < p, other=0.0, cache_modifier=".cg")
    m_row = tl.max(ms, axis=0)
    return m_row + tl.log2(tl.sum(ss * exp2(ms - m_row), axis=0))


@triton.jit
def _pipe_write(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr, PAIRS: tl.constexpr,
                GRANULES: tl.constexpr):
    """softmax of the held chunk k, from its row's statistics (all
    published); GRANULES: chunk 0 also writes its row's head and tail,
    read again (from L2) rather than held."""
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    row, c, start, span = _pipe_span(k, N, BLOCK, GRANULES, VEC)
    cy = pipe_row_log2sum(stats_ptr, row, tl.cdiv(N, BLOCK), P_MAX)
    out_ty = y_ptr.dtype.element_ty
    if PAIRS:
        BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
        idx = c * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
        lo, hi = _pair_unpack(v, BF16, 2)
        out = _pair_pack(exp2(lo * LOG2E - cy), exp2(hi * LOG2E - cy), BF16)
        tl.store((y_ptr + start).to(tl.pointer_type(tl.int32)) + idx, out, mask=idx < span // 2)
    else:
        cols = c * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + start + cols, exp2(v * LOG2E - cy).to(out_ty), mask=cols < span)
    if GRANULES:
        _, _, eoffs, emask = granule_row(row.to(tl.int64) * N, N, VEC)
        emask = emask & (c == 0)
        ze = tl.load(x_ptr + eoffs, mask=emask, other=0.0).to(tl.float32)
        tl.store(y_ptr + eoffs, exp2(ze * LOG2E - cy).to(out_ty), mask=emask)


@triton.jit(do_not_specialize=["M_BUCKET"])
def _softmax_pipe(x_ptr, y_ptr, stats_ptr, count_ptr, M, N, M_BUCKET, BLOCK: tl.constexpr,
                  P_MAX: tl.constexpr, PER_SM: tl.constexpr, PAIRS: tl.constexpr = True,
                  GRANULES: tl.constexpr = False):
    """Rows in chunks of BLOCK columns, held from load to store, on a
    persistent grid (PER_SM programs an SM: the launcher's grid).  PAIRS:
    16-bit chunks read, held and written as 32-bit words of two elements
    (the registers of BLOCK/2 floats); else held as float32.  GRANULES (rows
    not known to be 16-byte aligned): the chunks cut the row's body of whole
    16-byte granules, and chunk 0 also takes its head and tail (see
    _softmax_split), so every chunk moves in 16-byte vectors; without it
    PAIRS needs N % 16 == 0.

    The split kernel's programs each wait at their row's counter with nothing
    else to do (Nsight: barrier stalls 37% at bf16 4096 x 131072).  Here a
    program takes chunks from a ticket (count_ptr[0]) one after another and
    holds two: with the next chunk's loads issued, it looks once at the held
    chunk's row; if every chunk of that row is published, it writes the held
    chunk while those loads are in flight, then publishes the next one's
    statistics; if not, it publishes first, then waits for the row and
    writes.  Only the chunk index and the held pairs go from one chunk to the
    next; indices and masks are recomputed, since carried index tensors
    double the registers (lab/softmax_pipe_probe.py).
    No deadlock: a program waits only with all its chunks published, and
    tickets are taken in order, so only the newest row can be incomplete; for
    every resident program to wait on it, each would hold two of its chunks,
    so a GPU that holds at least half a row's chunks in programs at once never
    stalls (pipe_room).  count_ptr: int32 [1 + M], zero at launch;
    stats_ptr: float32 [M, 2, P_MAX].
    """
    p = tl.cdiv(N, BLOCK)
    total = M * p
    k = tl.atomic_add(count_ptr, 1, sem="relaxed")
    v = _pipe_load(x_ptr, k, total, N, BLOCK, PAIRS, GRANULES)
    _pipe_publish(v, x_ptr, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX, PAIRS, GRANULES)
    while k < total:
        kn = tl.atomic_add(count_ptr, 1, sem="relaxed")
        vn = _pipe_load(x_ptr, kn, total, N, BLOCK, PAIRS, GRANULES)
        row = k // p
        seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
        if seen >= p:
            tl.debug_barrier()
            _pipe_write(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, PAIRS, GRANULES)
            _pipe_publish(vn, x_ptr, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX, PAIRS, GRANULES)
        else:
            _pipe_publish(vn, x_ptr, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX, PAIRS, GRANULES)
            while seen < p:
                seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
            tl.debug_barrier()
            _pipe_write(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, PAIRS, GRANULES)
        v = vn
        k = kn


_rows_tuned = tuned(_softmax_rows, candidates)
# (the online kernel's own candidates also where the default plan for that
# width would be the split kernel: long_rows="online" forces it)
_online_tuned = tuned(_softmax_online, lambda m, n, b: candidates(m, n, b, long_rows="online"))


# Each timing run needs the ticket and row counters at zero.
_split_tuned = tuned(_softmax_split, split_candidates, reset_to_zero=["count_ptr"])
_pipe_tuned = tuned(_softmax_pipe, lambda m, n, b: pipe_candidates(n, b), reset_to_zero=["count_ptr"])


# (kernel, N, dtype bytes, M bucket) -> the config the autotuner chose, for config()
_CHOSEN = Raced(plan)


def _dtype_name(x) -> str:
    return str(x.dtype).removeprefix("torch.")


def _split_buffers(x, m: int, p_max: int):
    return team_buffers(x, m, 2, p_max)  # (max, sum of exp) a chunk


def _run_rows_tuned(x, y, m: int, n: int, bucket: int) -> None:
    _rows_tuned[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](x, y, m, n, bucket, LIVE=live_cols(n, x.element_size()))
    _CHOSEN.record("rows", _rows_tuned, n, x.element_size(), bucket)


def _run_split_tuned(x, y, m: int, n: int, bucket: int) -> None:
    p_max = triton.next_power_of_2(triton.cdiv(n, SPLIT_MIN_CHUNK))  # every candidate's chunks
    stats, count = _split_buffers(x, m, p_max)
    _split_tuned[lambda meta: (m * triton.cdiv(n, meta["BLOCK"]),)](x, y, stats, count, n, bucket, P_MAX=p_max,
                                                                     MODE=0)
    _CHOSEN.record("split", _split_tuned, n, x.element_size(), bucket)


def _pipe_grid(x, m: int, n: int, block: int, per_sm: int) -> int:
    if interpreting():
        return 1  # programs run one after another: rows of at most two chunks (see softmax_triton)
    return min(m * triton.cdiv(n, block), per_sm * _sm_count(_device_index(x)))


def _run_pipe_tuned(x, y, m: int, n: int, bucket: int) -> None:
    p_max = triton.next_power_of_2(triton.cdiv(n, min(c["BLOCK"] for c in pipe_candidates(n, x.element_size()))))
    stats, count = _split_buffers(x, m, p_max)
    _pipe_tuned[lambda meta: (_pipe_grid(x, m, n, meta["BLOCK"], meta["PER_SM"]),)](
        x, y, stats, count, m, n, bucket, P_MAX=p_max)
    _CHOSEN.record("pipe", _pipe_tuned, n, x.element_size(), bucket)


def _split_or_pipe(x, y, m: int, n: int, bucket: int) -> None:
    """Long rows (pipe_fits): the first call of an (N, dtype, M bucket)
    tunes the split and pipe kernels, times each one's winner as called here
    (buffers and counter reset included) and keeps the faster."""
    _CHOSEN.run_or_race(n, _dtype_name(x), x.element_size(), bucket,
                        {"split": lambda: _run_split_tuned(x, y, m, n, bucket),
                         "pipe": lambda: _run_pipe_tuned(x, y, m, n, bucket)}, _time_ms)


def _rows_or_split(x, y, m: int, n: int, bucket: int) -> None:
    """At the widths of split_tried: the first call of an (N, dtype, M bucket)
    tunes both kernels (each writes the whole of y), times each one's winner
    as called here (the split one with its counter reset) and keeps the
    faster; later calls run only that one."""
    _CHOSEN.run_or_race(n, _dtype_name(x), x.element_size(), bucket,
                        {"rows": lambda: _run_rows_tuned(x, y, m, n, bucket),
                         "split": lambda: _run_split_tuned(x, y, m, n, bucket)}, _time_ms)


def _groups_tried(x, n: int) -> bool:
    """Rows the rows kernel cannot prove 16-byte aligned (see
    _triton_plan.unaligned) whose group of rows fits a thread (row_groups)."""
    from implementations._shared import row_groups

    return unaligned(n) and row_groups.group_fits(n, x.element_size()) and row_groups.available(x)


def _rows_or_groups(x, y, m: int, n: int, bucket: int) -> None:
    """Short unaligned rows (_groups_tried): the first call of an (N, dtype, M
    bucket) tunes the rows kernel, times its winner beside the group kernel
    (implementations/_shared/row_groups.py) on 4 and on 8 warps and keeps
    the fastest."""
    from implementations._shared import row_groups

    runs = {"rows": lambda: _run_rows_tuned(x, y, m, n, bucket)}
    for warps in row_groups.WARPS:
        runs[row_groups.label(n, x.element_size(), warps)] = lambda w=warps: row_groups.launch(x, y, w)
    _CHOSEN.run_or_race(n, _dtype_name(x), x.element_size(), bucket, runs, _time_ms)


def softmax_triton(x, *, max_fused: int = MAX_FUSED, block: int | None = None, long_rows: str | None = None,
                   sub: int | None = None, granules: bool | None = None, pairs: bool | None = None):
    """Softmax over the last dim; ``max_fused``/``block``/``sub``/``granules``/``pairs``
    force the paths in tests (a forced path runs its plan as is, untuned);
    ``long_rows`` picks the long-row kernel (see plan)."""
    import torch

    x = x.contiguous()
    if x.data_ptr() % 16:  # the row offsets that granule_row and PAIRS assume (a view into a buffer)
        x = x.clone()
    y = torch.empty_like(x)
    n = x.shape[-1]
    m = x.numel() // n if n else 0
    if x.numel() == 0:
        return y
    p = plan(m, n, x.element_size(), max_fused, block, long_rows, sub, granules, pairs)
    bucket = triton.next_power_of_2(m)
    untuned = (interpreting() or max_fused != MAX_FUSED or block is not None or sub is not None
               or granules is not None or pairs is not None or p["kernel"] == "split2")
    if (p["kernel"] == "split" and not interpreting()
            and triton.cdiv(n, p["BLOCK"]) > 2 * _sm_count(_device_index(x))):
        # a GPU too small to hold every program of a row at once (never an H200)
        p = plan(m, n, x.element_size(), max_fused, block, "online")
    if p["kernel"] == "pipe":
        if not untuned:
            if not pipe_room(n, x.element_size(), _sm_count(_device_index(x))):
                raise ValueError(f"long_rows='pipe': rows of {n} columns need more programs at once than this "
                                 f"GPU holds (see pipe_room)")
            _run_pipe_tuned(x, y, m, n, bucket)
            return y
        chunks = triton.cdiv(n, p["BLOCK"])
        held = _pipe_grid(x, m, n, p["BLOCK"], p["PER_SM"])
        if 2 * held < chunks and held < m * chunks:  # see _softmax_pipe: no deadlock otherwise
            raise ValueError(f"long_rows='pipe': {chunks} chunks a row need at least {(chunks + 1) // 2} programs "
                             f"at once, and {held} run at once here" + (" (the interpreter runs one)"
                                                                       if interpreting() else ""))
        stats, count = _split_buffers(x, m, triton.next_power_of_2(chunks))
        _softmax_pipe[(held,)](x, y, stats, count, m, n, bucket, BLOCK=p["BLOCK"],
                               P_MAX=triton.next_power_of_2(chunks), PER_SM=p["PER_SM"], PAIRS=p["PAIRS"],
                               GRANULES=p["GRANULES"], num_warps=p["num_warps"], maxnreg=p["maxnreg"])
        return y
    if p["kernel"] in ("split", "split2"):
        if not untuned:
            if pipe_fits(n, x.element_size(), _sm_count(_device_index(x))):
                _split_or_pipe(x, y, m, n, bucket)
            else:
                _run_split_tuned(x, y, m, n, bucket)
            return y
        chunks = triton.cdiv(n, p["BLOCK"])
        stats, count = _split_buffers(x, m, triton.next_power_of_2(chunks))
        modes = (1, 2) if p["kernel"] == "split2" else (0,)
        for mode in modes:
            _softmax_split[(m * chunks,)](x, y, stats, count, n, bucket, BLOCK=p["BLOCK"], SUB=p["SUB"],
                                          P_MAX=triton.next_power_of_2(chunks), MODE=mode, EVICT=p["EVICT"],
                                          PAIRS=p.get("PAIRS", False), GRANULES=p.get("GRANULES", False),
                                          num_warps=p["num_warps"],
                                          **({"maxnreg": p["maxnreg"]} if "maxnreg" in p else {}))
    elif untuned:
        # One config: the interpreter would run every candidate on the CPU.
        if p["kernel"] == "rows":
            _softmax_rows[(triton.cdiv(m, p["ROWS"]),)](x, y, m, n, bucket, ROWS=p["ROWS"], BLOCK_N=p["BLOCK_N"],
                                                       EVICT=p["EVICT"], GRANULES=p.get("GRANULES", False),
                                                       PAIRS=p.get("PAIRS", False), LIVE=live_cols(n, x.element_size()),
                                                       num_warps=p["num_warps"],
                                          **({"maxnreg": p["maxnreg"]} if "maxnreg" in p else {}))
        else:
            _softmax_online[(m,)](x, y, n, bucket, BLOCK=p["BLOCK"], num_warps=p["num_warps"])
    elif p["kernel"] == "rows":
        if split_tried(n):
            _rows_or_split(x, y, m, n, bucket)
        elif _groups_tried(x, n):
            _rows_or_groups(x, y, m, n, bucket)
        else:
            _run_rows_tuned(x, y, m, n, bucket)
    else:
        _online_tuned[(m,)](x, y, n, bucket)
        _CHOSEN.record("online", _online_tuned, n, x.element_size(), bucket)
    return y


def _config(case: Case) -> str:
    """The autotuned choice once the case has run on the GPU, else the untuned plan."""
    return _CHOSEN.config_for(case["M"], case["N"], case.dtype, itemsize(case.dtype))


register("softmax", "triton", available=needs_triton,
         supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
         description="rows in registers (several short rows a program; 16-byte granules where rows are "
                     "unaligned; 16-bit rows as 32-bit pairs; short unaligned rows also as groups of rows a "
                     "thread in 16-byte vectors, Gluon, sm_90); long rows split over programs that meet in "
                     "the kernel, raced against a persistent grid that writes one chunk while loading the "
                     "next (x read once)")(
    softmax_triton)
