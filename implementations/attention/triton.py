"""Triton FlashAttention-2-style forward (kernels in _triton_flash.py and, for sm_90,
_gluon_flash.py, which races the first per tuning key): ``triton`` for float16
and bfloat16; ``triton:tf32x3`` (_triton_tf32x3.py) for float32 as three TF32 products.

Registers the implementation, says which cases it cannot run, and remembers
the config each case was tuned to, for the results' `config` column.
"""
from __future__ import annotations

from implementations.attention.head_dims import head_dim_problem
from suite.backends import needs_triton
from suite.workload import Case, register

_CHOSEN: dict[tuple, str] = {}


def _key(b, h, s, d, causal, dtype: str) -> tuple:
    return (b, h, s, d, int(bool(causal)), dtype)


def _supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return (f"{case.dtype} not supported: the kernel feeds float16/bfloat16 tiles "
                f"to the tensor cores (triton:tf32x3 takes float32)")
    return _shape_problem(case)


def _shape_problem(case: Case) -> str | None:
    return head_dim_problem(case["D"])


def _supports_tf32x3(case: Case) -> str | None:
    if case.dtype != "float32":
        return f"{case.dtype} not supported: float32 only (triton takes float16 and bfloat16)"
    return _shape_problem(case)


def _config(case: Case) -> str | None:
    return _CHOSEN.get(_key(case["B"], case["H"], case["S"], case["D"], case["causal"], case.dtype))


@register("attention", "triton", available=needs_triton, supports=_supports, config=_config,
          description="Triton FlashAttention-2-style forward: online softmax in float32 (exp2), "
                      "K/V streamed, causal blocks skipped; autotuned tiles; on sm_90 raced against a "
                      "Gluon kernel (TMA ring, QK^T of the next block beside P V of this one)")
def attention_triton(q, k, v, causal):
    from implementations.attention._triton_flash import attention

    return _remember(q, causal, *attention(q, k, v, causal))


@register("attention", "triton:tf32x3", available=needs_triton, supports=_supports_tf32x3, config=_config,
          math="tf32x3",
          description="FlashAttention-2-style forward on float32: Q, K and V split into TF32 heads and "
                      "tails in one pass first, read by TMA, each product three TF32 MMAs "
                      "(head x head + head x tail + tail x head)")
def attention_triton_tf32x3(q, k, v, causal):
    from implementations.attention._triton_tf32x3 import attention

    return _remember(q, causal, *attention(q, k, v, causal))


def _remember(q, causal, out, description: str):
    """``out``, after noting the config that computed it for the results' `config` column."""
    b, h, s, d = q.shape
    _CHOSEN[_key(b, h, s, d, causal, str(q.dtype).removeprefix("torch."))] = description
    return out
