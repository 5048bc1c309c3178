"""Runs one bf16 GEMM three times on fresh inputs, for Nsight Compute to profile the third.

    ncu --clock-control none --kernel-name regex:"gemm|nvjet|xmma|cutlass" --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight python3 -m lab.gemm_ncu_pair blas 1792 5304 2376

Targets: ``blas`` (torch.matmul, cuBLAS) and ``wgmma-T`` (cuda:wgmma's op with tile T).
"""
from __future__ import annotations

import sys

import torch


def main(argv: list[str]) -> int:
    if len(argv) != 4 or not (argv[0] == "blas" or argv[0].startswith("wgmma-")):
        print(__doc__, file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gemm_ncu_pair needs a CUDA GPU", file=sys.stderr)
        return 1
    kind, (m, n, k) = argv[0], map(int, argv[1:])
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    if kind == "blas":
        def run():
            return torch.matmul(a, b)
    else:
        from implementations.gemm.cuda_wgmma import ops

        tile = int(kind.split("-", 1)[1])

        def run():
            return ops().gemm_wgmma(a, b, tile)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
