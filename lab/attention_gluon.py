"""Does the Gluon attention kernel (implementations/attention/_gluon_flash.py: TMA
ring, the next block's QK^T issued beside this block's P V) close the Triton
attention's gap to cuDNN?

A one-off device comparison (``python3 -m lab.attention_gluon`` on the H200; its
output goes to lab/findings/): for attention cases where the Triton kernel
trailed torch's best in the fuzz runs (D = 128 most of all), each Gluon config,
the Triton FA2 kernel (autotuned), the registered op (which races the two) and torch's SDPA
backends are checked against float64 on a NaN-filled output, then timed in
alternating rounds with the suite's events timer.  Prints per case the median
time and TFLOP/s of each, and each one's time as a ratio to the best of torch's.
``python3 -m lab.attention_gluon [dtype] [--cases B,H,S,D,causal;...]`` times
other cases than CASES.
"""
from __future__ import annotations

import sys

CASES = ((5, 20, 4096, 128, 0), (2, 16, 4073, 128, 0), (11, 12, 2579, 128, 0), (1, 12, 3529, 128, 1),
         (4, 20, 3329, 128, 1), (1, 40, 1416, 128, 1), (1, 16, 7168, 64, 1), (3, 28, 4608, 64, 0),
         (88, 25, 193, 128, 1))
TORCH = ("torch", "torch:cudnn", "torch:flash")


def main(argv: list[str] | None = None) -> int:
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (sm_90)", file=sys.stderr)
        return 2
    from implementations.attention import _gluon_flash as G
    from implementations.attention import _triton_flash as A
    from lab._probe import attention_rounds, check_poisoned, registered_calls
    from suite.workload import Case, discover

    wl = discover().workloads["attention"]
    argv = list(argv or [])
    cases = CASES
    if "--cases" in argv:  # --cases B,H,S,D,causal[;B,H,S,D,causal...]
        i = argv.index("--cases")
        cases = [tuple(int(x) for x in c.split(",")) for c in argv[i + 1].split(";")]
        del argv[i:i + 2]
    dtype = argv[0] if argv else "bfloat16"
    summary = []
    for b, h, s, d, causal in cases:
        case = Case.make("attention", dtype, B=b, H=h, S=s, D=d, causal=causal)
        inputs = wl.make_inputs(case, "cuda", 1234)
        ref = wl.reference(case, inputs)
        calls = registered_calls("attention", case, inputs, ref, TORCH + ("triton",))
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        fa2 = lambda: A._triton(q, k, v, bool(causal))[0]  # noqa: E731
        fa2()
        check_poisoned("triton FA2 kernel", fa2, ref, wl.tolerance(case), q.dtype)
        calls["triton FA2"] = fa2
        for cfg in G.CONFIGS[d]:
            fn = lambda cfg=cfg: G.attention(q, k, v, bool(causal), *cfg)  # noqa: E731
            fn()
            name = G.label(cfg)
            check_poisoned(name, fn, ref, wl.tolerance(case), q.dtype)
            calls[name] = fn
        del ref
        med, best_torch = attention_rounds(wl, case, calls, TORCH, 6)
        gl_best = min(v for k, v in med.items() if k.startswith("gluon"))
        summary.append((f"B{b} H{h} S{s} D{d} c{causal}", best_torch / med["triton FA2"], best_torch / gl_best,
                        best_torch / med["triton"]))
    print(f"\n{dtype}: speed as a ratio to the best of torch's backends (1.0 = as fast); 'raced' is the "
          f"registered op, which races the two")
    print(f"{'case':28s} {'FA2':>7s} {'gluon':>7s} {'raced':>7s}")
    for name, tri, glu, raced in summary:
        print(f"{name:28s} {tri:7.3f} {glu:7.3f} {raced:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
