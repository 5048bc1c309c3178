"""Hand-written CUDA attention: ``cuda``, a FlashAttention-2-style forward.

flash_attention.cu: 128 queries per CTA (8 warps x 16 rows), K/V tiles of 64
keys double buffered through shared memory by cp.async, Q K^T and P V on
tensor cores (mma.sync m16n8k16), online softmax in fp32 with exp2; causal
skips the tiles above the diagonal.  float16 and bfloat16, head dims 64 and
128.  Built by suite.cuda_build on first use; called as
torch.ops.kernel_suite.attention_flash.
"""
from __future__ import annotations

from pathlib import Path

from suite import cuda_build
from suite.workload import Case, register

SOURCES = [Path(__file__).with_name("flash_attention.cu")]


def _fakes() -> None:
    import torch

    def fake(q, k, v, causal):
        torch._check(q.dim() == 4, lambda: "q must be (B, H, S, D)")
        torch._check(q.shape == k.shape and q.shape == v.shape, lambda: "q, k, v shapes differ")
        return torch.empty_like(q, memory_format=torch.contiguous_format)

    torch.library.register_fake("kernel_suite::attention_flash")(fake)


def ops():
    return cuda_build.load("attention", SOURCES, fakes=_fakes)


def _supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return f"{case.dtype} not supported (mma.sync tensor cores take float16 or bfloat16)"
    if case["D"] not in (64, 128):
        return f"head dim D={case['D']} not supported (only 64 and 128 are instantiated)"
    if case["B"] * case["H"] > 65535:
        return f"B*H={case['B'] * case['H']} exceeds the grid's y limit (65535)"
    return None


def _config(case: Case) -> str:
    occupancy = "2 CTAs/SM" if case["D"] == 64 else "1 CTA/SM"
    return f"BM=128 (8 warps x 16 rows), BN=64, cp.async double buffer, {occupancy}"


@register("attention", "cuda", available=cuda_build.cuda_available, supports=_supports,
          config=_config,
          description="CUDA: FlashAttention-2-style forward, mma.sync, online softmax, "
                      "cp.async double-buffered K/V")
def attention_cuda(q, k, v, causal):
    return ops().attention_flash(q, k, v, bool(causal))
