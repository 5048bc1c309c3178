"""float32 attention in Triton as three TF32 products (``triton:tf32x3``).

Each float32 operand x is a TF32 head h (x's top 10 mantissa bits, what a
TF32 MMA reads) plus a tail t = x - h, exact in float32 and below 2^-10 of x;
x y ~ h_x h_y + h_x t_y + t_x h_y drops only t_x t_y (2^-20 of the product)
and the tensor cores' cut of each tail to TF32 (2^-21): about float32's own
accuracy at three times TF32's work.

A kernel that splits its operands in registers holds both halves of Q there
(and of K and V on their way to shared memory): at D = 128 every tile spills
(ptxas, sm_90; NOTES.md).  So one pass first writes Q and K as their heads
followed by their tails, and V transposed (keys along the rows, for the P V
product, whose TF32 operand B must be K-major in shared memory), and the
kernel reads each tile by TMA (tensor descriptors: no per-thread addresses),
Q's two halves once into shared memory and K's and V's per key block into a
ring of stages.  P is split in registers.  The FA2 structure and the online
softmax are the float16/bfloat16 kernel's (_triton_flash.py).

Where a head has few key blocks the kernel is bound by memory, and the
passes with the kernel's reads of both halves move four times the bytes of
a kernel that reads Q, K and V once (64 against 16 an element), so below IN_KERNEL_BELOW
keys the same kernel, splitting K and V (and Q at D <= 64) as it loads them,
races the passes once per key, each timed whole.

Napkin math (H200, D = 128, 64 x 32 tiles): per key block 3 x 2 x 64 x 32 x
128 x 2 FLOP of TF32 MMA against 64 KB of K and V heads and tails from L2;
the split pass reads 12 and writes 24 bytes per (q, k, v) element, about 2%
of the time at S = 4096.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from implementations._shared.autotune import bucket
from implementations.attention._triton_flash import (INTERPRETER_CONFIG, _scale, describe, online_softmax,
                                                     tried, tuned)
from implementations.attention import head_dims
from implementations.attention.head_dims import head_dim_problem, padded_head_dim
from suite.backends import interpreting


@triton.jit
def split_tf32(x):
    """x as its TF32 head (sign, exponent, top 10 mantissa bits) and the tail x - head."""
    head = (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
    return head, x - head


@triton.jit
def _split_rows(X, OUT, N, BLOCK: tl.constexpr):
    """OUT[:N] = heads of the N elements of X, OUT[N:] = their tails."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    head, tail = split_tf32(tl.load(X + offs, mask=ok))
    tl.store(OUT + offs, head, mask=ok)
    tl.store(OUT + N + offs, tail, mask=ok)


@triton.jit
def _split_transposed(V, OUT, S, S_PAD, TAIL, D: tl.constexpr, DP: tl.constexpr, BLOCK_S: tl.constexpr):
    """V (BH, S, D) as OUT (2, BH, D, S_PAD): heads then tails (TAIL = BH D S_PAD
    elements on), keys along the rows, zeros in the columns S..S_PAD-1.  DP: D's
    power of two, the tile's width."""
    bh = tl.program_id(1).to(tl.int64)
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, DP)
    v = tl.load(V + (bh * S + offs_s[:, None]) * D + offs_d[None, :],
                mask=(offs_s[:, None] < S) & (offs_d[None, :] < D), other=0.0)
    head, tail = split_tf32(tl.trans(v))
    dst = (bh * D + offs_d[:, None]) * S_PAD + offs_s[None, :]
    ok = (offs_s[None, :] < S_PAD) & (offs_d[:, None] < D)
    tl.store(OUT + dst, head, mask=ok)
    tl.store(OUT + TAIL + dst, tail, mask=ok)


@triton.jit
def _stream_kv(acc, l_i, m_i, q, q_tail, k_desc, v_desc, k_row, k_tails, v_row, v_tails, offs_m, S, lo, hi,
               qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, RAW_KV: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m) of one query block;
    each product three TF32 MMAs, the small terms first.  Rows of K past S are
    the next head's (or TMA's zeros past the end), masked off by the softmax
    (and their V rows meet P's zeros).  RAW_KV: K and V as they are, (BH S, D),
    each tile split as it is loaded."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        if RAW_KV:
            k, k_tail = split_tf32(k_desc.load([k_row + start_n, 0]))
        else:
            k = k_desc.load([k_row + start_n, 0])
            k_tail = k_desc.load([k_tails + k_row + start_n, 0])
        qk = tl.dot(q_tail, k.T, input_precision="tf32")
        qk = tl.dot(q, k_tail.T, qk, input_precision="tf32")
        qk = tl.dot(q, k.T, qk, input_precision="tf32")
        offs_n = start_n + tl.arange(0, BLOCK_N)
        p, acc, l_i, m_new = online_softmax(qk, acc, l_i, m_i, offs_m, offs_n, S, qk_scale, MASKED, CAUSAL)
        # A block's P V in its own accumulator, added to O's in float32: the tensor
        # cores round their accumulation toward zero, so O's running sum taken
        # through every key's MMA steps drifts one way as S grows (and O is a sum
        # that cancels); a block's few steps, and partials of either sign, do not.
        if RAW_KV:
            v, v_tail = split_tf32(v_desc.load([k_row + start_n, 0]))
            p, p_tail = split_tf32(p)
            pv = tl.dot(p_tail, v, input_precision="tf32")
            pv = tl.dot(p, v_tail, pv, input_precision="tf32")
            acc += tl.dot(p, v, pv, input_precision="tf32")
        else:
            vt = v_desc.load([v_row, start_n])
            vt_tail = v_desc.load([v_tails + v_row, start_n])
            p, p_tail = split_tf32(p)
            pv = tl.dot(p_tail, vt.T, input_precision="tf32")
            pv = tl.dot(p, vt_tail.T, pv, input_precision="tf32")
            acc += tl.dot(p, vt.T, pv, input_precision="tf32")
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(q_desc, k_desc, v_desc, O, S, BH, qk_scale, S_KEY,  # S_KEY: the autotuner's key only
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, DIM: tl.constexpr,
              CAUSAL: tl.constexpr, RAW_Q: tl.constexpr = False, RAW_KV: tl.constexpr = False):
    # DIM: the head dim; HEAD_DIM: the tiles' (its power of two): TMA fills Q's and
    # K's columns past DIM with zeros, V's rows past DIM are the next head's (or
    # zeros) and give O columns that are not stored
    if CAUSAL:  # the longest query blocks first, as in _triton_flash
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    bh = tl.program_id(1)
    # Q and K: (2 BH S, D), heads then tails; V: (2 BH D, S_PAD), the same.
    # RAW_Q, RAW_KV: Q, or K and V, as they are, (BH S, D), split here.
    k_row = bh * S
    if RAW_Q:
        q, q_tail = split_tf32(q_desc.load([k_row + start_m * BLOCK_M, 0]))
    else:
        q = q_desc.load([k_row + start_m * BLOCK_M, 0])
        q_tail = q_desc.load([BH * S + k_row + start_m * BLOCK_M, 0])
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    k_tails, v_row, v_tails = BH * S, bh * DIM, BH * DIM
    if CAUSAL:
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_desc, v_desc, k_row, k_tails, v_row, v_tails,
                                   offs_m, S, 0, diag, qk_scale, BLOCK_N, False, False, RAW_KV)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_desc, v_desc, k_row, k_tails, v_row, v_tails,
                                   offs_m, S, diag, tl.minimum(diag + BLOCK_M, S), qk_scale, BLOCK_N, True, True, RAW_KV)
    else:
        full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_desc, v_desc, k_row, k_tails, v_row, v_tails,
                                   offs_m, S, 0, full, qk_scale, BLOCK_N, False, False, RAW_KV)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_desc, v_desc, k_row, k_tails, v_row, v_tails,
                                   offs_m, S, full, S, qk_scale, BLOCK_N, True, False, RAW_KV)
    out = acc / l_i[:, None]
    offs_d = tl.arange(0, HEAD_DIM)
    # a pointer store, not TMA's: rows past S are the next head's
    tl.store(O + (bh.to(tl.int64) * S + offs_m[:, None]) * DIM + offs_d[None, :], out,
             mask=(offs_m[:, None] < S) & (offs_d[None, :] < DIM))


def _cfg(bm, bn, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages, pre_hook=_set_boxes)


def _set_boxes(nargs):
    """The TMA boxes of a config: BLOCK_M rows of Q, BLOCK_N of K, BLOCK_N keys of V's rows."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["q_desc"].block_shape = [bm, d]
    nargs["k_desc"].block_shape = [bn, d]
    nargs["v_desc"].block_shape = [d, bn]


# Shared memory holds Q's two halves and, per stage, K's and V's (4 bytes an
# element): at D = 128 a 64 x 32 tile on two stages takes 192 KB, and 64-key
# blocks fit only unpipelined (one stage).  Every config fits in 255 registers
# without spills (ptxas, sm_90; lab/attention_occupancy --tf32x3); the
# one-stage 64 x 64 tiles hold two (D = 128) and three (D = 64) CTAs an SM,
# which overlap each other's loads instead; 64 x 32 on 8 warps splits O's
# columns over two warpgroups.
CONFIGS = {
    64: [_cfg(64, 32, 4, 2), _cfg(64, 64, 4, 2), _cfg(128, 32, 8, 2), _cfg(128, 64, 8, 2), _cfg(64, 64, 4, 1)],
    128: [_cfg(64, 32, 4, 2), _cfg(64, 32, 8, 2), _cfg(64, 16, 4, 3), _cfg(128, 16, 8, 2), _cfg(64, 64, 4, 1)],
}


_autotuned = tuned(_attn_fwd, CONFIGS)


def _set_boxes_in_kernel(nargs):
    """As _set_boxes, for V as it is: BLOCK_N keys of V's rows."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["q_desc"].block_shape = [bm, d]
    nargs["k_desc"].block_shape = [bn, d]
    nargs["v_desc"].block_shape = [bn, d]


def _cfg_in_kernel(bm, bn, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages,
                         pre_hook=_set_boxes_in_kernel)


# Below IN_KERNEL_BELOW keys (see the module's docstring) the kernel that
# splits its tiles as it loads them races the split passes.  At D = 64
# its configs fit without spills (184-255 registers, ptxas sm_90); at D = 128,
# with Q from its split pass, the 16-key tiles spill 40-56 bytes, the rest more.
IN_KERNEL_BELOW = 1024
IN_KERNEL_CONFIGS = {
    64: [_cfg_in_kernel(64, 32, 4, 2), _cfg_in_kernel(64, 16, 4, 2), _cfg_in_kernel(128, 16, 8, 2),
         _cfg_in_kernel(64, 64, 4, 1)],
    128: [_cfg_in_kernel(64, 16, 4, 1), _cfg_in_kernel(64, 16, 4, 2), _cfg_in_kernel(128, 16, 8, 2)],
}
_autotuned_in_kernel = tuned(_attn_fwd, IN_KERNEL_CONFIGS)

SPLIT_BLOCK = 4096
SPLIT_ROWS = 32  # keys a program of _split_transposed


def split(x: torch.Tensor) -> torch.Tensor:
    """Contiguous float32 (B, H, S, D) ``x`` as (2 B H S, D): its TF32 heads, then their tails."""
    out = torch.empty((2 * x.numel() // x.shape[-1], x.shape[-1]), dtype=torch.float32, device=x.device)
    _split_rows[(triton.cdiv(x.numel(), SPLIT_BLOCK),)](x, out, x.numel(), BLOCK=SPLIT_BLOCK)
    return out


def split_transposed(v: torch.Tensor) -> torch.Tensor:
    """Contiguous float32 (B, H, S, D) ``v`` as (2 B H D, S_PAD): per (b, h, d) a row of
    S keys and zeros up to S_PAD (a multiple of 4: TMA's 16-byte rows), heads then tails."""
    b, h, s, d = v.shape
    s_pad = -(-s // 4) * 4
    out = torch.empty((2 * b * h * d, s_pad), dtype=torch.float32, device=v.device)
    _split_transposed[(triton.cdiv(s_pad, SPLIT_ROWS), b * h)](v, out, s, s_pad, b * h * d * s_pad, D=d,
                                                               DP=padded_head_dim(d), BLOCK_S=SPLIT_ROWS)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              in_kernel: bool | None = None, out: torch.Tensor | None = None) -> tuple[torch.Tensor, str]:
    """softmax(q k^T / sqrt(D)) v for float32 (B, H, S, D) tensors, each product as
    three TF32 MMAs; returns O and the config used (tuned per S's bucket, D and causal).
    ``in_kernel``: split in the kernel (True; Q too where D <= 64) or by the split
    passes first (False); None: the passes, and below S = IN_KERNEL_BELOW the faster
    of the two forms at this key, raced at its first call.  ``out``: a contiguous
    float32 tensor of q's shape to write O into.  More than MAX_HEADS heads run a
    launch per run of them (head_dims.by_head_runs)."""
    if q.shape != k.shape or q.shape != v.shape or q.ndim != 4:
        raise ValueError(f"q, k, v must share one (B, H, S, D) shape: {q.shape} {k.shape} {v.shape}")
    B, H, S, D = q.shape
    if head_dim_problem(D):
        raise ValueError(head_dim_problem(D))
    if q.dtype != torch.float32 or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"float32 only, not {q.dtype}/{k.dtype}/{v.dtype}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if B * H > head_dims.MAX_HEADS:
        def run(q, k, v, causal, out):
            return attention(q, k, v, causal, in_kernel, out)

        return head_dims.by_head_runs(run, q, k, v, causal, torch.empty_like(q) if out is None else out)
    raced = ""
    if in_kernel is None:
        in_kernel = False
        if S < IN_KERNEL_BELOW and not interpreting():
            key = (bucket(S), D, bool(causal))
            if key not in _FORM:
                _FORM[key] = _race_forms(q, k, v, causal)
            in_kernel, raced = _FORM[key]
    o, text = (_in_kernel if in_kernel else _split_first)(q, k, v, causal, out)
    return o, text + raced


def _race_forms(q, k, v, causal) -> tuple[bool, str]:
    """Whether splitting in the kernel beats the split passes at this shape (each
    form tuned first, then both timed, passes included, in alternating passes)."""
    from implementations._shared import autotune

    runs = {False: lambda: _split_first(q, k, v, causal), True: lambda: _in_kernel(q, k, v, causal)}
    for run in runs.values():
        run()  # tunes and compiles each form before the race
    times = autotune.race(runs)
    if not times:
        return False, ""
    return min(times, key=times.get), "; raced " + ", ".join(
        ("split in kernel" if f else "split passes") + f":{t * 1000:.0f}us"
        for f, t in sorted(times.items(), key=lambda kv: kv[1]))


def _launch(tuner, descs, o, B, H, S, D, causal, **forms) -> None:
    args = (o, S, B * H, _scale(D), bucket(S))
    dp = padded_head_dim(D)
    if interpreting():
        _attn_fwd[(triton.cdiv(S, INTERPRETER_CONFIG["BLOCK_M"]), B * H)](
            *descs, *args, HEAD_DIM=dp, DIM=D, CAUSAL=bool(causal), **INTERPRETER_CONFIG, **forms)
    else:
        tuner[lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * H)](*descs, *args, HEAD_DIM=dp, DIM=D,
                                                                      CAUSAL=bool(causal), **forms)


def _boxes(bm: int, bn: int, dp: int, v_keys_first: bool) -> tuple[list, list, list]:
    return [bm, dp], [bn, dp], ([bn, dp] if v_keys_first else [dp, bn])


def _split_first(q, k, v, causal, out=None) -> tuple[torch.Tensor, str]:
    """The split passes, then the kernel on the heads and tails (into ``out`` where given)."""
    B, H, S, D = q.shape
    qs, ks, vs = split(q), split(k), split_transposed(v)
    o = torch.empty((B, H, S, D), dtype=torch.float32, device=q.device) if out is None else out
    # interpreter: its one config's boxes; GPU: placeholders, each config's pre_hook sets its own
    bm, bn = (INTERPRETER_CONFIG["BLOCK_M"], INTERPRETER_CONFIG["BLOCK_N"]) if interpreting() else (64, 16)
    boxes = _boxes(bm, bn, padded_head_dim(D), False)
    descs = tuple(TensorDescriptor.from_tensor(t, b) for t, b in zip((qs, ks, vs), boxes))
    _launch(_autotuned, descs, o, B, H, S, D, causal)
    if interpreting():
        return o, describe(INTERPRETER_CONFIG) + " (interpreter)"
    return o, tried(_autotuned, (bucket(S), D, bool(causal)), _TRIED, f"B={B} H={H} S={S}")


def _in_kernel(q, k, v, causal, out=None) -> tuple[torch.Tensor, str]:
    """The kernel on K and V as they are, each tile split as it is loaded; Q as
    well where D <= 64 (at D = 128 both halves of a Q tile in registers beside
    K's and V's spill), else Q's split pass first."""
    B, H, S, D = q.shape
    dp = padded_head_dim(D)
    raw_q = dp == 64
    rows = B * H * S
    qd = q.view(rows, D) if raw_q else split(q)
    o = torch.empty((B, H, S, D), dtype=torch.float32, device=q.device) if out is None else out
    bm, bn = (INTERPRETER_CONFIG["BLOCK_M"], INTERPRETER_CONFIG["BLOCK_N"]) if interpreting() else (64, 16)
    boxes = _boxes(bm, bn, dp, True)
    descs = tuple(TensorDescriptor.from_tensor(t, b) for t, b in zip((qd, k.view(rows, D), v.view(rows, D)), boxes))
    _launch(_autotuned_in_kernel, descs, o, B, H, S, D, causal, RAW_Q=raw_q, RAW_KV=True)
    what = "; Q, K and V split in the kernel" if raw_q else "; K and V split in the kernel"
    if interpreting():
        return o, describe(INTERPRETER_CONFIG) + what + " (interpreter)"
    return o, tried(_autotuned_in_kernel, (bucket(S), D, bool(causal)), _TRIED_IN_KERNEL, f"B={B} H={H} S={S}") + what


_TRIED: dict[tuple, str] = {}
_TRIED_IN_KERNEL: dict[tuple, str] = {}
_FORM: dict[tuple, tuple[bool, str]] = {}
