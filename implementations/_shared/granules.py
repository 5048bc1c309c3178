"""A row cut at its 16-byte boundaries, for Triton kernels whose rows are not known
to be 16-byte aligned (the softmax split kernel's and rlg's team kernel's GRANULES forms).

A row [base, base + n) of a 16-byte aligned buffer, in elements of VEC to 16 bytes,
is a body of whole 16-byte granules from the first boundary at or after its start to
the last at or before its end, which loads and stores in 16-byte vectors whatever n
is; and a head and a tail of fewer than VEC elements each, accessed element by element.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def granule_row(base, n, VEC: tl.constexpr):
    """(body, tail, eoffs, emask): the body is [body, tail), a multiple of VEC
    elements, so that a mask ``cols < tail - body`` is constant over each granule;
    eoffs / emask address the head [base, min(body, end)) in the first VEC lanes and
    the tail [tail, end) in the next VEC."""
    return granule_lanes(base, n, tl.arange(0, 2 * VEC), VEC)


@triton.jit
def granule_lanes(base, n, k, VEC: tl.constexpr):
    """granule_row over lanes ``k`` of any shape that broadcasts with ``base`` (rows
    of a 2-D tile: base [ROWS, 1], k [1, Q]).  Lanes from 2 * VEC on are masked off
    by emask as they stand (they would address past the tail's end)."""
    end = base + n
    body = (base + (VEC - 1)) // VEC * VEC
    tail = tl.maximum(end // VEC * VEC, body)  # a row with no boundary inside: no body
    eoffs = tl.where(k < VEC, base + k, tail + (k - VEC))
    emask = eoffs < tl.where(k < VEC, tl.minimum(body, end), end)
    return body, tail, eoffs, emask
