"""A workload for checking the harness itself: a plain copy.

``python -m suite run --plugin benchmarks.harness_checks --workloads copy``
measures a device-to-device copy through the suite's own timer; its GB/s
should agree with the run's measured copy ceiling (same bytes, same
operation), which checks the timer and the bytes accounting end to end.
"""
from __future__ import annotations

import torch

from suite.workload import Case, Workload, itemsize, register, register_workload, torch_dtype


@register_workload
class Copy(Workload):
    name = "copy"
    shape_keys = ("N",)
    bound = "memory"
    tolerances = {"float32": 0.0, "float16": 0.0, "bfloat16": 0.0}
    presets = {"cpu": [{"N": 1 << 20}], "quick": [{"N": 1 << 28}], "full": [{"N": 1 << 28}]}
    preset_dtypes = {"quick": ("float32",), "full": ("float32",)}

    def flops(self, case: Case) -> float:
        return 1.0  # nothing to compute; keeps intensity finite

    def min_bytes(self, case: Case) -> float:
        return 2.0 * case["N"] * itemsize(case.dtype)  # 2^28 float32: 2 GiB read + written

    def eager_bytes(self, case: Case) -> float:
        return self.min_bytes(case)

    def make_inputs(self, case: Case, device: str, seed: int) -> dict:
        g = torch.Generator(device=device).manual_seed(seed)
        return {"x": torch.randn(case["N"], generator=g, device=device).to(torch_dtype(case.dtype))}

    def reference(self, case: Case, inputs: dict) -> torch.Tensor:
        return inputs["x"].double()


@register("copy", "torch", description="Tensor.clone: one read, one write")
def copy_torch(x):
    return x.clone()
