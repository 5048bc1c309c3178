"""A TMA-fed skinny GEMM (lab/skinny_tma.cu) against gemm_skinny and cuBLAS, on a GPU (sm_90).

``python3 -m lab.skinny_tma [--seed S] [--count N] [--dtype bfloat16]``

The shapes are lab.skinny_probe's (a seeded random set with M from 1 to 16,
plus its decode and fuzz shapes), kept where K and N are multiples of 8 (the
tensor maps need 16-byte rows).  Each form's result is checked against the
float64 product with the gemm workload's tolerance before anything is timed;
then cuBLAS, gemm_skinny as registered (its tensor-core form) and the TMA
kernel at 10 and 6 stages of 20 KB are timed by the suite's events timer in
alternating rounds.  The table gives cuBLAS's median in us and cuBLAS / form
(above 1: ours is faster), then per form the worst ratio and the geometric mean.
"""
from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import torch

from lab.skinny_probe import EXTRA, shapes, time_us
from suite import verify
from suite.workload import Case, discover

ROOT = Path(__file__).resolve().parents[1]


def _build():
    from torch.utils.cpp_extension import load

    from implementations._shared import cuda_ext
    from suite import cuda_build

    cuda_flags, cxx_flags = cuda_build.build_flags(hopper=True)
    build = cuda_build.cache_root() / "skinny_tma"
    build.mkdir(parents=True, exist_ok=True)
    return load(name="ksuite_skinny_tma", sources=[str(Path(__file__).with_suffix(".cu"))],
                extra_cuda_cflags=cuda_flags, extra_cflags=cxx_flags,
                extra_include_paths=[str(cuda_ext.INCLUDE_DIR), str(ROOT / "implementations/gemm/cuda")],
                build_directory=str(build), verbose=False)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds a shape")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("skinny_tma needs a CUDA GPU")
    if torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("skinny_tma needs a Hopper GPU (sm_90: TMA)")

    from implementations.gemm.cuda import ops

    ext = _build()
    skinny_v = ops().gemm_skinny_v
    dtype = getattr(torch, args.dtype)
    wl = discover().workloads["gemm"]
    todo = [s for s in shapes(args.seed, args.count) + list(EXTRA) if s[1] % 8 == 0 and s[2] % 8 == 0]
    counters = torch.zeros(4096, dtype=torch.int32, device="cuda")
    forms = {"skinny": lambda a, b: skinny_v(a, b, 0),
             "tma10": lambda a, b: ext.run(a, b, counters, 10, 0),
             "tma6": lambda a, b: ext.run(a, b, counters, 6, 0)}
    print(f"{torch.cuda.get_device_name(0)}, {args.dtype}, seed {args.seed}")
    print(f"{'M x N x K':>20} {'cuBLAS us':>9} " + " ".join(f"{f:>7}" for f in forms))
    ratios: dict[str, dict] = {f: {} for f in forms}
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    for m, n, k in todo:
        a = torch.randn(m, k, generator=g, device="cuda").to(dtype)
        b = torch.randn(k, n, generator=g, device="cuda").to(dtype)
        ref = a.double() @ b.double()
        case = Case.make("gemm", args.dtype, M=m, N=n, K=k)
        calls = {"cuBLAS": lambda: torch.matmul(a, b)}
        for name, fn in forms.items():
            verify.poison_allocator("cuda", m * n * 2, dtype)
            out = fn(a, b)
            torch.cuda.synchronize()
            res = verify.check_case(wl, case, out, ref)
            if not res.correct:
                raise SystemExit(f"{m}x{n}x{k}: {name} is wrong: {res.message}")
            calls[name] = lambda fn=fn: fn(a, b)
        torch.matmul(a, b)
        times: dict = {name: [] for name in calls}
        for r in range(args.rounds):
            for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
                times[name].append(time_us(calls[name]))
        t = statistics.median(times["cuBLAS"])
        cells = []
        for name in forms:
            ratios[name][(m, n, k)] = t / statistics.median(times[name])
            cells.append(f"{ratios[name][(m, n, k)]:>7.3f}")
        print(f"{f'{m} x {n} x {k}':>20} {t:>9.2f} " + " ".join(cells), flush=True)
    for name, rs in ratios.items():
        worst = min(rs, key=rs.get)
        gm = math.exp(statistics.mean(math.log(r) for r in rs.values()))
        print(f"{name}: {len(rs)} shapes, worst {'x'.join(map(str, worst))} at {rs[worst]:.3f}, "
              f"geometric mean {gm:.3f}")


if __name__ == "__main__":
    main()
