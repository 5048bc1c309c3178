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


@triton.jit
def _split_tf32(x):
    """x as a TF32 head (its top 10 mantissa bits) and the float32 tail x - head (exact)."""
    head = (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
    return head, x - head


@triton.jit
def _load_tile(base, tail, offs, ok, MASKED: tl.constexpr, SPLIT: tl.constexpr):
    """A K or V tile, and (SPLIT) its TF32 tail stored ``tail`` elements after it."""
    if MASKED:
        x = tl.load(base + offs, mask=ok, other=0.0)
    else:
        x = tl.load(base + offs)
    x_tail = x
    if SPLIT:
        if MASKED:
            x_tail = tl.load(base + tail + offs, mask=ok, other=0.0)
        else:
            x_tail = tl.load(base + tail + offs)
    return x, x_tail


@triton.jit
def _stream_kv(acc, l_i, m_i, q, q_tail, k_base, v_base, tail, offs_m, S, lo, hi, qk_scale,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr, SPLIT: tl.constexpr):
    """Fold key/value blocks [lo, hi) into the running (acc, l, m) of one query block.

    SPLIT (float32 inputs): q, K and V come as TF32 heads with their tails
    (q_tail; K's and V's ``tail`` elements on), and each product is three TF32
    MMAs, head x head + head x tail + tail x head, the small terms first."""
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_offs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k, k_tail = _load_tile(k_base, tail, kv_offs, offs_n[:, None] < S, MASKED, SPLIT)
        if UPCAST:  # the interpreter's bfloat16 dot is wrong; float32 products are exact
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        elif SPLIT:
            qk = tl.dot(q_tail, tl.trans(k), input_precision="tf32")
            qk = tl.dot(q, tl.trans(k_tail), qk, input_precision="tf32")
            qk = tl.dot(q, tl.trans(k), qk, input_precision="tf32")
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
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v, v_tail = _load_tile(v_base, tail, kv_offs, offs_n[:, None] < S, MASKED, SPLIT)
        if UPCAST:
            acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
        elif SPLIT:
            p, p_tail = _split_tf32(p)
            acc = tl.dot(p_tail, v, acc, input_precision="tf32")
            acc = tl.dot(p, v_tail, acc, input_precision="tf32")
            acc = tl.dot(p, v, acc, input_precision="tf32")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, S, qk_scale, S_KEY, TAIL,  # S_KEY: the autotuner's key only
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr, SPLIT: tl.constexpr):
    # SPLIT: Q, K and V are float32 split into TF32 heads, each tail TAIL
    # elements after its head (split_tf32); O is float32
    if CAUSAL:
        # the last query blocks see the most keys: start them first so the
        # short ones fill the tail of the grid
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    # (B, H, S, D) contiguous: each head is S * HEAD_DIM elements; int64 for big B*H*S
    head = tl.program_id(1).to(tl.int64) * S * HEAD_DIM
    q_base, k_base, v_base, o_base = Q + head, K + head, V + head, O + head

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    row_ok = offs_m[:, None] < S
    q = tl.load(q_base + q_offs, mask=row_ok, other=0.0)
    q_tail = q
    if SPLIT:  # loaded, not split here: a split in registers would keep both halves there
        q_tail = tl.load(q_base + TAIL + q_offs, mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # keys below this block's first row are visible to all its rows (and
        # all < S): no masks; BLOCK_M is a multiple of BLOCK_N so `diag` is aligned
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_base, v_base, TAIL, offs_m, S, 0, diag, qk_scale,
                                   BLOCK_N, HEAD_DIM, False, False, UPCAST, SPLIT)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_base, v_base, TAIL, offs_m, S, diag,
                                   tl.minimum(diag + BLOCK_M, S), qk_scale,
                                   BLOCK_N, HEAD_DIM, True, True, UPCAST, SPLIT)
    else:
        full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_base, v_base, TAIL, offs_m, S, 0, full, qk_scale,
                                   BLOCK_N, HEAD_DIM, False, False, UPCAST, SPLIT)
        acc, l_i, m_i = _stream_kv(acc, l_i, m_i, q, q_tail, k_base, v_base, TAIL, offs_m, S, full, S, qk_scale,
                                   BLOCK_N, HEAD_DIM, True, False, UPCAST, SPLIT)
    out = acc / l_i[:, None]
    tl.store(o_base + q_offs, out.to(O.dtype.element_ty), mask=row_ok)


HEAD_DIMS = (64, 128)


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
# float32 as TF32 heads and tails (SPLIT): Q's two halves sit in shared memory
# and each stage holds four K/V tiles (heads and tails) of 4-byte elements, so
# at D = 128 only BLOCK_N = 16 fits two or three stages; wider key blocks, one
# stage or a split in registers spill (ptxas, sm_90).
TF32X3 = {
    64: [_cfg(64, 32, 4, 2), _cfg(64, 32, 4, 3), _cfg(64, 64, 4, 2), _cfg(128, 32, 8, 2), _cfg(128, 32, 8, 3)],
    128: [_cfg(64, 16, 4, 2), _cfg(64, 16, 4, 3), _cfg(128, 16, 8, 2), _cfg(128, 16, 8, 3)],
}


def _prune(configs, named_args, **kwargs):
    return (TF32X3 if kwargs["SPLIT"] else CONFIGS)[kwargs["HEAD_DIM"]]


# keyed on S's half-octave bucket (implementations._shared.autotune.bucket):
# every S in it reuses one tuning, the kernel masks the ragged last blocks
_autotuned = autotune(configs=[c for d in HEAD_DIMS for c in CONFIGS[d] + TF32X3[d]],
                      key=["S_KEY", "HEAD_DIM", "CAUSAL", "SPLIT"],
                      prune_configs_by={"early_config_prune": _prune},
                      # the winner per key is kept in Triton's cache directory (keyed by the
                      # kernel source, the configs and the GPU architecture), so a second run
                      # on this machine compiles the chosen config but does not autotune again
                      cache_results=True)(_attn_fwd)

INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16}


def describe(kwargs, num_warps=None, num_stages=None) -> str:
    text = f"BLOCK_M={kwargs['BLOCK_M']} BLOCK_N={kwargs['BLOCK_N']}"
    if num_warps is not None:
        text += f" warps={num_warps} stages={num_stages}"
    return text


def _check(q, k, v, dtypes) -> None:
    if q.shape != k.shape or q.shape != v.shape or q.ndim != 4:
        raise ValueError(f"q, k, v must share one (B, H, S, D) shape: {q.shape} {k.shape} {v.shape}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"head dim {q.shape[-1]} not supported (only {HEAD_DIMS})")
    if q.dtype not in dtypes or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"{' or '.join(str(d).removeprefix('torch.') for d in dtypes)} only, "
                         f"not {q.dtype}/{k.dtype}/{v.dtype}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, str]:
    """softmax(q k^T / sqrt(D)) v for (B, H, S, D) float16 or bfloat16 tensors;
    returns O and the config used (float32: attention_tf32x3).

    On sm_90 the Gluon kernel (_gluon_flash.py) races this one: per key (S's
    bucket, D, causal, dtype) the autotuned Triton config and each Gluon config
    are timed at its first shape, in passes in order and in reverse by turns
    (autotune.race), and the fastest serves every shape of that key."""
    _check(q, k, v, (torch.float16, torch.bfloat16))
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if interpreting():
        return _interpreted(q, k, v, causal, split=False)
    key = (bucket(q.shape[2]), q.shape[3], bool(causal), q.dtype)
    if key not in _WINNER:
        _WINNER[key], _RACED[key] = _race(q, k, v, causal)
    choice = _WINNER[key]
    if choice is None:
        o, text = _triton(q, k, v, causal)
    else:
        from implementations.attention import _gluon_flash

        o = _gluon_flash.attention(q, k, v, bool(causal), *choice)
        text = _gluon_flash.describe(choice)
    return o, text + _RACED[key]


def attention_tf32x3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, str]:
    """As :func:`attention` for float32 (B, H, S, D) tensors, each product as three
    TF32 MMAs (head x head + head x tail + tail x head: about float32's accuracy
    at the tensor cores' rate).  One pass first writes each of Q, K and V as its
    TF32 heads followed by their tails (split_tf32): 8 bytes an element read
    where float32 reads 4, so that no kernel holds both halves in registers."""
    _check(q, k, v, (torch.float32,))
    q, k, v = (split_tf32(t.contiguous()) for t in (q, k, v))
    if interpreting():
        return _interpreted(q, k, v, causal, split=True)
    return _triton(q, k, v, causal, split=True)


SPLIT_BLOCK = 4096


@triton.jit
def _split_kernel(X, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    head, tail = _split_tf32(tl.load(X + offs, mask=ok))
    tl.store(OUT + offs, head, mask=ok)
    tl.store(OUT + N + offs, tail, mask=ok)


def split_tf32(x: torch.Tensor) -> torch.Tensor:
    """Contiguous float32 ``x`` as a tensor of shape (2, *x.shape): its TF32 heads
    (the top 10 mantissa bits), then the tails x - head, exact in float32."""
    out = torch.empty((2, *x.shape), dtype=torch.float32, device=x.device)
    n = x.numel()
    _split_kernel[(triton.cdiv(n, SPLIT_BLOCK),)](x, out, n, BLOCK=SPLIT_BLOCK)
    return out


def _interpreted(q, k, v, causal, split: bool) -> tuple[torch.Tensor, str]:
    B, H, S, D = q.shape[-4:]
    o = torch.empty(q.shape[-4:], dtype=q.dtype, device=q.device)
    cfg = INTERPRETER_CONFIG
    grid = (triton.cdiv(S, cfg["BLOCK_M"]), B * H)
    _attn_fwd[grid](q, k, v, o, S, _scale(D), bucket(S), o.numel(), HEAD_DIM=D, CAUSAL=bool(causal),
                    UPCAST=q.dtype == torch.bfloat16, SPLIT=split, **cfg)
    return o, describe(cfg) + " (interpreter)"


def _scale(d: int) -> float:
    return math.log2(math.e) / math.sqrt(d)


def _triton(q, k, v, causal, split: bool = False) -> tuple[torch.Tensor, str]:
    """The autotuned Triton kernel (tuned at its key's first call): O and its config,
    with the autotuner's timings of every candidate where this call tuned.
    ``split``: q, k and v are split_tf32's (2, B, H, S, D) halves."""
    B, H, S, D = q.shape[-4:]
    o = torch.empty(q.shape[-4:], dtype=q.dtype, device=q.device)

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), B * H)

    _autotuned[grid](q, k, v, o, S, _scale(D), bucket(S), o.numel(), HEAD_DIM=D, CAUSAL=bool(causal),
                     UPCAST=False, SPLIT=split)
    best = _autotuned.best_config
    key = (bucket(S), D, bool(causal), q.dtype)
    if key not in _TRIED:
        # the autotuner's medians of every candidate, from the launch that tuned this key
        # (S's bucket): the shape they were timed at is named with them
        # (cleared once read: a key whose winner comes from the disk cache times nothing and
        # must not show the previous key's timings)
        timings = getattr(_autotuned, "configs_timings", None) or {}
        _autotuned.configs_timings = None
        _TRIED[key] = "; tried " + ", ".join(
            f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']},w{c.num_warps},s{c.num_stages}:{_median(t) * 1000:.0f}us"
            for c, t in sorted(timings.items(), key=lambda kv: _median(kv[1]))) + f" (at B={B} H={H} S={S})" \
            if len(timings) > 1 else ""
    return o, describe(best.kwargs, best.num_warps, best.num_stages) + _TRIED[key]


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
