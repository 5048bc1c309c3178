"""attention: O = softmax(Q K^T / sqrt(D)) V per (batch, head), optional causal mask.

Napkin math: QK^T and PV are 2*S*S*D FLOPs each per head: 4*B*H*S^2*D, half
of it when causal (the masked half need not be computed, the usual
FlashAttention convention).  Fused, Q, K, V are read once and O written once:
4*B*H*S*D*b bytes.  Intensity grows with S (about S/b FLOP/byte), so beyond a
few hundred tokens attention is compute bound, while the eager chain, which
materialises the S x S scores, moves O(S^2) bytes and is memory bound.
"""
from __future__ import annotations

import math
import random

import torch

from implementations._models import GPT2, GPT2_CONTEXT, LLAMA3_8B, MISTRAL_7B, PHI3_MINI, QWEN25_7B
from suite.shapes import fuzz_size
from suite.workload import Case, Workload, itemsize, register_workload, torch_dtype


@register_workload
class Attention(Workload):
    name = "attention"
    shape_keys = ("B", "H", "S", "D", "causal")
    bound = "compute"
    reference_backend = "torch"  # the best of SDPA's backends (torch, torch:flash, torch:cudnn, ...)
    tolerances = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}
    # a fused kernel rounds P to the dtype before P V, and O.  The eager
    # chain, which also rounds the scores, has its own (eager.py), and so
    # do its torch.compile variants
    rounding = 16.0
    presets = {
        "cpu": [{"B": 1, "H": 2, "S": 77, "D": 64, "causal": 0},
                {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1},
                {"B": 2, "H": 1, "S": 130, "D": 128, "causal": 1},
                {"B": 1, "H": 3, "S": 64, "D": 128, "causal": 0}],
        # many short sequences, one length off every block, and the largest
        # work with and without the mask; full adds S = 2048 and 16384 (each
        # attention case costs two torch.compile builds, seconds apiece)
        "quick": [{"B": 32, "H": 32, "S": 512, "D": 64, "causal": 0},
                  {"B": 2, "H": 16, "S": 1000, "D": 64, "causal": 1},
                  {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 0},
                  {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 1}],
        # 16K tokens per batch: (S, D, causal) over the ranges users run
        "full": [{"B": 32, "H": 32, "S": 512, "D": 64, "causal": 0},
                 {"B": 2, "H": 16, "S": 1000, "D": 64, "causal": 1},
                 {"B": 4, "H": 32, "S": 2048, "D": 64, "causal": 0},
                 {"B": 4, "H": 32, "S": 2048, "D": 64, "causal": 1},
                 {"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 0},
                 {"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 1},
                 {"B": 4, "H": 32, "S": 4096, "D": 64, "causal": 1},
                 {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 0},
                 {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 1},
                 {"B": 2, "H": 16, "S": 8192, "D": 128, "causal": 0},
                 {"B": 2, "H": 16, "S": 8192, "D": 128, "causal": 1},
                 {"B": 1, "H": 16, "S": 16384, "D": 64, "causal": 0},
                 {"B": 1, "H": 16, "S": 16384, "D": 128, "causal": 1}],
        # causal prefill at the query heads and head dims of
        # implementations/_models.py (K and V carry H heads here: grouped KV
        # heads are expanded); Phi-3's D = 96 is left to the library ops
        "llm": [{"B": 1, "H": LLAMA3_8B.heads, "S": 8192, "D": LLAMA3_8B.head_dim, "causal": 1},
                {"B": 4, "H": LLAMA3_8B.heads, "S": 2048, "D": LLAMA3_8B.head_dim, "causal": 1},
                {"B": 1, "H": QWEN25_7B.heads, "S": 16384, "D": QWEN25_7B.head_dim, "causal": 1},
                {"B": 2, "H": MISTRAL_7B.heads, "S": 4096, "D": MISTRAL_7B.head_dim, "causal": 1},
                {"B": 2, "H": PHI3_MINI.heads, "S": 4096, "D": PHI3_MINI.head_dim, "causal": 1},
                {"B": 16, "H": GPT2.heads, "S": GPT2_CONTEXT, "D": GPT2.head_dim, "causal": 1}],
    }

    def fuzz_shape(self, rng: random.Random, i: int) -> dict[str, int]:
        # D 64 and 128 and causal or not, in turn; S from 1024 to 8192 in two
        # draws of three, else from 16 (mostly not a multiple of any block);
        # heads as models have them; batch for
        # 16K-512K tokens, held to the quick preset's largest work (2^41 FLOPs:
        # milliseconds for the kernels, a fraction of a second for the float64
        # reference)
        d, causal = (64, 128)[i % 2], (i // 2) % 2
        s = fuzz_size(rng, 16 if i % 3 == 0 else 1024, 8192)
        per_head = 4 * s * s * d
        h = min(rng.choice((8, 12, 16, 20, 25, 28, 32, 40)), max(1, (1 << 41) // per_head))
        tokens = fuzz_size(rng, 1 << 14, 1 << 19)
        b = max(1, min(tokens // (h * s), (1 << 41) // (per_head * h)))
        return {"B": b, "H": h, "S": s, "D": d, "causal": causal}

    def memory_bytes(self, case: Case) -> float:
        # the base estimate plus reference()'s float64 scores for one chunk of
        # queries (scores, mask and softmax: about three of them at once)
        bhs = case["B"] * case["H"] * case["S"]
        chunk = min(bhs * case["S"], max(2**27, bhs))
        return super().memory_bytes(case) + 3.0 * 8 * chunk

    def size(self, case: Case) -> int:
        return case["B"] * case["H"] * case["S"] * case["D"]

    def flops(self, case: Case) -> float:
        f = 4.0 * case["B"] * case["H"] * case["S"] ** 2 * case["D"]
        return f / 2 if case["causal"] else f

    def min_bytes(self, case: Case) -> float:
        return 4.0 * case["B"] * case["H"] * case["S"] * case["D"] * itemsize(case.dtype)

    def write_bytes(self, case: Case) -> float:
        return float(case["B"] * case["H"] * case["S"] * case["D"] * itemsize(case.dtype))  # O: 3:1

    def reduction_length(self, case: Case) -> int:
        return case["S"] + case["D"]  # q.k over D, then the softmax sum and P V over S keys

    def eager_bytes(self, case: Case) -> float:
        # eager.py, with P = B*H*S*S score elements and T = B*H*S*D:
        #   s = q @ k^T            read 2T, write P
        #   s = s * scale          read P, write P
        #   s = masked_fill(mask)  read P + S*S (bool mask), write P   [causal only]
        #   p = softmax(s)         read P, write P
        #   o = p @ v              read P + T, write T
        b = itemsize(case.dtype)
        p = case["B"] * case["H"] * case["S"] ** 2
        t = case["B"] * case["H"] * case["S"] * case["D"]
        total = (4 * t + 6 * p) * b
        if case["causal"]:
            total += 2 * p * b + case["S"] ** 2
        return float(total)

    def make_inputs(self, case: Case, device: str, seed: int) -> dict:
        g = torch.Generator(device=device).manual_seed(seed)
        dt = torch_dtype(case.dtype)
        shape = (case["B"], case["H"], case["S"], case["D"])
        q, k, v = (torch.randn(*shape, generator=g, device=device).to(dt) for _ in range(3))
        return {"q": q, "k": k, "v": v, "causal": bool(case["causal"])}

    def reference(self, case: Case, inputs: dict) -> torch.Tensor:
        q, k, v = (inputs[n].double() for n in "qkv")
        s_len, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
        out = torch.empty_like(q)
        # chunk the queries so the float64 S x S scores stay near 1 GiB
        rows = max(1, int(2**27 // max(1, q.shape[0] * q.shape[1] * s_len)))
        for start in range(0, s_len, rows):
            stop = min(s_len, start + rows)
            scores = torch.matmul(q[:, :, start:stop], k.transpose(-1, -2)) * scale
            if inputs["causal"]:
                qi = torch.arange(start, stop, device=q.device)[:, None]
                kj = torch.arange(s_len, device=q.device)[None, :]
                scores = scores.masked_fill(kj > qi, float("-inf"))
            out[:, :, start:stop] = torch.matmul(torch.softmax(scores, dim=-1), v)
        return out
