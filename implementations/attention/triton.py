"""Triton FlashAttention-2-style forward (kernels in _triton_flash.py and, for sm_90,
_gluon_flash.py, which races the first per tuning key).

Registers the implementation, says which cases it cannot run, and remembers
the config each case was tuned to, for the results' `config` column.
"""
from __future__ import annotations

from suite.backends import needs_triton
from suite.workload import Case, register

_HEAD_DIMS = (64, 128)
_CHOSEN: dict[tuple, str] = {}


def _key(b, h, s, d, causal, dtype: str) -> tuple:
    return (b, h, s, d, int(bool(causal)), dtype)


def _supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return (f"{case.dtype} not supported: the kernel feeds float16/bfloat16 tiles "
                f"to the tensor cores (float32 would need TF32 and twice the shared memory)")
    if case["D"] not in _HEAD_DIMS:
        return f"head dim {case['D']} not supported (only {', '.join(map(str, _HEAD_DIMS))})"
    return None


def _config(case: Case) -> str | None:
    return _CHOSEN.get(_key(case["B"], case["H"], case["S"], case["D"], case["causal"], case.dtype))


@register("attention", "triton", available=needs_triton, supports=_supports, config=_config,
          description="Triton FlashAttention-2-style forward: online softmax in float32 (exp2), "
                      "K/V streamed, causal blocks skipped; autotuned tiles; on sm_90 raced against a "
                      "Gluon kernel (TMA ring, QK^T of the next block beside P V of this one)")
def attention_triton(q, k, v, causal):
    from implementations.attention._triton_flash import attention

    out, description = attention(q, k, v, causal)
    b, h, s, d = q.shape
    _CHOSEN[_key(b, h, s, d, causal, str(q.dtype).removeprefix("torch."))] = description
    return out
