"""How each implementation holds up across a run's shapes (the fuzz preset's, say).

Per (workload, implementation, dtype, timer): the number of ``ok`` rows and,
over them, the geometric mean and the worst of a score, naming the worst
case's shape.  The score is

- SOL for a workload whose ``bound`` is ``memory`` (1.0 = at the measured
  bandwidth of its traffic mix);
- for a compute-bound workload that names a ``reference_backend``, the speed
  relative to the fastest ok row of that backend's implementations at the same
  case and timer (reference ms / ms: 1.0 = as fast as the library, above 1
  faster); rows of cases the reference did not run leave the score out;
- SOL otherwise.

A CPU run has no SOL: its memory-bound rows are counted but not scored.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Mapping

import pandas as pd

KEYS = ["workload", "impl", "dtype", "timer"]


def _scores(g: pd.DataFrame, wl: Any) -> tuple[pd.Series, str]:
    """The score of each ok row of one workload, and what it is."""
    ref = getattr(wl, "reference_backend", None)
    if getattr(wl, "bound", None) == "memory" or not ref:
        return pd.to_numeric(g["sol"], errors="coerce"), "SOL"
    backend = g["impl"].astype(str).str.split(":").str[0]
    best = g[backend == ref].groupby(["dtype", "shape", "timer"])["ms_median"].min().rename("ref_ms")
    ref_ms = g.join(best, on=["dtype", "shape", "timer"])["ref_ms"]
    return ref_ms / g["ms_median"], f"x {ref}"


def robustness(df: pd.DataFrame, workloads: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (workload, impl, dtype, timer): ok, score (what it measures),
    scored (rows with a score), geomean, worst, worst_shape."""
    ok = df[(df["status"] == "ok") & df["ms_median"].notna()].copy()
    ok["ms_median"] = pd.to_numeric(ok["ms_median"], errors="coerce")
    out = []
    for name, g in ok.groupby("workload", sort=True):
        scores, what = _scores(g, workloads.get(name))
        g = g.assign(score=scores.where(scores > 0))
        for (wl, impl, dtype, timer), h in g.groupby(KEYS, sort=True):
            s = h["score"].dropna()
            entry = {"workload": wl, "impl": impl, "dtype": dtype, "timer": timer, "ok": len(h),
                     "score": what, "scored": len(s), "geomean": math.nan, "worst": math.nan,
                     "worst_shape": ""}
            if len(s):
                worst = s.idxmin()
                entry.update(geomean=float(math.exp(s.map(math.log).mean())), worst=float(s[worst]),
                             worst_shape=str(h.loc[worst, "shape"]))
            out.append(entry)
    return pd.DataFrame(out, columns=KEYS + ["ok", "score", "scored", "geomean", "worst", "worst_shape"])


def print_robustness(df: pd.DataFrame, workloads: Mapping[str, Any], file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    from suite.plain import rich_text

    console = Console(file=file or sys.stdout, width=160)
    table = Table(title="robustness: each implementation over the run's shapes (ok rows)")
    right = ("ok", "geomean", "worst")
    for col in ("workload", "impl", "dtype", "timer", "score") + right + ("worst case",):
        table.add_column(col, justify="right" if col in right else "left")
    for _, r in robustness(df, workloads).iterrows():
        fmt = (lambda x: "-" if pd.isna(x) else f"{x:.2f}")
        table.add_row(rich_text(r["workload"]), rich_text(r["impl"]), rich_text(r["dtype"]), rich_text(r["timer"]),
                      rich_text(r["score"]), str(r["ok"]), fmt(r["geomean"]), fmt(r["worst"]),
                      rich_text(r["worst_shape"]))
    console.print(table)
