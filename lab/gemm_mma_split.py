"""Does gemm_mma's split-K plan pick a good slice count where few tiles meet a long K?

``python3 -m lab.gemm_mma_split`` on the H200.  At the shapes that ran at
0.04-0.22x of cuBLAS unsplit (most on the guarded path: K or N odd), the
automatic tile is timed in paired rounds with the plan's slice count, no
split, half and twice the plan's count, and the most one wave allows (each
slice at least four k-tiles), every one checked against cuBLAS's output
first; cuBLAS in the same rounds.  The plan's cost model (split_slices in
gemm_mma.cu) has two estimated constants, a guarded k-tile at four aligned
ones and a partial's read at half a k-tile's bytes' time: the counts around
the plan's show whether they hold.
"""
import statistics

import torch

from lab._probe import round_times, spread

SHAPES = [(27, 256, 5959), (101, 911, 3719), (256, 179, 1813), (32, 768, 1877), (333, 717, 3697),
          (479, 241, 1584), (39, 2376, 6711), (67, 1928, 4493), (403, 256, 5768)]


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_mma_split needs a CUDA GPU (it times kernels; see lab/findings)")
    from implementations.gemm.cuda import SPLIT_MIN_KTILES, TILE_SHAPES, auto_tile, ops

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("M x N x K: time / cuBLAS's in the same round, median [p20, p80] over 10 rounds, by slice count")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        aligned = k % 8 == 0 and n % 8 == 0
        tile = auto_tile(m, n, k, sms) if aligned else 0
        plan, tiles, per_sm = ops().gemm_mma_split_plan(m, n, k, tile, aligned, torch.bfloat16)
        kt = -(-k // TILE_SHAPES[tile][2])
        wave = max(1, min(sms * per_sm // tiles, kt // SPLIT_MIN_KTILES))
        counts = sorted({1, plan, max(1, plan // 2), min(2 * plan, kt), wave})
        ref = (a @ b).float()
        calls = {"cublas": lambda: a @ b}
        for s in counts:
            y = ops().gemm_mma(a, b, tile, s).float()
            err = ((y - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"{m}x{n}x{k} S={s}: relative error {err:.1e}")
            calls[f"S={s}"] = lambda s=s: ops().gemm_mma(a, b, tile, s)
        times = round_times(calls, 10)
        cells = [f"{name}{'*' if name == f'S={plan}' else ''} {spread([x / y for x, y in zip(v, times['cublas'])])}"
                 for name, v in times.items() if name != "cublas"]
        print(f"{m}x{n}x{k} tile {tile}{'' if aligned else ' guarded'}, {tiles} tiles, wave {sms * per_sm}: "
              f"cuBLAS {statistics.median(times['cublas']):.1f} us; " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    bench()
