"""How much does a power-capped GEMM's median depend on what the card did just before?

    python3 -m lab.power_settle [--trials 8] [--impls torch triton]

For bf16 8192^3 (compute bound, at the H200's 700 W cap) and each
implementation, every trial first conditions the card for two seconds,
alternately idle or running a 4096^3 GEMM back to back, then takes three
medians under the suite's default protocol (events timer, cold L2, up to 100
samples in about 150 ms, or --budget-ms and --max-samples): at once (m1), right after (m2), and after 300 ms of
the op back to back (m3).  If m1 moves with the conditioning and m3 does not,
a settle before the samples removes the spread that a run-to-run comparison
sees; if m3 still moves, the spread is the card's temperature, slower than
any settle a sweep can afford.
"""
from __future__ import annotations

import argparse
import statistics
import time


def _busy(fn, seconds: float) -> None:
    import torch

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--impls", nargs="+", default=["torch", "triton"])
    p.add_argument("--budget-ms", type=float, default=None, help="each median's sample budget (default: the suite's)")
    p.add_argument("--max-samples", type=int, default=None)
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("power_settle: needs a CUDA GPU")

    from suite.timing import measure
    from suite.workload import Case, discover

    reg = discover()
    wl = reg.workloads["gemm"]
    case = Case.make("gemm", "bfloat16", M=8192, N=8192, K=8192)
    heat_case = Case.make("gemm", "bfloat16", M=4096, N=4096, K=4096)
    heat_in = wl.make_inputs(heat_case, "cuda", 3)
    heater = reg.get("gemm", "torch")

    def heat():
        heater.fn(**heat_in)

    limits = {k: v for k, v in (("budget_ms", args.budget_ms), ("max_samples", args.max_samples)) if v}
    rows = []
    for name in args.impls:
        impl = reg.get("gemm", name)
        inputs = wl.make_inputs(case, "cuda", 5)

        def call():
            impl.fn(**inputs)

        call()
        torch.cuda.synchronize()
        for trial in range(args.trials):
            cond = "idle" if trial % 2 == 0 else "heavy"
            if cond == "idle":
                time.sleep(2.0)
            else:
                _busy(heat, 2.0)
            m1 = measure([call], "cuda", "events", **limits).median
            m2 = measure([call], "cuda", "events", **limits).median
            _busy(call, 0.3)
            m3 = measure([call], "cuda", "events", **limits).median
            rows.append((name, trial, cond, m1, m2, m3))
            print(f"{name:8s} trial {trial} after {cond:5s}: m1 {m1:.4f} m2 {m2:.4f} m3 {m3:.4f} ms", flush=True)
    print()
    print("impl      cond   median m1  m3   spread (max/min) m1  m2  m3")
    for name in args.impls:
        for cond in ("idle", "heavy", "all"):
            sel = [r for r in rows if r[0] == name and (cond == "all" or r[2] == cond)]
            cols = [[r[i] for r in sel] for i in (3, 4, 5)]
            print(f"{name:8s}  {cond:5s}  {statistics.median(cols[0]):.4f} {statistics.median(cols[2]):.4f}  "
                  + "  ".join(f"{max(c) / min(c):.3f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
