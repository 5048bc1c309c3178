"""At the fuzz preset's memory-bound cases of at least 64 MiB that stay below 0.85 of
the measured copy rate, what does torch's own copy of the same bytes reach?

The suite's ceilings (suite/ceilings.py) are measured on 1 GiB buffers; a case of
64-200 MiB runs for 15-50 us, where a kernel's ramp and tail weigh more.  A one-off
device comparison (``python3 -m lab.size_ceilings`` on the H200; its output is in
lab/findings/): each case's torch op of the same traffic mix and bytes (softmax:
``y.copy_(x)``, 1:1; residual_layernorm_gelu: ``torch.add(x, r, out=y)``, 2:1 less w
and b) beside the ceiling's own op on 1 GiB buffers, and the shipped Triton and CUDA
kernels (checked against float64 first), all timed with the suite's events timer in
one process.  Columns: time in us, and each as a fraction of the 1 GiB rate of its
mix (the suite's SOL) and of the same-size op's rate.
"""
from __future__ import annotations

import sys

# (workload, dtype, M, N): the cases of results/h200/*-9a8f821 (softmax) and
# *-a644988 (residual_layernorm_gelu) runs with >= 64 MiB of traffic where Triton
# or CUDA was below 0.85 of the ceiling
CASES = (
    [("residual_layernorm_gelu", "bfloat16", m, n) for m, n in (
        (520, 32296), (656, 19379), (760, 25905), (1075, 14749), (1296, 13920), (1597, 13437), (1685, 14464),
        (1949, 6656), (19661, 640), (33104, 609), (49157, 384), (2232008, 8))]
    + [("residual_layernorm_gelu", "float32", m, n) for m, n in (
        (520, 32296), (631, 13381), (656, 19379), (760, 25905), (1075, 14749), (1279, 5093), (1296, 13920),
        (1597, 13437), (1685, 14464), (2208, 4721), (5039, 1664), (6408, 1200), (7808, 880), (33104, 609),
        (183392, 41))]
    + [("softmax", dt, m, n) for dt in ("bfloat16", "float32") for m, n in (
        (191, 90533), (256, 88813), (367, 82153), (503, 59367), (595, 34968), (1567, 19945), (3021808, 7))]
    + [("softmax", "float32", 3813928, 3)])


def main(argv: list[str] | None = None) -> int:
    import torch

    if not torch.cuda.is_available():
        print("size_ceilings needs a CUDA GPU", file=sys.stderr)
        return 2
    from lab._probe import registered_calls, time_us
    from suite.workload import Case, discover

    wl_of = discover().workloads
    n = 1 << 28  # the ceilings' buffers: 1 GiB of float32 each
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    roof = {"softmax": 2 * 4 * n / time_us(lambda: c.copy_(a)) / 1e3,
            "residual_layernorm_gelu": 3 * 4 * n / time_us(lambda: torch.add(a, b, out=c)) / 1e3}
    del a, b, c
    print(f"1 GiB rates: copy {roof['softmax']:.0f} GB/s, add (2:1) {roof['residual_layernorm_gelu']:.0f} GB/s")
    print(f"{'workload':24s} {'dtype':9s} {'shape':14s} {'MiB':>5s} {'op us':>7s} {'op/roof':>7s} "
          f"{'triton us':>9s} {'SOL':>5s} {'/op':>5s} {'cuda us':>8s} {'SOL':>5s} {'/op':>5s}")
    for name, dtype, m, n_ in CASES:
        wl = wl_of[name]
        case = Case.make(name, dtype, M=m, N=n_)
        inputs = wl.make_inputs(case, "cuda", 1234)
        ref = wl.reference(case, inputs)
        x = inputs["x"]
        y = torch.empty_like(x)
        if name == "softmax":
            op = lambda: y.copy_(x)  # noqa: E731
            nbytes = 2 * x.numel() * x.element_size()
        else:
            r = inputs["r"]
            op = lambda: torch.add(x, r, out=y)  # noqa: E731
            nbytes = 3 * x.numel() * x.element_size()
        t_op = time_us(op)
        op_gbps = nbytes / t_op / 1e3
        out = [f"{name:24s} {dtype:9s} {m}x{n_:<9d} {nbytes / 2**20:5.0f} {t_op:7.1f} {op_gbps / roof[name]:7.3f}"]
        calls = registered_calls(name, case, inputs, ref, ["triton", "cuda"])
        del ref
        for impl in ("triton", "cuda"):
            if impl in calls:
                t = time_us(calls[impl])
                gbps = wl.min_bytes(case) / t / 1e3
                out.append(f"{t:9.1f} {gbps / roof[name]:5.3f} {gbps / op_gbps:5.3f}")
        print(" ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
