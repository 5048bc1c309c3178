"""Runs one row kernel a few times on fresh inputs, for Nsight Compute to profile.

    ncu --clock-control none --kernel-name regex:KERNEL --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \\
        python3 -m lab.ncu_rows softmax-cuda-19 4096 131072 bfloat16

Targets: ``softmax-cuda-V`` / ``rlg-cuda-V`` (the CUDA op's plan V),
``softmax-triton-split`` (the PAIRS split kernel, 16384-wide chunks on 8
warps, as tuned on the H200) and ``rlg-triton-rows`` (one whole 16-bit row on
32 warps).  The Triton kernels are launched directly with those configs, so
that no autotuning launches precede the profiled one.
"""
from __future__ import annotations

import sys

import torch


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    target, m, n, dtype = argv[0], int(argv[1]), int(argv[2]), getattr(torch, argv[3])
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    r = torch.randn(m, n, device="cuda", dtype=dtype)
    w = 1 + 0.1 * torch.randn(n, device="cuda", dtype=dtype)
    b = 0.1 * torch.randn(n, device="cuda", dtype=dtype)
    kind, backend, choice = target.split("-", 2)
    if backend == "cuda":
        import importlib

        importlib.import_module(f"implementations.{'softmax' if kind == 'softmax' else 'residual_layernorm_gelu'}"
                                ".cuda").ops()
        ks = torch.ops.kernel_suite
        run = ((lambda: ks.softmax_v(x, int(choice))) if kind == "softmax"
               else (lambda: ks.residual_layernorm_gelu_v(x, r, w, b, 1e-5, int(choice))))
    elif target == "softmax-triton-split":
        import triton

        from implementations.softmax import triton as sm

        def run():
            y = torch.empty_like(x)
            chunks = triton.cdiv(n, 16384)
            stats = torch.empty(m * 2 * triton.next_power_of_2(chunks), device="cuda")
            count = torch.zeros(m + 1, device="cuda", dtype=torch.int32)
            sm._softmax_split[(m * chunks,)](x, y, stats, count, n, triton.next_power_of_2(m), BLOCK=16384,
                                             SUB=16384, P_MAX=triton.next_power_of_2(chunks), MODE=0, EVICT="",
                                             PAIRS=True, num_warps=8, maxnreg=64)
            return y
    elif target == "rlg-triton-rows":
        import triton

        from implementations.residual_layernorm_gelu import triton as rlg

        def run():
            y = torch.empty_like(x)
            rlg._rlg_rows[(m,)](x, r, w, b, y, m, n, 1e-5, triton.next_power_of_2(m), ROWS=1,
                                BLOCK_N=triton.next_power_of_2(n), EXACT=False, EVEN_N=n == triton.next_power_of_2(n),
                                ALIGN=rlg.row_align(n, x.element_size()), WB_EARLY=False, EVICT="", num_warps=32)
            return y
    else:
        print(f"unknown target {target!r}\n{__doc__}", file=sys.stderr)
        return 2
    for _ in range(4):
        run()
    torch.cuda.synchronize()
    print(f"{target} {m}x{n} {argv[3]}: ran 4 times")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
