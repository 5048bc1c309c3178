"""gelu: y = x * 0.5 * (1 + erf(x / sqrt(2))), elementwise.

Napkin math for N elements of b bytes each: a fused kernel reads x once and
writes y once, 2*N*b bytes, and does about 10 FLOPs per element (erf counted as
a handful), far below any ridge point: memory bound at every size.
"""
from __future__ import annotations

import math
import random

import torch

from implementations._models import DECODE, GPT2, GPT2_CONTEXT, LLAMA3_8B, PHI3_MINI, PREFILL, QWEN25_7B
from suite.shapes import fuzz_size
from suite.workload import Case, Workload, itemsize, register_workload, torch_dtype


@register_workload
class Gelu(Workload):
    name = "gelu"
    shape_keys = ("N",)
    bound = "memory"
    tolerances = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
    # Phi(x) is accurate to a few u absolute, so y = x * Phi(x) errs by about
    # |x| * u however small y is (x = -4: y = -1.3e-4); inputs are 2 * randn
    check_floor = 1.0
    presets = {
        "cpu": [{"N": 7}, {"N": 1823}, {"N": 65537}, {"N": 1823 * 781}],
        # launch bound (64K), L2 resident (3M: 12 MB in fp32), HBM bound
        # (2^28: 1 GiB of traffic in bf16, 2 GiB in fp32), plus odd sizes.
        "quick": [{"N": 65536}, {"N": 3_000_017}, {"N": 1 << 28}],
        "full": [{"N": 65536}, {"N": 1_000_003}, {"N": 3_000_017}, {"N": 16_777_259},
                 {"N": 100_000_007}, {"N": 1 << 28}],
        # the FFN activation, tokens x intermediate size (implementations/_models.py;
        # Llama, Qwen and Phi-3 gate it with SiLU, GPT-2 applies GELU: same size)
        "llm": [{"N": PREFILL * LLAMA3_8B.intermediate}, {"N": DECODE[2] * LLAMA3_8B.intermediate},
                {"N": PREFILL * QWEN25_7B.intermediate}, {"N": DECODE[0] * QWEN25_7B.intermediate},
                {"N": PREFILL * PHI3_MINI.intermediate},
                {"N": 8 * GPT2_CONTEXT * GPT2.intermediate}, {"N": DECODE[1] * GPT2.intermediate}],
    }

    def fuzz_shape(self, rng: random.Random, i: int) -> dict[str, int]:
        # one in six launch bound (up to 1M elements), the rest 1M to 32M
        # elements: 8 MiB to 256 MiB of traffic in float32, half that in bfloat16
        if i % 6 == 0:
            return {"N": fuzz_size(rng, 1, 1 << 20)}
        return {"N": fuzz_size(rng, 1 << 20, 1 << 25)}

    def flops(self, case: Case) -> float:
        return 10.0 * case["N"]

    def min_bytes(self, case: Case) -> float:
        return 2.0 * case["N"] * itemsize(case.dtype)

    def write_bytes(self, case: Case) -> float:
        return case["N"] * itemsize(case.dtype)  # 1:1, the copy's mix

    def eager_bytes(self, case: Case) -> float:
        # eager.py, one kernel per op, in elements of the dtype:
        #   a = 0.5 * x          read N, write N
        #   t = x * (1/sqrt 2)   read N, write N
        #   e = erf(t)           read N, write N
        #   f = 1 + e            read N, write N
        #   y = a * f            read 2N, write N
        # 6N read + 5N written = 11N, against 2N fused: 5.5x predicted.
        return 11.0 * case["N"] * itemsize(case.dtype)

    def make_inputs(self, case: Case, device: str, seed: int) -> dict:
        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(case["N"], generator=g, device=device, dtype=torch.float32) * 2.0
        return {"x": x.to(torch_dtype(case.dtype))}

    def reference(self, case: Case, inputs: dict) -> torch.Tensor:
        x = inputs["x"].double()
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
