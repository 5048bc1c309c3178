"""Prefetch of a byte range of two tensors into L2, for Triton kernels on sm_90.

A program that holds a whole row in registers (residual_layernorm_gelu's
rows of 16385..32768 columns fill an SM with one program) has no loads in
flight while it reduces, and HBM idles.  ``prefetch_l2`` asks L2 for a
later program's x and r with Hopper's bulk prefetch
(``cp.async.bulk.prefetch.L2``): no registers held, nothing waited for, and
that program's own loads then mostly hit L2.  A few threads each issue one
prefetch of a slice.  Bulk copies take 16-byte aligned addresses and sizes,
so each range is shrunk to the 16-byte words inside it (nothing outside the
tensor is touched).  Under TRITON_INTERPRET it does nothing.
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations.gelu._triton_math import PTX

SLICES = tl.constexpr(8)  # threads issuing a range's prefetch, one slice each

# $1, $2: 16-byte aligned start addresses; $3: bytes a slice (a multiple of
# 16); $4, $5: bytes of each range (multiples of 16).  Thread t issues slice t
# of both ranges where it is not empty.
_ASM = tl.constexpr("""{
.reg .pred p;
.reg .u32 t, off, sz;
.reg .u64 a;
mov.u32 t, %tid.x;
mul.lo.u32 off, t, $3;
setp.lt.u32 p, off, $4;
sub.u32 sz, $4, off;
min.u32 sz, sz, $3;
cvt.u64.u32 a, off;
add.u64 a, a, $1;
@p cp.async.bulk.prefetch.L2.global [a], sz;
setp.lt.u32 p, off, $5;
sub.u32 sz, $5, off;
min.u32 sz, sz, $3;
cvt.u64.u32 a, off;
add.u64 a, a, $2;
@p cp.async.bulk.prefetch.L2.global [a], sz;
mov.u32 $0, 0;
}""")


@triton.jit
def _aligned(ptr, count):
    """The 16-byte words inside ``count`` elements from ``ptr``: (start address, bytes)."""
    first = ptr.to(tl.int64, bitcast=True)
    last = first + count.to(tl.int64) * (ptr.dtype.element_ty.primitive_bitwidth // 8)
    start = (first + 15) // 16 * 16
    return start, tl.maximum(last // 16 * 16 - start, 0)


@triton.jit
def prefetch_l2(x_ptr, r_ptr, count):
    """Ask L2 for ``count`` elements from each of ``x_ptr`` and ``r_ptr`` (at most 2^31 bytes each)."""
    if PTX:
        xa, xn = _aligned(x_ptr, count)
        ra, rn = _aligned(r_ptr, count)
        slice_bytes = (tl.maximum(xn, rn) + (SLICES * 16 - 1)) // (SLICES * 16) * 16
        one = tl.zeros([1], tl.int64)  # the asm runs once in every thread; %tid.x picks the slice
        tl.inline_asm_elementwise(_ASM, "=r,l,l,r,r,r",
                                  [xa + one, ra + one, (slice_bytes + one).to(tl.int32), (xn + one).to(tl.int32),
                                   (rn + one).to(tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)
