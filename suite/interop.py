"""Meeting other tools where they are.

``import-pytest-benchmark`` turns pytest-benchmark JSON (``--benchmark-json``
or a ``--benchmark-autosave`` file) into rows of the suite's schema, with the
timer recorded as ``pytest-benchmark`` so the rows never match (and are never
compared with) the suite's own CUDA-event timings.

``export`` writes runs for two CI tools: github-action-benchmark's
``customSmallerIsBetter`` input (a JSON list of ``{name, unit, value, range?,
extra?}``) and Bencher's BMF (``{benchmark: {measure: {value, lower_value?,
upper_value?}}}``, latency in nanoseconds as Bencher's built-in measure is).
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from suite import store
from suite.args import UsageError, writable_file

TIMER = "pytest-benchmark"
# extra_info keys our benchmarks/ write that map straight onto columns.
_EXTRA_COLUMNS = ["workload", "impl", "dtype", "shape", "l2", "flops", "min_bytes", "eager_bytes",
                  "gbps", "tflops", "intensity", "bound_ms", "sol", "peak_gbps", "peak_tflops",
                  "rel_err", "tol", "correct", "device", "gpu_name", "gpu_sms", "torch", "triton",
                  "cuda", "config", "math", "size", "preset"]


# ---------------------------------------------------------------- import
def _iso(text: str | None) -> str | None:
    if not text:
        return None
    t = pd.to_datetime(text, utc=True, errors="coerce")
    return None if pd.isna(t) else t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _shape_columns(shape: str) -> dict:
    out = {}
    for part in (shape or "").split(","):
        key, _, val = part.partition("=")
        if key in store.SHAPE_KEYS and re.fullmatch(r"-?\d+", val.strip()):
            out[f"shape_{key}"] = int(val)
    return out


def bench_rows(doc: dict, source: str) -> list[dict]:
    """The rows of one pytest-benchmark JSON document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise UsageError(f"{source}: not pytest-benchmark JSON (no 'benchmarks' list)")
    commit = doc.get("commit_info") or {}
    machine = doc.get("machine_info") or {}
    stamp = _iso(doc.get("datetime")) or _iso(commit.get("time"))
    run_id = f"pytest-benchmark-{Path(source).stem}"
    rows = []
    for b in doc["benchmarks"]:
        stats, extra = b.get("stats") or {}, b.get("extra_info") or {}
        if "median" not in stats:
            raise UsageError(f"{source}: benchmark {b.get('name')!r} has no stats.median")
        data = np.asarray(stats.get("data") or [], dtype=float) * 1e3  # seconds -> ms
        name = str(b.get("name", ""))
        row = {
            "schema_version": store.SCHEMA_VERSION, "run_id": run_id, "timestamp": stamp,
            # A foreign benchmark has no workload: its test function and param stand in.
            "workload": b.get("group") or name.split("[", 1)[0],
            "impl": b.get("param") or name, "dtype": "", "shape": "", "timer": TIMER,
            "ms_median": stats["median"] * 1e3, "ms_min": stats.get("min", math.nan) * 1e3,
            "n_samples": stats.get("rounds"), "status": "ok",
            "commit": commit.get("id"), "dirty": commit.get("dirty"),
            "python": machine.get("python_version"), "hostname": machine.get("node"),
            "gpu_name": (machine.get("cpu") or {}).get("brand_raw"), "device": "cpu",
        }
        row.update({k: extra[k] for k in _EXTRA_COLUMNS if extra.get(k) is not None})
        row["backend"] = str(row["impl"]).split(":", 1)[0]
        if len(data):
            row["samples_ms"] = data.tolist()
            row["ms_p20"], row["ms_p80"] = (float(x) for x in np.percentile(data, [20, 80]))
        row.update(_shape_columns(row["shape"]))
        rows.append(row)
    return rows


def read_json(path: str) -> dict:
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{path}: a folder, not a file; name the pytest-benchmark JSON files in it "
                         f"(e.g. {p / '*.json'})")
    if not p.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        return json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({str(exc).splitlines()[0][:120]})") from None


def configure_import(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.json", help="pytest-benchmark JSON files")
    p.add_argument("--out", help="one Parquet file for all inputs (default: one file per input "
                                 "under --results as <gpu>/<timestamp>-<commit>.parquet)")
    p.add_argument("--results", default=f"{store.RUNS}/pytest-benchmark",
                   help=f"folder for the default output files (default {store.RUNS}/pytest-benchmark)")


def main_import(args) -> int:
    if args.out:
        writable_file(args.out)
    per_file = [(f, bench_rows(read_json(f), f)) for f in args.files]
    if not any(rows for _, rows in per_file):
        raise UsageError("no benchmarks in " + ", ".join(args.files))
    if args.out:
        written = [store.write_atomic(store.to_frame([r for _, rows in per_file for r in rows]),
                                      args.out)]
    else:
        written = []
        for f, rows in per_file:
            if not rows:
                continue
            first = rows[0]
            path = store.default_path(args.results, first.get("gpu_name") or "unknown",
                                      first.get("timestamp") or "", first.get("commit") or "")
            written.append(store.write_atomic(store.to_frame(rows), path))
    for w, n in zip(written, [sum(len(r) for _, r in per_file)] if args.out else
                    [len(r) for _, r in per_file if r]):
        print(f"wrote {n} rows to {w}")
    return 0


# ---------------------------------------------------------------- export
def latest_rows(df: pd.DataFrame, gpu: str | None) -> pd.DataFrame:
    """Ok rows of one GPU, the newest run's row where a case appears more than once."""
    if gpu:
        df = df[df["gpu_name"].fillna("").str.contains(gpu, case=False, regex=False)]
    gpus = sorted({str(g) for g in df["gpu_name"].dropna()})
    if len(gpus) > 1:
        raise UsageError(f"the runs hold {len(gpus)} GPUs ({', '.join(gpus)}); "
                         "export one at a time with --gpu NAME")
    df = df.assign(_t=pd.to_datetime(df["timestamp"], utc=True, errors="coerce"))
    # Newest first, then ok only: a case that fails now is left out, not shown at its old time.
    df = df.sort_values("_t", na_position="first", kind="stable")
    df = df.drop_duplicates(store.ROW_KEY, keep="last")
    df = df[(df["status"] == "ok") & df["ms_median"].notna()]
    if df.empty:
        raise UsageError("no ok rows to export" + (f" for GPU {gpu!r}" if gpu else ""))
    return df.sort_values(store.ROW_KEY).drop(columns="_t")


def bench_name(r) -> str:
    parts = [r["workload"], r["shape"], r["dtype"], r["impl"], r["timer"]]
    return "/".join(str(p) for p in parts if p not in (None, "") and not _nan(p))


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def github_action_benchmark(df: pd.DataFrame) -> list[dict]:
    out = []
    for _, r in df.iterrows():
        entry = {"name": bench_name(r), "unit": "ms", "value": float(r["ms_median"])}
        if _finite(r["ms_p20"]) and _finite(r["ms_p80"]):
            entry["range"] = f"± {(r['ms_p80'] - r['ms_p20']) / 2:.4g}"
        facts = [f"p20-p80 {r['ms_p20']:.4g}-{r['ms_p80']:.4g} ms" if "range" in entry else None,
                 f"n={int(r['n_samples'])}" if _finite(r["n_samples"]) else None,
                 f"{r['gbps']:.4g} GB/s" if _finite(r["gbps"]) else None,
                 f"{r['tflops']:.4g} TFLOP/s" if _finite(r["tflops"]) else None,
                 f"SOL {r['sol']:.3f}" if _finite(r["sol"]) else None,
                 str(r["gpu_name"]) if r["gpu_name"] else None,
                 f"commit {str(r['commit'])[:7]}" if r["commit"] else None]
        entry["extra"] = "\n".join(f for f in facts if f)
        out.append(entry)
    return out


def bencher(df: pd.DataFrame) -> dict:
    out = {}
    for _, r in df.iterrows():
        latency = {"value": float(r["ms_median"]) * 1e6}  # Bencher's latency is in ns
        if _finite(r["ms_p20"]) and _finite(r["ms_p80"]):
            latency["lower_value"] = float(r["ms_p20"]) * 1e6
            latency["upper_value"] = float(r["ms_p80"]) * 1e6
        measures = {"latency": latency}
        for slug_, col in (("gbps", "gbps"), ("tflops", "tflops"), ("sol", "sol")):
            if _finite(r[col]):
                measures[slug_] = {"value": float(r[col])}
        out[bench_name(r)] = measures
    return out


FORMATS = {"github-action-benchmark": github_action_benchmark, "bencher": bencher}


def configure_export(p) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help=f"runs: files, folders or quoted globs (default {store.RUNS}/, your own runs, "
                        f"or {store.RESULTS}/ where there is no {store.RUNS}/)")
    p.add_argument("--format", required=True, choices=sorted(FORMATS),
                   help="github-action-benchmark: customSmallerIsBetter JSON (ms); "
                        "bencher: BMF JSON (latency in ns, plus gbps, tflops, sol)")
    p.add_argument("--gpu", help="only runs whose GPU name contains this text")
    p.add_argument("--out", help="write here instead of standard output")


def main_export(args) -> int:
    args.paths = args.paths or [store.RUNS if Path(store.RUNS).is_dir() else store.RESULTS]
    df, problems = store.read_runs(args.paths)
    if problems:
        raise UsageError(problems[0])
    if df.empty:
        raise UsageError(f"no runs found in {', '.join(args.paths)}")
    doc = FORMATS[args.format](latest_rows(df, args.gpu))
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        writable_file(args.out, example="benchmarks.json").write_text(text)
        print(f"wrote {len(doc)} benchmarks to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
