"""Does splitting the ragged last wave along K pay in the persistent TMA matmul?

``python3 -m lab.gemm_split_tail`` on the H200.  triton:persistent runs the
tiles that fill whole waves of the SMs as they are and cuts the rest into K
slices (plan).  For aligned bf16 shapes off the powers of two, the
shipped call (autotuned, split where split_plan says so) is timed in paired
rounds against the same config with the split turned off (every tile whole),
each checked against cuBLAS's output first; cuBLAS is timed in the same rounds.
"""
import statistics

import torch

from implementations.gemm import _triton_persistent as P
from lab._probe import round_times, spread

SHAPES = [(1699, 2328, 1152), (1792, 5304, 2376), (3536, 2560, 5376), (7771, 4440, 2048), (6356, 1416, 1616),
          (7751, 5408, 1792), (4019, 5792, 1496), (5180, 2776, 1328), (2000, 3000, 1000), (3000, 6000, 2000)]


def whole(m, n, k, bm, bn, bk, sms):
    return -(-m // bm) * -(-n // bn), 1


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_split_tail needs a CUDA GPU (it times kernels; see lab/findings)")
    shipped = P.plan
    print("M x N x K: time / cuBLAS's in the same round, median [p20, p80] over 10 rounds; config")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = (a @ b).float()
        c, config = P.matmul(a, b)  # tunes
        calls = {"cublas": lambda: a @ b}
        for name, plan in (("split", shipped), ("whole", whole)):
            P.plan = plan
            y = P.matmul(a, b)[0].float()
            err = ((y - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"{m}x{n}x{k} {name}: relative error {err:.1e}")

            def call(plan=plan):
                P.plan = plan
                return P.matmul(a, b)

            calls[name] = call
        times = round_times(calls, 10)
        P.plan = shipped
        ratios = {k2: [x / y for x, y in zip(times[k2], times["cublas"])] for k2 in ("split", "whole")}
        print(f"{m}x{n}x{k}: cuBLAS {statistics.median(times['cublas']):.1f} us; split {spread(ratios['split'])}; "
              f"whole {spread(ratios['whole'])}; {config}", flush=True)


if __name__ == "__main__":
    bench()
