"""Does heating the card before the profiled calls bring ncu's duration to the suite's median?

    python3 -m lab.ncu_heat OUT_DIR [HEAT_MS ...]

For compute-bound rows at the H200's 700 W cap the suite's median (sustained
load, power-limited clock) and ncu's duration (one kernel on an idle card)
differ by 6-12%.  For each row below: the suite's events median, then ncu's
duration with the op run back to back for each HEAT_MS (default 0 and 1000)
before the profiled range; prints ncu_ratio per heat, for the suite's full
metric set (kernel replay: several passes, memory saved and restored between
them) and for the duration alone (one pass, nothing saved: the profiled
kernel follows the heat directly).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROWS = [("gemm", "bfloat16", dict(M=8192, N=8192, K=8192), ("torch", "triton", "cuda:wgmma")),
        ("attention", "bfloat16", dict(B=4, H=32, S=4096, D=128, causal=0), ("torch:cudnn", "cuda")),
        ("gelu", "bfloat16", dict(N=1 << 28), ("triton",))]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    import torch

    from suite import ncu, replay
    from suite.timing import measure
    from suite.workload import Case, discover

    out, heats = Path(argv[0]), [float(h) for h in argv[1:]] or [0.0, 1000.0]
    reg = discover()
    for workload, dtype, shape, impls in ROWS:
        case = Case.make(workload, dtype, **shape)
        inputs = reg.workloads[workload].make_inputs(case, "cuda", 7)
        for name in impls:
            impl = reg.get(workload, name)
            impl.fn(**inputs)
            ms = measure([lambda: impl.fn(**inputs)], "cuda", "events").median
            ratios = []
            for heat in heats:
                spec = replay.spec(case, name, 7, (), torch.cuda.current_device(), ncu.WARMUP,
                                   ncu.CALLS, "cold-clean", heat)
                tag = f"{workload}-{name.replace(':', '_')}-{heat:.0f}"
                row = ncu.profile(spec, out, tag, ms)
                ratios.append(f"heat {heat:.0f} ms: all {row['ncu_ratio']:.3f}, time only {_time_only(spec, out / (tag + '-t'), ms):.3f}")
            print(f"{workload} {dtype} {case.label} {name}: median {ms:.3f} ms; " + "; ".join(ratios),
                  flush=True)
    return 0


def _time_only(spec: dict, report: Path, ms: float) -> float:
    """ncu_ratio from a run that collects gpu__time_duration alone (one pass)."""
    import os

    from suite import ncu

    exe = ncu.find_ncu()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    rc, out = ncu._run(ncu.command(exe, [ncu.TIME], report, spec), ncu.TIMEOUT_S, env)
    rc, text = ncu._run([exe, "--import", f"{report}.ncu-rep", "--page", "raw", "--csv",
                         "--print-units", "base"], ncu.TIMEOUT_S, env)
    kernels, _ = ncu.parse_raw_csv(text)
    return ncu.summarize(kernels, spec["calls"], ms).get("ncu_ratio", float("nan"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
