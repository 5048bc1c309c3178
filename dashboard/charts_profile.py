"""The Profile page's pure functions: rows of one case -> Nsight Compute's breakdown.

Like charts.py: DataFrames in, Plotly figures or DataFrames out, no Streamlit;
every name from the rows reaches a figure HTML-escaped (dashboard.safe.html).
Speed-of-light bars in the manner of Nsight Compute's own section: for each
implementation of one case, DRAM, SM and tensor-pipe throughput, achieved
occupancy and L2 hit rate (% of peak, duration-weighted over a call's kernels,
see suite.ncu) beside the suite's SOL (bound_ms / ms_median, as a %).  A
kernel far from the roof with DRAM and SM both low is latency- or
launch-bound; one with a high bar at the top is held by that unit.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import safe
from dashboard.charts import _layout, color

# (label, column, factor to %)
BARS = [("SOL (suite)", "sol", 100.0), ("DRAM", "ncu_dram_pct", 1.0), ("SM", "ncu_sm_pct", 1.0),
        ("tensor pipe", "ncu_tensor_pct", 1.0), ("occupancy", "ncu_occupancy_pct", 1.0),
        ("L2 hit", "ncu_l2_hit_pct", 1.0)]
CASE = ["gpu", "workload", "shape", "dtype", "timer"]
TABLE = ["impl", "status", "ms_median", "sol", "ncu_ms", "ncu_ratio", "ncu_kernels", "ncu_top_kernel",
         "ncu_dram_gbps", "ncu_regs", "ncu_smem_bytes", "ncu_local_bytes", "energy_j", "energy_w",
         "gflops_per_j", "gb_per_j", "ncu_error"]


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name in df.columns:
        return df[name]
    return pd.Series([np.nan] * len(df), index=df.index, dtype=float)


def profiled(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with a profile or an energy figure, or a note saying why they have none."""
    has = (pd.to_numeric(_col(df, "ncu_ms"), errors="coerce").notna()
           | pd.to_numeric(_col(df, "energy_j"), errors="coerce").notna()
           | _col(df, "ncu_error").notna())
    return df[has]


def cases(df: pd.DataFrame) -> list[tuple]:
    """The (gpu, workload, shape, dtype, timer) cases among ``df``'s rows, in order."""
    keys = [c for c in CASE if c in df.columns]
    return list(dict.fromkeys(tuple(r) for r in df[keys].itertuples(index=False)))


def label(case: tuple) -> str:
    """A case as one line of plain text, each value clipped (dashboard.safe.clip):
    the Profile page's choice, and its URL value."""
    return " · ".join(safe.clip(v, 60) for v in case)


def one_case(df: pd.DataFrame, case: tuple) -> pd.DataFrame:
    keys = [c for c in CASE if c in df.columns]
    mask = np.logical_and.reduce([df[k] == v for k, v in zip(keys, case)]) if keys else []
    return df[mask]


def _num(value, fmt: str) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    return format(v, fmt) if math.isfinite(v) else "-"


def breakdown(df: pd.DataFrame, title: str = "") -> go.Figure:
    """Horizontal bars, one trace per implementation, one group per metric (BARS), in %."""
    fig = go.Figure()
    names = list(dict.fromkeys(df["impl"])) if len(df) else []
    labels = [b[0] for b in BARS]
    for name in names:
        r = df[df["impl"] == name].iloc[0]
        values = [float(pd.to_numeric(r.get(col), errors="coerce")) * factor for _, col, factor in BARS]
        top = r.get("ncu_top_kernel")
        top = safe.html(safe.clip(top)) if isinstance(top, str) and top else "-"
        note = (f"{_num(r.get('ncu_ms'), '.4g')} ms in ncu ({_num(r.get('ncu_ratio'), '.3f')} of the median), "
                f"{_num(r.get('ncu_kernels'), '.3g')} kernels<br>top: {top}")
        fig.add_trace(go.Bar(
            y=labels, x=values, orientation="h", name=safe.html(safe.clip(name)), marker_color=color(name, names),
            customdata=[note] * len(labels),
            hovertemplate="%{y}: %{x:.1f}%<br>%{customdata}<extra>" + safe.html(safe.clip(name)) + "</extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, 105])
    return _layout(fig, title, "% of peak (SOL: bound / measured)", "")


def table(df: pd.DataFrame) -> pd.DataFrame:
    """The case's implementations, fastest first, with their ncu and energy figures."""
    cols = [c for c in TABLE if c in df.columns]
    return df.sort_values("ms_median", na_position="last")[cols].reset_index(drop=True)
