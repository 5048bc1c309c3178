"""Time each tile of the CUDA GEMM against cuBLAS on this GPU, to pick the automatic one.

    python -m implementations.gemm.cuda.tune [--sizes 4096 8192] [--dtypes bfloat16 float16]

Prints TFLOP/s per (size, dtype, tile) and the ratio to torch.matmul.  Warm
L2 and back-to-back launches: a quick ranking of tiles for compute-bound
squares, not the suite's cold-L2 measurement.
"""
from __future__ import annotations

import argparse


def _time_ms(fn, iters: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main(argv=None) -> int:
    import torch

    from implementations.gemm.cuda import TILES, _TUNER, _key, gemm_tile, ops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args(argv)
    ops()
    for n in args.sizes:
        for name in args.dtypes:
            dt = getattr(torch, name)
            a = torch.randn(n, n, device="cuda").to(dt)
            b = torch.randn(n, n, device="cuda").to(dt)
            flops = 2.0 * n ** 3
            ref_ms = _time_ms(lambda: torch.matmul(a, b), args.iters)
            print(f"{n}^3 {name}: cuBLAS {flops / ref_ms / 1e9:7.1f} TFLOP/s")
            want = torch.matmul(a.float(), b.float())
            key = _key(name, n, n, n)
            for tile, desc in TILES.items():
                if not _TUNER.runs(tile, key):
                    continue
                ms = _time_ms(lambda: gemm_tile(a, b, tile), args.iters)
                err = (gemm_tile(a, b, tile).float() - want).norm() / want.norm()
                print(f"  tile {tile} ({desc}): {flops / ms / 1e9:7.1f} TFLOP/s, "
                      f"{ref_ms / ms:.2f} x cuBLAS, rel err {err:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
