"""Ceiling of the warp-level tensor-core instruction the cuda GEMM uses.

``python3 -m lab.mma_peak`` (GPU only) builds ``mma_peak.cu`` and times a
kernel that does nothing but issue ``mma.sync.m16n8k16`` (bf16 and fp16 in,
fp32 accumulate) from registers, over a grid of chain counts, warps per block
and blocks per SM, and puts its best rate beside cuBLAS (``torch.matmul``) at
the GEMM workload's square shapes, measured in the same process.  The ratio
is the most an mma.sync GEMM can reach against cuBLAS on this GPU, before any
memory traffic, shared-memory staging or epilogue.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

FLOPS_PER_MMA = 2 * 16 * 8 * 16


def _build():
    from torch.utils.cpp_extension import load

    from suite import cuda_build

    cuda_flags, cxx_flags = cuda_build.build_flags(False)
    return load(name="ksuite_mma_peak", sources=[str(Path(__file__).with_suffix(".cu"))],
                extra_cuda_cflags=cuda_flags, extra_cflags=cxx_flags,
                build_directory=str(_build_dir()), verbose=False)


def _build_dir() -> Path:
    from suite import cuda_build

    d = cuda_build.cache_root() / "mma_peak"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _events_ms(fn, samples: int = 5) -> float:
    """Median of ``samples`` timings of fn by the suite's events timer."""
    from suite.timing import measure

    return measure([fn], "cuda", "events", min_samples=samples, max_samples=samples).median


def mma_rates(ext, target_ms: float = 40.0) -> list[dict]:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    seed = torch.randint(-2**30, 2**30, (256,), dtype=torch.int32, device="cuda")
    rows = []
    for bf16 in (True, False):
        for chains in (2, 4, 8):
            for warps in (4, 8, 16):
                for per_sm in (1, 2, 4):
                    blocks, threads = sms * per_sm, 32 * warps
                    if warps * per_sm > 64:
                        continue
                    out = torch.empty(blocks * threads, device="cuda")
                    iters = 256
                    ms = _events_ms(lambda: ext.run(seed, out, blocks, threads, iters, chains, bf16), 2)
                    iters = max(256, int(iters * target_ms / max(ms, 1e-3)))
                    clocks = None

                    def go():
                        nonlocal clocks
                        clocks = ext.run(seed, out, blocks, threads, iters, chains, bf16)

                    ms = _events_ms(go)
                    mmas = blocks * warps * iters * chains
                    cyc, ns = (int(v) for v in clocks.tolist())
                    tflops = mmas * FLOPS_PER_MMA / ms / 1e9
                    ghz = cyc / ns if ns else float("nan")
                    rows.append(dict(dtype="bfloat16" if bf16 else "float16", chains=chains, warps=warps,
                                     blocks_per_sm=per_sm, tflops=tflops, sm_ghz=ghz,
                                     flop_per_sm_clock=tflops * 1e3 / sms / ghz))
    return rows


def cublas_rates(sizes=(4096, 8192)) -> list[dict]:
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            ms = _events_ms(lambda: torch.matmul(a, b), 10)
            rows.append(dict(dtype=str(dtype).removeprefix("torch."), n=n, tflops=2 * n**3 / ms / 1e9))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="also write every measurement here as CSV")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("mma_peak needs a CUDA GPU", file=sys.stderr)
        return 2
    import pandas as pd

    ext = _build()
    mma = pd.DataFrame(mma_rates(ext))
    blas = pd.DataFrame(cublas_rates())
    print(f"device: {torch.cuda.get_device_name(0)}")
    print(mma.sort_values("tflops", ascending=False).head(12).to_string(index=False, float_format="%.2f"))
    print()
    for dtype, g in blas.groupby("dtype"):
        best = mma[mma.dtype == dtype].tflops.max()
        for _, r in g.iterrows():
            print(f"{dtype} n={r.n}: cuBLAS {r.tflops:.0f} TFLOP/s; mma.sync issue ceiling {best:.0f} "
                  f"= {best / r.tflops:.3f} x cuBLAS")
    if args.out:
        pd.concat([mma.assign(kind="mma.sync"), blas.assign(kind="cublas")]).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
