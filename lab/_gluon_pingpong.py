"""A persistent warp-specialized matmul for sm_90 in Gluon, for lab/gemm_pingpong:
two consumer warpgroups that take turns on the tensor cores, one loading warp.

The suite's persistent Triton kernel computes a tile and then stores it with
the same warps, so the tensor cores wait through every epilogue.  Here a
program (one an SM) walks tiles tile, tile + NUM_SMS, ... and hands them to two
consumer warpgroups in turn, each with a whole BLOCK_M x BLOCK_N accumulator:

    loading warp:  A and B boxes of every tile's k-steps, in tile order, into
                   a ring of STAGES slots (TMA), a slot refilled once the
                   consumer that read it gives it back
    consumer 0:    the program's tiles 0, 2, 4, ...
    consumer 1:    tiles 1, 3, 5, ...

The ring fills in tile order, so one consumer's k-steps follow the other's:
while one runs its tile's MMAs, the other stores its last tile and waits for
the data of its next one.

Each slot has a "full" barrier per consumer.  With one shared full barrier a
slot, a consumer that skips the other's fills of a slot waits on a parity that
an older phase also had and can wake on the wrong fill: the kernel then read
slots being refilled and crashed or hung.  A consumer's own barrier advances
only with its own fills, which cannot run two ahead of it (the fill after one
of its steps waits for that step's release), so it keeps one phase bit a slot.

CONSUMERS = 1 gives every tile to consumer 0 (the other idles); STORE picks
the epilogue: "tma" (from a staging tile a consumer, by TMA) or "pointer"
(masked stores from registers).
"""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

GROUP_M = 8
CONSUMER_REGS = 232


@gluon.jit
def _coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped ordering: GROUP_M consecutive row-blocks walk the columns together."""
    per_group = GROUP_M * num_pid_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@gluon.jit
def _loads(a_desc, b_desc, a_smem, b_smem, full, empty, M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
           BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr,
           CONSUMERS: gl.constexpr):
    """The loading warp: every k-step of this program's tiles, in order, each
    signalled on its consumer's full barrier of the slot."""
    start = gl.program_id(0)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    g = 0
    j = 0
    for tile in range(start, num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _coords(tile, num_pid_m, num_pid_n, GROUP_M)
        owner = j % CONSUMERS
        for k in range(k_tiles):
            slot = g % STAGES
            # the slot's previous fill (step g - STAGES) must have been read
            mbarrier.wait(empty.index(slot), ((g // STAGES) - 1) & 1, pred=g >= STAGES)
            bar = full.index(owner * STAGES + slot)
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BLOCK_M, k * BLOCK_K], bar, a_smem.index(slot))
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, pid_n * BLOCK_N], bar, b_smem.index(slot))
            g += 1
        j += 1


@gluon.jit
def _consume(c: gl.constexpr, a_smem, b_smem, c_smem, full, empty, c_desc, c_ptr, M, N, K, BLOCK_M: gl.constexpr,
             BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
             NUM_SMS: gl.constexpr, CONSUMERS: gl.constexpr, TMA_STORE: gl.constexpr):
    """Consumer c: this program's tiles c, c + CONSUMERS, ..."""
    start = gl.program_id(0)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    staging = c_smem.index(c)
    first = start + c * NUM_SMS
    if c >= CONSUMERS:
        first = num_pid_m * num_pid_n  # no tiles
    i = c
    bits = 0  # the parity of each slot's next fill for this consumer
    for tile in range(first, num_pid_m * num_pid_n, CONSUMERS * NUM_SMS):
        pid_m, pid_n = _coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=acc_layout)
        g = i * k_tiles
        for k in range(k_tiles):
            slot = g % STAGES
            mbarrier.wait(full.index(c * STAGES + slot), (bits >> slot) & 1)
            bits ^= 1 << slot
            acc = warpgroup_mma(a_smem.index(slot), b_smem.index(slot), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])  # step g - 1's group is done: give its slot back
            mbarrier.arrive(empty.index((g + STAGES - 1) % STAGES), pred=k > 0)
            g += 1
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(empty.index((g + STAGES - 1) % STAGES))
        if TMA_STORE:
            tma.store_wait(0)  # this consumer's previous store has left the staging tile
            staging.store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], staging)
        else:
            rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
            cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_layout))
            offs = gl.expand_dims(rows.to(gl.int64), 1) * N + gl.expand_dims(cols, 0)
            mask = gl.expand_dims(rows < M, 1) & gl.expand_dims(cols < N, 0)
            gl.store(c_ptr + offs, acc.to(c_desc.dtype), mask=mask)
        i += CONSUMERS
    tma.store_wait(0)


@gluon.jit
def pingpong_kernel(a_desc, b_desc, c_desc, c_ptr, M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr,
                    CONSUMERS: gl.constexpr, TMA_STORE: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                    num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    c_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], c_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [2 * STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(full.index(s), count=1)
        mbarrier.init(full.index(STAGES + s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    gl.warp_specialize([
        (_consume, (0, a_smem, b_smem, c_smem, full, empty, c_desc, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                    STAGES, GROUP_M, NUM_SMS, CONSUMERS, TMA_STORE)),
        (_consume, (1, a_smem, b_smem, c_smem, full, empty, c_desc, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                    STAGES, GROUP_M, NUM_SMS, CONSUMERS, TMA_STORE)),
        (_loads, (a_desc, b_desc, a_smem, b_smem, full, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M,
                  NUM_SMS, CONSUMERS)),
    ], [4, 1], [CONSUMER_REGS, 24])


def matmul(a: torch.Tensor, b: torch.Tensor, bm: int, bn: int, bk: int, stages: int, num_sms: int,
           consumers: int = 2, tma_store: bool = True) -> torch.Tensor:
    """A @ B for contiguous, 16-byte aligned (M, K) and (K, N) operands of one 16-bit dtype."""
    M, K = a.shape
    N = b.shape[1]
    gdt = gl.bfloat16 if a.dtype == torch.bfloat16 else gl.float16
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], gdt))
    b_desc = TensorDescriptor.from_tensor(b, [bk, bn], gl.NVMMASharedLayout.get_default_for([bk, bn], gdt))
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn], gl.NVMMASharedLayout.get_default_for([bm, bn], gdt))
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    pingpong_kernel[(max(1, min(num_sms, tiles)),)](
        a_desc, b_desc, c_desc, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, STAGES=stages, GROUP_M=GROUP_M,
        NUM_SMS=num_sms, CONSUMERS=consumers, TMA_STORE=tma_store, CONSUMER_REGS=CONSUMER_REGS, num_warps=4)
    return c
