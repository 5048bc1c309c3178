"""Does the suite's L2 flush leave work behind for the call it times?

``python3 -m lab.l2_flush_probe`` on a GPU.  Before each
sample the events timer evicts the L2 by writing a buffer of four L2s
(suite/timing.py).  The L2 writes back lazily, so the last L2's worth of
that buffer may still be dirty when the timed call starts, and the call's
own traffic then pays for writing it back to HBM: about 50 MB on an H200,
a third as much again as the 134 MB a 16M-element float32 gelu moves.

This times memory-bound calls under three flushes, in rounds that alternate
their order (20 samples each, the suite's spin hold before each sample):

- ``write``: the written flush (``flush_l2(device, "write")``, the suite's
  default when this was first run at dad7d39);
- ``write+read``: the same, then a sum over a separate two-L2 buffer that
  is never written, so the L2 is left holding clean lines;
- ``read``: only a sum over a clean four-L2 buffer (the previous sample's
  outputs are written back during it): ``flush_l2(device, "clean")``, the
  suite's default since.

It prints each call's median time under each flush (median over rounds),
its GB/s, and its time as a ratio to torch's under the same flush.
"""
from __future__ import annotations

import statistics

import torch

from suite import timing
from suite.workload import Case, discover

CASES = (("float32", (1 << 24) + 43, ("torch", "triton", "cuda", "copy")),
         ("bfloat16", (1 << 24) + 43, ("torch", "triton", "cuda", "copy")),
         ("float32", 1 << 20, ("torch", "triton", "copy")),
         ("float32", 1 << 28, ("torch", "triton", "copy")))
ROUNDS = 7
SAMPLES = 20


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("l2_flush_probe needs a CUDA GPU (it times kernels; see lab/findings)")
    l2 = timing.l2_bytes("cuda")
    clean2 = torch.rand(2 * l2 // 4, device="cuda")
    sink = torch.empty((), device="cuda")
    flushes = {"write": lambda: timing.flush_l2("cuda", "cold-flush"),
               "write+read": lambda: (timing.flush_l2("cuda", "cold-flush"), torch.sum(clean2, dim=0, out=sink)),
               "read": lambda: timing.flush_l2("cuda", "cold-clean")}
    for f in flushes.values():
        f()
    reg = discover()
    wl = reg.workloads["gelu"]
    print(f"L2 {l2 / 2**20:.0f} MiB; {ROUNDS} rounds of {SAMPLES} samples; us, GB/s, x torch's time")
    for dtype, n, names in CASES:
        case = Case.make("gelu", dtype, N=n)
        inputs = wl.make_inputs(case, "cuda", 99)
        x = inputs["x"]
        dst = torch.empty_like(x)
        calls = {}
        for name in names:
            if name == "copy":
                calls[name] = lambda: dst.copy_(x)
                continue
            impl = reg.get("gelu", name)
            why = impl.check_available("cuda") or impl.supports(case)
            if why:
                print(f"{dtype} {name}: skipped ({why})")
                continue
            calls[name] = lambda impl=impl: impl.fn(**inputs)
        for fn in calls.values():
            fn()  # warm-up, tuning, builds
        torch.cuda.synchronize()
        hold = {k: int(timing.hold_us(timing.launch_us(fn, "cuda")) * timing._spin_rate("cuda"))
                for k, fn in calls.items()}
        times = {(k, f): [] for k in calls for f in flushes}
        for r in range(ROUNDS):
            order = [(k, f) for k in calls for f in flushes]
            for k, f in (order if r % 2 == 0 else order[::-1]):
                starts = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
                ends = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
                for i in range(SAMPLES):
                    flushes[f]()
                    torch.cuda._sleep(hold[k])
                    starts[i].record()
                    calls[k]()
                    ends[i].record()
                torch.cuda.synchronize()
                times[(k, f)].append(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3)
        gb = 2 * x.numel() * x.element_size() / 1e9
        print(f"{dtype} N={n} ({gb * 1e3:.0f} MB moved):")
        for k in calls:
            cells = []
            for f in flushes:
                us = statistics.median(times[(k, f)])
                ratio = statistics.median(a / b for a, b in zip(times[(k, f)], times[("torch", f)]))
                cells.append(f"{f} {us:8.1f} us {gb / us * 1e6:5.0f} GB/s {ratio:.3f}")
            print(f"  {k:7s} " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    bench()
