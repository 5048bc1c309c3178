"""Does a pingpong matmul (lab/_gluon_pingpong.py: two consumer warpgroups on
alternate tiles of 128 x 128, one loading warp) beat the persistent Triton
kernel, whose warps store each tile before starting the next?

A one-off device comparison (``python3 -m lab.gemm_pingpong`` on the H200; its
output goes to lab/findings/): the four aligned fuzz shapes of
lab/gemm_persistent_tiles where Triton trails cuBLAS most, 4096^3 and
8192 x 8192 x 1000, bf16.  Each kernel is checked against float64 on an output
the allocator last held as NaN, then cuBLAS (torch), the registered
persistent Triton op and each pingpong form are timed in alternating rounds
with the suite's events timer (L2 flushed).  Prints per shape cuBLAS's time
and each one's speed as a ratio to cuBLAS's.
"""
from __future__ import annotations

import sys

# (stages, TMA store): 's5' is 5 stages with the TMA store, 's5p' with pointer stores
FORMS = {"s4": (4, True), "s5": (5, True), "s5p": (5, False), "s6p": (6, False)}


def main(argv: list[str]) -> int:
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (sm_90)", file=sys.stderr)
        return 2
    from lab import _gluon_pingpong as G
    from lab._probe import check_poisoned, registered_calls, round_times
    from lab.gemm_persistent_tiles import shapes
    from suite.workload import Case, discover

    wl = discover().workloads["gemm"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k in shapes()[:4] + [(4096, 4096, 4096), (8192, 8192, 1000)]:
        case = Case.make("gemm", "bfloat16", M=m, N=n, K=k)
        inputs = wl.make_inputs(case, "cuda", 1234)
        ref = wl.reference(case, inputs)
        calls = registered_calls("gemm", case, inputs, ref, ("torch", "triton:persistent"))
        a, b = inputs["a"], inputs["b"]
        for name, (stages, tma_store) in FORMS.items():
            fn = lambda s=stages, t=tma_store: G.matmul(a, b, 128, 128, 64, s, sms, 2, t)  # noqa: E731
            fn()
            check_poisoned(f"pingpong {name}", fn, ref, wl.tolerance(case), a.dtype)
            calls[f"pp {name}"] = fn
        del ref
        times = round_times(calls, 5)
        med = {name: sorted(v)[len(v) // 2] for name, v in times.items()}
        ratios = "  ".join(f"{name} {med['torch'] / t:.3f}" for name, t in med.items() if name != "torch")
        print(f"{m}x{n}x{k} cuBLAS {med['torch']:.1f}us {2 * m * n * k / med['torch'] / 1e6:.0f}TF | {ratios}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
