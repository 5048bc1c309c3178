"""FlashAttention forward for sm_90 in Gluon, Triton's dialect with explicit
layouts, shared memory, barriers and asynchronous tensor-core ops.

The Triton kernel (_triton_flash.py) leaves every wgmma to finish before the
softmax that follows it, so a warpgroup's QK^T, softmax and P V run one after
another.  Here the order is written out, one key block ahead:

    issue S(j) = Q K(j)^T            (tensor cores, asynchronous)
    issue O += P(j-1) V(j-1)         (tensor cores, asynchronous)
    wait for S(j)                    (P V may still run)
    softmax of S(j) -> P(j), the row max's correction alpha(j)
    wait for P V; O *= alpha(j)

so the exponentials of block j run while the tensor cores do block j-1's P V.
K and V blocks arrive by TMA in a ring of STAGES shared-memory slots, each
with its own barrier; Q is loaded once (and, with Q_IN_REGS, held in
registers as QK^T's A operand, which spares the shared memory a read of Q
every block).  A program holds BLOCK_M query rows of one head, 64 rows a
warpgroup, in one of two forms:

- _attn_fwd_sm90: every warp computes and refills a slot, STAGES blocks
  ahead, once all are past the P V that read it.
- _attn_fwd_sm90_ws (warp-specialized): two or three consumer warpgroups of
  64 rows and one loading warp; a consumer gives a slot back through a barrier
  that counts them all, so they are not tied to each other and one's softmax
  can run beside another's MMAs.

The tensors are read as (B*H*S, D) row-major views: a key block that runs past
S reads the next head's first rows (or TMA's zeros past the end), which the
mask gives zero weight; O is stored with a row mask, so nothing past S is
written.
"""
from __future__ import annotations

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

@gluon.jit
def _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, row, slot, pred):
    mbarrier.expect(k_bars.index(slot), k_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(k_desc, [row, 0], k_bars.index(slot), k_smem.index(slot), pred=pred)
    mbarrier.expect(v_bars.index(slot), v_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(v_desc, [row, 0], v_bars.index(slot), v_smem.index(slot), pred=pred)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, offs_m, n0, S, BLOCK_N: gl.constexpr, MASK: gl.constexpr,
             CAUSAL: gl.constexpr):
    """One key block's scores into P (exp2 of scaled scores less the running
    max), the new running max and sum, and alpha, the factor that rescales
    what was accumulated under the old max."""
    if MASK:
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s.type.layout))
        keep = gl.expand_dims(offs_n < S, 0)
        if CAUSAL:
            keep = keep & (gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0))
        # a large finite negative, not -inf: never NaN after rescaling
        s = gl.where(keep, s * qk_scale, -1.0e6)
        m_new = gl.maximum(m_i, gl.max(s, 1))
        s = s - gl.expand_dims(m_new, 1)
    else:
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        s = s * qk_scale - gl.expand_dims(m_new, 1)
    p = gl.exp2(s)
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_i, alpha


@gluon.jit
def _step(j, p, acc, m_i, l_i, q_op, k_smem, v_smem, k_bars, v_bars, empty_bars, k_desc, v_desc, row0, n_blocks,
          qk_scale, offs_m, S, s_zero, p_layout: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
          MASK: gl.constexpr, CAUSAL: gl.constexpr, WS: gl.constexpr):
    """Key block j's QK^T beside block j-1's P V, then block j's softmax; block
    j-1's slot is then given back (WS: to the loading warp, which waits for both
    consumers; else refilled here once every warp is past it)."""
    slot = j % STAGES
    mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
    s = warpgroup_mma(q_op, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    prev = (j - 1) % STAGES
    mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
    p_op = gl.convert_layout(p.to(v_desc.dtype), p_layout)
    acc = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=[s])
    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N, S, BLOCK_N, MASK, CAUSAL)
    acc, p_op = warpgroup_mma_wait(0, deps=[acc, p_op])
    if WS:
        mbarrier.arrive(empty_bars.index(prev))
    else:
        gl.thread_barrier()
        nxt = j - 1 + STAGES
        _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, row0 + nxt * BLOCK_N, prev, nxt < n_blocks)
    alpha = gl.convert_layout(alpha, gl.SliceLayout(1, acc.type.layout))
    acc = acc * gl.expand_dims(alpha, 1)
    return p, acc, m_i, l_i


@gluon.jit
def _consume(q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S, qk_scale,
             row0, first_row, n_blocks, mask_from, HEAD_DIM: gl.constexpr, ROWS: gl.constexpr,
             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, Q_IN_REGS: gl.constexpr,
             WS: gl.constexpr, WARPS: gl.constexpr):
    """ROWS query rows from first_row (of this head) over key blocks [0, n_blocks),
    masked from block mask_from on; O's rows below S stored."""
    dtype: gl.constexpr = v_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

    offs_m = first_row + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([ROWS], gl.float32, layout=gl.SliceLayout(1, s_layout))
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)

    mbarrier.wait(q_bar, 0)
    if Q_IN_REGS:  # QK^T's A operand from registers: no shared-memory reads of Q a block
        q_op = q_smem.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        q_op = q_smem
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_op, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=[s])
    if mask_from == 0:
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, 0, S, BLOCK_N, True, CAUSAL)
    else:
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, 0, S, BLOCK_N, False, CAUSAL)

    for j in range(1, gl.maximum(mask_from, 1)):
        p, acc, m_i, l_i = _step(j, p, acc, m_i, l_i, q_op, k_smem, v_smem, k_bars, v_bars, empty_bars, k_desc,
                                 v_desc, row0, n_blocks, qk_scale, offs_m, S, s_zero, p_layout, BLOCK_N, STAGES,
                                 False, CAUSAL, WS)
    for j in range(gl.maximum(mask_from, 1), n_blocks):
        p, acc, m_i, l_i = _step(j, p, acc, m_i, l_i, q_op, k_smem, v_smem, k_bars, v_bars, empty_bars, k_desc,
                                 v_desc, row0, n_blocks, qk_scale, offs_m, S, s_zero, p_layout, BLOCK_N, STAGES,
                                 True, CAUSAL, WS)

    last = n_blocks - 1
    mbarrier.wait(v_bars.index(last % STAGES), (last // STAGES) & 1)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    acc = warpgroup_mma(p_op, v_smem.index(last % STAGES), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=[acc])

    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    out = (acc / gl.expand_dims(l_o, 1)).to(dtype)
    rows = first_row + gl.arange(0, ROWS, layout=gl.SliceLayout(1, o_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    offs = (row0.to(gl.int64) + gl.expand_dims(rows, 1)) * HEAD_DIM + gl.expand_dims(cols, 0)
    gl.store(O + offs, out, mask=gl.expand_dims(rows < S, 1))


@gluon.jit
def _blocks(S, first, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """The key blocks that query rows [first, first + ROWS) fold in, and the
    first that needs a mask."""
    if CAUSAL:
        hi = gl.minimum(first + ROWS, S)
        # blocks from here on hold keys past some row of these, or past S
        mask_from = gl.minimum(first, S) // BLOCK_N
    else:
        hi = S
        mask_from = S // BLOCK_N
    return gl.cdiv(hi, BLOCK_N), mask_from


@gluon.jit
def _query_block(CAUSAL: gl.constexpr):
    if CAUSAL:
        # the last query blocks see the most keys: start them first
        return gl.num_programs(0) - 1 - gl.program_id(0)
    else:
        return gl.program_id(0)


@gluon.jit
def _ring(q_desc, k_desc, v_desc, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
          STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
    """Shared memory for Q and STAGES slots of K and V, each with its barrier,
    initialised; warp-specialized (CONSUMERS > 0) adds the slots' empty
    barriers, each counting every consumer (otherwise the k_bars stand in for
    them, never waited on as such)."""
    dtype: gl.constexpr = q_desc.dtype
    if CONSUMERS > 0:  # Q as a 64-row box a consumer (a TMA box's sides are powers of two)
        q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, 64, HEAD_DIM], q_desc.layout)
    else:
        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    if CONSUMERS > 0:
        empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    else:
        empty_bars = k_bars
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
        if CONSUMERS > 0:
            mbarrier.init(empty_bars.index(i), count=CONSUMERS)
    fence_async_shared()
    return q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars


@gluon.jit
def _attn_fwd_sm90(q_desc, k_desc, v_desc, O, S, qk_scale,
                   HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, Q_IN_REGS: gl.constexpr, num_warps: gl.constexpr):
    """Every warp computes; the K/V loads are issued from the loop."""
    start_m = _query_block(CAUSAL)
    row0 = gl.program_id(1) * S  # this head's first row in the (B*H*S, D) views
    q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars = _ring(q_desc, k_desc, v_desc, BLOCK_M, BLOCK_N,
                                                                       HEAD_DIM, STAGES, 0)
    n_blocks, mask_from = _blocks(S, start_m * BLOCK_M, BLOCK_M, BLOCK_N, CAUSAL)

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [row0 + start_m * BLOCK_M, 0], q_bar, q_smem)
    for i in gl.static_range(STAGES):
        _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, row0 + i * BLOCK_N, i, i < n_blocks)
    _consume(q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S, qk_scale, row0,
             start_m * BLOCK_M, n_blocks, mask_from, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS,
             False, num_warps)


@gluon.jit
def _ws_loads(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, row0, q_row,
              n_blocks, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
    """The loading warp: Q once, then K and V block after block into the ring,
    each slot once every consumer has given it back."""
    mbarrier.expect(q_bar, CONSUMERS * q_desc.block_type.nbytes)
    for c in gl.static_range(CONSUMERS):
        tma.async_copy_global_to_shared(q_desc, [q_row + c * 64, 0], q_bar, q_smem.index(c))
    for j in range(n_blocks):
        slot = j % STAGES
        mbarrier.wait(empty_bars.index(slot), ((j // STAGES) - 1) & 1, pred=j >= STAGES)
        _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, row0 + j * BLOCK_N, slot, True)


@gluon.jit
def _ws_consume(c: gl.constexpr, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                qk_scale, row0, first, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                CAUSAL: gl.constexpr, Q_IN_REGS: gl.constexpr):
    """Consumer c's partition: query rows [first + 64 c, first + 64 c + 64) over
    the key blocks those rows see.  With CAUSAL the consumers below the last
    stop short of it on the diagonal; the blocks they skip are the last ones
    loaded, whose slots the loading warp never waits for."""
    n_blocks, mask_from = _blocks(S, first + c * 64, 64, BLOCK_N, CAUSAL)
    _consume(q_smem.index(c), k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
             qk_scale, row0, first + c * 64, n_blocks, mask_from, HEAD_DIM, 64, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS,
             True, 4)


@gluon.jit
def _attn_fwd_sm90_ws(q_desc, k_desc, v_desc, O, S, qk_scale,
                      HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      STAGES: gl.constexpr, CAUSAL: gl.constexpr, Q_IN_REGS: gl.constexpr,
                      CONSUMER_REGS: gl.constexpr, num_warps: gl.constexpr):
    """Warp-specialized: BLOCK_M / 64 consumer warpgroups (2 or 3; the default
    partition and workers) and one loading warp; no barrier ties the consumers
    to each other, so one's softmax can run beside another's MMAs."""
    CONSUMERS: gl.constexpr = BLOCK_M // 64
    start_m = _query_block(CAUSAL)
    row0 = gl.program_id(1) * S
    q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars = _ring(q_desc, k_desc, v_desc, BLOCK_M, BLOCK_N,
                                                                       HEAD_DIM, STAGES, CONSUMERS)
    first = start_m * BLOCK_M
    n_blocks = _blocks(S, first, BLOCK_M, BLOCK_N, CAUSAL)[0]  # the loading warp: every block any consumer sees
    # (the partitions are written out twice: a Gluon value cannot hold a function)
    if CONSUMERS == 3:
        gl.warp_specialize([
            (_ws_consume, (0, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                           qk_scale, row0, first, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS)),
            (_ws_consume, (1, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                           qk_scale, row0, first, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS)),
            (_ws_consume, (2, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                           qk_scale, row0, first, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS)),
            (_ws_loads, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, row0,
                         row0 + first, n_blocks, BLOCK_N, STAGES, CONSUMERS)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 24])
    else:
        gl.warp_specialize([
            (_ws_consume, (0, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                           qk_scale, row0, first, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS)),
            (_ws_consume, (1, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, k_desc, v_desc, O, S,
                           qk_scale, row0, first, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, Q_IN_REGS)),
            (_ws_loads, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, empty_bars, row0,
                         row0 + first, n_blocks, BLOCK_N, STAGES, CONSUMERS)),
        ], [4, 1], [CONSUMER_REGS, 24])


# (BLOCK_M, BLOCK_N, STAGES, warps, Q in registers, warp-specialized) per head
# dim: a slot holds a K and a V block, Q takes BLOCK_M x D, 64 rows a warpgroup.
# Unspecialized, a CTA is one warpgroup, two of them an SM, so that one's
# softmax runs beside the other's MMAs (two warpgroups in one CTA would meet at
# the slot's barrier every block and take their softmaxes together).
CONFIGS = {64: ((64, 64, 4, 4, 1, 0), (128, 128, 3, 4, 0, 1), (128, 128, 3, 4, 1, 1), (192, 64, 4, 4, 1, 1)),
           128: ((64, 64, 3, 4, 1, 0), (128, 64, 4, 4, 1, 1), (128, 64, 4, 4, 0, 1))}
# registers a consumer warpgroup, by consumers: with the loading warp's 24 they
# must fit the SM's 64K (the loading warp counts as a whole warpgroup).  Three
# consumers of 160 hold D = 64 without spilling, not D = 128.
CONSUMER_REGS = {2: 240, 3: 160}


def label(cfg: tuple) -> str:
    """A config in short, as the race lists it: 'gluon 64x64,s3,w4,q1' (',ws' if warp-specialized)."""
    return "gluon {}x{},s{},w{},q{}".format(*cfg[:5]) + (",ws" if cfg[5] else "")


def describe(cfg: tuple) -> str:
    """A config in full, for the results' config column."""
    return "gluon BLOCK_M={} BLOCK_N={} stages={} warps={} q_in_regs={} warp_specialized={}".format(*cfg)


def available(q: torch.Tensor) -> bool:
    """sm_90 (wgmma and TMA) and the shapes the kernel is written for."""
    return (q.is_cuda and torch.cuda.get_device_capability(q.device)[0] == 9
            and q.shape[-1] in CONFIGS and q.dtype in (torch.float16, torch.bfloat16)
            and q.shape[0] * q.shape[1] * q.shape[2] < 2**31)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, block_m: int, block_n: int,
              stages: int, warps: int, q_in_regs: int, ws: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for contiguous (B, H, S, D) tensors of one dtype (into
    ``out`` where given), B x H at most head_dims.MAX_HEADS."""
    B, H, S, D = q.shape
    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    o = torch.empty_like(q) if out is None else out
    q2, k2, v2 = (t.view(B * H * S, D) for t in (q, k, v))
    q_rows = 64 if ws else block_m  # a consumer's box, or the whole block
    q_desc = TensorDescriptor.from_tensor(q2, [q_rows, D], gl.NVMMASharedLayout.get_default_for([q_rows, D], gdt))
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, D], gdt)
    k_desc = TensorDescriptor.from_tensor(k2, [block_n, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v2, [block_n, D], kv_layout)
    grid = (triton.cdiv(S, block_m), B * H)
    args = (q_desc, k_desc, v_desc, o, S, math.log2(math.e) / math.sqrt(D))
    meta = dict(HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, STAGES=stages, CAUSAL=bool(causal),
                Q_IN_REGS=bool(q_in_regs), num_warps=warps)
    if ws:
        _attn_fwd_sm90_ws[grid](*args, CONSUMER_REGS=CONSUMER_REGS[block_m // 64], **meta)
    else:
        _attn_fwd_sm90[grid](*args, **meta)
    return o
