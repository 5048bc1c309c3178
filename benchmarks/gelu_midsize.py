"""gelu at 16M elements, where every implementation is furthest below the copy ceiling: paired rounds.

``PYTHONPATH=. python3 benchmarks/gelu_midsize.py`` on the H200.  At 2^24 + 43
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

import statistics

import torch

from benchmarks._probe import spread
from suite import verify
from suite.timing import measure
from suite.workload import Case, discover

N = (1 << 24) + 43
ROUNDS = 15
IMPLS = ("torch", "compile", "triton", "cuda")
# Load-path forms timed beside the registered implementations: gelu.cu's
# variants 7 and 8 with plain loads and 9 and 10 with L2 evict_first loads,
# and the Triton kernel at Inductor's block with and without evict_first.
CUDA_VARIANTS = (7, 8, 9, 10)
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
        def run(y=None, blk=blk, warps=warps, evict=evict):
            y = torch.empty_like(x) if y is None else y
            gt._gelu_kernel[(triton.cdiv(x.numel(), blk),)](x, y, x.numel(), triton.next_power_of_2(x.numel()),
                                                           BLOCK=blk, EXACT=exact, EVICT=evict, num_warps=warps)
            return y
        forms[f"tri {blk}/{warps}{'/ef' if evict else ''}"] = run
    for name, fn in forms.items():
        if name.startswith("tri"):
            y = fn(torch.full_like(x, float("nan")))
        else:  # the op allocates its output: poison the block the allocator hands it next
            poison = torch.full_like(x, float("nan"))
            del poison
            y = fn()
        res = verify.check(y, ref, tol)
        if not res.correct:
            raise SystemExit(f"{name} is wrong: {res.message}")
    return forms


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gelu_midsize needs a CUDA GPU (it times kernels; see results/h200/diagnostics)")
    reg = discover()
    wl = reg.workloads["gelu"]
    for dtype in ("float32", "bfloat16"):
        case = Case.make("gelu", dtype, N=N)
        inputs = wl.make_inputs(case, "cuda", 2024)
        ref = wl.reference(case, inputs)
        calls = {}
        for name in IMPLS:
            impl = reg.get("gelu", name)
            why = impl.check_available("cuda") or impl.supports(case)
            if why:
                print(f"{dtype} {name}: skipped ({why})")
                continue
            res = verify.check(impl.fn(**inputs), ref, wl.tolerance(case))  # warm-up, tuning, check
            if not res.correct:
                raise SystemExit(f"{dtype} {name} is wrong: {res.message}")
            calls[name] = lambda impl=impl: impl.fn(**inputs)
        calls.update(_forms(inputs["x"], ref, wl.tolerance(case)))
        x = inputs["x"]
        dst = torch.empty_like(x)
        calls["copy"] = lambda: dst.copy_(x)
        times: dict[str, list[float]] = {k: [] for k in calls}
        for r in range(ROUNDS):
            order = list(calls) if r % 2 == 0 else list(reversed(list(calls)))
            for k in order:
                times[k].append(measure([calls[k]], "cuda", "events", min_samples=8, max_samples=8).median * 1e3)
        gb = wl.min_bytes(case) / 1e9
        print(f"{dtype} N={N}: {gb:.3f} GB moved; us median [p20, p80] over {ROUNDS} rounds, GB/s, "
              f"time / torch's in the same round")
        for k, v in times.items():
            ratio = [a / b for a, b in zip(v, times["torch"])]
            print(f"  {k:8s} {spread(v, '7.2f')} us {gb / statistics.median(v) * 1e6:6.0f} GB/s  "
                  f"x torch time {spread(ratio)}", flush=True)


if __name__ == "__main__":
    bench()
