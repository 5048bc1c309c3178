"""gemm: C = A @ B with A (M x K), B (K x N), row-major, in the input dtype.

Napkin math: 2*M*N*K FLOPs; A, B read once and C written once, (MK + KN + MN)*b
bytes.  Intensity for a square n: 2n^3 / (3n^2 b) = n / (1.5 b) FLOP/byte, so
bf16 squares cross the H200's ridge (about 200 FLOP/B) near n = 600: large
squares are compute bound, skinny (decode-like, M <= 128) ones memory bound.
There is no unfused chain to speak of: `a @ b` is already the library call,
so eager_bytes == min_bytes and fusion predicts nothing.
"""
from __future__ import annotations

import random

import torch

from implementations._models import DECODE, GPT2, GPT2_CONTEXT, LLAMA3_8B, PREFILL, QWEN25_7B
from suite.shapes import fuzz_size
from suite.workload import Case, Workload, itemsize, register_workload, torch_dtype


def _llm_gemms() -> list[dict[str, int]]:
    """Projections of implementations/_models.py as M = tokens, K = in features,
    N = out features: FFN up (hidden -> intermediate) and down, the fused QKV
    projection ((heads + 2 kv_heads) x head_dim wide), and the LM head (hidden
    -> vocab), at prefill and at decode (M <= 16: skinny, memory bound)."""
    llama, qwen = LLAMA3_8B, QWEN25_7B
    qkv = lambda m: (m.heads + 2 * m.kv_heads) * m.head_dim  # noqa: E731
    return [{"M": PREFILL, "N": llama.intermediate, "K": llama.hidden},
            {"M": PREFILL, "N": llama.hidden, "K": llama.intermediate},
            {"M": PREFILL, "N": qkv(llama), "K": llama.hidden},
            {"M": DECODE[0], "N": llama.intermediate, "K": llama.hidden},
            {"M": DECODE[2], "N": llama.hidden, "K": llama.intermediate},
            {"M": DECODE[1], "N": llama.vocab, "K": llama.hidden},
            {"M": PREFILL, "N": qwen.intermediate, "K": qwen.hidden},
            {"M": DECODE[2], "N": qkv(qwen), "K": qwen.hidden},
            {"M": 8 * GPT2_CONTEXT, "N": GPT2.intermediate, "K": GPT2.hidden}]


@register_workload
class Gemm(Workload):
    name = "gemm"
    shape_keys = ("M", "N", "K")
    bound = "compute"
    reference_backend = "torch"  # cuBLAS: robustness is measured against it
    tolerances = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1e-2}
    # inputs rounded to a coarser math mode (tf32) err like a random walk of K
    # products, about u of the row's RMS and up to 5-6 u at the worst element;
    # 16-bit split-K partial sums may be rounded to the dtype before adding
    rounding = 16.0
    # every element is a K-term dot product of like inputs: its column's RMS is as
    # much its scale as its row's, which with one column is the element alone
    check_columns = True
    presets = {
        "cpu": [{"M": 1, "N": 64, "K": 33}, {"M": 37, "N": 129, "K": 71},
                {"M": 127, "N": 65, "K": 257}, {"M": 200, "N": 300, "K": 100}],
        "quick": [{"M": 512, "N": 512, "K": 512}, {"M": 3001, "N": 2047, "K": 1531},
                  {"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192},
                  {"M": 1, "N": 8192, "K": 8192}, {"M": 128, "N": 8192, "K": 8192}],
        "full": [{"M": 512, "N": 512, "K": 512}, {"M": 1024, "N": 1024, "K": 1024},
                 {"M": 2048, "N": 2048, "K": 2048}, {"M": 3001, "N": 2047, "K": 1531},
                 {"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192},
                 {"M": 1, "N": 8192, "K": 8192}, {"M": 16, "N": 8192, "K": 8192},
                 {"M": 128, "N": 8192, "K": 8192}],
        "llm": _llm_gemms(),
    }

    def fuzz_shape(self, rng: random.Random, i: int) -> dict[str, int]:
        # a quarter decode (M 1-16, memory bound), a quarter skinny (M 17-512),
        # a quarter with every side 128-8192 and a quarter 1024-8192 (the
        # targets' large GEMMs); M*N*K at most 2^38 (8192 x 8192 x 4096) to
        # keep a sweep's time bounded
        kind = i % 4
        m = fuzz_size(rng, *((1, 16), (17, 512), (128, 8192), (1024, 8192))[kind])
        n = fuzz_size(rng, 1024 if kind in (0, 3) else 128, 8192)
        k = fuzz_size(rng, 1024 if kind == 3 else 256, max(1024, min(8192, (1 << 38) // (m * n))))
        return {"M": m, "N": n, "K": k}

    def size(self, case: Case) -> int:
        return case["M"] * case["N"] * case["K"]

    def flops(self, case: Case) -> float:
        return 2.0 * case["M"] * case["N"] * case["K"]

    def min_bytes(self, case: Case) -> float:
        m, n, k, b = case["M"], case["N"], case["K"], itemsize(case.dtype)
        return float(m * k + k * n + m * n) * b

    def write_bytes(self, case: Case) -> float:
        # C only: 2:1 read:write for squares, nearly read-only when M is small
        return float(case["M"] * case["N"] * itemsize(case.dtype))

    def reduction_length(self, case: Case) -> int:
        return case["K"]

    def eager_bytes(self, case: Case) -> float:
        return self.min_bytes(case)  # one library call; nothing to fuse

    def make_inputs(self, case: Case, device: str, seed: int) -> dict:
        g = torch.Generator(device=device).manual_seed(seed)
        dt = torch_dtype(case.dtype)
        a = torch.randn(case["M"], case["K"], generator=g, device=device).to(dt)
        b = torch.randn(case["K"], case["N"], generator=g, device=device).to(dt)
        return {"a": a, "b": b}

    def reference(self, case: Case, inputs: dict) -> torch.Tensor:
        return inputs["a"].double() @ inputs["b"].double()
