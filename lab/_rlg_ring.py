"""Rows of residual_layernorm_gelu streamed through shared memory by TMA, for sm_90 (Gluon):
the kernel lab/rlg_ring.py times (it lost to the shipped kernels; its findings file
has the figures).

The register kernels (implementations/residual_layernorm_gelu/triton.py) load a row, reduce it, then normalise and
store it, one phase after another; with one or two programs an SM, HBM idles
through the reductions, and rows whose width is not a whole number of 16-byte
vectors are read one element a load.  Here one persistent program an SM keeps
HBM busy whatever the row's width:

- a loading warp copies rows of x and r into a ring of STAGES shared-memory
  slots by TMA, several rows ahead.  The copies are 1-D boxes of CHUNK
  elements of the flat (M*N) tensors from the 16-byte boundary at or before
  the row's start (TMA's start must be 16-byte aligned: an odd bf16 start
  faults with an illegal instruction).  A box that runs past the row reads
  the next row's first elements (or TMA's zeros past the end), which the
  consumers mask.
- two consumer partitions take alternate rows (SKIP: they only wait for a
  slot and give it back, which times the loads alone).  Each reads its slot twice:
  once for the row's mean and variance (sums of h - K and (h - K)^2, K the
  mean of the row's first group of chunks, which keeps the one-pass variance
  free of cancellation), once to normalise, scale, shift, apply GELU and
  store.  Then it gives the slot back to the loading warp.

Each slot has a `ready` barrier that counts CHUNKS arrivals (one a chunk, with
its bytes; chunks past the row arrive without bytes) and an `empty` barrier
that its consumer arrives at.  Row offsets are int32: the tensors must hold
fewer than 2^31 elements.
"""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from implementations._shared.gelu_math import AS_C1, AS_C2, AS_C3, AS_C4, AS_C5, AS_P, NEG_K2, SQRT1_2

SMEM_BUDGET = 227 * 1024 - 1024  # bytes for the ring on sm_90: a CTA's 227 KB, less barriers and reduction scratch
CHUNK = 256  # elements a TMA box (TMA's largest box dimension)
MAX_STAGES = 6
LOADER_REGS = 40


@gluon.jit
def _mufu(x, op: gl.constexpr):
    return gl.inline_asm_elementwise(op + ".approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=gl.float32, is_pure=True,
                                     pack=1)


@gluon.jit
def _gelu(x, EXACT: gl.constexpr):
    """x * Phi(x) in float32."""
    if EXACT:
        return 0.5 * x * (1.0 + gl.erf(x * SQRT1_2))
    else:
        ax = gl.abs(x)
        t = _mufu(1.0 + (AS_P * SQRT1_2) * ax, "rcp")
        q = t * (AS_C1 + t * (AS_C2 + t * (AS_C3 + t * (AS_C4 + t * AS_C5)))) * _mufu(x * (x * NEG_K2), "ex2")
        return gl.maximum(x, 0.0) - ax * q


@gluon.jit
def _loads(x_desc, r_desc, xs, rs, ready, empty, M, N, n_chunks, G: gl.constexpr, NG: gl.constexpr,
           STAGES: gl.constexpr):
    """The loading warp: this program's rows, in order, into the ring."""
    CH: gl.constexpr = x_desc.block_type.shape[0]
    ALIGN: gl.constexpr = 128 // x_desc.dtype.primitive_bitwidth
    BYTES: gl.constexpr = 2 * x_desc.block_type.nbytes
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    i = 0
    for row in range(pid, M, nprog):
        slot = i % STAGES
        mbarrier.wait(empty.index(slot), ((i // STAGES) - 1) & 1, pred=i >= STAGES)
        bar = ready.index(slot)
        start = row * N
        start -= start % ALIGN  # TMA reads from 16-byte boundaries only
        for c in range(NG * G):
            live = c < n_chunks
            mbarrier.expect(bar, BYTES, pred=live)
            mbarrier.arrive(bar, pred=c >= n_chunks)
            at = slot * (NG * G) + c
            tma.async_copy_global_to_shared(x_desc, [start + c * CH], bar, xs.index(at), pred=live)
            tma.async_copy_global_to_shared(r_desc, [start + c * CH], bar, rs.index(at), pred=live)
        i += 1


@gluon.jit
def _h(xs, rs, part, layout: gl.constexpr):
    return xs.index(part).load(layout).to(gl.float32) + rs.index(part).load(layout).to(gl.float32)


@gluon.jit
def _consume(xs, rs, ready, empty, w_ptr, b_ptr, y_ptr, M, N, eps, n_groups, which,
             G: gl.constexpr, NG: gl.constexpr, STAGES: gl.constexpr, EXACT: gl.constexpr, WARPS: gl.constexpr,
             SKIP: gl.constexpr):
    """Rows i = which, which + 2, ... of this program's rows, from their slots."""
    CH: gl.constexpr = xs.type.shape[2]
    VEC: gl.constexpr = 128 // xs.type.element_ty.primitive_bitwidth  # 16 bytes a thread
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [WARPS, 1], [1, 0])
    offs = (gl.expand_dims(gl.arange(0, G, layout=gl.SliceLayout(1, layout)), 1) * CH
            + gl.expand_dims(gl.arange(0, CH, layout=gl.SliceLayout(0, layout)), 0))
    GROUP: gl.constexpr = G * CH
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    ALIGN: gl.constexpr = VEC
    i = which
    for row in range(pid + which * nprog, M, 2 * nprog):
        slot = i % STAGES
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        base = slot * NG
        if not SKIP:
            # the slot holds the row from the 16-byte boundary at or before its start:
            # element k of the slot is column k - o
            o = (row * N) % ALIGN
            cols = offs - o
            # the first group's mean is the shift K
            live = (cols >= 0) & (cols < N)
            h = gl.where(live, _h(xs, rs, base, layout), 0.0)
            k = gl.sum(gl.sum(h, 1), 0) / gl.minimum(N, GROUP - o).to(gl.float32)
            d = gl.where(live, h - k, 0.0)
            s1 = d
            s2 = d * d
            for g in range(1, n_groups):
                live = cols + g * GROUP < N
                d = gl.where(live, _h(xs, rs, base + g, layout) - k, 0.0)
                s1 += d
                s2 += d * d
            dm = gl.sum(gl.sum(s1, 1), 0) / N
            var = gl.maximum(gl.sum(gl.sum(s2, 1), 0) / N - dm * dm, 0.0)
            mean = k + dm
            rstd = gl.rsqrt(var + eps)
            out = y_ptr + row.to(gl.int64) * N
            for g in range(n_groups):
                c = cols + g * GROUP
                live = (c >= 0) & (c < N)
                h = _h(xs, rs, base + g, layout)
                w = gl.load(w_ptr + c, mask=live, other=0.0).to(gl.float32)
                b = gl.load(b_ptr + c, mask=live, other=0.0).to(gl.float32)
                y = _gelu((h - mean) * rstd * w + b, EXACT)
                gl.store(out + c, y.to(y_ptr.dtype.element_ty), mask=live)
        gl.thread_barrier()  # every warp is past its reads of the slot
        mbarrier.arrive(empty.index(slot))
        i += 2


@gluon.jit
def _rlg_ring(x_desc, r_desc, w_ptr, b_ptr, y_ptr, M, N, eps, G: gl.constexpr, NG: gl.constexpr,
              STAGES: gl.constexpr, EXACT: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
              SKIP: gl.constexpr, num_warps: gl.constexpr):
    CH: gl.constexpr = x_desc.block_type.shape[0]
    dtype: gl.constexpr = x_desc.dtype
    # a slot is NG parts of G chunks: TMA writes a chunk at a time (1-D boxes,
    # row-major), a consumer reads a part at a time through a plain 3-D view
    xs_tma = gl.allocate_shared_memory(dtype, [STAGES * NG * G, CH], x_desc.layout)
    rs_tma = gl.allocate_shared_memory(dtype, [STAGES * NG * G, CH], x_desc.layout)
    plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
    xs = xs_tma._reinterpret(dtype, [STAGES * NG, G, CH], plain)
    rs = rs_tma._reinterpret(dtype, [STAGES * NG, G, CH], plain)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=NG * G)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    n_chunks = gl.cdiv(N + 128 // dtype.primitive_bitwidth - 1, CH)  # from the 16-byte boundary before a row
    n_groups = gl.cdiv(n_chunks, G)
    gl.warp_specialize([
        (_consume, (xs, rs, ready, empty, w_ptr, b_ptr, y_ptr, M, N, eps, n_groups, 0, G, NG, STAGES, EXACT,
                    num_warps, SKIP)),
        (_consume, (xs, rs, ready, empty, w_ptr, b_ptr, y_ptr, M, N, eps, n_groups, 1, G, NG, STAGES, EXACT,
                    num_warps, SKIP)),
        (_loads, (x_desc, r_desc, xs_tma, rs_tma, ready, empty, M, N, n_chunks, G, NG, STAGES)),
    ], [num_warps, 1], [CONSUMER_REGS, LOADER_REGS])


# (G chunks a consumer reads at a time, warps a consumer): what lab/rlg_ring.py times
CONFIGS = ((4, 4), (8, 4), (4, 8))


def consumer_regs(warps: int) -> int:
    """The most registers a consumer thread may hold beside the loading warp (64K an SM)."""
    return min(240, (65536 - 32 * LOADER_REGS) // (2 * 32 * warps) // 8 * 8)


def plan(n: int, dtype_bytes: int, g: int) -> tuple[int, int] | None:
    """(NG, STAGES) for rows of n elements, or None where two slots do not fit."""
    ng = triton.cdiv(triton.cdiv(n + 16 // dtype_bytes - 1, CHUNK), g)
    slot = 2 * ng * g * CHUNK * dtype_bytes
    stages = min(MAX_STAGES, SMEM_BUDGET // slot)
    return (ng, stages) if stages >= 2 else None


def configs(n: int, dtype_bytes: int) -> list[tuple[int, int]]:
    """The CONFIGS whose ring holds two slots of rows of n elements."""
    return [c for c in CONFIGS if plan(n, dtype_bytes, c[0]) is not None]


def label(cfg: tuple) -> str:
    return "ring g{},w{}".format(*cfg)


def rlg(x, r, weight, bias, eps: float, y, g: int, warps: int, sm_count: int, skip: bool = False):
    """y = gelu(layernorm(x + r) * weight + bias) for contiguous 2-D x, r, y."""
    m, n = x.shape
    ng, stages = plan(n, x.element_size(), g)
    gdt = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float32: gl.float32}[x.dtype]
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=x.element_size() * 8, rank=1)
    x_desc, r_desc = (TensorDescriptor(t.view(-1), [m * n], [1], [CHUNK], layout) for t in (x, r))
    _rlg_ring[(min(m, sm_count),)](x_desc, r_desc, weight, bias, y, m, n, float(eps), G=g, NG=ng, STAGES=stages,
                                   EXACT=x.element_size() == 4, CONSUMER_REGS=consumer_regs(warps),
                                   LOADER_REGS=LOADER_REGS, SKIP=skip, num_warps=warps)
    return y
