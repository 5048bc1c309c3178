"""softmax at 1823 x 781, the full preset's unaligned short-row shape, in paired rounds.

``python3 -m lab.softmax_short_rows`` on the H200.  The
rows (781 elements) are not 16-byte multiples, so the CUDA op runs its
any-alignment plans (softmax.cu 15-17, 26), a warp a row.  A kernel here
lasts about 7 us, and single suite runs have put the tuned CUDA op from
0.98 to 1.05 of torch.compile's speed.  This times the registered
implementations and each of those plans in rounds of 8 samples (suite events
timer, L2 flushed before each), the order reversed every other round, and
gives each one's time as a ratio to torch.compile's within the round.
(At 0bcf19f it also timed plans 34 and 35, 17 and 15 on one-warp blocks
instead of four-row ones: no faster, and removed; lab/findings/
softmax_short_rows-0bcf19f.txt.)
"""
from __future__ import annotations

import torch

from lab._probe import check_poisoned, paired_rounds, registered_calls
from suite.workload import Case, discover

M, N = 1823, 781
ROUNDS = 15
IMPLS = ("torch", "compile", "triton", "cuda")
PLANS = (15, 16, 17, 26)


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("softmax_short_rows needs a CUDA GPU (it times kernels; see lab/findings)")
    from implementations.softmax.cuda import _runs, ops

    wl = discover().workloads["softmax"]
    for dtype in ("float32", "bfloat16"):
        case = Case.make("softmax", dtype, M=M, N=N)
        inputs = wl.make_inputs(case, "cuda", 2025)
        ref = wl.reference(case, inputs)
        calls = registered_calls("softmax", case, inputs, ref, IMPLS)
        x = inputs["x"]
        for v in PLANS:
            if not _runs(v, dtype, N, 0):
                print(f"{dtype} plan {v}: does not run this shape")
                continue
            calls[f"cuda v{v}"] = fn = lambda v=v: ops().softmax_v(x, v)
            check_poisoned(f"cuda v{v}", fn, ref, wl.tolerance(case), x.dtype)
        paired_rounds(calls, ROUNDS, wl.min_bytes(case) / 1e9, f"{dtype} {M} x {N}", peer="compile")


if __name__ == "__main__":
    bench()
