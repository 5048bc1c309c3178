"""Row ops over short rows that are not 16-byte multiples, a group of rows a thread (Gluon).

A row of N=7 bf16 starts every 14 bytes, so the Triton rows kernels can
prove no alignment and move one element a lane, and their row reductions run
across the lanes that hold a row.  Here G rows, the fewest whose G * N
elements fill whole 16-byte vectors (N=7 bf16: 8 rows, 56 elements, seven
vectors), form a group, and every group starts on a 16-byte boundary.  A
program holds 32 * warps groups as a [T, GP] tile (GP, the next power of two
of G * N; the columns past G * N are masked off):

- it is read and written in 16-byte vectors, a warp's lanes on adjacent
  vectors, and passes through shared memory (16-byte vectors swizzled by row,
  so neither side has bank conflicts) to a layout where each thread owns one
  group;
- there every row's reductions are one thread's own registers.  Each
  register's column is a compile-time constant, so the per-row selects fold
  away: no shuffle and no barrier inside a row.

Every program but the last uses a mask the compiler knows is constant over
each vector; the last one masks its whole groups the same way and takes the
fewer than G rows left one element a lane.  Two ops: softmax (x) and
residual_layernorm_gelu (x + r, normalised, scaled by w, shifted by b,
GELU); each workload's Triton op races the kernel against its rows kernels.
sm_90 only (the only target it is tested on); never under the interpreter,
which does not run Gluon.
"""
from __future__ import annotations

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language import core as tlc

from implementations._shared.gelu_math import gelu_f32
from implementations._shared.triton_math import exp2

LOG2E = gl.constexpr(1.4426950408889634)
# Most bytes of a group a thread: the tile is held as loaded and as float32, and
# float32 groups of 128 slots spill for sm_90 (8 bytes); bf16 ones of 128 do not.
MAX_GROUP_BYTES = 256
WARPS = (4, 8)  # the designs raced: warps a program
SOFTMAX, RLG = 0, 1  # the ops (OP)
_SOFTMAX, _RLG = gl.constexpr(SOFTMAX), gl.constexpr(RLG)
# what _per_row makes of a row's values (kernels may read only constexpr globals)
ROW_MAX, ROW_INV_SUM, ROW_MEAN, ROW_RSTD = (gl.constexpr(k) for k in range(4))


@gluon.jit
def _max_nan(a, b):
    # NaN-propagating max: max(x, -inf) is x for every x, so the compiler drops
    # the other rows' (masked) registers from a row's reduction
    return gl.maximum(a, b, propagate_nan=tlc.PropagateNan.ALL)


@gluon.jit
def _per_row(v, row, eps, N: gl.constexpr, G: gl.constexpr, KIND: gl.constexpr):
    """v [T, GP] with G rows of N end to end in each tile row (``row``: each
    slot's row): every slot gets its row's max, 1 / sum, mean or
    1 / sqrt(mean + eps) (KIND)."""
    out = gl.zeros_like(v)
    for k in gl.static_range(G):
        seg = row == k
        if KIND == ROW_MAX:
            red = gl.reduce(gl.where(seg, v, float("-inf")), 1, _max_nan)
        else:
            red = gl.sum(gl.where(seg, v, -0.0), axis=1)  # x + -0.0 is x: the other rows' registers drop out
            if KIND == ROW_INV_SUM:
                red = 1.0 / red
            elif KIND == ROW_MEAN:
                red = red / N
            else:
                red = gl.rsqrt(red / N + eps)
        out = gl.where(seg, red[:, None], out)
    return out


@gluon.jit
def _group_op(h, w_ptr, b_ptr, eps, N: gl.constexpr, G: gl.constexpr, GP: gl.constexpr, calc: gl.constexpr,
              OP: gl.constexpr, EXACT: gl.constexpr):
    """The op on h [T, GP] float32 in ``calc`` (h = x, or x + r for RLG)."""
    col = gl.arange(0, GP, layout=gl.SliceLayout(0, calc))
    row = col[None, :] // N
    if OP == _SOFTMAX:
        e = exp2((h - _per_row(h, row, eps, N, G, ROW_MAX)) * LOG2E)
        return e * _per_row(e, row, eps, N, G, ROW_INV_SUM)
    else:
        d = h - _per_row(h, row, eps, N, G, ROW_MEAN)
        # w and b at each slot's column: constant offsets, the same for every thread
        wb = gl.where(col < G * N, col % N, 0)
        w = gl.load(w_ptr + wb).to(gl.float32)[None, :]
        b = gl.load(b_ptr + wb).to(gl.float32)[None, :]
        return gelu_f32(d * _per_row(d * d, row, eps, N, G, ROW_RSTD) * w + b, EXACT)


@gluon.jit
def _tile(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, eps, offs, live, stage, N: gl.constexpr, G: gl.constexpr,
          GP: gl.constexpr, calc: gl.constexpr, OP: gl.constexpr, EXACT: gl.constexpr):
    x = gl.load(x_ptr + offs, mask=live, other=0.0)
    if OP == _RLG:
        r = gl.load(r_ptr + offs, mask=live, other=0.0)
    stage.store(x)
    gl.thread_barrier()
    h = stage.load(calc).to(gl.float32)
    if OP == _RLG:
        gl.thread_barrier()  # every thread has read its group
        stage.store(r)
        gl.thread_barrier()
        h = h + stage.load(calc).to(gl.float32)
    y = _group_op(h, w_ptr, b_ptr, eps, N, G, GP, calc, OP, EXACT).to(y_ptr.dtype.element_ty)
    gl.thread_barrier()
    stage.store(y)
    gl.thread_barrier()
    gl.store(y_ptr + offs, stage.load(live.type.layout), mask=live)


@gluon.jit
def _row_groups(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, total, eps, N: gl.constexpr, G: gl.constexpr,
                GP: gl.constexpr, VEC: gl.constexpr, OP: gl.constexpr, EXACT: gl.constexpr,
                num_warps: gl.constexpr):
    T: gl.constexpr = 32 * num_warps  # groups a program
    GW: gl.constexpr = G * N
    calc: gl.constexpr = gl.BlockedLayout([1, GP], [32, 1], [num_warps, 1], [1, 0])
    io: gl.constexpr = gl.BlockedLayout([1, VEC], [32 * VEC // GP, GP // VEC], [num_warps, 1], [1, 0])
    t = gl.arange(0, T, layout=gl.SliceLayout(1, io))[:, None]
    c = gl.arange(0, GP, layout=gl.SliceLayout(0, io))[None, :]
    first = gl.program_id(0).to(gl.int64) * T  # the program's first group
    offs = (first + t) * GW + c
    stage = gl.allocate_shared_memory(y_ptr.dtype.element_ty, [T, GP], gl.SwizzledSharedLayout(VEC, 1, 8, [1, 0]))
    groups = total // GW  # whole groups; then fewer than G rows
    if first + T <= groups:
        _tile(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, eps, offs, (t >= 0) & (c < GW), stage, N, G, GP, calc, OP, EXACT)
    else:
        _tile(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, eps, offs, (first + t < groups) & (c < GW), stage, N, G, GP, calc,
              OP, EXACT)
        rest = total - groups * GW
        if rest > 0:
            # the rows left over, one element a lane (a thread holding a group's
            # slots would need a 64-bit address for each)
            lanes: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
            cl = gl.arange(0, GP, layout=gl.SliceLayout(0, lanes))[None, :]
            o = groups * GW + cl
            h = gl.load(x_ptr + o, mask=cl < rest, other=0.0).to(gl.float32)
            if OP == _RLG:
                h = h + gl.load(r_ptr + o, mask=cl < rest, other=0.0).to(gl.float32)
            y = _group_op(h, w_ptr, b_ptr, eps, N, G, GP, lanes, OP, EXACT)
            gl.store(y_ptr + o, y.to(y_ptr.dtype.element_ty), mask=cl < rest)


def group_rows(n: int, dtype_bytes: int) -> int:
    """G: the fewest rows whose elements fill whole 16-byte vectors."""
    vec = 16 // dtype_bytes
    return vec // math.gcd(n, vec)


def slots(n: int, dtype_bytes: int) -> int:
    """GP: a group's columns in the tile (G * N to the next power of two)."""
    return triton.next_power_of_2(group_rows(n, dtype_bytes) * n)


def group_fits(n: int, dtype_bytes: int) -> bool:
    """Whether a group of rows of n fits a thread."""
    return slots(n, dtype_bytes) * dtype_bytes <= MAX_GROUP_BYTES


def available(x: torch.Tensor) -> bool:
    return x.is_cuda and torch.cuda.get_device_capability(x.device)[0] == 9


def label(n: int, dtype_bytes: int, warps: int) -> str:
    return f"groups G={group_rows(n, dtype_bytes)} warps={warps}"


def launch(x: torch.Tensor, y: torch.Tensor, warps: int, r: torch.Tensor | None = None,
           w: torch.Tensor | None = None, b: torch.Tensor | None = None, eps: float = 0.0) -> None:
    """y = softmax(x) over the last dim, or with r, w and b, gelu(layernorm(x + r) * w + b).
    All contiguous, x, r and y 16-byte aligned and of one dtype (float32 rows: the exact erf)."""
    n = x.shape[-1]
    total = x.numel()
    g = group_rows(n, x.element_size())
    op = SOFTMAX if r is None else RLG
    r, w, b = (x, x, x) if op == SOFTMAX else (r, w, b)  # not read by the softmax
    _row_groups[(triton.cdiv(total, 32 * warps * g * n),)](
        x, r, w, b, y, total, float(eps), N=n, G=g, GP=slots(n, x.element_size()), VEC=16 // x.element_size(),
        OP=op, EXACT=x.element_size() == 4, num_warps=warps)
