"""Launch plans and autotuning candidates of the Triton softmax (triton.py beside this file).

Pure functions of the shape, the dtype's size and the caller's options, so that
``config()`` can replay a choice and the tests can check the plans on a CPU;
triton.py's docstring says what each kernel does and why.
"""
from __future__ import annotations

import triton

from implementations._shared.row_tuning import neighbours, rows_plan, tiny_rows, warp_rows
from suite.backends import interpreting

MAX_FUSED = 32768  # longest row (power of two) kept whole in registers

SPLIT_MIN_CHUNK = 4096  # smallest chunk the split kernel is tuned over
SPLIT_MAX_PROGRAMS = 64  # most programs a row may be split over (all must be on the GPU at once)
LONG_ROWS = ("split", "split2", "online", "pipe")
# The pipe kernel's candidates: (chunk, warps, register cap); programs an SM
# = 64K registers / (cap x threads).  Two chunks held a program: 16-bit ones
# as pairs, 32 or 64 words a thread; float32 ones 32 or 64 floats.  16-bit
# granule chunks (head and tail too) and rows that fit one program (P_MAX 4)
# spill at a cap of 80 registers for sm_90, so they take the roomy designs.
PIPE_DESIGNS = {2: ((8192, 4, 80), (16384, 8, 80), (8192, 4, 96)),
                4: ((4096, 4, 96), (4096, 8, 64), (8192, 8, 96))}
PIPE_ROOMY = ((8192, 4, 96), (4096, 2, 96), (16384, 8, 96))


def split_fits(n: int) -> bool:
    return triton.cdiv(n, SPLIT_MIN_CHUNK) <= SPLIT_MAX_PROGRAMS


def unaligned(n: int) -> bool:
    """Rows the launcher cannot prove 16-byte aligned: Triton specialises N
    only on divisibility by 16, so the element-masked rows kernel gets
    16-byte accesses only when N % 16 == 0."""
    return n % 16 != 0


def granule_block(n: int, dtype_bytes: int) -> int:
    """BLOCK_N of the GRANULES rows kernel: the body of whole 16-byte granules,
    at most N // VEC * VEC elements (N=2053 bf16: 2048, where the
    element-masked block is 4096)."""
    vec = 16 // dtype_bytes
    return max(16, triton.next_power_of_2(n // vec * vec))


def pairs_fit(n: int, dtype_bytes: int) -> bool:
    """Rows the PAIRS form of the rows kernel takes: 16-bit, on 16-byte boundaries."""
    return dtype_bytes == 2 and n % 16 == 0


def split_tried(n: int) -> bool:
    """Widths (8192 < N <= MAX_FUSED) where the rows kernel is raced against
    the split kernel at the first call: a row still fits one program, but a
    one-row program of up to 32 warps fills an SM that then idles through
    its reductions; split, 2 to 8 programs a row share each SM."""
    return MAX_FUSED // 4 < triton.next_power_of_2(n) <= MAX_FUSED


def pipe_config(block: int, warps: int, maxnreg: int, n: int, dtype_bytes: int, granules: bool | None = None) -> dict:
    """A pipe kernel launch: at most ``maxnreg`` registers a thread, so that at
    least PER_SM programs fit an SM (the grid); 16-bit chunks as pairs, and
    the granule form where a row is not known to be 16-byte aligned."""
    return dict(kernel="pipe", BLOCK=block, PER_SM=65536 // (maxnreg * 32 * warps), num_warps=warps,
                maxnreg=maxnreg, PAIRS=dtype_bytes == 2,
                GRANULES=unaligned(n) if granules is None else granules)


def pipe_designs(n: int, dtype_bytes: int, granules: bool | None = None) -> tuple:
    """The pipe kernel's (chunk, warps, register cap) designs for rows of n."""
    granules = unaligned(n) if granules is None else granules
    if dtype_bytes <= 2 and (granules or triton.next_power_of_2(n) <= MAX_FUSED):
        return PIPE_ROOMY
    return PIPE_DESIGNS[min(dtype_bytes, 4)]


def pipe_candidates(n: int, dtype_bytes: int) -> list[dict]:
    """The pipe kernel's candidates on the GPU (bf16 4096 x 131072 on the H200:
    0.924 of copy for the first two 16-bit ones, 0.904 for the third, against
    the split kernel's 0.857)."""
    return [pipe_config(*d, n, dtype_bytes) for d in pipe_designs(n, dtype_bytes)]


def pipe_room(n: int, dtype_bytes: int, sms: int) -> bool:
    """Whether a GPU of ``sms`` SMs holds at least half a row's chunks in
    programs at once for every candidate (what keeps the pipe kernel free of
    deadlock; see _softmax_pipe)."""
    return all(2 * sms * c["PER_SM"] >= triton.cdiv(n, c["BLOCK"]) for c in pipe_candidates(n, dtype_bytes))


def pipe_fits(n: int, dtype_bytes: int, sms: int) -> bool:
    """Rows the pipe kernel is raced at: too long for one program, where the GPU has room (pipe_room)."""
    return triton.next_power_of_2(n) > MAX_FUSED and pipe_room(n, dtype_bytes, sms)


def plan(m: int, n: int, dtype_bytes: int, max_fused: int = MAX_FUSED, block: int | None = None,
         long_rows: str | None = None, sub: int | None = None, granules: bool | None = None,
         pairs: bool | None = None) -> dict:
    """Kernel and launch parameters for an m x n softmax; pure, so config() can replay it.

    long_rows picks the kernel for rows longer than max_fused: "split" (one
    read, programs of a row meet in the kernel; default on the GPU), "split2"
    (the same in two launches, x read twice; default under the interpreter,
    which runs programs one after another and so cannot wait), "online" (one
    program a row, x re-read, hopefully from L2), "pipe" (a persistent grid
    that holds two chunks a program, one read; at any width it is asked for,
    and raced on the GPU where pipe_fits).  ``sub`` < ``block`` makes
    the split kernel stream its chunk and re-read it (see _softmax_split).
    ``granules`` picks the rows kernel's 16-byte granule form (GRANULES); the
    plan of an unaligned width (see unaligned) names GRANULES=False (the
    element-masked form), and the autotuner also tries the granule form.
    ``pairs`` picks the rows kernel's PAIRS form (16-bit rows with N % 16 == 0;
    see pairs_fit).
    """
    block_n = max(16, triton.next_power_of_2(n))  # 16: no degenerate 1-wide layouts
    if long_rows == "pipe":
        design = pipe_designs(n, dtype_bytes, granules)[0]
        return pipe_config(block or design[0], *design[1:], n, dtype_bytes, granules)
    if pairs:
        if not pairs_fit(n, dtype_bytes):
            raise ValueError(f"pairs: 16-bit rows of a multiple of 16 columns only, got N={n}, {dtype_bytes} bytes")
        if block_n <= max_fused:  # one program a row, 32 words a thread
            return dict(kernel="rows", ROWS=1, BLOCK_N=block_n, num_warps=max(1, min(32, block_n // 2048)),
                        EVICT="", PAIRS=True)
        chunk = block or 16384
        kernel = long_rows or ("split2" if interpreting() else "split")
        return dict(kernel=kernel, BLOCK=chunk, SUB=chunk, num_warps=max(1, min(16, chunk // 2048)), EVICT="",
                    PAIRS=True, maxnreg=64)
    if block_n <= max_fused:
        # 32 values a thread at the widest rows (32768: 53 registers, no spills
        # for sm_90, one 32-warp program an SM with 128 KB in flight).
        if granules:
            return dict(rows_plan(m, granule_block(n, dtype_bytes), dtype_bytes), EVICT="evict_first",
                        GRANULES=True)
        out = dict(rows_plan(m, block_n, dtype_bytes), EVICT="evict_first")
        if granules is not None or unaligned(n):
            out["GRANULES"] = False
        return out
    if long_rows is None:
        long_rows = "online" if not split_fits(n) else ("split2" if interpreting() else "split")
    if long_rows not in LONG_ROWS:
        raise ValueError(f"long_rows={long_rows!r}: choose from {LONG_ROWS}")
    if long_rows != "online":
        # 8192 with 8 warps: 32 values a thread, ~61 registers, four programs
        # an SM (128 KB of float32 loads in flight); 131072 columns are 16
        # programs a row.  The chunk stays in registers (SUB = BLOCK).
        chunk = block or 8192
        sub = min(sub or chunk, chunk)
        out = dict(kernel=long_rows, BLOCK=chunk, SUB=sub, num_warps=max(1, min(16, sub // 1024)),
                   EVICT="evict_first")
        if granules:
            if sub != chunk:
                raise ValueError("granules: the split kernel's granule form holds its chunk (sub == block)")
            out["GRANULES"] = True
        return out
    # 8192 with 32 warps: 8 values a thread, ~48 registers, one program an SM,
    # so ~132 rows share L2 (fp32 131072: 64 MB, the later chunks fitting).
    chunk = block or min(8192, max_fused)
    return dict(kernel="online", BLOCK=chunk, num_warps=max(1, min(32, chunk // 256)))


def _short_row_candidates(base: dict, m: int) -> list[dict]:
    """Rows of at most 256: the plan, its doubled and halved ROWS (16 values a
    thread, evict_first), then the plan and small programs without the
    eviction hint: 8 rows of 4 warps (ATen's 128-thread, 8-row blocks),
    8 rows of 2 warps (Inductor's persistent reduction at XBLOCK 8), 16 of 4
    and 4 rows on one warp."""
    bn, r0, top = base["BLOCK_N"], base["ROWS"], triton.next_power_of_2(m)
    extra = {k: base[k] for k in ("GRANULES",) if k in base}
    out = [base]
    for rows in (min(2 * r0, top), r0 // 2):
        warps = rows * bn // (32 * 16)
        if rows >= 1 and 1 <= warps <= 32:
            out.append(dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps, EVICT="evict_first", **extra))
    out.append(dict(base, EVICT=""))
    for rows, warps in ((16, 4), (8, 4), (8, 2), (4, 1)):
        if rows <= top and 1 <= rows * bn // (32 * warps) <= 32:
            out.append(dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps, EVICT="", **extra))
    return out


def _rows_shape(rows: int, bn: int, ept: int) -> dict | None:
    """ROWS x BLOCK_N at ``ept`` values a thread, if the warp count is legal
    (32 values a thread only for one row on up to 16 warps, as in neighbours)."""
    warps = rows * bn // (32 * ept)
    if rows >= 1 and 1 <= warps <= 32 and (ept < 32 or (rows == 1 and warps <= 16)):
        return dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps)
    return None


def _granule_candidates(base: dict, m: int, n: int, dtype_bytes: int) -> list[dict]:
    """Unaligned widths wider than 256: three element-masked designs (the plan,
    half its rows at 16 values a thread, one row at 32: among them the H200's
    winners at 65521 x 2053 and 1823 x 781), then the granule form over its
    own, often halved, block: one and (up to 1024 wide) four rows at 16 values a thread, its
    rows_plan, one row at 32, then (as room allows) two rows at 16, half the
    plan's rows at 16, one row at 8, and the plans' neighbours.  Four rows a
    program: short rows (bf16 N=307, 614 bytes) one to a warp leave each
    program too little to move."""
    bn, gb = base["BLOCK_N"], granule_block(n, dtype_bytes)
    gbase = rows_plan(m, gb, dtype_bytes)
    elem = [base] + [dict(c, EVICT="evict_first", GRANULES=False)
                     for c in [_rows_shape(base["ROWS"] // 2, bn, 16), _rows_shape(1, bn, 32)]
                     + neighbours(rows_plan(m, bn, dtype_bytes), m, "online", ()) if c]
    few = gb <= 1024  # several rows a program only for short rows (4 x 4096 float32 spills)
    gran = [dict(c, EVICT="evict_first", GRANULES=True)
            for c in [_rows_shape(1, gb, 16), few and _rows_shape(4, gb, 16), gbase, _rows_shape(1, gb, 32),
                      few and _rows_shape(2, gb, 16), _rows_shape(gbase["ROWS"] // 2, gb, 16),
                      _rows_shape(1, gb, 8)]
            + neighbours(gbase, m, "online", ()) if c]
    out: list[dict] = []
    for group, room in ((elem, 3), (gran, 8)):
        for c in group:
            if c not in out and len(out) < room:
                out.append(c)
    return out


def candidates(m: int, n: int, dtype_bytes: int, long_rows: str | None = None) -> list[dict]:
    """What the autotuner tries on the GPU: the plan and its neighbours, at most 8.

    Rows kernel: ROWS kept, halved and doubled, each with 16 or 8 values a
    thread, and 32 for single rows at up to 16 warps, all with evict_first;
    a plan with no neighbour (32768 columns) also without the hint, so that
    the autotuner times it (the split kernel is raced against it, see
    split_tried); rows of at most 256 see _short_row_candidates, unaligned
    rows _granule_candidates.  Split kernel: the chunk
    in registers at 4096 to 8192 (32 values a thread; 16384 on 16 warps fits
    only two programs an SM and is slower on the H200), the plan also loaded
    without the evict_first hint (which cost float32 rows 3-8% in
    residual_layernorm_gelu's kernel), and 32 or 64 KB chunks
    re-read from L2, streamed in 16 KB (8 warps) or 8 KB (4 warps) steps:
    4 to 16 programs a row in either dtype.  Online kernel: chunks of 2048
    to 8192 with 8 or 16 values a thread (16384 spilled at 16 or 32 warps).
    The sm_90 compile test checks every one of these for spills.
    """
    base = plan(m, n, dtype_bytes, long_rows=long_rows)
    if base["kernel"] in ("split", "split2"):
        # the plan also without the load's evict_first hint (in registers only;
        # the streamed chunks keep their evict_last / evict_first pair)
        out = [base, dict(base, EVICT="")] + [dict(kernel=base["kernel"], BLOCK=blk, SUB=blk, num_warps=w,
                                                   EVICT="evict_first") for blk, w in ((4096, 4), (8192, 16))]
        for kb in (32768, 65536):
            for sub_bytes, w in ((16384, 8), (8192, 4)):
                out.append(dict(kernel=base["kernel"], BLOCK=kb // dtype_bytes, SUB=sub_bytes // dtype_bytes,
                                num_warps=w, EVICT="evict_first"))
        if unaligned(n):
            # rows not known to be 16-byte aligned: the chunks in registers
            # also as granules of the row's body (see _softmax_split), first,
            # and of the streamed ones only the 64 KB chunk in 16 KB steps
            held = [c for c in out if c["SUB"] == c["BLOCK"]]
            out = [dict(c, GRANULES=True) for c in held] + held[:1] + held[2:3] + out[len(held):len(held) + 1]
        if pairs_fit(n, dtype_bytes):
            # PAIRS, 32 words a thread: 16384 on 8 warps (the float32 plan's
            # bytes and registers) and 8192 on 4, in place of the two streamed
            # candidates slowest at bf16 131072 (16384/4096 and 32768/4096 on
            # 4 warps: 769 and 799 us against 636 us)
            out = [c for c in out if not (c["num_warps"] == 4 and c["SUB"] < c["BLOCK"])]
            # and of the next two slowest (8192 on 16 warps, 752 us; 32768
            # streamed 8192 at a time, 731), 32768 and 16384 on 16 warps:
            # 4 or 8 programs a row, 2 or 3 an SM (the rows kernel's 32768 on 16
            # warps reached 0.93 of copy)
            out = [c for c in out if c["num_warps"] != 16 and c["BLOCK"] != 32768]
            # (capped at 64 registers, 4 and 8 programs an SM: 71-78 uncapped, no spills capped)
            out += [dict(kernel=base["kernel"], BLOCK=blk, SUB=blk, num_warps=w, EVICT="", PAIRS=True, maxnreg=64)
                    for blk, w in ((16384, 8), (8192, 4), (32768, 16), (16384, 16))]
    elif base["kernel"] == "rows" and tiny_rows(m, n, dtype_bytes):
        # rows of at most 16 columns: the plan, then blocks as narrow as the
        # row holding 8-32 KB of real row bytes (see tiny_rows), the first
        # also without the eviction hint
        extra = {k: base[k] for k in ("GRANULES",) if k in base}
        tiny = [dict(c, EVICT="evict_first", **extra) for c in tiny_rows(m, n, dtype_bytes)]
        out = [base] + tiny[:6] + [dict(tiny[0], EVICT="")]
    elif base["kernel"] == "rows" and base["BLOCK_N"] <= 256:
        out = _short_row_candidates(base, m)
        if "GRANULES" in base:
            bn, gb = base["BLOCK_N"], granule_block(n, dtype_bytes)
            out = out[:5] + [dict(c, BLOCK_N=gb, GRANULES=True, num_warps=max(1, c["num_warps"] * gb // bn))
                             for c in out[:3]]
    elif base["kernel"] == "rows" and "GRANULES" in base:
        out = _granule_candidates(base, m, n, dtype_bytes)
    else:
        out = neighbours(base, m, "online",
                         ((4096, 16), (8192, 32), (8192, 16), (4096, 8), (2048, 8), (2048, 4)))
        out = [dict(c, EVICT="evict_first") if c["kernel"] == "rows" else c for c in out]
        if len(out) == 1 and base["kernel"] == "rows":
            out.append(dict(base, EVICT=""))
        if base["kernel"] == "rows" and split_tried(n) and pairs_fit(n, dtype_bytes):
            # PAIRS: 32 words a thread (two programs an SM at 32768) and 16
            bn = base["BLOCK_N"]
            out += [dict(kernel="rows", ROWS=1, BLOCK_N=bn, num_warps=w, EVICT="", PAIRS=True)
                    for w in (bn // 2048, bn // 1024) if 1 <= w <= 32]
    unique: list[dict] = []
    for c in out:
        if c not in unique:
            unique.append(c)
    if base["kernel"] == "rows":  # and each row on one warp
        bn = max(16, triton.next_power_of_2(n))
        extra = {"GRANULES": False} if "GRANULES" in base else {}
        return unique[:8] + [dict(c, EVICT="evict_first", **extra) for c in warp_rows(m, n, dtype_bytes, bn)]
    return unique[:8]


def split_candidates(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """The split kernel's candidates: candidates() where rows are too long for
    one program; at the widths of split_tried, the chunk held in registers,
    8192 on 8 warps (the long-row plan), also without the evict_first hint,
    4096 on 4 warps, 8192 on 16 and 4096 on 8: 2 to 8 programs a row, at
    least one chunk fewer than the row has."""
    if not split_tried(n):
        return candidates(m, n, dtype_bytes, long_rows="split")
    top = triton.next_power_of_2(n)
    out = [dict(kernel="split", BLOCK=blk, SUB=blk, num_warps=w, EVICT="evict_first")
           for blk, w in ((8192, 8), (4096, 4), (8192, 16), (4096, 8)) if blk < top]
    if unaligned(n):  # the same as granules of the row's body (see _softmax_split), and the plan as is
        return [dict(c, GRANULES=True) for c in out] + out[:1]
    return out[:1] + [dict(out[0], EVICT="")] + out[1:]
