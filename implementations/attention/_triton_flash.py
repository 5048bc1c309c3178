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

from suite.backends import interpreting
from implementations._shared.autotune import autotune, bucket
from implementations.attention import head_dims
from implementations.attention.head_dims import head_dim_problem, padded_head_dim


@triton.jit
def online_softmax(qk, acc, l_i, m_i, offs_m, offs_n, S, qk_scale, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """One key block's step of the online softmax: the block's unnormalised
    probabilities p (keys at offs_n, masked past S and, CAUSAL, above the
    diagonal), O and the running sum rescaled to the new running max, and that max."""
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
def _load_rows(base, offs, offs_n, offs_d, S, MASKED: tl.constexpr, DIM: tl.constexpr, HEAD_DIM: tl.constexpr):
    """A tile of rows offs_n (zeros past S where MASKED) and columns offs_d
    (zeros past DIM where the head dim is padded to HEAD_DIM)."""
    if MASKED:
        ok = offs_n[:, None] < S
        if DIM != HEAD_DIM:
            ok = ok & (offs_d[None, :] < DIM)
        x = tl.load(base + offs, mask=ok, other=0.0)
    elif DIM != HEAD_DIM:
        x = tl.load(base + offs, mask=offs_d[None, :] < DIM, other=0.0)
    else:
        x = tl.load(base + offs)
    return x


@triton.jit
def _stream_kv(acc, l_i, m_i, q, k_base, v_base, offs_m, S, lo, hi, qk_scale,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, DIM: tl.constexpr,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    """Fold key/value blocks [lo, hi) into the running (acc, l, m) of one query block."""
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_offs = offs_n[:, None] * DIM + offs_d[None, :]
        k = _load_rows(k_base, kv_offs, offs_n, offs_d, S, MASKED, DIM, HEAD_DIM)
        if UPCAST:  # the interpreter's bfloat16 dot is wrong; float32 products are exact
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            qk = tl.dot(q, tl.trans(k))
        p, acc, l_i, m_new = online_softmax(qk, acc, l_i, m_i, offs_m, offs_n, S, qk_scale, MASKED, CAUSAL)
        v = _load_rows(v_base, kv_offs, offs_n, offs_d, S, MASKED, DIM, HEAD_DIM)
        p = p.to(v.dtype)
        if UPCAST:
            acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
        else:
            acc = tl.dot(p, v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, S, qk_scale, S_KEY,  # S_KEY: the autotuner's key only
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, DIM: tl.constexpr,
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    # DIM: the head dim; HEAD_DIM: the tiles' (DIM, or the power of two above it,
    # the padding columns loaded as zeros and not stored)
    if CAUSAL:
        # the last query blocks see the most keys: start them first so the
        # short ones fill the tail of the grid
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    # (B, H, S, D) contiguous: each head is S * DIM elements; int64 for big B*H*S
    head = tl.program_id(1).to(tl.int64) * S * DIM
    q_base, k_base, v_base, o_base = Q + head, K + head, V + head, O + head

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_offs = offs_m[:, None] * DIM + offs_d[None, :]
    row_ok = offs_m[:, None] < S
    if DIM != HEAD_DIM:
        row_ok = row_ok & (offs_d[None, :] < DIM)
    q = tl.load(q_base + q_offs, mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # keys below this block's first row are visible to all its rows (and
        # all < S): no masks; BLOCK_M is a multiple of BLOCK_N so `diag` is aligned
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, k_base, v_base, offs_m, S, 0, diag, qk_scale,
                                   BLOCK_N, HEAD_DIM, DIM, False, False, UPCAST)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, k_base, v_base, offs_m, S, diag,
                                   tl.minimum(diag + BLOCK_M, S), qk_scale,
                                   BLOCK_N, HEAD_DIM, DIM, True, True, UPCAST)
    else:
        full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, k_base, v_base, offs_m, S, 0, full, qk_scale,
                                   BLOCK_N, HEAD_DIM, DIM, False, False, UPCAST)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, k_base, v_base, offs_m, S, full, S, qk_scale,
                                   BLOCK_N, HEAD_DIM, DIM, True, False, UPCAST)
    out = acc / l_i[:, None]
    tl.store(o_base + q_offs, out.to(O.dtype.element_ty), mask=row_ok)


def _cfg(bm, bn, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)


# Per head dim, since K/V tiles of D=128 need twice the shared memory per stage.
CONFIGS = {
    64: [_cfg(128, 64, 4, 3), _cfg(128, 128, 8, 3), _cfg(128, 64, 8, 4),
         _cfg(128, 128, 8, 4), _cfg(64, 64, 4, 3)],
    # 4 warps on a 128 x 128 fp32 accumulator spill (ptxas, sm_90): 8 warps here
    # 64 x 32 tiles: less of a short sequence's last block masked off, three CTAs an SM
    128: [_cfg(128, 64, 8, 3), _cfg(128, 64, 8, 4), _cfg(128, 128, 8, 2),
          _cfg(64, 64, 4, 3), _cfg(64, 32, 4, 3)],
}


def tuned(kernel, configs: dict):
    """``kernel`` autotuned over ``configs[HEAD_DIM]`` (the padded head dim), keyed on
    S's half-octave bucket (implementations._shared.autotune.bucket: every S in it
    reuses one tuning, the kernel masks the ragged last blocks), DIM and CAUSAL."""
    return autotune(configs=[c for cs in configs.values() for c in cs], key=["S_KEY", "DIM", "CAUSAL"],
                    prune_configs_by={"early_config_prune": lambda cfgs, named, **kw: configs[kw["HEAD_DIM"]]},
                    # the winner per key is kept in Triton's cache directory (keyed by the
                    # kernel source, the configs and the GPU architecture), so a second run
                    # on this machine compiles the chosen config but does not autotune again
                    cache_results=True)(kernel)


_autotuned = tuned(_attn_fwd, CONFIGS)

INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16}


def describe(kwargs, num_warps=None, num_stages=None) -> str:
    text = f"BLOCK_M={kwargs['BLOCK_M']} BLOCK_N={kwargs['BLOCK_N']}"
    if num_warps is not None:
        text += f" warps={num_warps} stages={num_stages}"
    return text


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              out: torch.Tensor | None = None) -> tuple[torch.Tensor, str]:
    """softmax(q k^T / sqrt(D)) v for (B, H, S, D) tensors; returns O (``out`` where
    given: a contiguous tensor of q's shape) and the config used.  More than
    MAX_HEADS heads run a launch per run of them (head_dims.by_head_runs).

    On sm_90 the Gluon kernel (_gluon_flash.py) races this one: per key (S's
    bucket, D, causal, dtype) the autotuned Triton config and each Gluon config
    are timed at its first shape, in passes in order and in reverse by turns
    (autotune.race), and the fastest serves every shape of that key."""
    if q.shape != k.shape or q.shape != v.shape or q.ndim != 4:
        raise ValueError(f"q, k, v must share one (B, H, S, D) shape: {q.shape} {k.shape} {v.shape}")
    B, H, S, D = q.shape
    if head_dim_problem(D):
        raise ValueError(head_dim_problem(D))
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"float16 or bfloat16 only (float32: _triton_tf32x3), not {q.dtype}/{k.dtype}/{v.dtype}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if B * H > head_dims.MAX_HEADS:
        return head_dims.by_head_runs(attention, q, k, v, causal, torch.empty_like(q) if out is None else out)
    if interpreting():
        o = torch.empty_like(q) if out is None else out
        cfg = INTERPRETER_CONFIG
        grid = (triton.cdiv(S, cfg["BLOCK_M"]), B * H)
        _attn_fwd[grid](q, k, v, o, S, _scale(D), bucket(S), HEAD_DIM=padded_head_dim(D), DIM=D,
                        CAUSAL=bool(causal), UPCAST=q.dtype == torch.bfloat16, **cfg)
        return o, describe(cfg) + " (interpreter)"
    key = (bucket(S), D, bool(causal), q.dtype)
    if key not in _WINNER:
        _WINNER[key], _RACED[key] = _race(q, k, v, causal)
    choice = _WINNER[key]
    if choice is None:
        o, text = _triton(q, k, v, causal, out)
    else:
        from implementations.attention import _gluon_flash

        o = _gluon_flash.attention(q, k, v, bool(causal), *choice, out=out)
        text = _gluon_flash.describe(choice)
    return o, text + _RACED[key]


def _scale(d: int) -> float:
    return math.log2(math.e) / math.sqrt(d)


def _triton(q, k, v, causal, out=None) -> tuple[torch.Tensor, str]:
    """The autotuned Triton kernel (tuned at its key's first call): O (into ``out``
    where given) and its config, with the autotuner's timings of every candidate
    where this call tuned."""
    B, H, S, D = q.shape
    o = torch.empty_like(q) if out is None else out

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), B * H)

    _autotuned[grid](q, k, v, o, S, _scale(D), bucket(S), HEAD_DIM=padded_head_dim(D), DIM=D, CAUSAL=bool(causal),
                     UPCAST=False)
    key = (bucket(S), D, bool(causal), q.dtype)
    return o, tried(_autotuned, key, _TRIED, f"B={B} H={H} S={S}")


def tried(tuner, key, cache: dict, shape: str) -> str:
    """The winner of ``tuner`` (autotuned per ``key``) and, where its launch tuned
    ``key``, every candidate's median, fastest first, and the shape they were timed
    at (kept in ``cache``: a later shape of the key names the same timings)."""
    best = tuner.best_config
    if key not in cache:
        # cleared once read: a key whose winner comes from the disk cache times
        # nothing and must not show the previous key's timings
        timings = getattr(tuner, "configs_timings", None) or {}
        tuner.configs_timings = None
        cache[key] = "; tried " + ", ".join(
            f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']},w{c.num_warps},s{c.num_stages}:{_median(t) * 1000:.0f}us"
            for c, t in sorted(timings.items(), key=lambda kv: _median(kv[1]))) + f" (at {shape})" \
            if len(timings) > 1 else ""
    return describe(best.kwargs, best.num_warps, best.num_stages) + cache[key]


def _race(q, k, v, causal) -> tuple[tuple[int, ...] | None, str]:
    """The fastest of the tuned Triton kernel and each Gluon config at this shape:
    None (Triton) or the Gluon config (a tuple of _gluon_flash.CONFIGS), and the
    race's timings as text."""
    from implementations._shared import autotune

    try:
        from implementations.attention import _gluon_flash
    except ImportError:  # a triton without Gluon's Hopper API
        return None, ""
    if not _gluon_flash.available(q):
        return None, ""
    _triton(q, k, v, causal)  # tunes and compiles before the race
    runs = {None: lambda: _triton(q, k, v, causal)}
    for cfg in _gluon_flash.CONFIGS[q.shape[-1]]:
        runs[cfg] = lambda cfg=cfg: _gluon_flash.attention(q, k, v, bool(causal), *cfg)
    # in alternating passes; a Gluon config that fails to build or launch sits the race out
    times = autotune.race(runs)
    best = min(times, key=times.get)
    text = "; raced " + ", ".join(("triton" if c is None else _gluon_flash.label(c)) + f":{t * 1000:.0f}us"
                                  for c, t in sorted(times.items(), key=lambda kv: kv[1]))
    return best, text


_TRIED: dict[tuple, str] = {}
_WINNER: dict[tuple, tuple[int, ...] | None] = {}
_RACED: dict[tuple, str] = {}


def _median(t):
    return t[0] if isinstance(t, (list, tuple)) else t
