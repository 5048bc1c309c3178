"""A and B copied into rows padded with zeros to 16 bytes, for the GEMM kernels
whose fast paths need 16-byte rows (vector loads, cp.async, TMA).

A K or N that is not a multiple of 16 bytes' worth of elements leaves a kernel
element-by-element (2-byte) loads, which feed the tensor cores at a fraction of
their rate, or, for TMA, no way in at all.  Copying A and B into aligned rows
(and C out of them after) moves 2 (MK + KN + MN) elements: a small price beside
the 2 MNK FLOPs it speeds up once 1/M + 1/N + 1/K is below PAD_BELOW, while a
skinny or small GEMM, bandwidth bound, would pay the copy in full.  The zeros
in A's extra columns and B's extra rows add nothing to C; B's extra columns
make C's extra columns, which are dropped.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

PAD_BELOW = 1 / 256


def per16(t: torch.Tensor) -> int:
    """Elements of t's dtype in 16 bytes."""
    return 16 // t.element_size()


def rows_aligned(t: torch.Tensor) -> bool:
    """Whether t's rows are contiguous, their width and stride multiples of 16
    bytes, from a 16-byte aligned base."""
    e = per16(t)
    return (t.stride(1) == 1 and t.shape[1] % e == 0 and t.stride(0) % e == 0
            and t.data_ptr() % 16 == 0)


def padded_dims(k: int, n: int, itemsize: int) -> tuple[int, int]:
    """K and N rounded up to 16 bytes' worth of elements of this size."""
    e = 16 // itemsize
    return -(-k // e) * e, -(-n // e) * e


def pays(m: int, n: int, k: int) -> bool:
    """Whether padding a GEMM of this shape costs little beside its FLOPs."""
    return 1 / m + 1 / n + 1 / k < PAD_BELOW


def pad_operands(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Zero-padded copies of A (K to a multiple of 16 bytes) and B (K and N), each
    only where it needs one; None where both are aligned already."""
    if rows_aligned(a) and rows_aligned(b):
        return None
    k, n = a.shape[1], b.shape[1]
    kp, np_ = padded_dims(k, n, a.element_size())
    a2 = a if rows_aligned(a) else F.pad(a, (0, kp - k))
    b2 = b if rows_aligned(b) and kp == k else F.pad(b, (0, np_ - n, 0, kp - k))
    return a2, b2


def unpad(c: torch.Tensor, n: int) -> torch.Tensor:
    """C's first n columns, contiguous."""
    return c if c.shape[1] == n else c[:, :n].contiguous()


def padded_text(k: int, n: int, itemsize: int) -> str:
    """The config note of a padded call ('' where nothing is padded)."""
    kp, np_ = padded_dims(k, n, itemsize)
    if kp == k and np_ == n:
        return ""
    return f" (rows padded to 16 bytes: K {k}->{kp}, N {n}->{np_})"


LINE = 128  # bytes of an L2 line


def stride_on_lines(rows: int, stride: int, itemsize: int) -> bool:
    """Whether every one of ``rows`` rows ``stride`` elements apart starts on a
    128-byte line (the base on one, as the caching allocator's are)."""
    return rows <= 1 or (stride * itemsize) % LINE == 0


def on_lines(t: torch.Tensor) -> bool:
    """Whether every row of t starts on a 128-byte line: stride_on_lines of its rows."""
    return stride_on_lines(t.shape[0], t.stride(0), t.element_size())


def onto_lines(t: torch.Tensor) -> torch.Tensor:
    """t itself where its rows start on 128-byte lines; else a copy whose rows
    lie a whole number of lines apart (a view of wider rows, the columns past
    t's width left unwritten, for kernels that take a row stride)."""
    if on_lines(t):
        return t
    per_line = LINE // t.element_size()
    wide = t.new_empty((t.shape[0], -(-t.shape[1] // per_line) * per_line))
    view = wide[:, :t.shape[1]]
    size = t.element_size()
    word = t.shape[1] * size % 8 == 0 and t.stride(0) * size % 8 == 0 and t.data_ptr() % 8 == 0
    if word and t.stride(1) == 1:
        # In 8-byte words: element by element the strided copy is far slower
        # (lab/findings/gemm_row_align-c52569a.txt).
        view.view(torch.int64).copy_(t.view(torch.int64))
    else:
        view.copy_(t)
    return view
