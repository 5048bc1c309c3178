"""gelu at 16M elements, where every implementation is furthest below the copy ceiling: paired rounds.

``python3 -m lab.gelu_midsize`` on the H200.  At 2^24 + 43
elements (the full preset's middle shape) the suite's runs put torch, the
Triton and the CUDA kernels within 1% of each other in float32, all at about
0.86 of the copy ceiling, whose 2 GiB copy runs at full speed.  A single
run's medians cannot say whether a 1% gap is real, so this times each
implementation, and a device-to-device copy of the same bytes, in rounds of
8 samples with the suite's events timer (L2 flushed before each sample), the
order reversed every other round, and gives each one's time as a ratio to
torch's within the same round: median and [p20, p80] over the rounds.  The
copy says what the same traffic costs with nothing computed.
"""
from __future__ import annotations

import torch

from lab._probe import check_poisoned, paired_rounds, registered_calls
from suite.workload import Case, discover

N = (1 << 24) + 43
ROUNDS = 15
IMPLS = ("torch", "compile", "triton", "cuda")
# Load-path forms timed beside the registered implementations: gelu.cu's
# variants 7 and 8 with plain loads and 9 and 10 with L2 evict_first loads,
# and the Triton kernel at Inductor's block with and without evict_first.
CUDA_VARIANTS = (7, 8)
TRITON_FORMS = ((1024, 4, ""), (1024, 4, "evict_first"), (512, 4, "evict_first"))


def _forms(x, ref, tol) -> dict:
    """The CUDA_VARIANTS and TRITON_FORMS as calls, each checked first on a NaN-poisoned output."""
    import triton

    from implementations.gelu import triton as gt
    from implementations.gelu.cuda import ops

    forms = {}
    for v in CUDA_VARIANTS:
        forms[f"cuda v{v}"] = lambda v=v: ops().gelu_v(x, v)
    exact = x.element_size() == 4
    for blk, warps, evict in TRITON_FORMS:
        def run(blk=blk, warps=warps, evict=evict):
            y = torch.empty_like(x)
            gt._gelu_kernel[(triton.cdiv(x.numel(), blk),)](x, y, x.numel(), triton.next_power_of_2(x.numel()),
                                                           BLOCK=blk, EXACT=exact, EVICT=evict, num_warps=warps)
            return y
        forms[f"tri {blk}/{warps}{'/ef' if evict else ''}"] = run
    for name, fn in forms.items():
        check_poisoned(name, fn, ref, tol, x.dtype)
    return forms


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gelu_midsize needs a CUDA GPU (it times kernels; see lab/findings)")
    wl = discover().workloads["gelu"]
    for dtype in ("float32", "bfloat16"):
        case = Case.make("gelu", dtype, N=N)
        inputs = wl.make_inputs(case, "cuda", 2024)
        ref = wl.reference(case, inputs)
        calls = registered_calls("gelu", case, inputs, ref, IMPLS)
        calls.update(_forms(inputs["x"], ref, wl.tolerance(case)))
        x = inputs["x"]
        dst = torch.empty_like(x)
        calls["copy"] = lambda: dst.copy_(x)
        paired_rounds(calls, ROUNDS, wl.min_bytes(case) / 1e9, f"{dtype} N={N}")


if __name__ == "__main__":
    bench()
