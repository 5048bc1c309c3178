"""The summary of a run: the best correct implementation per workload and dtype.

At each workload's largest shape (per dtype): the fastest ``ok`` row, its
GB/s (memory bound) or TFLOP/s (compute bound), its SOL, and its speedup over
``eager`` and ``torch`` at the same case and timer.  Rows of status
``suspect`` (timed with a cold L2 above SUSPECT_SOL of their roof) are listed
with their reason and never chosen: faster than the measured roofline means a
wrong roof, bytes or FLOP model, check, or a timing artifact.
A CPU run is a smoke run: it is said so, and its rows show no SOL.
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import Iterable

import pandas as pd

from suite.plain import figure
from suite.plain import rich_text as _t
from suite.roofline import SUSPECT_SOL
from suite.store import normalize

CPU_NOTE = "CPU run: a smoke run, not scored on a roofline"


def best_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (workload, dtype, timer): the fastest ok row at the largest shape.

    Rows without a size (imported from pytest-benchmark) count as one shape.
    """
    out = []
    df = df.assign(**{c: df[c].fillna("").astype(str) for c in ("workload", "dtype", "timer", "shape")})
    for (wl, dtype, timer), g in df.groupby(["workload", "dtype", "timer"], sort=True):
        size = pd.to_numeric(g["size"], errors="coerce").astype(float).fillna(-1.0)
        at = g[size == size.max()]
        shape = at["shape"].iloc[0]
        good = g[(g["status"] == "ok") & (g["shape"] == shape) & g["ms_median"].notna()]
        entry = {"workload": wl, "dtype": dtype, "timer": timer, "shape": shape,
                 "rows": len(at), "ok": len(good)}
        if len(good):
            best = good.loc[good["ms_median"].idxmin()]
            by_impl = good.groupby("impl")["ms_median"].min()
            entry.update(impl=best["impl"], ms=best["ms_median"], gbps=best["gbps"],
                         tflops=best["tflops"], sol=best["sol"], bound=best.get("bound"),
                         vs_eager=by_impl.get("eager", math.nan) / best["ms_median"],
                         vs_torch=by_impl.get("torch", math.nan) / best["ms_median"])
        out.append(entry)
    return pd.DataFrame(out)


def _fmt(x, spec: str, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return figure(x, spec) + unit


def print_summary(rows: Iterable[dict] | pd.DataFrame, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    df = normalize(rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows)))
    console = Console(file=file or sys.stdout, width=140)
    if df.empty:
        console.print("no rows")
        return
    cpu = df["device"].astype(str).eq("cpu")
    if cpu.any():  # files from before CPU rows were left unscored carry a SOL: not shown either
        df.loc[cpu, "sol"] = math.nan
        console.print(CPU_NOTE if cpu.all() else "its CPU rows: " + CPU_NOTE.split(": ", 1)[1])
    table = Table(title="best correct implementation at each workload's largest shape")
    for col in ("workload", "dtype", "timer", "shape", "best", "GB/s", "TFLOP/s", "SOL",
                "vs eager", "vs torch"):
        table.add_column(col, justify="right" if col in ("GB/s", "TFLOP/s", "SOL", "vs eager", "vs torch") else "left")
    for _, b in best_rows(df).iterrows():
        if pd.isna(b.get("impl")):
            table.add_row(_t(b["workload"]), _t(b["dtype"]), _t(b["timer"]), _t(b["shape"]), "[red]none correct[/]",
                          "-", "-", "-", "-", "-")
            continue
        mem = b.get("bound") == "memory"
        table.add_row(_t(b["workload"]), _t(b["dtype"]), _t(b["timer"]), _t(b["shape"]), _t(b["impl"]),
                      f"[bold]{_fmt(b['gbps'], '.0f')}[/]" if mem else _fmt(b["gbps"], ".0f"),
                      _fmt(b["tflops"], ".1f") if mem else f"[bold]{_fmt(b['tflops'], '.1f')}[/]",
                      _fmt(b["sol"], ".2f"), _fmt(b["vs_eager"], ".2f", "x"),
                      _fmt(b["vs_torch"], ".2f", "x"))
    console.print(table)
    counts = df["status"].value_counts().to_dict()
    console.print("rows by status: " + ", ".join(f"{_t(k)} {v}" for k, v in sorted(counts.items())))
    # Only a cold-cache GPU measurement is held to the HBM roof (the worker
    # marks it); CPU rows of cache-resident data beat the DRAM rates by design.
    for _, r in df[df["status"] == "suspect"].iterrows():
        console.print(f"[yellow]suspect: {_t(r['workload'])} {_t(r['impl'])} {_t(r['dtype'])} {_t(r['shape'])} "
                      f"({_t(r['timer'])}): {_t(r['error'])}[/]")
    bad = df[df["status"].isin(["error", "incorrect"])]
    for _, r in bad.head(20).iterrows():
        test = r.get("check")
        test = f" ({_t(test)})" if isinstance(test, str) and test else ""
        console.print(f"[red]{_t(r['status'])}[/]{test}: {_t(r['workload'])} {_t(r['impl'])} {_t(r['dtype'])} "
                      f"{_t(r['shape'])}: {_t(str(r['error'])[:160])}")
    if len(bad) > 20:
        console.print(f"... and {len(bad) - 20} more error/incorrect rows")


def print_rows(df: pd.DataFrame, file=None) -> None:
    """Every row, one line each: time, rate, SOL, speed against torch at the same case and
    timer, and the card's mean SM clock, board power and clock limits while the row was timed."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=200)
    if df.empty:
        console.print("no rows match")
        return
    df = df.copy()
    if "size" not in df.columns:
        df["size"] = 0
    for col in ("sm_clock_mhz", "power_w", "clock_limits"):
        if col not in df.columns:
            df[col] = None
    ok = df[df["status"] == "ok"]
    # the fastest of a case's torch rows, should the rows hold the case more than once
    torch_ms = ok[ok["impl"] == "torch"].groupby(["workload", "dtype", "shape", "timer"])["ms_median"].min()
    table = Table(title="rows")
    right = ("ms", "GB/s", "TFLOP/s", "SOL", "x torch", "MHz", "W")
    for col in ("workload", "dtype", "shape", "timer", "impl", "status") + right + ("limits",):
        table.add_column(col, justify="right" if col in right else "left")
    df = df.sort_values(["workload", "dtype", "size", "shape", "timer", "ms_median"], na_position="last")
    for _, r in df.iterrows():
        if r["status"] != "ok":
            table.add_row(_t(r["workload"]), _t(r["dtype"]), _t(r["shape"]), _t(r["timer"]), _t(r["impl"]),
                          f"[{'red' if r['status'] in ('error', 'incorrect') else 'dim'}]{_t(r['status'])}[/]",
                          "-", "-", "-", "-", "-", "-", "-", _t(str(r.get("error") or "")[:60]))
            continue
        ref = torch_ms.get((r["workload"], r["dtype"], r["shape"], r["timer"]), math.nan)
        clock = pd.to_numeric(r["sm_clock_mhz"], errors="coerce")
        watts = pd.to_numeric(r["power_w"], errors="coerce")
        table.add_row(_t(r["workload"]), _t(r["dtype"]), _t(r["shape"]), _t(r["timer"]), _t(r["impl"]), "ok",
                      _fmt(r["ms_median"], ".4g"), _fmt(r["gbps"], ".0f"), _fmt(r["tflops"], ".1f"),
                      _fmt(r["sol"], ".2f"), _fmt(ref / r["ms_median"], ".3f"),
                      _fmt(None if pd.isna(clock) else float(clock), ".0f"),
                      _fmt(None if pd.isna(watts) else float(watts), ".0f"),
                      _t(r["clock_limits"]) if isinstance(r["clock_limits"], str) else "")
    console.print(table)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", help="result files, folders or globs")
    p.add_argument("--newest", action="store_true",
                   help="only the newest run of each GPU (given one GPU's folder: its newest run)")
    p.add_argument("--rows", action="store_true",
                   help="also print every row (time, GB/s, TFLOP/s, SOL, x torch, SM clock, board power "
                        "and clock limits while timed)")
    p.add_argument("--workloads", help="comma-separated workloads: the summary (and --rows) of only their rows")
    p.add_argument("--impls", help="comma-separated implementations: the summary (and --rows) of only their rows")
    p.add_argument("--dtypes", help="comma-separated dtypes: the summary (and --rows) of only their rows")
    p.add_argument("--robustness", action="store_true",
                   help="also print, per implementation and dtype, the geometric mean and the worst of "
                        "SOL (memory bound) or of the speed against the workload's reference backend "
                        "(compute bound) over the run's shapes, naming the worst (always for a fuzz run)")


def main(args) -> int:
    from suite.args import UsageError
    from suite.store import read_runs

    df, problems = read_runs(args.paths)
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    if df.empty:
        raise UsageError("no readable results in " + ", ".join(args.paths))
    # one file is one run's rows: a copy of a run file elsewhere is shown as its own, not merged into it
    runs = [(run_id, g) for (run_id, _), g in df.groupby(["run_id", "source"], sort=False, dropna=False)]
    if args.newest:
        runs = newest_runs(runs)
    filtered = any(f is not None for f in (args.workloads, args.impls, args.dtypes))
    skipped = 0
    for run_id, g in runs:
        rows = _narrow(g, df, args) if filtered else g
        if rows.empty:  # said once at the end, not once a run
            skipped += 1
            continue
        first = g.iloc[0]
        count = f"{len(rows)} of {len(g)} rows" if filtered else f"{len(g)} rows"
        print(f"run {run_id}: {first['gpu_name']}, commit {str(first['commit'])[:7]}, "
              f"{first['timestamp']}, {count} ({first['source']})")
        print_summary(rows)
        if args.robustness or ("preset" in g and g["preset"].astype(str).eq("fuzz").any()):
            from suite.robustness import print_robustness
            from suite.workload import discover

            print_robustness(rows, discover().workloads)
        if args.rows:
            print_rows(rows)
    if skipped == len(runs) and skipped:
        print(f"no rows match (in {skipped} run{'s' if skipped > 1 else ''})")
    elif skipped:
        print(f"{skipped} run{'s' if skipped > 1 else ''} with no matching row not shown")
    return 0


def newest_runs(runs: list[tuple]) -> list[tuple]:
    """Of (run_id, rows) pairs, the newest run of each GPU (by timestamp, then file name)."""
    newest: dict[str, tuple] = {}
    for run_id, g in runs:
        first = g.iloc[0]
        when = pd.to_datetime(g["timestamp"], utc=True, errors="coerce").max()
        key = (pd.Timestamp.min.tz_localize("UTC") if pd.isna(when) else when, str(first["source"]))
        gpu = str(first["gpu_name"])
        if gpu not in newest or key > newest[gpu][0]:
            newest[gpu] = (key, (run_id, g))
    return [pair for _, pair in sorted(newest.values(), key=lambda v: v[0])]


def _narrow(run: pd.DataFrame, every: pd.DataFrame, args) -> pd.DataFrame:
    """The run's rows matching --workloads/--impls/--dtypes; a name that no given file
    has is a UsageError listing the ones they do."""
    from suite.args import choose, csv_list

    for col, text, what in (("workload", args.workloads, "workload"), ("impl", args.impls, "implementation"),
                            ("dtype", args.dtypes, "dtype")):
        wanted = choose(csv_list(text), sorted(every[col].dropna().astype(str).unique()), what)
        if wanted:
            run = run[run[col].isin(wanted)]
    return run
