"""Loading the runs the dashboard was given, cached per server process; no widgets.

The paths come only from the launcher (an environment variable holding a JSON
list), never from a URL: query parameters select among loaded runs, they do
not name files.  Loading follows suite.store's rules (files, folders, globs;
a corrupt file becomes one problem line and the rest still loads) but reads
all files as Arrow tables and converts once, refuses a file without one of the
required columns (suite.store.REQUIRED) the same way, and leaves out the raw
``samples_ms`` lists that no view plots: with 200 runs of 2,000 rows this is
several times faster than ``store.read_runs`` followed by concatenation.
tests/test_dashboard_data.py checks that both give the same values.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import streamlit as st

from dashboard import analysis
from suite import store

PATHS_ENV = "KERNEL_SUITE_DASHBOARD_PATHS"
ROOT = Path(__file__).resolve().parents[1]
# a user's own runs (ignored by git) and the committed reference runs
DEFAULT_PATHS = (str(ROOT / store.RUNS), str(ROOT / store.RESULTS))
SKIPPED = {"samples_ms"}
SHARED_MAX = 32  # results of Loaded.shared kept per load
# Columns the dashboard fills itself.  A file may carry one already: a resumed
# run is checkpointed from rows that store.read_file had tagged with "source"
# (the partial file's path on the GPU machine); the reader's own value wins.
DERIVED = {"source"}

# Per-run values, repeated on each of a run's rows: held as categoricals (one small
# integer a row), which is most of the frame's size as strings (400k rows: ~150 MB of
# ~450 MB) and of the time every row selection takes.  The case columns (workload,
# impl, dtype, ...) stay strings: the views build new values from them.
CATEGORICAL = ("source", "run_id", "timestamp", "gpu_name", "gpu_slug", "gpu", "hostname", "python", "torch",
               "triton", "driver", "cuda", "device", "preset", "l2", "commit", "clock_limits", "run_args",
               "ceilings")

_PANDAS = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}.get


def _arrow_types() -> dict[str, pa.DataType]:
    """The Arrow type of each store column, as store.normalize types it in pandas."""
    kinds = {"float64": pa.float64(), "Int64": pa.int64(), "boolean": pa.bool_()}
    dtypes = store.normalize(pd.DataFrame(columns=store.COLUMNS)).dtypes
    return {c: kinds.get(str(t), pa.string()) for c, t in dtypes.items()}


def default_paths() -> tuple[str, ...]:
    """The repo's runs/ and results/, those that exist (results/ when neither does)."""
    return tuple(p for p in DEFAULT_PATHS if Path(p).exists()) or DEFAULT_PATHS[-1:]


def configured_paths() -> tuple[str, ...]:
    """The launcher's paths: a JSON list in the environment, else default_paths()."""
    raw = os.environ.get(PATHS_ENV)
    if not raw:
        return default_paths()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return default_paths()
    if isinstance(value, str):
        value = [value]
    return tuple(str(v) for v in value if isinstance(v, str)) or default_paths()


@dataclass
class Loaded:
    frame: pd.DataFrame                     # every row, read-only: shared by all sessions; index 0..n-1
    problems: list[str]
    runs: pd.DataFrame                      # one row per run, newest first
    index: dict[str, np.ndarray] = field(default_factory=dict)  # run_id -> row positions
    _options: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _shared: dict[tuple, object] = field(default_factory=dict, repr=False)

    def options(self, column: str) -> list[str]:
        """The values a filter offers, computed once per load (the sidebar asks on every rerun)."""
        if column not in self._options:
            self._options[column] = self._find_options(column)
        return list(self._options[column])

    def _find_options(self, column: str) -> list[str]:
        if column == "commit" and "commits" in self.runs.columns:
            # every commit measured, not only each run's first: a resumed run has two
            # (newest first: within a run, the commit whose rows came last is the newer)
            return list(dict.fromkeys(c for cs in self.runs["commits"] for c in reversed(cs)))
        if column in self.runs.columns:
            return list(dict.fromkeys(self.runs[column].tolist()))
        return sorted(self.frame[column].dropna().astype(str).unique().tolist())

    def shared(self, key: tuple, compute):
        """``compute()`` once per ``key`` for this load, its result shared by every session
        and never modified; the oldest of SHARED_MAX results goes first.  The views every
        visitor opens first (the default filters' rows, the Overview's tables) are computed
        once per process (dashboard/serve.py does it before the server answers), not on
        each visitor's first page."""
        if key in self._shared:
            return self._shared[key]
        value = compute()
        while len(self._shared) >= SHARED_MAX:
            self._shared.pop(next(iter(self._shared)), None)
        self._shared[key] = value
        return value

    def rows(self, run_ids, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows of ``run_ids`` in load order (only ``columns`` where given); their
        index is their position in ``frame``."""
        frame = self.frame if columns is None else self.frame[columns]
        parts = [self.index[r] for r in run_ids if r in self.index]
        if not parts:
            return frame.iloc[0:0]
        return frame.iloc[np.sort(np.concatenate(parts))]

    def at(self, positions) -> pd.DataFrame:
        """Every column of the rows at ``positions`` (a :meth:`rows` result's index)."""
        return self.frame.iloc[np.asarray(positions, dtype=np.int64)]


def _read_one(path: Path, types: dict[str, pa.DataType]) -> pa.Table:
    """One file as a table in the store's column types, or StoreError naming it."""
    try:
        pf = pq.ParquetFile(path)
        names = [n for n in dict.fromkeys(pf.schema_arrow.names) if n not in SKIPPED | DERIVED]
        table = pf.read(columns=names, use_threads=False)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise store.StoreError(f"{path}: not a readable Parquet file ({reason[:160]})") from None
    missing = [c for c in ("schema_version", "workload", "impl", "status") if c not in names]
    if missing:
        raise store.StoreError(f"{path}: not a kernel-suite results file (no column {', '.join(missing)})")
    try:
        versions = table.column("schema_version").cast(pa.int64())
        newest = pc.max(versions).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        newest = None
    if newest is not None and newest > store.SCHEMA_VERSION:
        raise store.StoreError(f"{path}: schema_version {newest} is newer than this suite "
                               f"understands ({store.SCHEMA_VERSION})")
    # a run without a column of the contract (gbps, sol, ...) would leave its points out
    # of some charts and not others, with nothing to say why: the file is refused instead
    missing = [c for c in store.REQUIRED if c not in names]
    if missing:
        raise store.StoreError(f"{path}: a results file missing required columns ({', '.join(missing)})")
    columns, fields = [], []
    for name in store.COLUMNS + [n for n in names if n not in store.COLUMNS]:
        col = table.column(name) if name in names else None
        # extra columns keep their own type unless they are empty
        want = types.get(name) or (pa.string() if col.type == pa.null() else col.type)
        col = col if col is not None else pa.nulls(table.num_rows, want)
        if not col.type.equals(want):
            try:
                col = col.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                col = pa.array(pd.Series(col.to_pylist(), dtype=object).astype(str), pa.string()) \
                    if want == pa.string() else pa.nulls(table.num_rows, want)
        columns.append(col)
        fields.append(pa.field(name, want))
    columns.append(pa.array([str(path)] * table.num_rows, pa.string()))
    fields.append(pa.field("source", pa.string()))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def read(paths) -> tuple[pd.DataFrame, list[str]]:
    """Every results file under ``paths``: (rows in store.COLUMNS types + source, problems)."""
    files, problems = store.expand(paths)
    types = _arrow_types()

    def one(f):
        try:
            return _read_one(f, types)
        except store.StoreError as exc:
            return str(exc)

    # Parquet decoding releases the GIL: one reader per core (200 files: ~2x on 2 cores)
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        done = list(pool.map(one, files))
    tables = [t for t in done if not isinstance(t, str)]
    problems += [t for t in done if isinstance(t, str)]
    if not tables:
        empty = store.normalize(pd.DataFrame(columns=store.COLUMNS))
        return empty.drop(columns=list(SKIPPED)).assign(source=pd.Series(dtype=str)), problems
    table = pa.concat_tables(tables, promote_options="permissive")
    del tables
    # text columns stay Arrow arrays in pandas: one chunk each, not one per file, so that
    # every row selection is one take per column (200 chunks: ~1.6x slower)
    for i, f in enumerate(table.schema):
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            table = table.set_column(i, f, table.column(i).combine_chunks())
    # split_blocks and self_destruct: no consolidation copy of a few hundred MB
    df = table.to_pandas(types_mapper=_PANDAS, ignore_metadata=True, split_blocks=True,
                         self_destruct=True)
    del table
    return df.drop(columns=[c for c in SKIPPED if c in df.columns]), problems


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Columns the views group by, filled where an older or partial file left them empty.

    Changes ``df`` in place: it is freshly read and not shared yet.
    """
    names = df["gpu_name"].fillna("unknown").astype(str)
    slugs = {n: store.slug(n) for n in names.unique()}
    df["gpu"] = df["gpu_slug"].where(df["gpu_slug"].notna() & (df["gpu_slug"] != ""), names.map(slugs))
    df["commit"] = df["commit"].fillna("nogit").astype(str)
    df["run_id"] = df["run_id"].where(df["run_id"].notna(), df["source"])
    # size and bound are extra columns (store.EXTRA) an older file may lack; every size
    # plot and best-of needs them: the workloads' default size is the product of the
    # shape's values (attention's excludes causal too), the limiter roofline.limiter's
    missing = df["size"].isna()
    if missing.any():
        keys = [c for c in store.SHAPE_COLUMNS if c != "shape_causal"]
        shape = df.loc[missing, keys].astype("float64")
        size = shape.prod(axis=1, min_count=1).where(shape.notna().any(axis=1))
        df.loc[missing, "size"] = size.round().astype("Int64")
    missing = df["bound"].isna() & df["flops"].notna() & df["min_bytes"].notna()
    if missing.any():
        d = df.loc[missing]
        compute = d["flops"] / (d["peak_tflops"] * 1e12) >= d["min_bytes"] / (d["peak_gbps"] * 1e9)
        df.loc[missing, "bound"] = np.where(compute, "compute", "memory")
    return df


def _runs(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=["run_id", "gpu", "gpu_name", "commit", "commits", "workloads", "widths",
                                     "timestamp", "time", "rows", "ok", "source", "label"])
    g = df.groupby("run_id", sort=False)
    # a run resumed after a new commit holds rows of both: "commit" is the first,
    # "commits" all of them in the order their rows were written (no per-group
    # Python lambdas: at 200 runs they cost a second)
    runs = g.agg(gpu=("gpu", "first"), gpu_name=("gpu_name", "first"), commit=("commit", "first"),
                 timestamp=("timestamp", "first"), rows=("status", "size"), source=("source", "first"))
    runs["ok"] = df["status"].eq("ok").groupby(df["run_id"], sort=False).sum().astype(int)
    commits = df[["run_id", "commit"]].drop_duplicates()
    runs["commits"] = commits.groupby("run_id", sort=False)["commit"].agg(tuple)
    loads = df[["run_id", "workload"]].dropna().drop_duplicates().sort_values("workload", kind="stable")
    runs["workloads"] = loads.groupby("run_id", sort=False)["workload"].agg(tuple).reindex(runs.index)
    runs["workloads"] = runs["workloads"].map(lambda w: w if isinstance(w, tuple) else ())
    runs = runs.reset_index()
    # (workload, analysis.width of it) of each run, for the default run choice (analysis.select_runs)
    pairs = df[["run_id", "workload", "impl", "dtype"]].drop_duplicates()
    g2 = pairs.groupby(["run_id", "workload"], sort=False)
    width = analysis.width(g2["impl"].nunique(), g2.size())
    widths = {r: tuple(zip(g.index.get_level_values(1), g.tolist())) for r, g in width.groupby(level=0, sort=False)}
    runs["widths"] = runs["run_id"].map(lambda r: widths.get(r, ()))
    runs["time"] = pd.to_datetime(runs["timestamp"], utc=True, errors="coerce", format="mixed")
    runs["label"] = (runs["gpu"] + " · " + runs["commits"].map(lambda cs: "+".join(c[:7] for c in cs))
                     + " · " + runs["time"].dt.strftime("%Y-%m-%d %H:%M").fillna("?"))
    return runs.sort_values(["time", "run_id"], ascending=[False, True],
                            na_position="last").reset_index(drop=True)


def fingerprint(paths) -> tuple:
    """What changes when a run is added or rewritten: files with sizes and times."""
    files, problems = store.expand(paths)
    stats = []
    for f in files:
        try:
            s = f.stat()
            stats.append((str(f), s.st_size, s.st_mtime_ns))
        except OSError:
            stats.append((str(f), -1, -1))
    return tuple(stats), tuple(problems)


def build(paths) -> Loaded:
    df, problems = read(paths)
    df = derive(df)
    df.index = pd.RangeIndex(len(df))  # a row's label is its position (Loaded.at)
    runs = _runs(df)
    index = {k: np.asarray(v) for k, v in df.groupby("run_id", sort=False).indices.items()}
    for column in CATEGORICAL:
        if column in df.columns:
            df[column] = df[column].astype("category")
    # the reader's buffers are freed: hand their pages back to the system, so the
    # server keeps only the frame resident
    pa.default_memory_pool().release_unused()
    return Loaded(frame=df, problems=problems, runs=runs, index=index)


# cache_resource, not cache_data: the frame is shared, never copied or pickled
# per rerun (hundreds of MB at 400k rows); views treat it as read-only.
@st.cache_resource(max_entries=4, show_spinner="Reading results…")
def _cached(paths: tuple[str, ...], stamp: tuple) -> Loaded:
    return build(paths)


def load(paths: tuple[str, ...] | None = None) -> Loaded:
    paths = tuple(paths) if paths is not None else configured_paths()
    return _cached(paths, fingerprint(paths))
