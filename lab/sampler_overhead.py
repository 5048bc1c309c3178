"""Does the clock sampler change what the suite's timer measures?

``python3 -m lab.sampler_overhead`` on a GPU.  While a
case is timed, a thread of the runner reads the SM clock and board power
from NVML every 2 ms (suite/clocks.py).  A Python thread beside a launcher
whose own overhead is tens of microseconds (the Triton kernels) could delay
a launch past the spin that hides it (suite/timing.py), and the delay would
be timed.  This times a few of the suite's implementations with and
without the sampler running, in alternating rounds (6 rounds, the suite's
default sample counts), and prints each one's time with the sampler as a
ratio to its time without: median and [p20, p80] over the rounds.
"""
from __future__ import annotations

import statistics

import torch

from lab._probe import spread
from suite import clocks
from suite.timing import measure
from suite.workload import Case, discover

CASES = (("residual_layernorm_gelu", "float32", dict(M=4096, N=32768), ("triton", "cuda")),
         ("residual_layernorm_gelu", "bfloat16", dict(M=4096, N=32768), ("triton", "cuda")),
         ("gelu", "float32", dict(N=(1 << 24) + 43), ("triton", "torch")))
ROUNDS = 6



def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("sampler_overhead needs a CUDA GPU (it times kernels; see lab/findings)")
    reg = discover()
    for wl_name, dtype, dims, impl_names in CASES:
        wl = reg.workloads[wl_name]
        case = Case.make(wl_name, dtype, **dims)
        inputs = wl.make_inputs(case, "cuda", 5)
        for name in impl_names:
            impl = reg.get(wl_name, name)
            call = lambda impl=impl: impl.fn(**inputs)  # noqa: E731
            call()  # warm-up: tuning, builds
            torch.cuda.synchronize()
            res: dict[str, list[float]] = {"plain": [], "sampler": []}
            for r in range(ROUNDS):
                for mode in (("plain", "sampler") if r % 2 == 0 else ("sampler", "plain")):
                    if mode == "plain":
                        t = measure([call], "cuda", "events").median
                    else:
                        with clocks.sampler("cuda"):
                            t = measure([call], "cuda", "events").median
                    res[mode].append(t * 1e3)
            ratio = [s / p for s, p in zip(res["sampler"], res["plain"])]
            print(f"{wl_name} {dtype} {name}: without {statistics.median(res['plain']):.1f} us, with the sampler "
                  f"{statistics.median(res['sampler']):.1f} us, ratio {spread(ratio)}", flush=True)


if __name__ == "__main__":
    bench()
