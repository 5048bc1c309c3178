"""Prefetch of a byte range of two tensors into L2, for Triton kernels on sm_90.

A program that holds a whole row in registers (residual_layernorm_gelu's
rows of 16385..32768 columns fill an SM with one program) has no loads in
flight while it reduces, and HBM idles.  ``prefetch_l2`` asks L2 for a
later program's x and r with Hopper's bulk prefetch
(``cp.async.bulk.prefetch.L2``): no registers held, nothing waited for, and
that program's own loads then mostly hit L2.  Eight threads each issue one
prefetch of a slice.  Bulk copies take 16-byte aligned addresses and sizes,
so each range is shrunk to the 16-byte words inside it (nothing outside the
tensor is touched).  Under TRITON_INTERPRET it does nothing.

All of that address arithmetic runs inside the asm, behind a branch that
only those eight threads take: written in Triton around the asm, it would
run in every thread, about 100 of the parts kernel's ~1080 instructions a
thread for sm_90, in a kernel whose 16-bit form is bound by instruction
issue (at bf16 4096 x 32768: 208.2 us against 220.4 that way, and 223.6
without the prefetch; residual_layernorm_gelu/NOTES.md).
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._shared.triton_math import PTX

# One range's prefetch, thread t's slice of it: the range from byte address
# {src}, n bytes long, shrunk to the 16-byte words inside it; its bytes
# [off, off + sl), where there are any.
_RANGE = """add.u64 e, {src}, n;
and.b64 e, e, -16;
add.u64 a, {src}, 15;
and.b64 a, a, -16;
sub.s64 sz, e, a;
max.s64 sz, sz, 0;
setp.lt.s64 p, off, sz;
sub.s64 sz, sz, off;
min.s64 sz, sz, sl;
add.u64 a, a, off;
cvt.u32.u64 len, sz;
@p cp.async.bulk.prefetch.L2.global [a], len;
"""
# $1, $2: the ranges' first byte addresses; $3: bytes of each range.  Threads
# past the first 8 branch straight to the end, so that the other warps issue
# three instructions for it; thread t < 8 prefetches bytes [t * S, (t + 1) * S)
# of each range, S = ceil(bytes / 128) * 16 (8 slices of S cover a range).
_ASM = tl.constexpr("""{
.reg .pred p;
.reg .u32 t, len;
.reg .u64 a, e, n, sl, off, sz;
mov.u32 t, %tid.x;
setp.ge.u32 p, t, 8;
@p bra KS_PF_DONE;
cvt.u64.u32 n, $3;
cvt.u64.u32 off, t;
add.u64 sl, n, 127;
shr.u64 sl, sl, 7;
shl.b64 sl, sl, 4;
mul.lo.u64 off, off, sl;
""" + _RANGE.format(src="$1") + _RANGE.format(src="$2") + """KS_PF_DONE:
mov.u32 $0, 0;
}""")


@triton.jit
def prefetch_l2(x_ptr, r_ptr, count):
    """Ask L2 for ``count`` elements from each of ``x_ptr`` and ``r_ptr`` (at most 2^31 bytes each).

    May be called more than once a kernel: the asm's label is local to its { } block."""
    if PTX:
        one = tl.zeros([1], tl.int64)  # the asm runs once in every thread; %tid.x picks the slice
        nbytes = count * (x_ptr.dtype.element_ty.primitive_bitwidth // 8)
        tl.inline_asm_elementwise(_ASM, "=r,l,l,r",
                                  [x_ptr.to(tl.int64, bitcast=True) + one, r_ptr.to(tl.int64, bitcast=True) + one,
                                   (nbytes + one).to(tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)
