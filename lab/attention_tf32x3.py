"""Would a hand-written CUDA float32 attention (three TF32 products on mma.sync)
keep up with torch's float32 SDPA and with triton:tf32x3?

A one-off device comparison (``python3 -m lab.attention_tf32x3`` on the H200;
its output goes to lab/findings/).  ``attention_tf32x3.cu`` beside this file is
an FA2-style forward: 64 query rows a CTA on 4 warps, K and V double buffered
by cp.async, every fragment split into a TF32 head and tail as it is read from
shared memory, three m16n8k8 MMAs a product (32- or 64-key tiles).  Per case,
each key-tile width of it, triton:tf32x3 and torch's float32 backends are
checked against float64 on a NaN-filled output, then timed in alternating
rounds with the suite's events timer.  Prints per case the median time and
TFLOP/s of each and its time as a ratio to the best of torch's.
``python3 -m lab.attention_tf32x3 [--cases B,H,S,D,causal;...] [--rounds N]``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

CASES = ((4, 32, 4096, 128, 0), (4, 32, 4096, 128, 1), (4, 32, 2048, 64, 0), (2, 16, 8191, 128, 0),
         (2, 16, 1000, 64, 1), (32, 32, 512, 64, 0), (3, 25, 3976, 128, 0))
TORCH = ("torch", "torch:efficient")


def _cases(text: str):
    return [tuple(int(x) for x in c.split(",")) for c in text.split(";")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=_cases, default=list(CASES), help="B,H,S,D,causal[;B,H,S,D,causal...]")
    ap.add_argument("--rounds", type=int, default=6, help="alternating timing rounds a case")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("attention_tf32x3 needs a CUDA GPU (sm_80 or newer)", file=sys.stderr)
        return 2
    from lab._probe import attention_rounds, build_extension, check_poisoned, registered_calls
    from suite.workload import Case, discover

    ext = build_extension("attention_tf32x3", Path(__file__).with_suffix(".cu"))
    wl = discover().workloads["attention"]
    summary = []
    for b, h, s, d, causal in args.cases:
        case = Case.make("attention", "float32", B=b, H=h, S=s, D=d, causal=causal)
        inputs = wl.make_inputs(case, "cuda", 1234)
        ref = wl.reference(case, inputs)
        calls = registered_calls("attention", case, inputs, ref, TORCH + ("triton:tf32x3",))
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        for bn in (32, 64):
            fn = lambda bn=bn: ext.run(q, k, v, bool(causal), bn)  # noqa: E731
            fn()
            check_poisoned(f"cuda bn={bn}", fn, ref, wl.tolerance(case), torch.float32)
            calls[f"cuda bn={bn}"] = fn
        del ref
        med, best_torch = attention_rounds(wl, case, calls, TORCH, args.rounds)
        cuda_best = min(t for name, t in med.items() if name.startswith("cuda"))
        summary.append((f"B{b} H{h} S{s} D{d} c{causal}", best_torch / med.get("triton:tf32x3", float("nan")),
                        best_torch / cuda_best))
    print("\nfloat32: speed as a ratio to the best of torch's backends (1.0 = as fast)")
    print(f"{'case':28s} {'triton':>7s} {'cuda':>7s}")
    for name, tri, cu in summary:
        print(f"{name:28s} {tri:7.3f} {cu:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
