"""Pure DataFrame -> DataFrame steps behind the views: selection, best-of, fusion,
comparison, history.  No Streamlit here, so every rule is unit-tested.

One rule everywhere: only ``status == "ok"`` rows are measurements.  Anything
else (incorrect, error, unsupported, unavailable) is listed apart with its
status and never enters a speedup, a best-of or a plot.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from suite import roofline, store

ROW_KEY = store.ROW_KEY
FILTERS = ("run", "gpu", "commit", "workload", "dtype", "impl", "timer")


@dataclass(frozen=True)
class Filters:
    """The sidebar's choices; an empty tuple means no restriction."""

    run: tuple[str, ...] = ()
    gpu: tuple[str, ...] = ()
    commit: tuple[str, ...] = ()
    workload: tuple[str, ...] = ()
    dtype: tuple[str, ...] = ()
    impl: tuple[str, ...] = ()
    timer: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, tuple[str, ...]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def select_runs(runs: pd.DataFrame, f: Filters) -> list[str]:
    """The runs a view shows: the chosen ones, else, for each GPU and
    workload, the newest of its widest runs (:func:`width`: most
    implementations, then most (implementation, dtype) pairs), so that a later
    run of one workload, say a float16 GEMM sweep, hides neither the earlier
    full sweep's other workloads nor, being narrower, its GEMM rows in two
    dtypes, and a later run of one or two backends does not hide the newest
    one that compares them all (:func:`newest_per_workload` keeps the rows
    the same way).  Without the runs' ``widths``, the newest run of each
    workload.

    ``runs`` is newest first (data.Loaded.runs).  GPU and commit filters narrow
    the candidates either way.
    """
    cand = runs
    if f.gpu:
        cand = cand[cand["gpu"].isin(f.gpu)]
    if f.commit:
        if "commits" in cand.columns:  # a run with rows of several commits matches any of them
            cand = cand[cand["commits"].map(lambda cs: not set(cs).isdisjoint(f.commit)).astype(bool)]
        else:
            cand = cand[cand["commit"].isin(f.commit)]
    if f.run:
        return cand.loc[cand["run_id"].isin(f.run), "run_id"].tolist()
    if "widths" in cand.columns:
        best: dict[tuple, tuple[int, str]] = {}  # (gpu, workload) -> (implementations, run); newest first
        for run_id, gpu, widths in zip(cand["run_id"], cand["gpu"], cand["widths"]):
            for workload, width in widths:
                if width > best.get((gpu, workload), (0, ""))[0]:
                    best[(gpu, workload)] = (width, run_id)
        keep = {run_id for _, run_id in best.values()}
        gpus = {gpu for gpu, _ in best}
        chosen = []
        for run_id, gpu in zip(cand["run_id"], cand["gpu"]):
            if run_id in keep or gpu not in gpus:  # a GPU whose runs hold no rows still gets one
                chosen.append(run_id)
                gpus.add(gpu)
        return chosen
    if "workloads" not in cand.columns:
        return cand.drop_duplicates("gpu")["run_id"].tolist()
    chosen, covered = [], set()
    for run_id, gpu, workloads in zip(cand["run_id"], cand["gpu"], cand["workloads"]):
        new = {(gpu, w) for w in workloads} - covered
        if new or not any(g == gpu for g, _ in covered):
            chosen.append(run_id)
            covered |= new | {(gpu, None)}
    return chosen


def width(impls, pairs):
    """How widely a run compares a workload: its implementations first, then
    its (implementation, dtype) pairs, as one number (scalars or Series)."""
    return impls * 1000 + pairs


def newest_per_workload(df: pd.DataFrame, run_ids: list[str], having: str | None = None,
                        widest: bool = False) -> pd.DataFrame:
    """Keep each (GPU, workload)'s rows from the first of ``run_ids`` (newest
    first) that has it, so every ratio on a page comes from one run.

    ``widest``: the first of the widest runs of that (GPU, workload)
    (:func:`width`), so that a later run of one or two backends (a kernel
    experiment) or of fewer dtypes does not hide the newest run that compares
    them all.
    ``having``: the first run that has rows of that implementation for the
    (GPU, workload), where one does (Fusion needs eager rows, which a later
    run of a few backends lacks); else the first run, as without it."""
    if df.empty or df["run_id"].nunique() <= df["gpu"].nunique():
        return df
    order = pd.Series(range(len(run_ids)), index=run_ids)
    rank = df["run_id"].map(order).astype(float)  # run_id may be categorical (data.CATEGORICAL)
    keys = [df["gpu"], df["workload"]]
    first = rank.groupby(keys).transform("min")
    if widest and "impl" in df.columns:
        pair = df["impl"].astype(str) + ("|" + df["dtype"].astype(str) if "dtype" in df.columns else "")
        by_run = [df["run_id"], *keys]
        w = width(df["impl"].groupby(by_run).transform("nunique"), pair.groupby(by_run).transform("nunique"))
        first = rank.where(w == w.groupby(keys).transform("max")).groupby(keys).transform("min")
    if having is not None:
        has = df["impl"].eq(having).groupby([df["run_id"], *keys]).transform("any")
        first = rank.where(has).groupby(keys).transform("min").fillna(first)
    return df[(rank == first).to_numpy()]


def narrow(df: pd.DataFrame, f: Filters) -> pd.DataFrame:
    """Row-level filters (workload, dtype, implementation, timer)."""
    if not (f.workload or f.dtype or f.impl or f.timer):
        return df  # no copy: a mask over every column of 400k rows costs ~0.5 s
    mask = np.ones(len(df), dtype=bool)
    for col in ("workload", "dtype", "impl", "timer"):
        chosen = getattr(f, col)
        if chosen:
            mask &= df[col].isin(chosen).to_numpy()
    return df[mask]


def at_commits(df: pd.DataFrame, f: Filters) -> pd.DataFrame:
    """Rows measured at the chosen commits; a resumed run's rows of another commit drop out."""
    return df[df["commit"].isin(f.commit)] if f.commit else df


def only(df: pd.DataFrame, names) -> pd.DataFrame:
    """``df``'s columns ``names`` (those it has): a row mask then takes those alone, not
    every column of the store (~110; the text ones are Arrow arrays, one take each)."""
    return df[[c for c in dict.fromkeys(names) if c in df.columns]]


def ok(df: pd.DataFrame) -> pd.DataFrame:
    """The measurements: ok rows with a time, less those :func:`beyond_roof`."""
    return df[(df["status"] == "ok") & df["ms_median"].gt(0).fillna(False).astype(bool) & ~beyond_roof(df)]


def beyond_roof(df: pd.DataFrame) -> pd.Series:
    """ok rows above roofline.SUSPECT_SOL, from runs older than the ``suspect`` status:
    listed by :func:`suspects`, never shown as fast.  CPU rows are smoke runs, not held
    to a roofline; without ``sol`` (a caller's column subset) no row is."""
    if "sol" not in df.columns:
        return pd.Series(False, index=df.index)
    gpu = df["device"].astype(str).ne("cpu") if "device" in df.columns else True
    return (df["status"] == "ok") & (pd.to_numeric(df["sol"], errors="coerce") > roofline.SUSPECT_SOL) & gpu


def flag_suspects(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the status of the rows :func:`beyond_roof` set to ``suspect``, the
    status the suite writes for such a row: for a view that sets ``status == "ok"``
    rows apart itself."""
    beyond = beyond_roof(df)
    return df.assign(status=df["status"].where(~beyond, "suspect")) if beyond.any() else df


def not_ok(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["gpu", "run_id", "workload", "impl", "dtype", "shape", "timer", "status", "error",
            "rel_err", "tol"]
    bad = df[df["status"] != "ok"]
    return bad[[c for c in cols if c in bad.columns]].reset_index(drop=True)


def suspects(df: pd.DataFrame) -> pd.DataFrame:
    """Rows faster than the roofline allows: status ``suspect``, and ok rows of runs
    older than that status above the same line.  A roof, bytes-model, check or
    timing bug to look at.  CPU rows are smoke runs, not held to a roofline."""
    gpu = df["device"].astype(str).ne("cpu") if "device" in df.columns else True
    return df[((df["status"] == "suspect") & gpu) | beyond_roof(df)]


def with_series(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``series``: the implementation, plus timer and GPU when those vary, plus the
    run (its commit, and its time where two runs share one) when a GPU has several."""
    df = df.copy()
    label = df["impl"].astype(str)
    if df["timer"].nunique() > 1:
        label = label + " [" + df["timer"].astype(str) + "]"
    if df["gpu"].nunique() > 1:
        label = label + " · " + df["gpu"].astype(str)
    if several_runs(df):
        label = label + " · " + run_tags(df)
    df["series"] = label
    return df


def several_runs(df: pd.DataFrame, by=("gpu",)) -> bool:
    """Whether a GPU (a group of the ``by`` columns) has rows of more than one run here."""
    if "run_id" not in df.columns:
        return False
    return bool(df.drop_duplicates([*by, "run_id"]).duplicated(list(by)).any())


def run_tags(df: pd.DataFrame) -> pd.Series:
    """Each row's run, short: its commit, and its time where two runs here share one."""
    runs = df.drop_duplicates("run_id")
    tag = runs["commit"].astype(str).str[:7]
    if tag.duplicated().any():
        when = pd.to_datetime(runs["timestamp"].astype(str), utc=True, errors="coerce", format="mixed")
        tag = tag + " " + when.dt.strftime("%Y-%m-%d %H:%M").fillna(runs["run_id"].astype(str))
    return df["run_id"].astype(str).map(dict(zip(runs["run_id"].astype(str), tag)))


def shares_sizes(df: pd.DataFrame) -> bool:
    """Whether two shapes of these rows have the same size (elements): a line over
    size would then jump up and down at one x (causal and non-causal attention)."""
    shapes = df.drop_duplicates("shape")
    return bool(shapes["size"].duplicated().any())


def family_key(df: pd.DataFrame, most: int = 4) -> str | None:
    """The shape key with the fewest values (2 to ``most``) that, held fixed, leaves
    no two shapes of one size and at least two shapes in each family: the lines a
    size plot can draw one family at a time."""
    shapes = df.drop_duplicates("shape")
    best = None
    for col in store.SHAPE_COLUMNS:
        if col not in shapes.columns:
            continue
        values = shapes[col].dropna().unique()
        if not 2 <= len(values) <= most or shapes[col].isna().any():
            continue
        if shapes.duplicated([col, "size"]).any() or shapes[col].value_counts().min() < 2:
            continue
        if best is None or len(values) < best[1]:
            best = (col, len(values))
    return best[0] if best else None


def largest_shape(df: pd.DataFrame, by=("workload", "dtype")) -> pd.DataFrame:
    """Rows at the largest problem size per group, among shapes with any ok row."""
    good = ok(df)
    if good.empty:
        return good
    top = good.groupby(list(by) + ["gpu"], dropna=False)["size"].transform("max")
    return good[good["size"] == top]


def best_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, workload, dtype, timer and run, at the largest size: the fastest correct
    implementation, its SOL, and its speedup over eager and over the best torch op of
    the same run.  ``run`` names the run (:func:`run_tags`) where a GPU's workload has
    rows of several runs here, else it is empty; ``run_id`` is the run's id.

    Grouped, not looped: a Python loop per group costs ~1 s at 200 runs."""
    columns = ["gpu", "workload", "dtype", "timer", "run", "shape", "best", "ms", "sol", "vs_eager", "vs_torch",
               "run_id"]
    keys = ["gpu", "workload", "dtype", "timer", "run_id"]
    df = only(df, keys + ["commit", "timestamp", "shape", "size", "impl", "backend", "status", "ms_median", "sol",
                          "device"])
    rows = largest_shape(df, by=("workload", "dtype", "timer", "run_id"))
    if rows.empty:
        return pd.DataFrame(columns=columns)
    groups = rows.groupby(keys, sort=True, observed=True)
    best = rows.loc[groups["ms_median"].idxmin().to_numpy()]   # the first fastest, as idxmin picks
    at = pd.MultiIndex.from_frame(best[keys].astype(object))

    def fastest(mask: pd.Series) -> np.ndarray:
        ms = rows["ms_median"].where(mask).groupby([rows[k] for k in keys], sort=True, observed=True).min()
        ms.index = ms.index.set_levels([lv.astype(object) for lv in ms.index.levels])
        return ms.reindex(at).to_numpy(dtype=float)

    ms = best["ms_median"].to_numpy(dtype=float)
    out = pd.DataFrame({k: best[k].astype(object).to_numpy() for k in keys})
    out["run"] = run_tags(best).to_numpy() if several_runs(rows, by=("gpu", "workload")) else ""
    out["shape"] = best["shape"].to_numpy()
    out["best"] = best["impl"].to_numpy()
    out["ms"], out["sol"] = ms, best["sol"].to_numpy(dtype=float)
    out["vs_eager"] = fastest(rows["impl"] == "eager") / ms
    out["vs_torch"] = fastest(rows["backend"] == "torch") / ms
    return out[columns]


def _largest_shapes(d: pd.DataFrame) -> pd.Series:
    top = largest_shape(d, by=("workload",))
    return top.drop_duplicates("workload").set_index("workload")["shape"]


def _of_run(df: pd.DataFrame, run: str | None) -> pd.DataFrame:
    return df if run is None else df[(df["run_id"] == run).to_numpy()]


def sol_shapes(df: pd.DataFrame, dtype: str, gpu: str, run: str | None = None) -> pd.Series:
    """The shape :func:`sol_matrix` shows for each workload (its largest with an ok
    row), by workload."""
    return _largest_shapes(_of_run(df[(df["dtype"] == dtype) & (df["gpu"] == gpu)], run))


def sol_runs(df: pd.DataFrame, gpu: str) -> list[str]:
    """The runs the SOL matrix of ``gpu`` offers, newest first: one is shown at a time,
    where a workload of that GPU has rows of several runs here; else none (each
    workload's cells come from its one run)."""
    d = only(df, ["gpu", "workload", "run_id", "timestamp"])
    d = d[(d["gpu"] == gpu).to_numpy()]
    if not several_runs(d, by=("gpu", "workload")):
        return []
    runs = d.drop_duplicates("run_id").sort_values(["timestamp", "run_id"], ascending=[False, True], kind="stable")
    return runs["run_id"].astype(str).tolist()


def sol_choices(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The dtypes (bf16, fp16, fp32 first) and GPUs the SOL matrix offers; the first of each
    is its default."""
    present = set(df["dtype"].dropna())
    dtypes = [d for d in ("bfloat16", "float16", "float32") if d in present] or sorted(present)
    return dtypes, sorted(df["gpu"].unique())


def sol_matrix(df: pd.DataFrame, dtype: str, gpu: str, run: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(SOL, status text): workload x implementation at each workload's largest size
    (:func:`sol_shapes`), of the rows of ``run`` where given (:func:`sol_runs`).

    Cells of implementations that failed there hold NaN and their status.
    """
    d = only(df, ["dtype", "gpu", "run_id", "workload", "shape", "size", "impl", "status", "ms_median", "sol",
                  "device"])
    d = _of_run(d[((d["dtype"] == dtype) & (d["gpu"] == gpu)).to_numpy()], run)
    shapes = _largest_shapes(d)
    if shapes.empty:
        return pd.DataFrame(), pd.DataFrame()
    at = flag_suspects(d[d["shape"].eq(d["workload"].map(shapes))])
    # several timers: keep the best of each implementation
    at = at.assign(_sol=at["sol"].where(at["status"] == "ok"))
    sol = at.pivot_table(index="workload", columns="impl", values="_sol", aggfunc="max")
    status = at.sort_values("status").groupby(["workload", "impl"])["status"].first().unstack()
    sol = sol.reindex(index=status.index, columns=status.columns)
    return sol, status.where(status != "ok", "")


def pass_rate(df: pd.DataFrame, by: str = "impl") -> pd.DataFrame:
    """Per implementation (or ``by``): counts per status, and ok / attempted rows.

    Unsupported and unavailable cases were never run, so they are not failures.
    """
    counts = df.groupby([by, "status"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=list(store.STATUSES), fill_value=0)
    counts.columns.name = None
    attempted = counts[["ok", "incorrect", "error"]].sum(axis=1)
    counts["pass_rate"] = (counts["ok"] / attempted.where(attempted > 0)).astype(float)
    return counts.reset_index()


def environment(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run and commit (a resumed run may span two): where and with what it ran."""
    cols = ["run_id", "gpu_name", "gpu_sms", "driver", "cuda", "torch", "triton", "commit", "dirty",
            "timestamp", "sm_clock_start_mhz", "sm_clock_end_mhz", "mem_clock_start_mhz",
            "mem_clock_end_mhz", "hostname", "python", "preset"]
    have = [c for c in cols if c in df.columns]
    return df.drop_duplicates(["run_id", "commit"])[have].reset_index(drop=True)


def ceilings(df: pd.DataFrame) -> pd.DataFrame:
    """Measured roofs against the datasheet, per run and dtype."""
    g = df.groupby(["run_id", "gpu", "dtype"], dropna=False).agg(
        peak_gbps=("peak_gbps", "median"), datasheet_gbps=("peak_gbps_datasheet", "median"),
        peak_tflops=("peak_tflops", "median"), datasheet_tflops=("peak_tflops_datasheet", "median"))
    g["gbps_of_datasheet"] = g["peak_gbps"] / g["datasheet_gbps"]
    g["tflops_of_datasheet"] = g["peak_tflops"] / g["datasheet_tflops"]
    return g.reset_index()


def roofs(df: pd.DataFrame) -> tuple[float, dict[str, float]]:
    """(copy GB/s, {math mode: TFLOP/s}) of these rows: the medians of what was measured.

    The math mode is the row's ``math`` (tf32 for a float32 row on TF32 tensor
    cores), else its dtype, so each arithmetic gets its own roof; runs that
    predate ``copy_gbps`` give their ``peak_gbps``, which was the copy figure.
    """
    if not len(df):
        return float("nan"), {}
    copy = df["copy_gbps"] if "copy_gbps" in df.columns else pd.Series(dtype=float)
    bw = pd.to_numeric(copy, errors="coerce").fillna(df["peak_gbps"]).median()
    mode = math_mode(df)
    # a row's own peak_tflops is its mode's only where the row names its math
    own = df["math"].notna() if "math" in df.columns else mode.eq(df["dtype"])
    own = own | mode.eq(df["dtype"])
    tf = df[own.to_numpy()].assign(_mode=mode[own]).groupby("_mode")["peak_tflops"].median().dropna()
    roofs = {k: float(v) for k, v in tf.items()}
    # a mode present without its own peak (a TF32 variant of a run that predates
    # ``math``): the run's measured matmul ceilings, where it recorded them
    for m in sorted(set(mode) - set(roofs)):
        value = ceiling_tflops(df, m)
        if value:
            roofs[m] = value
    return float(bw), roofs


def math_mode(df: pd.DataFrame) -> pd.Series:
    """Each row's arithmetic: its ``math``, else tf32 for a float32 row of a ``*tf32*``
    implementation (runs before ``math`` was recorded), else its dtype."""
    mode = df["dtype"].astype(str)
    tf32 = df["impl"].astype(str).str.contains("tf32", regex=False) & mode.eq("float32")
    mode = mode.where(~tf32, "tf32")
    if "math" in df.columns:
        mode = df["math"].where(df["math"].notna(), mode).astype(str)
    return mode


def ceiling_tflops(df: pd.DataFrame, mode: str) -> float | None:
    """The median measured matmul TFLOP/s of ``mode`` in the rows' ``ceilings`` JSON."""
    if "ceilings" not in df.columns:
        return None
    values = []
    for text in df["ceilings"].dropna().unique()[:64]:
        try:
            v = json.loads(text).get("matmul_tflops", {}).get(mode)
        except (ValueError, AttributeError):
            continue
        if isinstance(v, (int, float)) and np.isfinite(v) and v > 0:
            values.append(float(v))
    return float(np.median(values)) if values else None


# A kernel's FLOPs per byte is at least this; the harness's own rows (copies that
# measure a ceiling: no FLOPs) sit many decades below and would squeeze the plot.
MIN_INTENSITY = 1e-6


def kernel_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a roofline plots: implementations' rows, not the harness's."""
    harness = df["backend"].astype(str).eq("harness") if "backend" in df.columns else False
    return df[~harness & pd.to_numeric(df["intensity"], errors="coerce").gt(MIN_INTENSITY).to_numpy()]


def fusion_table(df: pd.DataFrame) -> pd.DataFrame:
    """Each non-eager implementation against eager on the same case and timer.

    predicted = eager_bytes / min_bytes (what removing the intermediate traffic
    can buy if both run at the bandwidth roof); measured = eager ms / impl ms;
    reached = measured / predicted.
    """
    good = ok(df)
    keys = ["gpu", "run_id", "workload", "dtype", "shape", "timer"]
    eager = good[good["impl"] == "eager"][keys + ["ms_median"]].rename(columns={"ms_median": "eager_ms"})
    fused = good[good["impl"] != "eager"]
    m = fused.merge(eager.drop_duplicates(keys), on=keys, how="inner")
    m = m.assign(predicted=m["eager_bytes"] / m["min_bytes"], measured=m["eager_ms"] / m["ms_median"])
    m["reached"] = m["measured"] / m["predicted"]
    cols = keys + ["impl", "size", "bound", "eager_ms", "ms_median", "predicted", "measured", "reached"]
    return m[[c for c in cols if c in m.columns]].reset_index(drop=True)


def no_eager(df: pd.DataFrame) -> list[str]:
    """Workloads in these rows that have no eager implementation (gemm)."""
    has = set(df.loc[df["impl"] == "eager", "workload"])
    return sorted(set(df["workload"]) - has)


def latest_per_key(df: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The newest row of each key (timestamps are ISO 8601, so they sort as text)."""
    return df.sort_values("timestamp", kind="stable").drop_duplicates(key, keep="last")


@dataclass
class Comparison:
    table: pd.DataFrame      # matched ok cases with base, cand, speedup, verdict
    failed: pd.DataFrame     # matched cases not ok on one side or both
    only_base: int
    only_cand: int
    other_l2: pd.DataFrame | None = None  # matched cases whose l2 differs: not compared


def compare(base: pd.DataFrame, cand: pd.DataFrame, key: list[str], metric: str = "time",
            threshold: float = 0.05) -> Comparison:
    """Per-case ratio of candidate to base, on rows matched by ``key``.

    speedup > 1 means the candidate is better: base ms / candidate ms, or, for
    metric == "sol" (different GPUs), candidate SOL / base SOL.  A case is a
    regression when its speedup < 1 / (1 + threshold) and an improvement when
    it is > 1 + threshold.  An ok row :func:`beyond_roof` counts as ``suspect``: not ok.
    """
    base, cand = flag_suspects(base), flag_suspects(cand)
    keep = key + ["size", "ms_median", "sol", "status"] + (["sm_clock_mhz"] if "sm_clock_mhz" in base.columns else [])
    b = latest_per_key(base, key)
    c = latest_per_key(cand, key)
    b = b[[c_ for c_ in keep + ["timestamp"] if c_ in b.columns]].assign(l2=store.l2_column(b))
    c = c[[c_ for c_ in keep + ["timestamp"] if c_ in c.columns]].assign(l2=store.l2_column(c))
    m = b.merge(c, on=key, how="inner", suffixes=("_base", "_cand"))
    # a case timed with the L2 evicted one way on one side and another way on the
    # other measures the protocol as much as the kernel (suite.timing.flush_l2);
    # a row that was never timed (unsupported, failed) has no protocol to differ
    timed = (m["status_base"] == "ok") & (m["status_cand"] == "ok")
    other = timed & (m["l2_base"] != m["l2_cand"])
    other_l2 = m[other][key + ["l2_base", "l2_cand"]].reset_index(drop=True)
    m = m[~other].drop(columns=["l2_base", "l2_cand"])
    both = (m["status_base"] == "ok") & (m["status_cand"] == "ok")
    t = m[both].copy()
    if metric == "sol":
        t["speedup"] = t["sol_cand"] / t["sol_base"]
    else:
        t["speedup"] = t["ms_median_base"] / t["ms_median_cand"]
    t["verdict"] = np.select([t["speedup"] < 1 / (1 + threshold), t["speedup"] > 1 + threshold],
                             ["regression", "improvement"], "same")
    t = t.rename(columns={"size_base": "size"}).drop(columns=["size_cand", "timestamp_base",
                                                              "timestamp_cand"], errors="ignore")
    failed = m[~both][key + ["status_base", "status_cand"]]
    matched = len(m) + len(other_l2)
    return Comparison(table=t.sort_values("speedup").reset_index(drop=True),
                      failed=failed.reset_index(drop=True),
                      only_base=len(b) - matched, only_cand=len(c) - matched, other_l2=other_l2)


def default_pair(frame: pd.DataFrame, column: str, options: list[str], key: list[str],
                 limit: int = 12) -> tuple[int, int]:
    """(candidate, base) positions in ``options`` (newest first) for Compare's first view:
    the newest of the first ``limit`` options that shares an ok case (timed under the
    same l2) with an older one, against the newest such, however many options back.

    Runs of different presets, or the two commits of a resumed run, may share no
    case at all; (0, 1) when none of the first ``limit`` options shares one.
    """
    # only the columns needed: a row mask over every column of 400k rows costs ~0.5 s
    cols = list(dict.fromkeys(key + [column, "status", "ms_median"]
                              + (["l2"] if "l2" in frame.columns else [])))
    good = ok(frame[cols])
    # a case shared under another l2 is not compared (compare), so it does not pair runs
    good = good.assign(_l2=store.l2_column(good))
    # each case as one 64-bit hash: sets of tuples of 400k rows cost seconds
    hashed = pd.util.hash_pandas_object(good[key + ["_l2"]], index=False).to_numpy()
    cases = {opt: set(hashed[idx].tolist()) for opt, idx in good.groupby(column, sort=False).indices.items()}
    for i, cand in enumerate(options[:limit]):
        mine = cases.get(cand)
        if not mine:
            continue
        for j in range(i + 1, len(options)):
            if not mine.isdisjoint(cases.get(options[j], ())):
                return i, j
    return 0, 1


def richest_case(frame: pd.DataFrame, names: list[str]) -> pd.Series:
    """Per case (``names``), how many commits have an ok row, most first: History's default."""
    good = ok(frame[names + ["commit", "status", "ms_median"]])
    if good.empty:  # no case yet, but one level per name, as History reads them
        return pd.Series(dtype="int64", index=pd.MultiIndex.from_tuples([], names=names))
    # distinct (case, commit) pairs counted per case: much faster than nunique at 400k rows
    pairs = good[names + ["commit"]].drop_duplicates()
    per = pairs.groupby(names, sort=True, dropna=False).size()
    return per.sort_values(ascending=False, kind="stable")


def geomean(x: pd.Series) -> float:
    x = x[(x > 0) & np.isfinite(x)]
    return float(np.exp(np.log(x).mean())) if len(x) else float("nan")


def history(df: pd.DataFrame, case: dict, metric: str) -> pd.DataFrame:
    """One case over commits, per GPU and l2: commit, first time seen, order, metric, status.
    An ok row :func:`beyond_roof` counts as ``suspect``: a gap, as a failed run is.

    A change of how L2 is evicted before each sample moves mid-size times by
    up to a tenth, so each l2 is its own series rather than a step in one."""
    d = df
    for k, v in case.items():
        d = d[d[k] == v]
    d = flag_suspects(d)
    if d.empty:
        return pd.DataFrame(columns=["gpu", "l2", "commit", "time", "order", metric, "status", "run_id"])
    d = d.assign(time=pd.to_datetime(d["timestamp"], utc=True, errors="coerce", format="mixed"),
                 l2=store.l2_column(d))
    d = d.sort_values("time", kind="stable")
    order = {c: i for i, c in enumerate(d.drop_duplicates("commit")["commit"])}
    d = d.drop_duplicates(["gpu", "l2", "commit"], keep="last")
    value = d[metric].where(d["status"] == "ok")
    out = pd.DataFrame({"gpu": d["gpu"], "l2": d["l2"], "commit": d["commit"], "time": d["time"],
                        "order": d["commit"].map(order).astype(int), metric: value, "status": d["status"],
                        "run_id": d["run_id"]})
    return out.sort_values(["gpu", "l2", "order"]).reset_index(drop=True)


# --l2-flush choices of `python -m suite run` (suite.timing.L2_CHOICES); "cold" is its default
L2_FLAGS = ("cold-clean", "cold-flush")
CASE_COLUMNS = ["rank", "impl", "timer", "run", "ms", "p20", "p80", "rate", "unit", "sol", "vs_torch", "vs_compile",
                "sm_clock_mhz", "power_w", "energy_j", "energy_from", "per_j", "per_j_unit", "config", "command"]
# how a case row's energy_j was found (case_table)
ENERGY_BURST = "burst"          # the row's own energy_j: a back-to-back burst (suite.energy)
ENERGY_ESTIMATE = "power×time"  # the row's power_w over its median time: an estimate


def reproduce(row) -> str:
    """The command that measures this row again (same case, implementation, timer, L2 eviction)."""
    cmd = (f"python -m suite run --workloads {row['workload']} --shape {row['shape']} "
           f"--dtypes {row['dtype']} --impls {row['impl']} --timer {row['timer']}")
    l2 = row.get("l2")
    return cmd + (f" --l2-flush {l2}" if isinstance(l2, str) and l2 in L2_FLAGS else "")


def case_table(df: pd.DataFrame) -> pd.DataFrame:
    """One case's correct rows (one workload, shape, dtype and GPU), fastest first.

    ``rate`` is GB/s for a memory-bound case and TFLOP/s for a compute-bound one
    (the row's ``bound``); ``vs_torch`` and ``vs_compile`` are the fastest
    ``torch*`` and ``compile*`` row's median time over this row's (> 1: this row
    is faster), on the same timer and in the same run; ``run`` names the row's run
    (:func:`run_tags`) where the rows hold several, else it is empty.  SM clock, power and energy are the row's
    own where the run recorded them.  ``energy_j`` is the row's measured joules a
    call where it has them, else power_w x median time (``energy_from`` says which:
    ENERGY_BURST or ENERGY_ESTIMATE); ``per_j`` is GFLOP/J for a compute-bound row
    and GB/J for a memory-bound one (``per_j_unit``), the row's own figure, else
    its flops or min_bytes over that energy.
    """
    good = ok(df)
    if good.empty:
        return pd.DataFrame(columns=CASE_COLUMNS)
    good = good.sort_values(["ms_median", "impl"], kind="stable").reset_index(drop=True)
    compute = good["bound"].astype(str).eq("compute").to_numpy() if "bound" in good.columns else False
    out = pd.DataFrame({
        "rank": np.arange(1, len(good) + 1), "impl": good["impl"], "timer": good["timer"],
        "ms": good["ms_median"], "p20": good["ms_p20"], "p80": good["ms_p80"],
        "rate": np.where(compute, good["tflops"], good["gbps"]).astype(float),
        "unit": np.where(compute, "TFLOP/s", "GB/s"), "sol": good["sol"]})
    out.insert(3, "run", run_tags(good) if several_runs(good) else "")
    within = [good[c].astype(str) for c in ("timer", "run_id") if c in good.columns]
    for name, prefix in (("vs_torch", "torch"), ("vs_compile", "compile")):
        mine = good["impl"].astype(str).str.startswith(prefix)
        best = good["ms_median"].where(mine).groupby(within).transform("min")
        out[name] = best.astype(float) / good["ms_median"]

    def num(col: str) -> pd.Series:
        if col not in good.columns:
            return pd.Series(np.nan, index=good.index, dtype=float)
        return pd.to_numeric(good[col], errors="coerce").astype(float)

    out["sm_clock_mhz"], out["power_w"] = num("sm_clock_mhz"), num("power_w")
    measured = num("energy_j")
    estimate = out["power_w"] * out["ms"] * 1e-3
    out["energy_j"] = measured.fillna(estimate)
    out["energy_from"] = np.where(measured.notna(), ENERGY_BURST,
                                  np.where(estimate.notna(), ENERGY_ESTIMATE, ""))
    work = np.where(compute, num("flops"), num("min_bytes")) / 1e9
    own = pd.Series(np.where(compute, num("gflops_per_j"), num("gb_per_j")), index=good.index)
    out["per_j"] = own.fillna(pd.Series(work, index=good.index) / out["energy_j"].where(out["energy_j"] > 0))
    out["per_j_unit"] = np.where(compute, "GFLOP/J", "GB/J")
    out["config"] = good["config"].astype("string").fillna("") if "config" in good.columns else ""
    out["command"] = [reproduce(r) for r in good.to_dict("records")]
    return out[CASE_COLUMNS]


def judged(base: pd.DataFrame, cand: pd.DataFrame, threshold: float = 0.05) -> pd.DataFrame:
    """What ``python -m suite compare`` decides on these two sides, per case (suite.compare:
    same statistics, same band): its verdict, the ratio candidate / base (time, or time
    over each side's own bound across GPUs), the band the ratio was judged against (a
    relative half-width), the reason, and each side's SM clock while timed."""
    from suite import compare as sc  # the CLI's module; imported when Compare is shown

    cols = ROW_KEY + ["verdict", "ratio", "band", "basis", "reason", "clock_base", "clock_cand"]
    if base.empty or cand.empty:
        return pd.DataFrame(columns=cols)
    # the dashboard does not load samples_ms: significance falls back to suite.compare's
    # p20-p80 overlap test, where the CLI, reading the samples, uses a Mann-Whitney test
    base, cand = (d if "samples_ms" in d.columns else d.assign(samples_ms=None) for d in (base, cand))
    b, c = sc.Side("base", base), sc.Side("candidate", cand)
    try:
        result = sc.compare(b, c, sc.Options(threshold=threshold))
    except sc.UsageError:
        return pd.DataFrame(columns=cols)
    rows = pd.DataFrame(result.rows)
    if rows.empty:
        return pd.DataFrame(columns=cols)
    clocks = b.cases[ROW_KEY + ["clock"]].merge(c.cases[ROW_KEY + ["clock"]], on=ROW_KEY, how="outer",
                                               suffixes=("_base", "_cand"))
    out = rows.merge(clocks, on=ROW_KEY, how="left")
    for col in ("ratio", "band", "clock_base", "clock_cand"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out[cols]
