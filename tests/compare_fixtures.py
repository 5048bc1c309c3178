"""Runs for the compare / interop tests, and the edits they inject.

``base_run`` prefers a real run: the newest Parquet file committed under
results/, else a CPU run of the suite's own runner; only when neither exists
does it build synthetic rows (bytes and FLOPs from the workload registry,
lognormal timing noise, the odd slow outlier) so the tests still run.
"""
from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from suite import store

ROOT = Path(__file__).resolve().parents[1]
GATED = ("eager", "triton")  # synthetic rows with one implementation the gate judges
# Fewer dtypes and samples than a default run: the CI's two cores pay for every second.
RUNNER_ARGS = ["--device", "cpu", "--preset", "cpu", "--workloads", "gelu,softmax",
               "--impls", "eager,triton", "--dtypes", "float32,bfloat16", "--samples", "10,60",
               "--budget-ms", "60", "--reuse-ceilings", "--no-progress"]


def newest_committed_run() -> Path | None:
    """The newest committed run of the quick preset: real rows of every backend
    with no suspect row (a suspect candidate row fails any comparison)."""
    files = sorted((ROOT / "results").rglob("*.parquet")) if (ROOT / "results").is_dir() else []
    files = [f for f in files if _quick_and_clean(f)]
    tracked = []
    for f in files:
        # Only files git knows about count as committed reference runs.
        r = subprocess.run(["git", "ls-files", "--error-unmatch", str(f)], cwd=ROOT,
                           capture_output=True)
        if r.returncode == 0:
            tracked.append(f)
    return max(tracked, key=lambda f: f.name) if tracked else None


def _quick_and_clean(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path, columns=["status", "shape_source"]).to_pandas()
    except Exception:  # noqa: BLE001 - older runs have no shape_source: not the newest
        return False
    return bool((t["shape_source"] == "preset:quick").all() and not (t["status"] == "suspect").any())


def runner_run(out: Path) -> Path | None:
    try:
        import suite.runner  # noqa: F401
    except ImportError:
        return None
    r = subprocess.run([sys.executable, "-m", "suite", "run", *RUNNER_ARGS, "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not out.exists():
        warnings.warn(f"suite run failed (rc {r.returncode}): {r.stderr.strip()[-300:]}; "
                      "using synthetic rows")
        return None
    return out


def synthetic_rows(seed: int = 0, gpu: str = "NVIDIA H200", commit: str = "a" * 40,
                   n: int = 40, peak_gbps: float = 4200.0, peak_tflops: float = 60.0,
                   impls: tuple[str, str] = ("eager", "torch")) -> list[dict]:
    """Rows of gelu and softmax on the cpu preset's shapes for two implementations: the
    first unfused (2.5x the bytes' time), the second at the bytes' time."""
    from suite.workload import discover

    reg = discover()
    rng = np.random.default_rng(seed)
    rows = []
    for wl_name in ("gelu", "softmax"):
        wl = reg.workloads[wl_name]
        for case in wl.cases("cpu", ["float32", "bfloat16"]):
            for k, impl in enumerate(impls):
                flops, nbytes = wl.flops(case), wl.min_bytes(case)
                true_ms = 0.004 + nbytes / 40e9 * 1e3 * (2.5 if k == 0 else 1.0)
                samples = true_ms * rng.lognormal(0.0, 0.02, n)
                samples[rng.integers(0, n)] *= 1.5  # a scheduler hiccup
                med = float(np.median(samples))
                bound = max(flops / (peak_tflops * 1e12), nbytes / (peak_gbps * 1e9)) * 1e3
                rows.append({
                    "schema_version": store.SCHEMA_VERSION, "run_id": f"run-{commit[:7]}",
                    "timestamp": "2025-01-02T03:04:05Z", "workload": wl_name, "impl": impl,
                    "backend": impl.split(":")[0], "dtype": case.dtype, "shape": case.label,
                    **{f"shape_{key}": v for key, v in case.shape},
                    "timer": "events", "l2": "cold", "ms_median": med,
                    "ms_p20": float(np.percentile(samples, 20)),
                    "ms_p80": float(np.percentile(samples, 80)), "ms_min": float(samples.min()),
                    "n_samples": n, "samples_ms": samples.tolist(), "flops": flops,
                    "min_bytes": nbytes, "eager_bytes": wl.eager_bytes(case),
                    "gbps": nbytes / med / 1e6, "tflops": flops / med / 1e9, "bound_ms": bound,
                    "sol": bound / med, "peak_gbps": peak_gbps, "peak_tflops": peak_tflops,
                    "status": "ok", "correct": True, "device": "cuda", "gpu_name": gpu,
                    "commit": commit, "dirty": False,
                })
    return rows


def base_run(tmp: Path) -> tuple[pd.DataFrame, str]:
    """A run's rows and where they came from ("committed", "runner" or "synthetic")."""
    committed = newest_committed_run()
    found = []
    if committed is not None:
        found.append((store.read_file(committed), f"committed {committed.name}"))
    else:
        ran = runner_run(tmp / "runner.parquet")
        if ran is not None:
            found.append((store.read_file(ran), "runner"))
    for df, origin in found:
        if len(measurable(df)) >= 2:
            return df.drop(columns="source"), origin
        # A run on a busy machine can be too noisy for any 10% change to be
        # significant; then the gate is right not to flag it, and these tests
        # need steadier numbers than the run has.
        warnings.warn(f"{origin} run has fewer than 2 cases steady enough to show a 10% "
                      "change; using synthetic rows")
    return store.to_frame(synthetic_rows(impls=GATED)), "synthetic"


def measurable(df: pd.DataFrame) -> pd.DataFrame:
    """Ok rows of our own implementations (the gated ones) whose samples are steady
    enough to show a 10% change, steadiest first.

    Steadiness is judged the way the gate judges it: the U test's p-value between
    the samples and the same samples 8% slower (a margin under the 10% the tests
    inject, which also get 2% jitter) must be tiny, and the samples' own floor
    (half their p20-p80 width) and a --repeat pair must sit well inside the band.
    A case with a few slow outliers among few samples fails this and is not chosen.
    """
    from suite.compare import mann_whitney_p, owned

    ok = df[(df["status"] == "ok") & df["impl"].map(owned)
            & df["samples_ms"].map(lambda s: s is not None and len(s) >= 10)]
    ok = ok[ok["ms_median"] >= 0.02]
    ok = ok[(ok["ms_p80"] - ok["ms_p20"]) / (2 * ok["ms_median"]) < 0.03]
    if "ms_median_repeat" in ok:
        rep = (np.log(ok["ms_median_repeat"] / ok["ms_median"])).abs()
        ok = ok[rep.isna() | (rep < 0.02)]
    p = ok["samples_ms"].map(lambda s: mann_whitney_p(np.asarray(s), np.asarray(s) * 1.08))
    return ok.assign(_spread=p)[p < 1e-3].sort_values("_spread")


TIME_COLUMNS = ("ms_median", "ms_p20", "ms_p80", "ms_min", "ms_median_repeat", "ms_p20_repeat",
                "ms_p80_repeat")


def key_mask(df: pd.DataFrame, row) -> pd.Series:
    m = pd.Series(True, index=df.index)
    for k in store.ROW_KEY:
        m &= df[k].astype(str) == str(row[k])
    return m


def scale_case(df: pd.DataFrame, row, factor: float) -> pd.DataFrame:
    """Make one case ``factor`` times slower, samples and summaries alike."""
    df = df.copy()
    m = key_mask(df, row)
    df.loc[m, "samples_ms"] = df.loc[m, "samples_ms"].map(lambda s: np.asarray(s) * factor)
    for col in TIME_COLUMNS:
        df.loc[m, col] = df.loc[m, col] * factor
    for col in ("gbps", "tflops", "sol"):
        df.loc[m, col] = df.loc[m, col] / factor
    return df


def scale_case_all(df: pd.DataFrame, factor: float) -> pd.DataFrame:
    """Every case ``factor`` times slower (a whole run on faster or slower hardware)."""
    df = df.copy()
    df["samples_ms"] = df["samples_ms"].map(lambda s: None if s is None else np.asarray(s) * factor)
    for col in TIME_COLUMNS:
        df[col] = df[col] * factor
    for col in ("gbps", "tflops", "sol"):
        df[col] = df[col] / factor
    return df


def jitter(df: pd.DataFrame, rel: float, seed: int = 1) -> pd.DataFrame:
    """Independent multiplicative noise of about ``rel`` on every sample of every row."""
    rng = np.random.default_rng(seed)
    df = df.copy()
    df["samples_ms"] = df["samples_ms"].map(
        lambda s: None if s is None else np.asarray(s) * rng.uniform(1 - rel, 1 + rel, len(s)))
    return df


def set_gpu(df: pd.DataFrame, name: str, peak_gbps: float, peak_tflops: float) -> pd.DataFrame:
    """Pretend the run was on another GPU with other ceilings (SOL recomputed)."""
    df = df.copy()
    df["gpu_name"] = name
    df["peak_gbps"], df["peak_tflops"] = peak_gbps, peak_tflops
    bound = [max(f / (peak_tflops * 1e12), b / (peak_gbps * 1e9)) * 1e3
             for f, b in zip(df["flops"], df["min_bytes"])]
    df["bound_ms"] = bound
    df["sol"] = df["bound_ms"] / df["ms_median"]
    return df


def write(df: pd.DataFrame, path: Path) -> Path:
    df = df.drop(columns=[c for c in ("source", "_spread") if c in df.columns])
    return store.write_atomic(store.normalize(df), path)


def finite(x) -> bool:
    return x is not None and math.isfinite(x)
