"""Can a Triton softmax over rows of 3-16 columns read and write in 16-byte vectors?

``python3 -m lab.softmax_tiny_flat`` on the H200.  The shipped rows kernel
holds such rows as a [ROWS, next_pow2(N)] block; at N=7 a row starts every 14
bytes (bf16), so the compiler can prove no alignment and every lane moves one
element, and the row's reductions run across the lanes that hold it.  In the
committed fuzz runs bf16 3021808 x 7 took as long as float32 (0.42 of copy
against 0.83): a cost per element, not per byte.

Here a program's ROWS rows are one contiguous stretch of ROWS * N elements,
which starts on a 16-byte boundary whenever ROWS * N * size is a multiple of
16: it is loaded and stored flat, in 16-byte vectors, and tl.gather (through
shared memory) turns it into the [ROWS, BN] block and back.  Full blocks run
in one launch with a mask the compiler knows is constant over each vector;
the last, partial block in a second launch with an element mask.  Each
variant is checked against float64 on a NaN-poisoned output, then timed in
paired rounds beside the registered torch, triton and cuda implementations.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from lab._probe import check_poisoned, paired_rounds, registered_cases

SHAPES = [(3021808, 7), (3813928, 3), (657893, 5), (1000003, 12)]
DESIGNS = [(128, 4), (256, 4), (256, 8), (512, 8)]  # (ROWS, warps)
ROUNDS = 9


@triton.jit
def _halve(x, SLOTS: tl.constexpr, MAX: tl.constexpr):
    """[SLOTS] -> [SLOTS // 2]: adjacent slots combined (tl.split: a pair in one thread)."""
    a, b = tl.split(tl.reshape(x, (SLOTS // 2, 2)))
    if MAX:
        return tl.maximum(a, b)
    return a + b


@triton.jit
def _per_row(x, ROWS: tl.constexpr, BN: tl.constexpr, MAX: tl.constexpr):
    """The max (MAX) or sum of each row of the flat slots x [ROWS * BN] (BN <= 16): [ROWS]."""
    if BN >= 16:
        x = _halve(x, ROWS * 16, MAX)
    if BN >= 8:
        x = _halve(x, ROWS * 8, MAX)
    if BN >= 4:
        x = _halve(x, ROWS * 4, MAX)
    return _halve(x, ROWS * 2, MAX)


@triton.jit
def _to_slots(v, ROWS: tl.constexpr, BN: tl.constexpr):
    """Each row's value [ROWS] repeated over its BN slots [ROWS * BN] (tl.join: in one thread)."""
    v = tl.reshape(tl.join(v, v), (ROWS * 2,))
    if BN >= 4:
        v = tl.reshape(tl.join(v, v), (ROWS * 4,))
    if BN >= 8:
        v = tl.reshape(tl.join(v, v), (ROWS * 8,))
    if BN >= 16:
        v = tl.reshape(tl.join(v, v), (ROWS * 16,))
    return v


@triton.jit
def _flat(x_ptr, y_ptr, M, first, N: tl.constexpr, ROWS: tl.constexpr, BN: tl.constexpr,
          FLAT: tl.constexpr, TAIL: tl.constexpr):
    f = tl.arange(0, FLAT)
    if TAIL:
        base = first.to(tl.int64) * N
        live = (f < ROWS * N) & (base + f < M * N)
    else:
        # a multiple of ROWS * N from the 16-byte aligned base, and a mask constant over
        # each 16-byte vector: the compiler can prove both
        base = tl.program_id(0).to(tl.int64) * (ROWS * N)
        live = f < ROWS * N
    xf = tl.load(x_ptr + base + f, mask=live, other=0.0)
    j = tl.arange(0, ROWS * BN)  # slot j: row j // BN, column j % BN
    col = j % BN
    xj = tl.gather(xf, tl.minimum((j // BN) * N + tl.minimum(col, N - 1), FLAT - 1), 0)
    x = tl.where(col < N, xj.to(tl.float32), float("-inf"))
    # rows reduced and broadcast over flat slots, a pair at a time (split / join keep
    # a pair in one thread): no shuffles where a thread holds its rows' slots
    e = tl.exp2((x - _to_slots(_per_row(x, ROWS, BN, True), ROWS, BN)) * 1.4426950408889634)
    y = e * _to_slots(1.0 / _per_row(e, ROWS, BN, False), ROWS, BN)
    back = tl.minimum((f // N) * BN + f % N, ROWS * BN - 1)
    yf = tl.gather(y, back, 0)
    tl.store(y_ptr + base + f, yf.to(y_ptr.dtype.element_ty), mask=live)


def flat_softmax(x: torch.Tensor, rows: int, warps: int, out: torch.Tensor | None = None) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    bn = max(2, triton.next_power_of_2(n))
    flat = triton.next_power_of_2(rows * n)
    full = m // rows
    if full:
        _flat[(full,)](x, y, m, 0, N=n, ROWS=rows, BN=bn, FLAT=flat, TAIL=False, num_warps=warps)
    if m % rows:
        _flat[(1,)](x, y, m, full * rows, N=n, ROWS=rows, BN=bn, FLAT=flat, TAIL=True, num_warps=warps)
    return y


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("softmax_tiny_flat needs a CUDA GPU (it times kernels)")
    for wl, case, x, ref, calls in registered_cases("softmax", SHAPES, ("bfloat16", "float32"),
                                                    ("torch", "triton", "cuda")):
        m, n = x.shape
        for rows, warps in DESIGNS:
            if rows * n * x.element_size() % 16:
                continue
            fn = lambda rows=rows, warps=warps: flat_softmax(x, rows, warps)  # noqa: E731
            check_poisoned(f"flat {rows}/{warps}", fn, ref, wl.tolerance(case), x.dtype)
            calls[f"flat {rows}/{warps}"] = fn
        paired_rounds(calls, ROUNDS, wl.min_bytes(case) / 1e9, f"{case.dtype} {m} x {n}", peer="cuda")


if __name__ == "__main__":
    bench()
