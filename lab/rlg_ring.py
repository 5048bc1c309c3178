"""Does streaming residual_layernorm_gelu rows through a shared-memory ring by TMA
(lab/_rlg_ring.py, Gluon for sm_90) beat the register kernels at the fuzz preset's
wide rows, where they stay below 0.85 of the 2:1 copy rate?

A one-off device comparison (``python3 -m lab.rlg_ring`` on the H200; its output is
in lab/findings/): each config of the ring that fits, checked against float64 on a
NaN-filled output, and the ring's loads alone (the consumers only give the slots
back), timed with the suite's events timer beside the shipped Triton kernel (as the
suite calls it), the CUDA one and torch.add of the same x and r (the 2:1 traffic
mix the suite's ceiling is measured with, here at the case's size); the copy rate
is measured in the same run.
"""
from __future__ import annotations

import sys

SHAPES = (("bfloat16", 1597, 13437), ("bfloat16", 1296, 13920), ("bfloat16", 1685, 14464),
          ("bfloat16", 1075, 14749), ("bfloat16", 1949, 6656), ("float32", 631, 13381),
          ("float32", 1279, 5093), ("float32", 2208, 4721), ("float32", 6408, 1200))


def main(argv: list[str] | None = None) -> int:
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("rlg_ring needs a CUDA GPU (sm_90: TMA)", file=sys.stderr)
        return 2
    from implementations._shared.row_tuning import sm_count
    from lab import _rlg_ring as R
    from lab._probe import check_poisoned, print_table, registered_calls, rlg_shipped, time_us, variant_row
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    sms = sm_count(0)
    want = argv or []
    rows = []
    for dtype, m, n in SHAPES:
        if want and dtype not in want:
            continue
        args, gb, rel, row = rlg_shipped(dtype, m, n, 50)
        rows.append(row)
        case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
        inputs = dict(zip(("x", "r", "weight", "bias", "eps"), args))
        ref = wl.reference(case, inputs)
        x, r, w, b, eps = args
        y = torch.empty_like(x)
        for name, fn in registered_calls("residual_layernorm_gelu", case, inputs, ref, ["cuda"]).items():
            t = time_us(fn)
            rows.append((dtype, f"{m}x{n}", name, "", t, gb / t * 1e6, rel(fn())))
        t = time_us(lambda: torch.add(x, r, out=y))
        rows.append((dtype, f"{m}x{n}", "torch.add(x, r) (same bytes less w, b)", "", t, gb / t * 1e6, float("nan")))
        for g, warps in R.configs(n, x.element_size()):
            ng, stages = R.plan(n, x.element_size(), g)

            def run(out=None, g=g, warps=warps):
                return R.rlg(x, r, w, b, eps, torch.empty_like(x) if out is None else out, g, warps, sms), None

            check_poisoned(R.label((g, warps)), lambda: run()[0], ref, wl.tolerance(case), x.dtype)
            rows.append(variant_row(dtype, f"{m}x{n}", R.label((g, warps)), x, gb, rel, run,
                                    lambda k, ng=ng, stages=stages, g=g: f"{stages} slots of {ng * g} chunks"))
        t = time_us(lambda: R.rlg(x, r, w, b, eps, y, 4, 4, sms, skip=True))
        # the loads alone move x and r: 2/3 of the case's bytes
        rows.append((dtype, f"{m}x{n}", "ring g4,w4 loads only", "", t, gb * 2 / 3 / t * 1e6, float("nan")))
    print_table(rows, "rel. error")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
