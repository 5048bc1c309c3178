"""FlashAttention-2-style forward in Triton.

One program per (BLOCK_M query rows, batch*head).  Q's tile stays in
registers; K and V stream through in BLOCK_N-row tiles; the softmax is kept
online (running max m and sum l in float32), so the S x S scores never reach
memory: HBM traffic is Q, K, V read once per query block and O written once.
The 1/sqrt(D) scale and log2(e) are folded into one multiplier so every
exponential is a single exp2.  Causal programs skip the blocks above the
diagonal entirely and apply the mask only on the diagonal blocks; a ragged S
only masks the last key block.

Napkin math (H200, bf16, D=128, BLOCK_M=128): per key block of 64 rows, 4.2
MFLOP of tensor-core work against 32 KiB of K and V from L2/HBM, about 128
FLOP/byte, well past the ridge, so the kernel should sit near the MMA rate and
the softmax (exp2, max, sum on the CUDA cores) is what it must hide.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from triton.tools.tensor_descriptor import TensorDescriptor

from suite.backends import interpreting
from implementations._shared.autotune import autotune, bucket


@triton.jit
def _scores(acc, l_i, m_i, q, k, offs_m, offs_n, S, qk_scale,
            MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    """The probabilities p of one key block (k: BLOCK_N x HEAD_DIM) against the query
    block, and the running (acc, l, m) rescaled to the new row maxima."""
    if UPCAST:  # the interpreter's bfloat16 dot is wrong; float32 products are exact
        qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
    else:
        qk = tl.dot(q, tl.trans(k))
    if MASKED:
        keep = offs_n[None, :] < S
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= offs_n[None, :])
        # a large finite negative, not -inf: a row whose block is all
        # masked then gives exp2(0) * 0-weight after rescaling, never NaN
        qk = tl.where(keep, qk * qk_scale, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_new[:, None]
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_new[:, None]
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_new)
    return p, acc * alpha[:, None], l_i * alpha + tl.sum(p, 1), m_new


@triton.jit
def _accumulate(acc, p, v, UPCAST: tl.constexpr):
    p = p.to(v.dtype)
    if UPCAST:
        return tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
    else:
        return tl.dot(p, v, acc)


@triton.jit
def _stream_kv(acc, l_i, m_i, q, K, V, bh, offs_m, S, lo, hi, qk_scale,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
    """Fold key/value blocks [lo, hi) into the running (acc, l, m) of one query block
    (V loaded after the scores, as the registers allow).
    TMA: K and V are (B*H*S, D) tensor descriptors whose box is one block, the head's
    first row at ``bh`` * S (a ragged last block reads the next head's first rows, or
    zeros past the last head: their scores are masked, so they weigh nothing); else
    pointers to the head's first element."""
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_offs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        if TMA:
            k = K.load([bh * S + start_n, 0])
        elif MASKED:
            k = tl.load(K + kv_offs, mask=offs_n[:, None] < S, other=0.0)
        else:
            k = tl.load(K + kv_offs)
        p, acc, l_i, m_i = _scores(acc, l_i, m_i, q, k, offs_m, offs_n, S, qk_scale, MASKED, CAUSAL, UPCAST)
        if TMA:
            v = V.load([bh * S + start_n, 0])
        elif MASKED:
            v = tl.load(V + kv_offs, mask=offs_n[:, None] < S, other=0.0)
        else:
            v = tl.load(V + kv_offs)
        acc = _accumulate(acc, p, v, UPCAST)
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, S, qk_scale, S_KEY,  # S_KEY: the autotuner's key only
              Qd, Kd, Vd,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr = False):
    """Q, K, V, O: (B, H, S, D) contiguous pointers; Qd, Kd, Vd: tensor
    descriptors of q, k, v as (B*H*S, D), which load them instead where TMA
    (the autotuner tries both forms).  O is stored through its pointer, masked
    to the head's rows."""
    if CAUSAL:
        # the last query blocks see the most keys: start them first so the
        # short ones fill the tail of the grid
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    bh = tl.program_id(1)
    # (B, H, S, D) contiguous: each head is S * HEAD_DIM elements; int64 for big B*H*S
    head = bh.to(tl.int64) * S * HEAD_DIM

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    row_ok = offs_m[:, None] < S
    if TMA:
        q = Qd.load([bh * S + start_m * BLOCK_M, 0])  # rows past S: not stored
        kk, vv = Kd, Vd
    else:
        q = tl.load(Q + head + q_offs, mask=row_ok, other=0.0)
        kk, vv = K + head, V + head

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # keys below this block's first row are visible to all its rows (and
        # all < S): no masks; BLOCK_M is a multiple of BLOCK_N so `diag` is aligned
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, kk, vv, bh, offs_m, S, 0, diag, qk_scale,
                                   BLOCK_N, HEAD_DIM, False, False, UPCAST, TMA)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, kk, vv, bh, offs_m, S, diag,
                                   tl.minimum(diag + BLOCK_M, S), qk_scale,
                                   BLOCK_N, HEAD_DIM, True, True, UPCAST, TMA)
    else:
        full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, kk, vv, bh, offs_m, S, 0, full, qk_scale,
                                   BLOCK_N, HEAD_DIM, False, False, UPCAST, TMA)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, kk, vv, bh, offs_m, S, full, S, qk_scale,
                                   BLOCK_N, HEAD_DIM, True, False, UPCAST, TMA)
    out = acc / l_i[:, None]
    tl.store(O + head + q_offs, out.to(O.dtype.element_ty), mask=row_ok)


def _set_boxes(nargs):
    """Host descriptors carry the box, which depends on the config being tried."""
    d = nargs["Qd"].block_shape[1]
    for name, rows in (("Qd", nargs["BLOCK_M"]), ("Kd", nargs["BLOCK_N"]), ("Vd", nargs["BLOCK_N"])):
        nargs[name].block_shape = [rows, d]


def _cfg(bm, bn, warps, stages, tma=False):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "TMA": tma}, num_warps=warps, num_stages=stages,
                         pre_hook=_set_boxes if tma else None)


# Per head dim, since K/V tiles of D=128 need twice the shared memory per stage.
# The TMA forms load Q, K and V by tensor descriptor (the pipeliner's copies
# then wait on mbarriers instead of cp.async groups).
CONFIGS = {
    64: [_cfg(128, 64, 4, 3), _cfg(128, 128, 8, 3), _cfg(128, 64, 8, 4),
         _cfg(128, 128, 8, 4), _cfg(64, 64, 4, 3),
         _cfg(128, 64, 4, 3, True), _cfg(128, 128, 8, 3, True)],
    # 4 warps on a 128 x 128 fp32 accumulator spill (ptxas, sm_90): 8 warps here
    128: [_cfg(128, 64, 8, 3), _cfg(128, 64, 8, 4), _cfg(128, 128, 8, 2),
          _cfg(64, 64, 4, 3),
          _cfg(128, 64, 8, 3, True), _cfg(128, 128, 8, 2, True), _cfg(128, 128, 8, 3, True)],
}


def _prune(configs, named_args, **kwargs):
    return CONFIGS[kwargs["HEAD_DIM"]]


# keyed on S's half-octave bucket (implementations._shared.autotune.bucket):
# every S in it reuses one tuning, the kernel masks the ragged last blocks
_autotuned = autotune(configs=CONFIGS[64] + CONFIGS[128], key=["S_KEY", "HEAD_DIM", "CAUSAL"],
                             prune_configs_by={"early_config_prune": _prune},
                             # the winner per key is kept in Triton's cache directory (keyed by the
                             # kernel source, the configs and the GPU architecture), so a second run
                             # on this machine compiles the chosen config but does not autotune again
                             cache_results=True)(_attn_fwd)

INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16}
HEAD_DIMS = (64, 128)


def describe(kwargs, num_warps=None, num_stages=None) -> str:
    text = f"BLOCK_M={kwargs['BLOCK_M']} BLOCK_N={kwargs['BLOCK_N']}"
    if kwargs.get("TMA"):
        text += " TMA"
    if num_warps is not None:
        text += f" warps={num_warps} stages={num_stages}"
    return text


def _descriptors(q, k, v, bm: int, bn: int):
    """(B*H*S, D) tensor descriptors of q, k and v, boxes of one query or key block."""
    B, H, S, D = q.shape
    return tuple(TensorDescriptor.from_tensor(t.view(B * H * S, D), [rows, D])
                 for t, rows in ((q, bm), (k, bn), (v, bn)))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              tma: bool | None = None) -> tuple[torch.Tensor, str]:
    """softmax(q k^T / sqrt(D)) v for (B, H, S, D) tensors; returns O and the config used.
    ``tma`` picks the descriptor form under the interpreter (the GPU autotunes both)."""
    if q.shape != k.shape or q.shape != v.shape or q.ndim != 4:
        raise ValueError(f"q, k, v must share one (B, H, S, D) shape: {q.shape} {k.shape} {v.shape}")
    B, H, S, D = q.shape
    if D not in HEAD_DIMS:
        raise ValueError(f"head dim {D} not supported (only {HEAD_DIMS})")
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"float16 or bfloat16 only, not {q.dtype}/{k.dtype}/{v.dtype}")
    # contiguous, and 16-byte aligned as tensor descriptors need (a view into a buffer is copied)
    q, k, v = (t.contiguous() for t in (q, k, v))
    q, k, v = (t if t.data_ptr() % 16 == 0 else t.clone() for t in (q, k, v))
    o = torch.empty_like(q)
    qk_scale = math.log2(math.e) / math.sqrt(D)
    args = (q, k, v, o, S, qk_scale, bucket(S))
    if interpreting():
        cfg = dict(INTERPRETER_CONFIG, TMA=bool(tma))
        grid = (triton.cdiv(S, cfg["BLOCK_M"]), B * H)
        _attn_fwd[grid](*args, *_descriptors(q, k, v, cfg["BLOCK_M"], cfg["BLOCK_N"]), HEAD_DIM=D,
                        CAUSAL=bool(causal), UPCAST=q.dtype == torch.bfloat16, **cfg)
        return o, describe(cfg) + " (interpreter)"

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), B * H)

    # placeholder boxes; a TMA config's pre_hook sets the real ones before each launch
    _autotuned[grid](*args, *_descriptors(q, k, v, 64, 64), HEAD_DIM=D, CAUSAL=bool(causal), UPCAST=False)
    best = _autotuned.best_config
    return o, describe(best.kwargs, best.num_warps, best.num_stages)
