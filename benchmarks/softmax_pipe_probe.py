"""Softmax over long rows by a persistent grid: a one-off device comparison.

``PYTHONPATH=. python3 benchmarks/softmax_pipe_probe.py`` on the H200 (its output
is in results/h200/diagnostics/).  The shipped Triton softmax meets the split
kernel's programs of a row at a counter, and Nsight Compute shows them
stalled at that barrier for 37% of the time at bf16 4096 x 131072
(results/h200/diagnostics/ncu-softmax-triton-split-ca4e325.txt).
``_softmax_pipe`` asks whether hiding that wait pays: a persistent grid
whose programs take chunks from a ticket counter and, before waiting for
the row of the chunk they hold, load the next chunk and publish its
statistics (max, sum of exp), so that by the time they wait the row is
most likely complete.  Publishing before waiting keeps it free of
deadlock: a program that waits holds two published chunks, only the
newest row can be incomplete, so all resident programs would have to hold
two chunks each of that one row (more than half a row's chunks resident
is enough; 132 SMs hold far more).

Each variant is checked against float64 and timed with the suite's events
timer (L2 flushed) beside the shipped kernel as the suite calls it, the copy
rate measured in the same run.  The table gives registers and spills (from
the compiled kernel) and the programs an SM can hold by registers.
"""
import torch
import triton
import triton.language as tl

from implementations.gelu._triton_math import exp2
from implementations.softmax.triton import LOG2E, _pair_max, _pair_pack, _pair_unpack


@triton.jit
def _chunk_stats(v, BF16: tl.constexpr, PAIRS: tl.constexpr):
    if PAIRS:
        m = _pair_max(v, BF16, 0) * LOG2E
        safe = tl.where(m == float("-inf"), 0.0, m)
        lo, hi = _pair_unpack(v, BF16, 1)
        s = tl.sum(exp2(lo * LOG2E - safe) + exp2(hi * LOG2E - safe), axis=0)
    else:
        z = v.to(tl.float32) * LOG2E
        m = tl.max(z, axis=0)
        s = tl.sum(exp2(z - tl.where(m == float("-inf"), 0.0, m)), axis=0)
    return m, s


@triton.jit
def _softmax_pipe(x_ptr, y_ptr, stats_ptr, count_ptr, N, total, BLOCK: tl.constexpr, P_MAX: tl.constexpr,
                  PAIRS: tl.constexpr, EVICT: tl.constexpr):
    """Chunks of BLOCK columns (``total`` = rows x chunks a row) taken from the
    ticket count_ptr[0]; count_ptr[1 + row] counts the row's published chunks;
    stats_ptr holds each row's chunk maxima, then sums, P_MAX apart.  PAIRS:
    16-bit chunks read, held and written as 32-bit words of two elements."""
    BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    p = tl.cdiv(N, BLOCK)
    W: tl.constexpr = BLOCK // 2 if PAIRS else BLOCK
    lanes = tl.arange(0, W)
    n_lanes = N // 2 if PAIRS else N
    NEG: tl.constexpr = -8323200 if BF16 else -67044352
    k = tl.atomic_add(count_ptr, 1, sem="relaxed")
    row = k // p
    c = k - row * p
    live = k < total
    idx = c * W + lanes
    if PAIRS:
        v = tl.load((x_ptr + row.to(tl.int64) * N).to(tl.pointer_type(tl.int32)) + idx,
                    mask=(idx < n_lanes) & live, other=NEG, eviction_policy=EVICT)
    else:
        v = tl.load(x_ptr + row.to(tl.int64) * N + idx, mask=(idx < n_lanes) & live, other=float("-inf"),
                    eviction_policy=EVICT)
    m, s = _chunk_stats(v, BF16, PAIRS)
    st = stats_ptr + row.to(tl.int64) * (2 * P_MAX)
    tl.store(st + c, m, mask=live)
    tl.store(st + P_MAX + c, s, mask=live)
    tl.debug_barrier()
    tl.atomic_add(count_ptr + 1 + row, 1, sem="release", mask=live)
    while k < total:
        kn = tl.atomic_add(count_ptr, 1, sem="relaxed")
        rown = kn // p
        cn = kn - rown * p
        liven = kn < total
        idxn = cn * W + lanes
        if PAIRS:
            vn = tl.load((x_ptr + rown.to(tl.int64) * N).to(tl.pointer_type(tl.int32)) + idxn,
                         mask=(idxn < n_lanes) & liven, other=NEG, eviction_policy=EVICT)
        else:
            vn = tl.load(x_ptr + rown.to(tl.int64) * N + idxn, mask=(idxn < n_lanes) & liven,
                         other=float("-inf"), eviction_policy=EVICT)
        mn, sn = _chunk_stats(vn, BF16, PAIRS)
        stn = stats_ptr + rown.to(tl.int64) * (2 * P_MAX)
        tl.store(stn + cn, mn, mask=liven)
        tl.store(stn + P_MAX + cn, sn, mask=liven)
        tl.debug_barrier()
        tl.atomic_add(count_ptr + 1 + rown, 1, sem="release", mask=liven)
        # the previous chunk: its row is most likely complete by now
        seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
        while seen < p:
            seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
        tl.debug_barrier()
        kk = tl.arange(0, P_MAX)
        ms = tl.load(st + kk, mask=kk < p, other=float("-inf"), cache_modifier=".cg")
        ss = tl.load(st + P_MAX + kk, mask=kk < p, other=0.0, cache_modifier=".cg")
        m_row = tl.max(ms, axis=0)
        cy = m_row + tl.log2(tl.sum(ss * exp2(ms - m_row), axis=0))
        if PAIRS:
            lo, hi = _pair_unpack(v, BF16, 2)
            out = _pair_pack(exp2(lo * LOG2E - cy), exp2(hi * LOG2E - cy), BF16)
            tl.store((y_ptr + row.to(tl.int64) * N).to(tl.pointer_type(tl.int32)) + idx, out,
                     mask=idx < n_lanes)
        else:
            out = exp2(v.to(tl.float32) * LOG2E - cy)
            tl.store(y_ptr + row.to(tl.int64) * N + idx, out.to(y_ptr.dtype.element_ty), mask=idx < n_lanes)
        v = vn
        k = kn
        row = rown
        c = cn
        idx = idxn
        st = stn


def pipe(x, block, warps, progs_per_sm, pairs, maxnreg=None, out=None, programs=None):
    """y = softmax(x) by _softmax_pipe on min(chunks, SMs x progs_per_sm) programs
    (or ``programs``), into ``out`` if given; returns y and the compiled kernel."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    p = triton.cdiv(n, block)
    pmax = triton.next_power_of_2(p)
    stats = torch.empty(m * 2 * pmax, device=x.device, dtype=torch.float32)
    count = torch.zeros(m + 1, device=x.device, dtype=torch.int32)
    if programs is None:
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count * progs_per_sm
    grid = min(m * p, programs)
    kw = {"maxnreg": maxnreg} if maxnreg else {}
    h = _softmax_pipe[(grid,)](x, y, stats, count, n, m * p, BLOCK=block, P_MAX=pmax, PAIRS=pairs, EVICT="",
                               num_warps=warps, **kw)
    return y, h


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("softmax_pipe_probe needs a CUDA GPU (it times kernels; see results/h200/diagnostics)")
    from implementations.softmax.triton import _CHOSEN, softmax_triton
    from suite.timing import measure

    def time_us(fn):
        t = measure([fn], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0)
        return t.median * 1e3

    torch.manual_seed(0)
    rows = []
    for dtype, m, n in [(torch.bfloat16, 4096, 131072), (torch.float32, 4096, 131072)]:
        x = torch.randn(m, n, device="cuda", dtype=dtype) * 3
        ref = torch.softmax(x.double(), -1)
        gb = 2 * x.numel() * x.element_size() / 1e9
        name = str(dtype).removeprefix("torch.")
        y = softmax_triton(x)
        err = (y.double() - ref).abs().max().item()
        t = time_us(lambda: softmax_triton(x))
        cfg = _CHOSEN.config_for(m, n, name, x.element_size())
        rows.append((name, f"{m}x{n}", "shipped: " + cfg[:60], "", t, gb / t * 1e6, err))
        cfgs = []
        if x.element_size() == 2:
            cfgs += [(16384, 8, g, True, None) for g in (1, 2, 4)] + [(8192, 4, g, True, None) for g in (2, 4, 8)]
            cfgs += [(16384, 8, 2, True, 128)]
        cfgs += [(8192, 8, g, False, None) for g in (1, 2, 4)] + [(4096, 4, g, False, None) for g in (2, 4, 8)]
        for blk, w, g, pairs, mr in cfgs:
            poisoned = torch.full_like(x, float("nan"))  # every element must be written
            y, h = pipe(x, blk, w, g, pairs, mr, out=poisoned)
            err = (y.double() - ref).abs().max().item()
            t = time_us(lambda: pipe(x, blk, w, g, pairs, mr))
            fit = min(65536 // (h.n_regs * 32 * w), 64 // w)
            rows.append((name, f"{m}x{n}", f"pipe {'pairs ' if pairs else ''}chunk {blk}, {w} warps, "
                         f"{g}/SM{f', maxnreg {mr}' if mr else ''}", f"{h.n_regs} regs {h.n_spills} spills, "
                         f"{fit}/SM fit", t, gb / t * 1e6, err))
            print(rows[-1], flush=True)
    src = torch.randn(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    t = time_us(lambda: dst.copy_(src))
    copy = 2 * src.numel() * 4 / t / 1e3
    print(f"copy {copy:.0f} GB/s (2^28 float32)")
    print("%-9s %-12s %-48s %-26s %9s %8s %6s %s" % ("dtype", "shape", "kernel", "registers", "us", "GB/s",
                                                     "x copy", "max |err|"))
    for name, shape, kernel, regs, t, gbps, err in rows:
        print("%-9s %-12s %-48s %-26s %9.1f %8.0f %6.3f %.1e" % (name, shape, kernel, regs, t, gbps, gbps / copy,
                                                                 err))


if __name__ == "__main__":
    bench()
