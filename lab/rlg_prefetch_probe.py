"""residual_layernorm_gelu over 32768-wide rows: the parts kernel's forms, L2 prefetch and all, side by side.

``python3 -m lab.rlg_prefetch_probe`` on the H200.  At 4096 x 32768
one program holds a whole row and fills an SM; while it reduces, the SM has no
loads in flight and HBM idles (ncu: 67% of DRAM peak,
lab/findings/ncu-rlg-triton-rows-ca4e325.txt), and holding the
next row's loads in registers runs out of registers (rlg_pipe_probe).  The
shipped ``_rlg_parts`` holds the row as two or four parts, adds the parts
before its two block reductions, and can ask L2 for a later program's x and
r (implementations/_shared/l2_prefetch.py: a bulk prefetch, no registers held).

Timed here, beside the shipped (raced, autotuned) kernel, in one process:
- every (PARTS, PF_AT, PF_DIV) form of ``_rlg_parts`` the autotuner tries,
  with x and r loaded through L2 only (as shipped) and through L1 too, and
  the placements it does not try (they lost or spill);
- in bf16, the whole-row kernel the race used before (``_rlg_rows``, one
  32768-wide block on 32 warps);
- ``_rlg_rot``: one persistent program an SM that loads the next row part by
  part into the registers each written quarter frees.

Earlier runs, with the probe's own kernels (lab/findings/
rlg_prefetch-5e0a70d.txt, -f79fef0.txt, -943a684.txt): a per-line
``prefetch.global.L2`` from every thread lost to the bulk form (0.816 of copy
at best against 0.831); the prefetch issued before the program's own loads
gained little (258.6 us against 263.5 without it, and 231.7 with it issued
after them, rlg_prefetch-5e0a70d.txt); a whole float32 row in
quarters reduced quarter by quarter (eight block reductions) got no better
than the split kernel, and the prefetch made it worse; mean and variance from
one two-value reduction (sums shifted by the row's first h) tied the two
reductions (235.1 against 236.4 us).
"""
import torch
import triton
import triton.language as tl

from lab._probe import print_table, rlg_shipped, variant_row
from implementations._shared.l2_prefetch import prefetch_l2
from implementations._shared.row_tuning import device_index, sm_count
from implementations.residual_layernorm_gelu.triton import (PARTS_FORMS, _dev, _h_part, _rlg_parts, _rlg_rows,
                                                            _y_part, row_align)

# forms the autotuner does not try, by dtype size: other prefetch placements (they lost)
# and the float32 ones that spill for sm_90
OTHER_FORMS = {2: ((4, 1, 2), (4, 2, 2), (4, 3, 2), (2, 1, 2)), 4: ((4, 4, 2), (2, 2, 2), (4, 2, 8), (2, 1, 4))}


@triton.jit
def _rlg_rot(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, DISTP, Q: tl.constexpr, EXACT: tl.constexpr,
             EAGER: tl.constexpr):
    """One persistent program an SM, a row held as four Q-wide quarters: quarter k's y is written, then
    the next row's quarter k is loaded into the registers it held, while quarter k + 1's GELU runs.
    DISTP > 0: row + DISTP * P prefetched into L2 at the top of each row.  EAGER: the next row's
    quarter k - 1 added into h as soon as quarter k's loads are issued (fewer registers in flight)."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    cols = tl.arange(0, Q)
    n0 = tl.where(pid < M, N, 0)  # a row past the end loads nothing
    base = pid.to(tl.int64) * N
    h0 = _h_part(x_ptr, r_ptr, base, 0, cols, n0, False, "")
    h1 = _h_part(x_ptr, r_ptr, base, Q, cols, n0, False, "")
    h2 = _h_part(x_ptr, r_ptr, base, 2 * Q, cols, n0, False, "")
    h3 = _h_part(x_ptr, r_ptr, base, 3 * Q, cols, n0, False, "")
    for row in range(pid, M, P):
        if DISTP > 0:
            ahead = row + DISTP * P
            prefetch_l2(x_ptr + ahead.to(tl.int64) * N, r_ptr + ahead.to(tl.int64) * N, tl.where(ahead < M, N, 0))
        mean = tl.sum(h0 + h1 + h2 + h3, 0) / N
        d0 = _dev(h0, mean, 0, cols, N, False)
        d1 = _dev(h1, mean, Q, cols, N, False)
        d2 = _dev(h2, mean, 2 * Q, cols, N, False)
        d3 = _dev(h3, mean, 3 * Q, cols, N, False)
        rstd = tl.math.rsqrt(tl.sum(d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3, 0) / N + eps)
        nb = base + P.to(tl.int64) * N
        nn = tl.where(row + P < M, N, 0)
        m0 = cols < nn
        m1 = Q + cols < nn
        m2 = 2 * Q + cols < nn
        m3 = 3 * Q + cols < nn
        _y_part(d0, rstd, w_ptr, b_ptr, y_ptr, base, 0, cols, N, EXACT, False)
        x0 = tl.load(x_ptr + nb + cols, mask=m0, other=0.0)
        r0 = tl.load(r_ptr + nb + cols, mask=m0, other=0.0)
        _y_part(d1, rstd, w_ptr, b_ptr, y_ptr, base, Q, cols, N, EXACT, False)
        x1 = tl.load(x_ptr + nb + Q + cols, mask=m1, other=0.0)
        r1 = tl.load(r_ptr + nb + Q + cols, mask=m1, other=0.0)
        if EAGER:
            h0 = x0.to(tl.float32) + r0.to(tl.float32)
        _y_part(d2, rstd, w_ptr, b_ptr, y_ptr, base, 2 * Q, cols, N, EXACT, False)
        x2 = tl.load(x_ptr + nb + 2 * Q + cols, mask=m2, other=0.0)
        r2 = tl.load(r_ptr + nb + 2 * Q + cols, mask=m2, other=0.0)
        if EAGER:
            h1 = x1.to(tl.float32) + r1.to(tl.float32)
        _y_part(d3, rstd, w_ptr, b_ptr, y_ptr, base, 3 * Q, cols, N, EXACT, False)
        x3 = tl.load(x_ptr + nb + 3 * Q + cols, mask=m3, other=0.0)
        r3 = tl.load(r_ptr + nb + 3 * Q + cols, mask=m3, other=0.0)
        if not EAGER:
            h0 = x0.to(tl.float32) + r0.to(tl.float32)
            h1 = x1.to(tl.float32) + r1.to(tl.float32)
        h2 = x2.to(tl.float32) + r2.to(tl.float32)
        h3 = x3.to(tl.float32) + r3.to(tl.float32)
        base = nb


def parts(x, r, w, b, eps, form, cache=".cg", out=None):
    """y by the shipped _rlg_parts in ``form`` (PARTS, PF_AT, PF_DIV), x and r loaded with the cache
    modifier ``cache``; returns y and the kernel."""
    m, n = x.shape
    p, at, div = form
    q = triton.next_power_of_2(triton.cdiv(n, p))
    y = torch.empty_like(x) if out is None else out
    k = _rlg_parts[(m,)](x, r, w, b, y, m, n, float(eps), triton.next_power_of_2(m),
                         sm_count(device_index(x)), PARTS=p, Q=q,
                         EXACT=x.element_size() == 4, EVEN=p * q == n, ALIGN=row_align(n, x.element_size()),
                         PF_AT=at, PF_DIV=div, CACHE=cache, num_warps=32)
    return y, k


def whole_block(x, r, w, b, eps, out=None):
    """y by _rlg_rows as one 16-bit row in one block on 32 warps (the race's rows kernel before the parts one)."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    k = _rlg_rows[(m,)](x, r, w, b, y, m, n, float(eps), triton.next_power_of_2(m), ROWS=1,
                        BLOCK_N=triton.next_power_of_2(n), EXACT=False, EVEN_N=n == triton.next_power_of_2(n),
                        ALIGN=row_align(n, 2), WB_EARLY=False, EVICT="", num_warps=32)
    return y, k


def rot(x, r, w, b, eps, distp, eager, out=None, programs=None):
    """y by _rlg_rot on one program an SM (or ``programs``); returns y and the kernel."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    if programs is None:
        programs = min(m, sm_count(device_index(x)))
    k = _rlg_rot[(programs,)](x, r, w, b, y, m, n, float(eps), distp, Q=triton.next_power_of_2(triton.cdiv(n, 4)),
                                 EXACT=x.element_size() == 4, EAGER=eager, num_warps=32)
    return y, k


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("rlg_prefetch_probe needs a CUDA GPU (it times kernels; see lab/findings)")
    rows = []
    res = lambda k: f"{k.n_regs} regs {k.n_spills} spills"  # noqa: E731
    for dtype, m, n in [("bfloat16", 4096, 32768), ("float32", 4096, 32768), ("bfloat16", 300, 30000),
                        ("float32", 1000, 20000)]:
        (x, r, w, b, eps), gb, rel, shipped = rlg_shipped(dtype, m, n, 62)
        rows.append(shipped)
        full, size = m == 4096, x.element_size()
        shape = f"{m}x{n}"

        def add(label, fn):
            rows.append(variant_row(dtype, shape, label, x, gb, rel, fn, res))

        for form in PARTS_FORMS[size] + (OTHER_FORMS[size] if full else ()):
            tried = "" if form in PARTS_FORMS[size] else " (not tried)"
            where = f"prefetch after part {form[1]}, SMs/{form[2]} ahead" if form[1] else "no prefetch"
            for cache in ((".cg", "") if full and not tried else (".cg",)):
                add(f"parts {form[0]}, {where}{tried}{'' if cache else ', x and r via L1'}",
                    lambda out=None: parts(x, r, w, b, eps, form, cache, out=out))
        if size == 2 and full:
            add("whole-row block (_rlg_rows)", lambda out=None: whole_block(x, r, w, b, eps, out=out))
        for distp in ((0, 1) if full else (1,)):
            for eager in ((False, True) if full else (True,)):
                add(f"rotating quarters, prefetch {distp}P{', eager' if eager else ''}",
                    lambda out=None: rot(x, r, w, b, eps, distp, eager, out=out))
    print_table(rows, "rel err")


if __name__ == "__main__":
    bench()
