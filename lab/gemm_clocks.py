"""SM clock and board power while a GEMM runs back to back, per implementation.

    python3 -m lab.gemm_clocks [--size 8192] [--dtypes bfloat16 float16] [--seconds 4]
        [--impls torch cuda cuda:wgmma triton:persistent] [--wgmma-tiles 3 4]

Each implementation runs its square GEMM continuously for ``--seconds`` while
``nvidia-smi`` samples the SM clock and the power draw every 100 ms; the
table gives the medians of the samples taken in the second half of the run
(the clock has settled by then) and the rate over that half.  A kernel that
draws more energy a FLOP than another meets the board's power limit at a lower
clock: the table says which of them do, and at what clock each settles.
Each implementation is called once first (build, tuning, warm-up), then the
GPU idles two seconds, so every run starts from a similar temperature.
``--wgmma-tiles`` adds one row a named tile of ``cuda:wgmma`` (as
``wgmma tile T``), run as it is rather than as the tuner would pick.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time


def _reasons_field() -> str:
    """The name this driver's nvidia-smi gives the active clock-limit reasons."""
    for field in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return field
    return "clocks.sm"  # a stand-in column: no reasons on this driver


def _sampler(reasons: str):
    return subprocess.Popen(["nvidia-smi", f"--query-gpu=clocks.sm,power.draw,temperature.gpu,{reasons}",
                             "--format=csv,noheader,nounits", "-lms", "100"],
                            stdout=subprocess.PIPE, text=True)


def _run(fn, seconds: float, flops: float, reasons_field: str):
    import torch

    sampler = _sampler(reasons_field)
    start = time.perf_counter()
    marks = []  # (host time, event) every few calls
    calls = 0
    while time.perf_counter() - start < seconds:
        fn()
        calls += 1
        if calls % 4 == 0:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            marks.append((time.perf_counter() - start, calls, ev))
            if len(marks) > 2:
                marks[-3][2].synchronize()  # keep the queue short: the host is at most a few calls ahead
    torch.cuda.synchronize()
    sampler.terminate()
    lines = sampler.communicate()[0].strip().splitlines()
    samples = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        try:
            samples.append((float(parts[0]), float(parts[1]), float(parts[2]), parts[3]))
        except (ValueError, IndexError):
            continue
    if not samples:
        raise SystemExit("gemm_clocks: nvidia-smi gave no samples")
    half = samples[len(samples) // 2:]
    second_half = [m for m in marks if m[0] >= seconds / 2]
    if len(second_half) < 2:
        raise SystemExit(f"gemm_clocks: too few calls in {seconds} s to time the second half; raise --seconds")
    mid, last = second_half[0], second_half[-1]
    tflops = (last[1] - mid[1]) * flops / (mid[2].elapsed_time(last[2]) * 1e-3) / 1e12
    reasons = sorted({s[3] for s in half})
    return (statistics.median(s[0] for s in half), statistics.median(s[1] for s in half),
            max(s[2] for s in half), tflops, ",".join(reasons), len(half))


def main(argv=None) -> int:
    import torch

    from suite.workload import Case, discover

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--impls", nargs="+", default=["torch", "cuda", "cuda:wgmma", "triton:persistent"])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--wgmma-tiles", nargs="*", type=int, default=[],
                        help="also run these tiles of cuda:wgmma, each as its own row")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("gemm_clocks: needs a CUDA GPU")
    reg = discover()
    wl = reg.workloads["gemm"]
    n = args.size
    rows = []
    reasons_field = _reasons_field()
    for dtype in args.dtypes:
        case = Case.make("gemm", dtype, M=n, N=n, K=n)
        inputs = wl.make_inputs(case, "cuda", n + 1)
        runs = []
        for name in args.impls:
            impl = reg.get("gemm", name)
            why = impl.check_available("cuda") or impl.supports(case)
            if why:
                print(f"{name} {dtype}: skipped ({why})")
                continue
            runs.append((name, lambda impl=impl: impl.fn(**inputs)))
        if args.wgmma_tiles:
            from implementations.gemm import cuda_wgmma

            why = reg.get("gemm", "cuda:wgmma").check_available("cuda")
            if why:
                raise SystemExit(f"gemm_clocks: --wgmma-tiles: cuda:wgmma is unavailable ({why})")
            for t in args.wgmma_tiles:
                if t not in cuda_wgmma.TILES:
                    raise SystemExit(f"gemm_clocks: no wgmma tile {t}; tiles are {sorted(cuda_wgmma.TILES)}")
                runs.append((f"wgmma tile {t}", lambda t=t: cuda_wgmma.ops().gemm_wgmma(inputs["a"], inputs["b"], t)))
        for name, fn in runs:
            fn()  # build, tune, warm up
            torch.cuda.synchronize()
            time.sleep(2.0)
            clock, power, temp, tflops, reasons, k = _run(fn, args.seconds, 2.0 * n**3, reasons_field)
            rows.append((dtype, name, tflops, clock, power, temp, reasons, k))
    print(f"\n{n}^3, back to back for {args.seconds:.0f} s; medians of the second half's samples")
    print("TFLOP/s/GHz: the rate a clock, TFLOP/s over the median SM clock")
    print(f"{'dtype':<10}{'impl':<20}{'TFLOP/s':>9}{'SM MHz':>8}{'TFLOP/s/GHz':>13}{'W':>7}{'max C':>7}"
          "  throttle reasons (bitmask)  n")
    for dtype, name, tflops, clock, power, temp, reasons, k in rows:
        print(f"{dtype:<10}{name:<20}{tflops:>9.0f}{clock:>8.0f}{tflops / clock * 1000:>13.1f}{power:>7.0f}"
              f"{temp:>7.0f}  {reasons:<26} {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
