"""softmax: row-wise softmax over the last dim of an M x N matrix.

Napkin math: fused, each row is read once and written once: 2*M*N*b bytes
(bf16 4096 x 4096: 2 * 4096 * 4096 * 2 = 64 MiB); about 5 FLOPs an element.
Memory bound at every shape; rows too long for the chip need an online
(running max and sum) pass or a second read.
"""
from __future__ import annotations

import random

import torch

from implementations._models import (DECODE, GPT2, GPT2_CONTEXT, LLAMA3_8B, MISTRAL_7B, PHI3_MINI,
                                     PREFILL, QWEN25_7B)
from suite.shapes import fuzz_rows, fuzz_size
from suite.workload import Case, Workload, itemsize, register_workload, torch_dtype


@register_workload
class Softmax(Workload):
    name = "softmax"
    shape_keys = ("M", "N")
    bound = "memory"
    tolerances = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
    presets = {
        "cpu": [{"M": 1, "N": 1}, {"M": 5, "N": 3}, {"M": 1823, "N": 781}, {"M": 4, "N": 131072},
                {"M": 300, "N": 128}],
        # rows from 128 to 131072 columns; 64K elements to 1 GiB (bf16)
        "quick": [{"M": 512, "N": 128}, {"M": 1823, "N": 781}, {"M": 32768, "N": 4096},
                  {"M": 4096, "N": 131072}, {"M": 2_097_152, "N": 128}],
        "full": [{"M": 512, "N": 128}, {"M": 1823, "N": 781}, {"M": 4096, "N": 4096},
                 {"M": 32768, "N": 4096}, {"M": 16384, "N": 8192}, {"M": 4096, "N": 32768},
                 {"M": 4096, "N": 131072}, {"M": 2_097_152, "N": 128}, {"M": 65521, "N": 2053}],
        # over the vocabulary (tokens x vocab_size: a scored prompt, decode
        # batches), then attention rows (heads x queries rows of keys columns);
        # sizes from implementations/_models.py
        "llm": [{"M": PREFILL, "N": LLAMA3_8B.vocab}, {"M": DECODE[2], "N": LLAMA3_8B.vocab},
                {"M": DECODE[0], "N": QWEN25_7B.vocab}, {"M": 64, "N": MISTRAL_7B.vocab},
                {"M": DECODE[2], "N": PHI3_MINI.vocab}, {"M": 8 * GPT2_CONTEXT, "N": GPT2.vocab},
                {"M": LLAMA3_8B.heads * PREFILL, "N": PREFILL},
                {"M": GPT2.heads * GPT2_CONTEXT, "N": GPT2_CONTEXT}],
    }

    def fuzz_shape(self, rng: random.Random, i: int) -> dict[str, int]:
        # a quarter each: vocabulary rows (32000-152064 columns, 1 row up to
        # 32M elements: decode batches to scored prompts), short rows (up to
        # 1024), rows of 1K-16K and long rows (16K-128K); the others 1M to 32M
        # elements: 8 MiB to 256 MiB of traffic in float32
        kind = i % 4
        if kind == 0:
            n = fuzz_size(rng, 32000, 152064)
            return {"M": fuzz_rows(rng, n, 1, 1 << 25), "N": n}
        n = fuzz_size(rng, *((2, 1024), (1025, 16384), (16385, 131072))[kind - 1])
        return {"M": fuzz_rows(rng, n, 1 << 20, 1 << 25), "N": n}

    def size(self, case: Case) -> int:
        return case["M"] * case["N"]

    def flops(self, case: Case) -> float:
        return 5.0 * case["M"] * case["N"]

    def min_bytes(self, case: Case) -> float:
        return 2.0 * case["M"] * case["N"] * itemsize(case.dtype)

    def write_bytes(self, case: Case) -> float:
        return case["M"] * case["N"] * itemsize(case.dtype)  # 1:1, the copy's mix

    def reduction_length(self, case: Case) -> int:
        return case["N"]  # the row's max and sum

    def eager_bytes(self, case: Case) -> float:
        # eager.py, five kernels (elements of the dtype):
        #   m = x.amax(-1)      read MN, write M
        #   d = x - m           read MN + M, write MN
        #   e = exp(d)          read MN, write MN
        #   s = e.sum(-1)       read MN, write M
        #   y = e / s           read MN + M, write MN
        # 8MN + 4M against 2MN fused: about 4x predicted.
        m, n, b = case["M"], case["N"], itemsize(case.dtype)
        return (8.0 * m * n + 4.0 * m) * b

    def make_inputs(self, case: Case, device: str, seed: int) -> dict:
        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(case["M"], case["N"], generator=g, device=device) * 3.0
        return {"x": x.to(torch_dtype(case.dtype))}

    def reference(self, case: Case, inputs: dict) -> torch.Tensor:
        return torch.softmax(inputs["x"].double(), dim=-1)
