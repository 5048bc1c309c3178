"""What a candidate run is judged against, case by case.

- ``per_case``: the baseline of each case is the newest stored row of the same
  case (workload, impl, dtype, shape, timer) on the same GPU under the same
  ``l2``, wherever it lies among the stored runs: one file per candidate would
  leave every case it does not hold without a baseline.
- ``evidence``: each case's earlier runs on the same GPU and protocol, as lists of
  per-run medians, from which ``compare_stats.run_spread`` estimates how far one
  run's median moves between runs.
- ``Coverage``: what a run's sweep asked for, read from its rows (workloads,
  backends, timers, and each workload's grid of shapes and dtypes).  A case the
  candidate covers but has no row for, where the baseline has an ok one, is a
  loss: a backend module that fails to import writes no rows.  A sharded run
  covers only the (workload, shape, dtype) points it holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from suite import store

KEY = store.ROW_KEY


def backend_of(impl: str) -> str:
    return str(impl).split(":", 1)[0]


def _text_key(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in KEY:
        df[col] = df[col].fillna("").astype(str)
    df["_l2"] = store.l2_column(df).astype(str)
    df["_gpu"] = df["gpu_name"].map(lambda g: store.slug(g) if isinstance(g, str) else "unknown")
    df["_run"] = df["run_id"].fillna("").astype(str) if "run_id" in df else ""
    return df


@dataclass
class Coverage:
    """The cases and implementations a run's sweep covered, from its rows."""

    workloads: set = field(default_factory=set)
    backends: set = field(default_factory=set)
    timers: set = field(default_factory=set)
    grid: dict = field(default_factory=dict)  # workload -> (shapes, dtypes)
    points: set = field(default_factory=set)  # (workload, dtype, shape) held
    sharded: bool = False

    @classmethod
    def of(cls, df: pd.DataFrame) -> "Coverage":
        df = _text_key(df)
        grid = {w: (set(g["shape"]), set(g["dtype"])) for w, g in df.groupby("workload")}
        shard = df["shard"] if "shard" in df else pd.Series(dtype=object)
        return cls(set(df["workload"]), {backend_of(i) for i in df["impl"]}, set(df["timer"]),
                   grid, set(zip(df["workload"], df["dtype"], df["shape"])),
                   bool(shard.notna().any()))

    def covers(self, workload: str, impl: str, dtype: str, shape: str, timer: str) -> bool:
        if workload not in self.workloads or timer not in self.timers:
            return False
        if backend_of(impl) not in self.backends:
            return False
        if self.sharded:
            return (workload, dtype, shape) in self.points
        shapes, dtypes = self.grid[workload]
        return shape in shapes and dtype in dtypes

    def describe(self) -> str:
        return (f"workloads {', '.join(sorted(self.workloads))}; backends "
                f"{', '.join(sorted(self.backends))}; timers {', '.join(sorted(self.timers))}"
                + ("; sharded" if self.sharded else ""))


def per_case(cand: pd.DataFrame, stored: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """For every case the candidate covers, the newest stored row of it on the candidate's
    GPU under its protocol; and a line saying what was searched (for a "none found")."""
    c = _text_key(cand)
    s = _text_key(stored)
    s = s[~s["_run"].isin(set(c["_run"]) - {""})]
    s = s[s["_gpu"].isin(set(c["_gpu"]))]
    protocols = set(zip(c["timer"], c["_l2"]))
    s = s[[p in protocols for p in zip(s["timer"], s["_l2"])]]
    what = (f"GPU {', '.join(sorted(set(c['_gpu'])))}, "
            + "; ".join(f"timer {t}, l2 {l2}" for t, l2 in sorted(protocols)))
    if s.empty:
        return stored.iloc[0:0], what
    cov = Coverage.of(cand)
    held = set(zip(*(c[k] for k in KEY), c["_l2"]))
    keep = [(tuple(r[k] for k in KEY) + (r["_l2"],)) in held or cov.covers(*(r[k] for k in KEY))
            for _, r in s.iterrows()]
    s = s[keep]
    stamp = pd.to_datetime(s["timestamp"], utc=True, errors="coerce")
    s = s.assign(_t=stamp.fillna(pd.Timestamp(0, tz="UTC")),
                 _src=s["source"].fillna("") if "source" in s else "")
    newest = s.sort_values(["_t", "_src"]).groupby(KEY + ["_l2", "_gpu"], sort=False).tail(1)
    return stored.loc[newest.index], what


def evidence(frames: list[pd.DataFrame], exclude_runs: set[str]) -> dict[tuple, list[list[float]]]:
    """Case (ROW_KEY + l2) -> per-GPU lists of per-run medians of its ok rows, from ``frames``
    (earlier runs and the base), leaving out the runs in ``exclude_runs`` (the candidate's)."""
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return {}
    df = _text_key(pd.concat(frames, ignore_index=True))
    df = df[(df["status"] == "ok") & ~df["_run"].isin(exclude_runs) & (df["_run"] != "")]
    df = df[pd.to_numeric(df["ms_median"], errors="coerce") > 0]
    df = df.drop_duplicates(KEY + ["_l2", "_run"])
    out: dict[tuple, list[list[float]]] = {}
    for key, g in df.groupby(KEY + ["_l2", "_gpu"], sort=False):
        if len(g) >= 2:
            out.setdefault(tuple(key[:-1]), []).append([float(x) for x in g["ms_median"]])
    return out
