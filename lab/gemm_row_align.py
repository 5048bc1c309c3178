"""Does cuda:wgmma trail cuBLAS because its operands' rows start off 128-byte lines?

``python3 -m lab.gemm_row_align [--tiles 3,9]`` on a GPU.  Each aligned fuzz
shape where cuda:wgmma stays under 0.90x cuBLAS is timed beside its twins
with K and N rounded to multiples of 64 (rows of A and B on whole 128-byte
lines), one at a time and both: a TMA box row of 128 bytes on a row that
starts 16-112 bytes into a line touches two lines, five 32-byte sectors
instead of four.  Then K is doubled and quadrupled at the aligned twin, to
see how much of the gap is a cost per output tile (start and epilogue)
rather than per k-step.  bf16, fresh random inputs, each output checked
against fp32 first; paired rounds of the suite's events timer (L2 flushed),
the order reversed every other round; ratios are cuBLAS's time over the
tile's in the same round.  Last, the rate of padding.onto_lines's copy
(the tuner's lined variants), in 8-byte words and element by element.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from lab._probe import round_times, spread

ROUNDS = 7


def _up64(x: int) -> int:
    return -(-x // 64) * 64


def shapes() -> list[tuple[str, int, int, int]]:
    out = []
    for m, n, k in ((1792, 5304, 2376), (1699, 2328, 1152), (7771, 4440, 2048)):
        out += [("fuzz", m, n, k), ("K on lines", m, n, _up64(k)), ("N on lines", m, _up64(n), k),
                ("both", m, _up64(n), _up64(k))]
    m, n, k = 1792, _up64(5304), _up64(2376)
    out += [("2 K", m, n, 2 * k), ("4 K", m, n, 4 * k)]
    out += [("control", 4096, 4096, 4096), ("control off", 4096, 4104, 4104)]
    seen: set[tuple[int, int, int]] = set()
    return [s for s in out if s[1:] not in seen and not seen.add(s[1:])]


def bench(tiles: list[int]) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_row_align needs a CUDA GPU (it times kernels; see lab/findings)")
    from implementations.gemm.cuda_wgmma import TILES, ops

    print("tiles: " + "; ".join(f"{t} = {TILES[t][2]}" for t in tiles))
    for label, m, n, k in shapes():
        g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
        a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
        b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
        want = a.float() @ b.float()
        calls = {"torch": lambda: torch.matmul(a, b)}
        for t in tiles:
            calls[f"tile {t}"] = lambda t=t: ops().gemm_wgmma(a, b, t)
        for name, fn in calls.items():
            err = ((fn().float() - want).norm() / want.norm()).item()
            if err > 1e-2:
                raise SystemExit(f"{name} at {m}x{n}x{k}: relative error {err:.1e}")
        times = round_times(calls, ROUNDS)
        tf = 2.0 * m * n * k / 1e6
        line = [f"{label:12s} {m:5d}x{n:5d}x{k:5d}",
                f"cuBLAS {statistics.median(times['torch']):7.1f} us {tf / statistics.median(times['torch']):4.0f} TF/s"]
        for t in tiles:
            v = times[f"tile {t}"]
            ratio = [x / y for x, y in zip(times["torch"], v)]
            line.append(f"tile {t} {tf / statistics.median(v):4.0f} TF/s x cuBLAS {spread(ratio)}")
        print("  ".join(line), flush=True)
        del a, b, want


def copy_rates() -> None:
    """GB/s of padding.onto_lines's copy (read and write) of the fuzz shapes'
    operands that are off lines, in 8-byte words and element by element."""
    from suite.timing import measure

    from implementations.gemm import padding

    for rows, cols in ((2376, 5304), (1792, 2376), (2048, 4440), (1152, 2328)):
        t = torch.randn(rows, cols, device="cuda").bfloat16()
        wide = t.new_empty((rows, -(-cols // 64) * 64))
        view = wide[:, :cols]
        forms = {"words": lambda: padding.onto_lines(t),
                 "elements": lambda: view.copy_(t)}
        for name, fn in forms.items():
            fn()
            assert torch.equal(view if name == "elements" else fn(), t)
        gb = 2 * t.numel() * 2 / 1e9
        line = [f"copy onto lines {rows:5d} x {cols:5d} bf16 ({gb * 1e3:.0f} MB moved)"]
        for name, fn in forms.items():
            us = measure([fn], "cuda", "events", min_samples=20, max_samples=20).median * 1e3
            line.append(f"{name} {us:6.1f} us {gb / us * 1e3:5.2f} TB/s")
        print("  ".join(line), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="3,9", help="cuda:wgmma tiles to time (comma-separated)")
    bench([int(t) for t in ap.parse_args(argv).tiles.split(",")])
    copy_rates()


if __name__ == "__main__":
    main()
