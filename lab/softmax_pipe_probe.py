"""Softmax over long rows by a persistent grid: a one-off device comparison.

``python3 -m lab.softmax_pipe_probe`` on the H200 (its output
is in lab/findings/).  The shipped Triton softmax meets the split
kernel's programs of a row at a counter, and Nsight Compute shows them
stalled at that barrier for 37% of the time at bf16 4096 x 131072
(lab/findings/ncu-softmax-triton-split-ca4e325.txt).
``_softmax_pipe`` asks whether hiding that wait pays: a persistent grid
whose programs take chunks from a ticket counter and, before waiting for
the row of the chunk they hold, load the next chunk and publish its
statistics (max, sum of exp), so that by the time they wait the row is
most likely complete.  Publishing before waiting keeps it free of
deadlock: a program that waits holds two published chunks, only the
newest row can be incomplete, so all resident programs would have to hold
two chunks each of that one row (more than half a row's chunks resident
is enough; 132 SMs hold far more).

At 34e5f4e the kernel carried its index tensors from one chunk to the next
(twice the registers of its data); now only the chunk index and the held
chunk are carried, and a STATIC grid (every program resident, chunks dealt
round robin) is timed beside the ticket one.

Each variant is checked against float64 and timed with the suite's events
timer (L2 flushed) beside the shipped kernel as the suite calls it, the copy
rate measured in the same run.  The table gives registers and spills (from
the compiled kernel) and the programs an SM can hold by registers.
"""
import torch
import triton
import triton.language as tl

from lab._probe import fit, print_table, time_us, variant_row

from implementations._shared.triton_math import exp2
from implementations.softmax.triton import (LOG2E, _pipe_publish, _pipe_write, _split_buffers, pipe_release,
                                             pipe_row_log2sum)


@triton.jit
def _chunk_stats(v):
    """max and sum of exp (in units of 2^max) of a chunk of floats."""
    z = v.to(tl.float32) * LOG2E
    m = tl.max(z, axis=0)
    return m, tl.sum(exp2(z - tl.where(m == float("-inf"), 0.0, m)), axis=0)


@triton.jit
def _load_chunk(x_ptr, k, total, N, BLOCK: tl.constexpr, PAIRS: tl.constexpr, EVICT: tl.constexpr):
    """Chunk k (of BLOCK columns; nothing read when k >= total), as loaded."""
    BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    W: tl.constexpr = BLOCK // 2 if PAIRS else BLOCK
    p = tl.cdiv(N, BLOCK)
    row = k // p
    idx = (k - row * p) * W + tl.arange(0, W)
    if PAIRS:
        return tl.load((x_ptr + row.to(tl.int64) * N).to(tl.pointer_type(tl.int32)) + idx,
                       mask=(idx < N // 2) & (k < total), other=-8323200 if BF16 else -67044352,  # -inf pairs
                       eviction_policy=EVICT)
    else:
        return tl.load(x_ptr + row.to(tl.int64) * N + idx, mask=(idx < N) & (k < total), other=float("-inf"),
                       eviction_policy=EVICT)


@triton.jit
def _publish(v, x_ptr, stats_ptr, count_ptr, k, total, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr,
             PAIRS: tl.constexpr, BF16: tl.constexpr):
    """Chunk k's max and sum of exp into the row's statistics, then one count at its counter."""
    if PAIRS:
        _pipe_publish(v, x_ptr, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX, True, False)  # the shipped kernel's
    else:
        m, s = _chunk_stats(v)
        pipe_release(m, s, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX)


@triton.jit
def _write_chunk(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK: tl.constexpr, P_MAX: tl.constexpr, PAIRS: tl.constexpr,
                 BF16: tl.constexpr):
    """softmax of held chunk k from its row's statistics (all published)."""
    if PAIRS:
        _pipe_write(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, True, False)  # the shipped kernel's
    else:
        p = tl.cdiv(N, BLOCK)
        row = k // p
        cy = pipe_row_log2sum(stats_ptr, row, p, P_MAX)
        idx = (k - row * p) * BLOCK + tl.arange(0, BLOCK)
        out = exp2(v.to(tl.float32) * LOG2E - cy)
        tl.store(y_ptr + row.to(tl.int64) * N + idx, out.to(y_ptr.dtype.element_ty), mask=idx < N)


@triton.jit
def _softmax_pipe(x_ptr, y_ptr, stats_ptr, count_ptr, N, total, BLOCK: tl.constexpr, P_MAX: tl.constexpr,
                  PAIRS: tl.constexpr, EVICT: tl.constexpr, STATIC: tl.constexpr = False,
                  EARLY: tl.constexpr = False):
    """Chunks of BLOCK columns (``total`` = rows x chunks a row) taken from the
    ticket count_ptr[0]; count_ptr[1 + row] counts the row's published chunks;
    stats_ptr holds each row's chunk maxima, then sums, P_MAX apart.  PAIRS:
    16-bit chunks read, held and written as 32-bit words of two elements.
    Only the chunk index and the held chunk are carried from one chunk to the
    next (indices and masks are recomputed).  STATIC: program i takes chunks
    i, i + G, i + 2G, ... (G programs) instead of tickets, one atomic fewer a
    chunk, but every program must be resident at once (the caller sizes G).
    EARLY: with the next chunk's loads issued, look once at the held chunk's
    row; if it is complete, write the held chunk while those loads are in
    flight and publish the next one after; else publish first and wait, as
    without EARLY (a program only ever waits with all its chunks published)."""
    BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    p = tl.cdiv(N, BLOCK)
    if STATIC:
        k = tl.program_id(0)
    else:
        k = tl.atomic_add(count_ptr, 1, sem="relaxed")
    v = _load_chunk(x_ptr, k, total, N, BLOCK, PAIRS, EVICT)
    _publish(v, x_ptr, stats_ptr, count_ptr, k, total, N, BLOCK, P_MAX, PAIRS, BF16)
    while k < total:
        if STATIC:
            kn = k + tl.num_programs(0)
        else:
            kn = tl.atomic_add(count_ptr, 1, sem="relaxed")
        vn = _load_chunk(x_ptr, kn, total, N, BLOCK, PAIRS, EVICT)
        row = k // p
        if EARLY:
            seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
            if seen >= p:
                tl.debug_barrier()
                _write_chunk(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, PAIRS, BF16)
                _publish(vn, x_ptr, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX, PAIRS, BF16)
            else:
                _publish(vn, x_ptr, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX, PAIRS, BF16)
                while seen < p:
                    seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
                tl.debug_barrier()
                _write_chunk(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, PAIRS, BF16)
        else:
            _publish(vn, x_ptr, stats_ptr, count_ptr, kn, total, N, BLOCK, P_MAX, PAIRS, BF16)
            # chunk k: its row is most likely complete by now
            seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
            while seen < p:
                seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
            tl.debug_barrier()
            _write_chunk(v, x_ptr, y_ptr, stats_ptr, k, N, BLOCK, P_MAX, PAIRS, BF16)
        v = vn
        k = kn


_FIT = {}  # (dtype, N, launch meta) -> programs an SM holds


def pipe(x, block, warps, progs_per_sm, pairs, maxnreg=None, out=None, programs=None, static=False, evict="",
         early=False):
    """y = softmax(x) by _softmax_pipe on min(chunks, SMs x progs_per_sm) programs
    (or ``programs``), into ``out`` if given; returns y and the compiled kernel.
    static, or progs_per_sm=0: the grid is what the GPU holds at once."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    p = triton.cdiv(n, block)
    pmax = triton.next_power_of_2(p)
    stats, count = _split_buffers(x, m, pmax)
    args = (x, y, stats, count, n, m * p)
    meta = dict(BLOCK=block, P_MAX=pmax, PAIRS=pairs, EVICT=evict, STATIC=static, EARLY=early, num_warps=warps,
                **({"maxnreg": maxnreg} if maxnreg else {}))
    if (static or not progs_per_sm) and programs is None:
        key = (x.dtype, n, tuple(sorted(meta.items())))
        if key not in _FIT:
            _FIT[key] = fit(_softmax_pipe.warmup(*args, grid=(1,), **meta), warps)
        progs_per_sm = _FIT[key]
    if programs is None:
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count * progs_per_sm
    h = _softmax_pipe[(min(m * p, programs),)](*args, **meta)
    return y, h


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("softmax_pipe_probe needs a CUDA GPU (it times kernels; see lab/findings)")
    from implementations.softmax.triton import _CHOSEN, softmax_triton

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
        cfgs = []  # (chunk, warps, programs an SM (0: as many as fit), pairs, maxnreg, load eviction policy)
        if x.element_size() == 2:
            cfgs += [(8192, 4, 0, True, 80, ""), (16384, 8, 0, True, 80, ""), (8192, 8, 0, True, 44, ""),
                     (8192, 4, 0, True, 96, "")]
        cfgs += [(4096, 4, 0, False, 80, "")]
        for early in (False, True):
            for blk, w, g, pairs, mr, ev in cfgs:
                grid = "tickets" + (f", {g}/SM" if g else ", all resident") + (", early" if early else "")
                rows.append(variant_row(
                    name, f"{m}x{n}", f"pipe {'pairs ' if pairs else ''}chunk {blk}, {w} warps, {grid}"
                    f"{f', maxnreg {mr}' if mr else ''}{f', {ev}' if ev else ''}", x, gb,
                    lambda y: (y.double() - ref).abs().max().item(),
                    lambda out=None: pipe(x, blk, w, g, pairs, mr, out=out, evict=ev, early=early),
                    lambda h: f"{h.n_regs} regs {h.n_spills} spills, {fit(h, w)}/SM fit"))
    print_table(rows, "max |err|")


if __name__ == "__main__":
    bench()
