"""The two skinny forms the `cuda` GEMM races on Hopper, against cuBLAS, on a GPU (sm_90).

``python3 -m lab.skinny_tma [--seed S] [--count N] [--dtype bfloat16] [--floor 0.85]``

The shapes are lab.skinny_probe's (a seeded random set with M from 1 to 16,
plus its decode and fuzz shapes), kept where K and N are multiples of 8 (the
tensor maps need 16-byte rows).  Each form's result is checked against the
float64 product with the gemm workload's tolerance before anything is timed;
then cuBLAS, gemm_skinny's tensor-core form and gemm_skinny_tma are timed by
the suite's events timer in alternating rounds.  The table gives cuBLAS's
median in us and cuBLAS / form (above 1: ours is faster), then per form the
worst ratio, the geometric mean and the shapes below --floor.
"""
from __future__ import annotations

import argparse

import torch

from lab.skinny_probe import EXTRA, race, shapes, summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds a shape")
    ap.add_argument("--floor", type=float, default=0.85, help="list shapes whose ratio is below this")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("skinny_tma needs a CUDA GPU")
    if torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("skinny_tma needs a Hopper GPU (sm_90: TMA)")

    from implementations.gemm.cuda import ops

    lib = ops()
    todo = [s for s in shapes(args.seed, args.count) + list(EXTRA) if s[1] % 8 == 0 and s[2] % 8 == 0]
    forms = {"skinny": lambda a, b: lib.gemm_skinny_v(a, b, 0), "tma": lib.gemm_skinny_tma}
    print(f"{torch.cuda.get_device_name(0)}, {args.dtype}, seed {args.seed}")
    print(f"{'M x N x K':>20} {'cuBLAS us':>9} " + " ".join(f"{f:>7}" for f in forms))
    ratios: dict[str, dict] = {f: {} for f in forms}
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    for m, n, k in todo:
        t, got = race(m, n, k, forms, args.dtype, g, args.rounds)
        for name, r in got.items():
            ratios[name][(m, n, k)] = r
        print(f"{f'{m} x {n} x {k}':>20} {t:>9.2f} " + " ".join(f"{got[f]:>7.3f}" for f in forms), flush=True)
    for name, rs in ratios.items():
        print(summary(name, rs, args.floor))


if __name__ == "__main__":
    main()
