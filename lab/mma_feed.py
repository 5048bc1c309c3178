"""What feeding the tensor pipe costs the mma.sync GEMM, step by step.

    python3 -m lab.mma_feed [--stages 248] [--out feed.csv]     (GPU only, sm_90)

``mma_feed.cu`` runs the consumer loop of the warp-specialised mma.sync GEMM
(the ``cuda`` GEMM's tile 11: 128 x 256 x 64, 8 warps of 64 x 64, 4 stages)
on data that is already on chip, one CTA an SM, in three steps: the mma
alone on register fragments (and, as a reference, the same mma all reading
one A and one B fragment); + the ldmatrix loads from the swizzled stages;
+ the producer's bulk-copy refills over the full/empty mbarrier ring (from a
buffer that stays in L2).  Beside them, in the same process: the GEMM itself
and cuBLAS (``torch.matmul``) at 4096^3 and 8192^3.  ``--stages`` k-tiles a
CTA (248 is what a CTA of the 4096^3 GEMM runs: 512 tiles x 64 k-tiles over
132 SMs).  ``tflops`` is the whole launch timed by the suite's events timer
(for the loops that includes filling shared memory, 192 KiB a CTA, and the
launch); each loop also reports, from block 0's own clock64 and globaltimer
over the loop alone, the SM clock it ran at, its FLOPs a SM-cycle (which do
not depend on the clock) and the rate that makes on every SM at that clock
(``loop_tflops``).  The GEMM can reach at most the last step's loop rate,
less its DRAM and L2 misses, its epilogue, its prologue and its last
partial wave.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

STAGE_BYTES = 48 * 1024
STAGES = 4
FLOPS_PER_STAGE_PER_CTA = 2 * 128 * 256 * 64  # one 64-deep k-tile of a 128 x 256 tile
STEPS = {3: "mma, one A and B fragment for all", 0: "mma on register fragments",
         1: "+ ldmatrix from the stages", 2: "+ bulk-copy refills (L2)"}


def _build():
    from lab._probe import build_extension

    return build_extension("mma_feed", Path(__file__).with_suffix(".cu"))


def _ms(fn, samples: int = 20) -> float:
    from suite.timing import measure

    return measure([fn], "cuda", "events", min_samples=samples, max_samples=samples).median


def feed_rates(ext, stages: int) -> list[dict]:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(sms * 256, device="cuda")
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        src = torch.randn(STAGES * STAGE_BYTES // 2, device="cuda").to(dtype)
        for mode, step in STEPS.items():
            clocks = None

            def go():
                nonlocal clocks
                clocks = ext.run(src, out, sms, stages, mode, dtype == torch.bfloat16)

            ms = _ms(go)
            cyc, ns = (int(v) for v in clocks.tolist())
            ghz = cyc / ns if ns else float("nan")
            per_clock = stages * FLOPS_PER_STAGE_PER_CTA / cyc  # block 0's loop alone
            rows.append(dict(dtype=str(dtype).removeprefix("torch."), what=f"loop {mode}: {step}",
                             tflops=sms * stages * FLOPS_PER_STAGE_PER_CTA / ms / 1e9, sm_ghz=ghz,
                             loop_flop_per_sm_clock=per_clock, loop_tflops=per_clock * sms * ghz / 1e3))
    return rows


def gemm_rates(sizes=(4096, 8192)) -> list[dict]:
    import torch

    from implementations.gemm.cuda import gemm_tile, ops

    ops()
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for n in sizes:
            a = torch.randn(n, n, device="cuda").to(dtype)
            b = torch.randn(n, n, device="cuda").to(dtype)
            for what, fn in ((f"cuBLAS {n}^3", lambda: torch.matmul(a, b)),
                             (f"GEMM tile 11 {n}^3", lambda: gemm_tile(a, b, 11))):
                ms = _ms(fn)
                rows.append(dict(dtype=str(dtype).removeprefix("torch."), what=what, tflops=2 * n**3 / ms / 1e9))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", type=int, default=248, help="k-tiles each CTA runs (default: 248)")
    ap.add_argument("--out", help="also write every measurement here as CSV")
    args = ap.parse_args(argv)
    if args.stages < 1:
        ap.error("--stages must be at least 1")
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("mma_feed needs a CUDA GPU of compute capability 9.0 (Hopper)", file=sys.stderr)
        return 2
    import pandas as pd

    table = pd.DataFrame(feed_rates(_build(), args.stages) + gemm_rates())
    print(f"device: {torch.cuda.get_device_name(0)}; {args.stages} k-tiles a CTA in the loops")
    for dtype, g in table.groupby("dtype", sort=False):
        blas = g[g.what == "cuBLAS 4096^3"].tflops.iloc[0]
        g = g.assign(x_cublas_4096=g.tflops / blas)
        print(g.to_string(index=False, float_format="%.3f", na_rep="-"))
        print()
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
