"""Softmax over short rows that do not start on 16-byte boundaries, a group of rows a thread (Gluon).

A row of N=7 bf16 starts every 14 bytes, so the rows kernel (triton.py) can
prove no alignment and moves one element a lane, and its row reductions run
across the lanes that hold a row.  Here G rows, the fewest whose G * N
elements fill whole 16-byte vectors (N=7 bf16: 8 rows, 56 elements, seven
vectors), form a group, and every group starts on a 16-byte boundary.  A
program holds 32 * warps groups as a [T, GP] tile (GP, the next power of two
of G * N; the columns past G * N are masked off):

- it is read and written in 16-byte vectors, a warp's lanes on adjacent
  vectors, and passes through shared memory (16-byte vectors swizzled by row,
  so neither side has bank conflicts) to a layout where each thread owns one
  group;
- there every row's max and sum are one thread's own registers.  Each
  register's column is a compile-time constant, so the per-row selects fold
  away: no shuffle and no barrier inside a row.

Every program but the last uses a mask the compiler knows is constant over
each vector; the last one masks its whole groups the same way and takes the
fewer than G rows left one element a lane.  Raced against the rows kernel
(see triton.py); sm_90 only (the only target it is tested on); never under
the interpreter, which does not run Gluon.
"""
from __future__ import annotations

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language import core as tlc

LOG2E = gl.constexpr(1.4426950408889634)
# Most bytes of a group a thread: the tile is held as loaded and as float32, and
# float32 groups of 128 slots spill for sm_90 (8 bytes); bf16 ones of 128 do not.
MAX_GROUP_BYTES = 256
WARPS = (4, 8)  # the designs raced: warps a program


@gluon.jit
def _max_nan(a, b):
    # NaN-propagating max: max(x, -inf) is x for every x, so the compiler drops
    # the other rows' (masked) registers from a row's reduction
    return gl.maximum(a, b, propagate_nan=tlc.PropagateNan.ALL)


@gluon.jit
def _ex2(x):
    return gl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=gl.float32,
                                     is_pure=True, pack=1)


@gluon.jit
def _group_softmax(x, N: gl.constexpr, G: gl.constexpr, GP: gl.constexpr, calc: gl.constexpr):
    """x [T, GP] float32 in ``calc`` (a thread holds whole rows of x): each
    row of x is G softmax rows of N columns end to end, then padding."""
    row = gl.arange(0, GP, layout=gl.SliceLayout(0, calc))[None, :] // N
    mx = gl.zeros_like(x)
    for k in gl.static_range(G):
        seg = row == k
        m_k = gl.reduce(gl.where(seg, x, float("-inf")), 1, _max_nan)
        mx = gl.where(seg, m_k[:, None], mx)
    e = _ex2((x - mx) * LOG2E)
    inv = gl.zeros_like(x)
    for k in gl.static_range(G):
        seg = row == k
        s_k = gl.sum(gl.where(seg, e, -0.0), axis=1)  # x + -0.0 is x: the other rows' registers drop out
        inv = gl.where(seg, (1.0 / s_k)[:, None], inv)
    return e * inv


@gluon.jit
def _tile(x_ptr, y_ptr, offs, live, stage, N: gl.constexpr, G: gl.constexpr, GP: gl.constexpr,
          calc: gl.constexpr):
    stage.store(gl.load(x_ptr + offs, mask=live, other=0.0))
    gl.thread_barrier()
    y = _group_softmax(stage.load(calc).to(gl.float32), N, G, GP, calc).to(y_ptr.dtype.element_ty)
    gl.thread_barrier()  # every thread has read its group
    stage.store(y)
    gl.thread_barrier()
    gl.store(y_ptr + offs, stage.load(live.type.layout), mask=live)


@gluon.jit
def _softmax_groups(x_ptr, y_ptr, total, N: gl.constexpr, G: gl.constexpr, GP: gl.constexpr, VEC: gl.constexpr,
                    num_warps: gl.constexpr):
    T: gl.constexpr = 32 * num_warps  # groups a program
    GW: gl.constexpr = G * N
    calc: gl.constexpr = gl.BlockedLayout([1, GP], [32, 1], [num_warps, 1], [1, 0])
    io: gl.constexpr = gl.BlockedLayout([1, VEC], [32 * VEC // GP, GP // VEC], [num_warps, 1], [1, 0])
    t = gl.arange(0, T, layout=gl.SliceLayout(1, io))[:, None]
    c = gl.arange(0, GP, layout=gl.SliceLayout(0, io))[None, :]
    first = gl.program_id(0).to(gl.int64) * T  # the program's first group
    offs = (first + t) * GW + c
    stage = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [T, GP], gl.SwizzledSharedLayout(VEC, 1, 8, [1, 0]))
    groups = total // GW  # whole groups; then fewer than G rows
    if first + T <= groups:
        _tile(x_ptr, y_ptr, offs, (t >= 0) & (c < GW), stage, N, G, GP, calc)
    else:
        _tile(x_ptr, y_ptr, offs, (first + t < groups) & (c < GW), stage, N, G, GP, calc)
        rest = total - groups * GW
        if rest > 0:
            # the rows left over, one element a lane (a thread holding a group's
            # slots would need a 64-bit address for each)
            lanes: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
            cl = gl.arange(0, GP, layout=gl.SliceLayout(0, lanes))[None, :]
            o = groups * GW + cl
            x = gl.load(x_ptr + o, mask=cl < rest, other=0.0)
            y = _group_softmax(x.to(gl.float32), N, G, GP, lanes)
            gl.store(y_ptr + o, y.to(y_ptr.dtype.element_ty), mask=cl < rest)


def group_rows(n: int, dtype_bytes: int) -> int:
    """G: the fewest rows whose elements fill whole 16-byte vectors."""
    vec = 16 // dtype_bytes
    return vec // math.gcd(n, vec)


def slots(n: int, dtype_bytes: int) -> int:
    """GP: a group's columns in the tile (G * N to the next power of two)."""
    return triton.next_power_of_2(group_rows(n, dtype_bytes) * n)


def fits(n: int, dtype_bytes: int) -> bool:
    """Widths the kernel is raced at: rows the rows kernel cannot prove 16-byte
    aligned (N % 16 != 0, see _triton_plan.unaligned) whose group fits a thread."""
    return n % 16 != 0 and slots(n, dtype_bytes) * dtype_bytes <= MAX_GROUP_BYTES


def available(x: torch.Tensor) -> bool:
    return x.is_cuda and torch.cuda.get_device_capability(x.device)[0] == 9


def label(n: int, dtype_bytes: int, warps: int) -> str:
    return f"groups G={group_rows(n, dtype_bytes)} warps={warps}"


def softmax(x: torch.Tensor, y: torch.Tensor, warps: int) -> None:
    """y = softmax(x) over the last dim; x and y contiguous, 16-byte aligned, of one dtype."""
    n = x.shape[-1]
    total = x.numel()
    g = group_rows(n, x.element_size())
    _softmax_groups[(triton.cdiv(total, 32 * warps * g * n),)](x, y, total, N=n, G=g, GP=slots(n, x.element_size()),
                                                               VEC=16 // x.element_size(), num_warps=warps)
