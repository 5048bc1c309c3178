"""``python -m suite report``: Markdown tables printed from result files.

The results documents under docs/ are this command's output, so every figure
in them traces back to rows of a committed Parquet file.  For each run: what
it is (GPU, commit, protocol, row counts, the roofs it was scored against),
then one table per workload: at its largest shapes (per dtype), each
implementation's rate and SOL, and how the best of our own backends compares
with the best library peer (``torch`` or ``compile``, any variant).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from suite.plain import figure, md_text

PEER_BACKENDS = ("torch", "compile")   # what a user calls today
OWN_BACKENDS = ("triton", "cuda")      # written here; plugins count as ours too
BACKEND_ORDER = ("eager", "torch", "compile", "triton", "cuda")


def configure(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = ("example:\n  python -m suite report results/h200/*.parquet --title 'Results on an H200'"
                " > docs/results-h200.md")
    p.add_argument("paths", nargs="+", help="result files, folders or globs")
    p.add_argument("--largest", type=int, default=1, metavar="N",
                   help="the N largest shapes of each workload and dtype (default 1)")
    p.add_argument("--title", default="Results", help="the document's heading")


def main(args) -> int:
    from suite.args import UsageError
    from suite.store import read_runs

    if args.largest < 1:
        raise UsageError(f"--largest {args.largest}: expected a positive number of shapes")
    df, problems = read_runs(args.paths)
    if problems:
        raise UsageError("; ".join(problems))
    if df.empty:
        raise UsageError("no readable results in " + ", ".join(args.paths))
    sys.stdout.write(render(df, args.title, args.largest))
    return 0


def render(df: pd.DataFrame, title: str, largest: int = 1) -> str:
    lines = [f"# {title}", "",
             "Printed by `python -m suite report` from the Parquet files named below; "
             "do not edit by hand.", "",
             "Cells: GB/s for memory-bound workloads, TFLOP/s for compute-bound ones, "
             "with SOL (roofline bound / measured time) in brackets. "
             "`ours / peer`: the best of our own backends against the best library peer "
             "(time ratio, above 1 is faster).", ""]
    # one file is one run's rows: a copy of a run file elsewhere is its own section, not merged into it
    by = ["run_id", "source"] if "source" in df else ["run_id"]
    for _, run in df.groupby(by, sort=False, dropna=False):
        lines += _run_section(run, largest)
    return "\n".join(lines).rstrip() + "\n"


def _one(series: pd.Series) -> str:
    vals = sorted({str(v) for v in series.dropna()})
    return md_text(", ".join(vals)) if vals else "-"


def _run_section(run: pd.DataFrame, largest: int) -> list[str]:
    first = run.iloc[0]
    counts = run["status"].value_counts()
    # (in a code span, where Markdown is not read; a backtick would end it)
    name = (Path(str(first.get("source", ""))).name or str(first["run_id"])).replace("`", "'")
    roofs = [f"memory {_num(run['peak_gbps'].median(), '.0f')} GB/s"]
    for dtype, g in run.groupby("dtype"):
        tf = pd.to_numeric(g["peak_tflops"], errors="coerce").median()
        if tf > 0:
            roofs.append(f"{md_text(dtype)} matmul {_num(tf, '.0f')} TFLOP/s")
    lines = [f"## `{name}`", "",
             f"{md_text(first['gpu_name'])}, commit {md_text(str(first['commit'])[:7])}, "
             f"torch {md_text(first['torch'])}, triton {md_text(first['triton'])}; timer {_one(run['timer'])}, "
             f"L2 {_one(run['l2'])}; "
             f"{len(run)} rows (" + ", ".join(f"{md_text(k)} {v}" for k, v in counts.items()) + "); "
             f"roofs: " + ", ".join(roofs) + ".", ""]
    for workload, g in run.groupby("workload", sort=True):
        lines += _workload_table(workload, g, largest)
    if (run.get("shape_source", pd.Series(dtype=str)).astype(str) == "preset:fuzz").any():
        lines += _robustness_table(run)
    return lines


def _robustness_table(run: pd.DataFrame) -> list[str]:
    """Over a fuzz run's shapes: each implementation's geometric mean and worst score."""
    from suite.robustness import robustness
    from suite.workload import discover

    table = robustness(run, discover().workloads)
    lines = [f"### robustness over the {run['shape'].nunique()} shapes of seed {_one(run['seed'])}", "",
             "| workload | impl | dtype | score | ok | geomean | worst | worst case |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {md_text(r['workload'])} | {md_text(r['impl'])} | {md_text(r['dtype'])} | "
                     f"{md_text(r['score'])} | {r['ok']} | {_num(r['geomean'], '.2f')} | {_num(r['worst'], '.2f')} | "
                     f"{md_text(r['worst_shape'])} |")
    return lines + [""]


def _impl_order(impls) -> list[str]:
    def key(name: str):
        backend = name.split(":")[0]
        rank = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(BACKEND_ORDER)
        return rank, name
    return sorted(impls, key=key)


def _workload_table(workload: str, g: pd.DataFrame, largest: int) -> list[str]:
    memory = _memory_bound(g)
    unit = "GB/s" if memory else "TFLOP/s"
    impls = _impl_order(g["impl"].dropna().unique())
    head = ["dtype", "shape"] + [md_text(i) for i in impls] + ["ours / peer"]
    lines = [f"### {md_text(workload)} ({unit})", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * 2 + "---:|" * (len(impls) + 1)]
    for dtype, d in g.groupby("dtype", sort=True):
        # a workload's own size measure where the rows have one, else its traffic
        size = d["size"] if "size" in d and d["size"].notna().any() else d["min_bytes"]
        for top in sorted(size.dropna().unique(), reverse=True)[:largest]:
            at = d[size == top]
            for shape, s in at.groupby("shape", sort=True):
                lines.append("| " + " | ".join([md_text(dtype), md_text(shape)] + _cells(s, impls, memory)) + " |")
    return lines + [""]


def _memory_bound(g: pd.DataFrame) -> bool:
    """The rows' own ``bound`` where recorded, else which roof their bound time comes from."""
    if "bound" in g and g["bound"].notna().any():
        return bool((g["bound"].dropna() == "memory").all())
    mem_ms = g["min_bytes"] / g["peak_gbps"]
    math_ms = g["flops"] / g["peak_tflops"] / 1e3
    return bool((mem_ms >= math_ms).all())


def _cells(s: pd.DataFrame, impls: list[str], memory: bool) -> list[str]:
    cells = []
    best: dict[str, float] = {}
    for impl in impls:
        r = s[s["impl"] == impl]
        if r.empty:
            cells.append("")
            continue
        r = r.iloc[0]
        if r["status"] != "ok":
            cells.append(md_text(r["status"]))
            continue
        rate = r["gbps"] if memory else r["tflops"]
        cells.append(f"{_num(rate, '.0f')} ({_num(r['sol'], '.2f')})")
        side = "peer" if r["backend"] in PEER_BACKENDS else "ours" if r["backend"] != "eager" else None
        if side and r["ms_median"] > 0:
            best[side] = min(best.get(side, math.inf), float(r["ms_median"]))
    ratio = best.get("peer", math.nan) / best.get("ours", math.nan)
    cells.append(_num(ratio, ".2f") if not math.isnan(ratio) else "-")
    return cells


def _num(x, spec: str) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(x) else figure(x, spec)
