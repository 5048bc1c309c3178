"""What the one-off probes under lab/ share: how many programs an SM holds, the suite's
timer, the spread of paired rounds, a residual_layernorm_gelu case beside the shipped kernel,
the copy rate, the table, and the build of a probe's own CUDA source."""
from __future__ import annotations


def build_extension(name: str, source):
    """``source`` (a .cu beside its probe, with a pybind11 module) built for this GPU with
    the suite's flags, ksuite's headers and the GEMM's (hopper.cuh, tma_map.h) on the path."""
    from pathlib import Path

    from torch.utils.cpp_extension import load

    from implementations._shared import cuda_ext
    from suite import cuda_build

    root = Path(__file__).resolve().parents[1]
    cuda_flags, cxx_flags = cuda_build.build_flags(hopper=True)
    build = cuda_build.cache_root() / name
    build.mkdir(parents=True, exist_ok=True)
    return load(name=f"ksuite_{name}", sources=[str(source)], extra_cuda_cflags=cuda_flags, extra_cflags=cxx_flags,
                extra_include_paths=[str(cuda_ext.INCLUDE_DIR), str(root / "implementations/gemm/cuda")],
                build_directory=str(build), verbose=False)


def fit(kernel, warps: int) -> int:
    """Programs of ``kernel`` an SM holds by its registers (8 a thread at a time, 64K an SM, 64 warps)."""
    kernel._init_handles()  # a warmed-up kernel learns its registers when loaded
    return min(65536 // (-(-kernel.n_regs // 8) * 8 * 32 * warps), 64 // warps, 32)


def time_us(fn) -> float:
    """Median of ``fn`` by the suite's events timer (L2 flushed before each sample)."""
    from suite.timing import measure

    return measure([fn], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0).median * 1e3


def spread(values: list[float], fmt: str = ".3f") -> str:
    """'median [p20, p80]' of paired-round values (p20 and p80 the nearest-rank ones)."""
    import statistics

    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
    return f"{statistics.median(v):{fmt}} [{q(.2):{fmt}}, {q(.8):{fmt}}]"


def registered_calls(wl_name: str, case, inputs: dict, ref, impls) -> dict:
    """The registered ``impls`` of a workload as calls on ``inputs``, each run
    once first (warm-up and tuning) and checked against ``ref`` on an output
    whose memory the allocator last held as NaN; those unavailable or not
    supporting ``case`` are skipped, with a line saying so."""
    import torch

    from suite.workload import discover

    reg = discover()
    wl = reg.workloads[wl_name]
    calls = {}
    for name in impls:
        impl = reg.get(wl_name, name)
        why = impl.check_available("cuda") or impl.supports(case)
        if why:
            print(f"{case.dtype} {name}: skipped ({why})")
            continue
        fn = lambda impl=impl: impl.fn(**inputs)  # noqa: E731
        fn()  # warm-up, tuning
        check_poisoned(name, fn, ref, wl.tolerance(case), getattr(torch, case.dtype))
        calls[name] = fn
    return calls


def registered_cases(wl_name: str, shapes, dtypes, impls, seed: int = 2026):
    """For each (M, N) of ``shapes`` and each dtype: (workload, case, x, ref,
    calls), x the case's fresh input and calls its registered ``impls``
    (registered_calls), ready for the probe's own variants."""
    from suite.workload import Case, discover

    wl = discover().workloads[wl_name]
    for m, n in shapes:
        for dtype in dtypes:
            case = Case.make(wl_name, dtype, M=m, N=n)
            inputs = wl.make_inputs(case, "cuda", seed)
            ref = wl.reference(case, inputs)
            yield wl, case, inputs["x"], ref, registered_calls(wl_name, case, inputs, ref, impls)


def check_poisoned(name: str, fn, ref, tol, dtype) -> None:
    """``fn()`` (which allocates an output of ``ref``'s shape in ``dtype``)
    checked against ``ref``, run just after a NaN tensor of that shape and
    dtype was freed, so that an element it does not write shows.  (The
    poison must be in the output's dtype: float64 NaN bytes read as float32
    or bf16 are mostly zeros.)"""
    import torch

    from suite import verify

    poison = torch.full(ref.shape, float("nan"), dtype=dtype, device="cuda")
    del poison
    res = verify.check(fn(), ref, tol)
    if not res.correct:
        raise SystemExit(f"{name} is wrong: {res.message}")


def round_times(calls: dict, rounds: int) -> dict[str, list[float]]:
    """Each of ``calls`` timed in rounds of 8 samples with the suite's events timer
    (L2 flushed before each sample), the order reversed every other round: the
    per-round medians in us, by name."""
    from suite.timing import measure

    times: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(rounds):
        for k in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            times[k].append(measure([calls[k]], "cuda", "events", min_samples=8, max_samples=8).median * 1e3)
    return times


def attention_rounds(wl, case, calls: dict, torch_names, rounds: int) -> tuple[dict[str, float], float]:
    """``calls`` of an attention case timed by round_times; prints each one's
    median, TFLOP/s and ratio to the best of ``torch_names``, fastest first, and
    returns (median us by name, the best torch median)."""
    med = {k: sorted(v)[len(v) // 2] for k, v in round_times(calls, rounds).items()}
    best_torch = min(med[k] for k in torch_names if k in med)
    tf = wl.flops(case) / 1e12
    print(f"B{case['B']} H{case['H']} S{case['S']} D{case['D']} causal={case['causal']}:", flush=True)
    for k, t in sorted(med.items(), key=lambda kv: kv[1]):
        print(f"  {k:16s} {t:9.1f} us {tf / t * 1e6:6.1f} TFLOP/s  x best torch {best_torch / t:.3f}")
    return med, best_torch


def paired_rounds(calls: dict, rounds: int, gb: float, title: str, peer: str = "torch") -> None:
    """``calls`` timed by round_times; prints each one's time, GB/s for ``gb`` GB
    moved, and time as a ratio to ``peer``'s within the same round: median and
    [p20, p80] over the rounds."""
    import statistics

    times = round_times(calls, rounds)
    print(f"{title}: {gb:.3f} GB moved; us median [p20, p80] over {rounds} rounds, GB/s, "
          f"time / {peer}'s in the same round")
    for k, v in times.items():
        ratio = [a / b for a, b in zip(v, times[peer])]
        print(f"  {k:12s} {spread(v, '7.2f')} us {gb / statistics.median(v) * 1e6:6.0f} GB/s  "
              f"x {peer} time {spread(ratio)}", flush=True)


def variant_row(dtype: str, shape: str, label: str, like, gb: float, err, run, resources) -> tuple:
    """One probe variant's table row, printed as it comes.  ``run(out=...)``
    returns (y, compiled kernel): it runs first into a NaN-filled tensor like
    ``like`` (every element must be written) for ``err(y)``, then is timed
    writing its own output; ``resources(kernel)`` says what the kernel holds."""
    import torch

    y, kernel = run(out=torch.full_like(like, float("nan")))
    e = err(y)
    t = time_us(lambda: run())
    row = (dtype, shape, label, resources(kernel), t, gb / t * 1e6, e)
    print(row, flush=True)
    return row


def rlg_shipped(dtype: str, m: int, n: int, width: int):
    """Fresh residual_layernorm_gelu inputs (M x N, dtype) on the GPU, and the
    shipped Triton kernel timed on them.  Returns the inputs (x, r, w, b,
    eps), the compulsory traffic in GB, a function giving an output's error
    against float64, and the shipped kernel's table row (its config cut to
    ``width``), printed as it comes."""
    from implementations.residual_layernorm_gelu.triton import _config, residual_layernorm_gelu_triton
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    inputs = wl.make_inputs(case, "cuda", 1234)
    ref = wl.reference(case, inputs)
    args = tuple(inputs[k] for k in ("x", "r", "weight", "bias", "eps"))
    gb = (3 * m * n + 2 * n) * args[0].element_size() / 1e9

    def rel(y) -> float:
        return ((y.double() - ref).norm() / ref.norm()).item()

    y = residual_layernorm_gelu_triton(*args)
    t = time_us(lambda: residual_layernorm_gelu_triton(*args))
    row = (dtype, f"{m}x{n}", "shipped: " + _config(case)[:width], "", t, gb / t * 1e6, rel(y))
    print(row, flush=True)
    return args, gb, rel, row


def print_table(rows: list[tuple], err_name: str) -> None:
    """The copy rate, measured now, then the rows (dtype, shape, kernel, registers, us, GB/s, error),
    each with its GB/s as a fraction of that copy rate."""
    import torch

    src = torch.randn(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / time_us(lambda: dst.copy_(src)) / 1e3
    print(f"copy {copy:.0f} GB/s (2^28 float32)")
    width = max(len(r[2]) for r in rows)
    print(f"{'dtype':9s} {'shape':12s} {'kernel':{width}s} {'registers':26s} {'us':>9s} {'GB/s':>8s} {'x copy':>6s} "
          f"{err_name}")
    for name, shape, kernel, regs, t, gbps, err in rows:
        print(f"{name:9s} {shape:12s} {kernel:{width}s} {regs:26s} {t:9.1f} {gbps:8.0f} {gbps / copy:6.3f} {err:.1e}")
