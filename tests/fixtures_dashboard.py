"""Synthetic but plausible result files for the dashboard's tests and benchmark.

No real runs exist on a CPU machine, so these rows follow the workloads' own
napkin math (the same FLOP and byte formulas as implementations/*/__init__.py;
tests/test_dashboard_fixtures.py checks that they agree) and a simple time
model: each implementation reaches a fixed fraction of the roofline, eager is
timed on its unfused traffic, and small problems hit a launch floor.  A few
rows are incorrect, failed, unsupported or unavailable, one is suspiciously
faster than the roofline allows, so every branch of the dashboard has data.

``write_fixture_tree(root)`` lays out the folders the tests use:

    root/results/h200/...-aaaaaaa.parquet   H200, commit aaaaaaa (older)
    root/results/h200/...-bbbbbbb.parquet   H200, commit bbbbbbb (a regression)
    root/results/h100/...-bbbbbbb.parquet   H100, commit bbbbbbb
    root/results/empty/                     an empty folder
    root/corrupt/broken.parquet             not Parquet at all
"""
from __future__ import annotations

import math
import random
from pathlib import Path

from suite import store

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
DTYPES = ("float32", "bfloat16", "float16")

# name, slug, measured copy GB/s, measured TFLOP/s, datasheet GB/s, datasheet TFLOP/s, SMs
GPUS = {
    "h200": ("NVIDIA H200", "h200", 4210.0, {"bfloat16": 740.0, "float16": 755.0, "float32": 51.0},
             4800.0, {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}, 132),
    "h100": ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3", 3010.0,
             {"bfloat16": 640.0, "float16": 650.0, "float32": 48.0},
             3350.0, {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}, 132),
}

SHAPES = {
    "gelu": [{"N": 65536}, {"N": 3_000_017}, {"N": 1 << 28}],
    "residual_layernorm_gelu": [{"M": 64, "N": 1024}, {"M": 4096, "N": 1000}, {"M": 65536, "N": 1024},
                                {"M": 16384, "N": 8192}],
    "softmax": [{"M": 512, "N": 128}, {"M": 1823, "N": 781}, {"M": 32768, "N": 4096},
                {"M": 4096, "N": 131072}],
    "gemm": [{"M": 512, "N": 512, "K": 512}, {"M": 3001, "N": 2047, "K": 1531},
             {"M": 8192, "N": 8192, "K": 8192}, {"M": 1, "N": 8192, "K": 8192}],
    "attention": [{"B": 1, "H": 4, "S": 128, "D": 128, "causal": 0},
                  {"B": 2, "H": 16, "S": 1000, "D": 64, "causal": 1},
                  {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 1}],
}

# Fraction of the roofline each implementation reaches on a large problem.
IMPLS = {
    "gelu": {"eager": 0.85, "torch": 0.90, "compile": 0.88, "triton": 0.91, "cuda": 0.93},
    "residual_layernorm_gelu": {"eager": 0.80, "compile": 0.82, "triton": 0.88, "cuda": 0.86},
    "softmax": {"eager": 0.82, "torch": 0.86, "compile": 0.84, "triton": 0.90, "cuda": 0.87},
    "gemm": {"torch": 0.80, "compile": 0.79, "triton": 0.72, "cuda": 0.55},
    "attention": {"eager": 0.35, "torch": 0.62, "torch:flash": 0.66, "compile": 0.40, "triton": 0.55},
}
BOUND = {"gelu": "memory", "residual_layernorm_gelu": "memory", "softmax": "memory",
         "gemm": "compute", "attention": "compute"}


def size(workload: str, s: dict) -> int:
    if workload == "gelu":
        return s["N"]
    if workload == "gemm":
        return s["M"] * s["N"] * s["K"]
    if workload == "attention":
        return s["B"] * s["H"] * s["S"] * s["D"]
    return s["M"] * s["N"]


def napkin(workload: str, s: dict, dtype: str) -> tuple[float, float, float]:
    """(flops, min_bytes, eager_bytes), as the workloads define them."""
    b = ITEMSIZE[dtype]
    if workload == "gelu":
        n = s["N"]
        return 10.0 * n, 2.0 * n * b, 11.0 * n * b
    if workload == "residual_layernorm_gelu":
        m, n = s["M"], s["N"]
        return 20.0 * m * n, (3.0 * m * n + 2.0 * n) * b, (7.0 * m * n + 2.0 * n) * b + 2.0 * m * 4
    if workload == "softmax":
        m, n = s["M"], s["N"]
        return 5.0 * m * n, 2.0 * m * n * b, (8.0 * m * n + 4.0 * m) * b
    if workload == "gemm":
        m, n, k = s["M"], s["N"], s["K"]
        nb = float(m * k + k * n + m * n) * b
        return 2.0 * m * n * k, nb, nb
    p = s["B"] * s["H"] * s["S"] ** 2
    t = s["B"] * s["H"] * s["S"] * s["D"]
    f = 4.0 * p * s["D"] / (2 if s["causal"] else 1)
    eager = (4 * t + 6 * p) * b + ((2 * p * b + s["S"] ** 2) if s["causal"] else 0)
    return f, 4.0 * t * b, float(eager)


def _label(s: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in s.items())


def _status(workload: str, impl: str, dtype: str, index: int, nshapes: int, gpu: str) -> tuple[str, str]:
    """The planted failures: (status, error)."""
    if workload == "attention" and impl == "torch:flash" and dtype == "float32":
        return "unsupported", "flash attention needs float16 or bfloat16"
    if workload == "attention" and impl == "triton" and dtype == "float32" and index == nshapes - 1:
        return "error", "triton.runtime.errors.OutOfResources: out of resource: shared memory"
    if workload == "softmax" and impl == "cuda" and dtype == "float16" and index == 1:
        return "incorrect", ""
    if gpu == "h100" and impl == "cuda":
        return "unavailable", "the CUDA extension was not built for sm_90a on this image"
    return "ok", ""


def make_run(gpu: str = "h200", commit: str = "aaaaaaa", timestamp: str = "2025-06-01T10:00:00Z",
             seed: int = 0, slowdown: dict | None = None, shapes: dict | None = None,
             timers: tuple[str, ...] = ("events",), dtypes: tuple[str, ...] = DTYPES) -> list[dict]:
    """One run's rows.  ``slowdown`` maps (workload, impl) -> a factor on its time."""
    rng = random.Random(seed)
    name, gslug, bw, peaks, ds_bw, ds_peaks, sms = GPUS[gpu]
    stamp = timestamp.replace("-", "").replace(":", "")
    run_id = f"{stamp}-{commit[:7]}-{gslug}"
    shapes = shapes or SHAPES
    slowdown = slowdown or {}
    rows = []
    for workload, impls in IMPLS.items():
        cases = shapes[workload]
        for timer in timers:
            for dtype in dtypes:
                for i, s in enumerate(cases):
                    flops, nbytes, eager_bytes = napkin(workload, s, dtype)
                    peak_tf = peaks[dtype]
                    bound = max(flops / (peak_tf * 1e12), nbytes / (bw * 1e9)) * 1e3
                    limiter = "compute" if flops / (peak_tf * 1e12) >= nbytes / (bw * 1e9) else "memory"
                    for impl, eff in impls.items():
                        status, error = _status(workload, impl, dtype, i, len(cases), gpu)
                        row = _base_row(run_id, timestamp, workload, impl, dtype, s, timer, commit,
                                        name, gslug, bw, peak_tf, ds_bw, ds_peaks[dtype], sms)
                        row.update(flops=flops, min_bytes=nbytes, eager_bytes=eager_bytes,
                                   intensity=flops / nbytes, bound_ms=bound, bound=limiter,
                                   size=size(workload, s), status=status, error=error or None)
                        if status in ("ok", "incorrect"):
                            traffic = eager_bytes if impl == "eager" else nbytes
                            ideal = max(flops / (peak_tf * 1e12), traffic / (bw * 1e9)) * 1e3
                            launch = 0.004 * (5 if impl == "eager" else 1) * (0.4 if timer == "graph" else 1)
                            ms = (ideal / eff + launch) * slowdown.get((workload, impl), 1.0)
                            ms *= 1 + rng.uniform(-0.02, 0.02)
                            if workload == "gelu" and impl == "cuda" and i == 1 and dtype == "bfloat16":
                                ms = bound / 1.3  # L2-resident: faster than the HBM roof allows
                            samples = sorted(ms * (1 + rng.gauss(0, 0.015)) for _ in range(15))
                            tol = 1e-5 if dtype == "float32" else 2e-3
                            rel = tol * (40 if status == "incorrect" else rng.uniform(0.01, 0.4))
                            row.update(ms_median=ms, ms_p20=samples[3], ms_p80=samples[11],
                                       ms_min=samples[0], n_samples=len(samples), samples_ms=samples,
                                       gbps=nbytes / ms / 1e6, tflops=flops / ms / 1e9, sol=bound / ms,
                                       rel_err=rel, tol=tol, correct=status == "ok",
                                       compile_s=rng.uniform(0.1, 30.0) if impl != "eager" else 0.0,
                                       peak_mem_bytes=int(3 * nbytes))
                        rows.append(row)
    return rows


def _base_row(run_id, timestamp, workload, impl, dtype, s, timer, commit, name, gslug, bw, peak_tf,
              ds_bw, ds_tf, sms) -> dict:
    row = {
        "schema_version": 1, "run_id": run_id, "timestamp": timestamp, "workload": workload,
        "impl": impl, "backend": impl.split(":")[0], "dtype": dtype, "shape": _label(s),
        "timer": timer, "l2": "cold", "peak_gbps": bw, "peak_tflops": peak_tf,
        "device": "cuda:0", "gpu_name": name, "gpu_sms": sms, "driver": "580.65", "cuda": "13.0",
        "torch": "2.11.0", "triton": "3.6.0", "commit": commit, "dirty": False, "preset": "quick",
        "config": "BLOCK=1024,warps=4" if impl == "triton" else None, "math": None, "seed": 0,
        "peak_gbps_datasheet": ds_bw, "peak_tflops_datasheet": ds_tf, "gpu_mem_bytes": 141 << 30,
        "python": "3.11.9", "hostname": "gpu-box", "sm_clock_start_mhz": 1980.0,
        "sm_clock_end_mhz": 1830.0, "mem_clock_start_mhz": 3201.0, "mem_clock_end_mhz": 3201.0,
        "gpu_slug": gslug, "l2_bytes": 60 << 20,
        # the card while timed (suite.clocks): Compare shows both sides', Case each row's
        "sm_clock_mhz": 1755.0 if gslug == "h200" else 1830.0, "power_w": 610.0,
    }
    for k, v in s.items():
        row[f"shape_{k}"] = v
    return row


def write_run(rows: list[dict], root: Path) -> Path:
    r = rows[0]
    path = store.default_path(root, r["gpu_name"], r["timestamp"], r["commit"])
    return store.write_atomic(store.to_frame(rows), path)


def write_fixture_tree(root: Path) -> dict[str, Path]:
    """The layout of the module docstring; returns its named paths."""
    root = Path(root)
    results = root / "results"
    old = write_run(make_run("h200", "aaaaaaa", "2025-06-01T10:00:00Z", seed=1,
                             timers=("events", "graph")), results)
    new = write_run(make_run("h200", "bbbbbbb", "2025-06-03T09:30:00Z", seed=2,
                             slowdown={("softmax", "triton"): 1.25, ("gemm", "triton"): 0.8}), results)
    h100 = write_run(make_run("h100", "bbbbbbb", "2025-06-03T11:00:00Z", seed=3), results)
    empty = results / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    corrupt = root / "corrupt" / "broken.parquet"
    corrupt.parent.mkdir(parents=True, exist_ok=True)
    corrupt.write_bytes(b"PAR1 this is not a parquet file at all")
    return {"root": root, "results": results, "old": old, "new": new, "h100": h100,
            "empty": empty, "corrupt": corrupt}


def perf_shapes(per_workload: int) -> dict:
    """``per_workload`` sizes per workload, geometric, for the large benchmark folder."""
    out = {}
    for wl in SHAPES:
        sizes = [int(2 ** (12 + 16 * i / max(1, per_workload - 1))) for i in range(per_workload)]
        if wl == "gelu":
            out[wl] = [{"N": n + 1} for n in sizes]
        elif wl in ("softmax", "residual_layernorm_gelu"):
            out[wl] = [{"M": max(1, n // 1024), "N": 1024 + 3} for n in sizes]
        elif wl == "gemm":
            out[wl] = [{"M": max(1, round(n ** (1 / 3)) * 8), "N": 4096, "K": 4096} for n in sizes]
        else:
            out[wl] = [{"B": 1, "H": 16, "S": 64 * (1 + i), "D": 128, "causal": i % 2}
                       for i in range(per_workload)]
    return out


def write_many(root: Path, runs: int = 200, rows_per_run: int = 2000) -> list[Path]:
    """``runs`` files of about ``rows_per_run`` rows each, over two GPUs and many commits."""
    per_run = sum(len(v) for v in IMPLS.values()) * len(DTYPES) * 2  # x shapes
    shapes = perf_shapes(max(1, math.ceil(rows_per_run / per_run)))
    paths = []
    for i in range(runs):
        gpu = "h200" if i % 2 == 0 else "h100"
        commit = f"{i // 2:07x}"
        stamp = f"2025-{1 + (i // 56) % 12:02d}-{1 + (i // 2) % 28:02d}T{i % 24:02d}:00:00Z"
        rows = make_run(gpu, commit, stamp, seed=i, shapes=shapes, timers=("events", "graph"))
        paths.append(write_run(rows[:rows_per_run], Path(root)))
    return paths
