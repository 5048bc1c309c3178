"""Run vs run: commit vs commit, GPU vs GPU, and the regression gate for CI.

Rows are matched on ``store.ROW_KEY``.  A time change counts only when it lies
outside the case's band and the samples differ (a Mann-Whitney U test).  The
band is the widest of ``--threshold``, three standard errors of the log ratio
from the case's between-run spread (compare_stats: its runs on either side,
its earlier runs on the same GPU given with ``--history``, a prior otherwise),
and the floor its own samples' spread sets.  Each verdict carries its band.

What is gated: by default our own implementations (triton, cuda, plugins); the
changes of PyTorch's (eager, torch, compile) are listed as context and as a
sign that the machine or its libraries moved; ``gate="all"`` gates everything.
A candidate row timed faster than its roof allows ("suspect") fails the gate,
whoever owns it.  Losses are regressions: an ok row that becomes incorrect or error ("broke") or
unsupported or unavailable ("lost"), and an ok row with no candidate row where
the candidate's sweep covers the case ("missing", see baselines.Coverage).
Across different GPUs the verdict is taken on SOL, each run against its own
measured ceilings.  Rows timed under different protocols (timer or ``l2``) are
listed as not comparable, never compared; when no case is left to compare the
comparison is bad input, never a pass.

Exit codes: 0 nothing regressed, 1 a regression (or, with
``--fail-on-improvement``, an improvement), 2 bad input or nothing comparable.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from suite import baselines, store
from suite.args import UsageError
from suite.compare_stats import (band, geomean, mann_whitney_p, mann_whitney_p_normal,  # noqa: F401
                                 run_spread, sample_floor)

BAD_STATUS = ("incorrect", "error")
GONE_STATUS = ("unsupported", "unavailable")
LOSSES = ("suspect", "broke", "lost", "missing")
CONTEXT_BACKENDS = ("eager", "torch", "compile")  # PyTorch's own: context unless gate="all"
# Which status wins when one key appears in several pooled runs.
_STATUS_RANK = {"error": 0, "incorrect": 1, "suspect": 2, "ok": 3, "unsupported": 4, "unavailable": 5}
MIN_SAMPLES = 3
CLOCK_NOTE = 0.03  # SM clocks this far apart are named beside a time verdict
MOVED_NOTE = 0.02  # PyTorch's own implementations moving this much (geomean) are named
VERSIONS = ("torch", "triton", "cuda", "driver")


def owned(impl: str) -> bool:
    """Ours to gate: anything but PyTorch's own eager, torch and compile backends."""
    return baselines.backend_of(impl) not in CONTEXT_BACKENDS


# ---------------------------------------------------------------- inputs
@dataclass
class Side:
    """One side of a comparison: rows collapsed to one per ROW_KEY."""

    label: str
    frame: pd.DataFrame  # the raw rows
    cases: pd.DataFrame = field(init=False)

    def __post_init__(self):
        self.cases = collapse(self.frame)

    @property
    def gpus(self) -> list[str]:
        return sorted({str(g) for g in self.frame["gpu_name"].dropna()})

    @property
    def commits(self) -> list[str]:
        return sorted({str(c)[:7] for c in self.frame["commit"].dropna()})

    @property
    def runs(self) -> set[str]:
        return {str(r) for r in self.frame["run_id"].dropna()}

    def describe(self) -> dict:
        files = sorted({Path(s).name for s in self.frame.get("source", pd.Series(dtype=str)).dropna()})
        return {"label": self.label, "files": files, "gpus": self.gpus, "commits": self.commits,
                "rows": int(len(self.frame)), "dirty": bool(self.frame["dirty"].fillna(False).any())}


def _samples(values) -> np.ndarray:
    parts = [np.asarray(v, dtype=float) for v in values if v is not None and not _isna(v)]
    return np.concatenate(parts) if parts else np.array([])


def _isna(v) -> bool:
    return not isinstance(v, (list, tuple, np.ndarray)) and pd.isna(v)


CASE_COLUMNS = store.ROW_KEY + ["status", "error", "ms", "p20", "p80", "samples", "bound_ms", "sol", "runs",
                                "run_ms", "repeats", "floor", "l2", "gpu", "clock"]


def _strings(col: pd.Series, empty: str) -> np.ndarray:
    """``col`` as str, ``empty`` where missing (a categorical column too)."""
    return col.astype(object).where(col.notna(), empty).astype(str).to_numpy()


def _numbers(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        return np.full(len(df), math.nan)
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=math.nan)


def _median(values: np.ndarray) -> float:
    """pandas' median: NaN skipped, NaN when nothing is left."""
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return float(values[0]) if len(values) else math.nan
    return float(np.median(values))


def collapse(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ROW_KEY; several runs of a key pool their samples and keep each run's median.

    The frame is grouped once and each case read from NumPy arrays, so a side of
    thousands of cases collapses in about a second."""
    if df.empty:
        return pd.DataFrame(columns=CASE_COLUMNS)
    keys = pd.DataFrame({col: _strings(df[col], "") for col in store.ROW_KEY})
    groups = keys.groupby(store.ROW_KEY, sort=True)
    ids = groups.ngroup().to_numpy()
    order = np.argsort(ids, kind="stable")           # each case's rows, in the frame's order
    bounds = np.searchsorted(ids[order], np.arange(groups.ngroups + 1))
    names = groups.size().index                       # the cases, in ngroup's (sorted) order
    status = _strings(df["status"], "error")
    is_ok = (df["status"] == "ok").fillna(False).to_numpy(dtype=bool)
    error = df["error"].astype(object).to_numpy() if "error" in df.columns else None
    samples_ms = df["samples_ms"].to_numpy(dtype=object)
    ms, p20s, p80s = (_numbers(df, c) for c in ("ms_median", "ms_p20", "ms_p80"))
    bound_ms, sols, clocks = (_numbers(df, c) for c in ("bound_ms", "sol", "sm_clock_mhz"))
    repeat = _numbers(df, "ms_median_repeat") if "ms_median_repeat" in df.columns else None
    runs = _strings(df["run_id"], "")
    l2, gpu_name = df["l2"].to_numpy(dtype=object), df["gpu_name"].to_numpy(dtype=object)
    out = []
    for i, key in enumerate(names):
        at = order[bounds[i]:bounds[i + 1]]
        case_status = min(status[at], key=lambda s: _STATUS_RANK.get(s, 0))
        error_text = ""
        if error is not None:
            errs = [e for e in error[at[status[at] == case_status]] if not _isna(e)]
            error_text = str(errs[0]) if errs else ""
        ok = at[is_ok[at]]
        samples = _samples(samples_ms[ok])
        if len(samples):
            median = float(np.median(samples))
            p20, p80 = (float(x) for x in np.percentile(samples, [20, 80]))
        else:
            median = _median(ms[ok])
            p20, p80 = _median(p20s[ok]), _median(p80s[ok])
        bound = _median(bound_ms[ok])
        sol = bound / median if bound > 0 and median > 0 else _median(sols[ok])
        run_ms = [_median(ms[ok][runs[ok] == r]) for r in np.unique(runs[ok])]
        repeats = [] if repeat is None else [(float(a), float(b)) for a, b in zip(ms[ok], repeat[ok])
                                              if a > 0 and b > 0]
        out.append(dict(zip(store.ROW_KEY, key), status=case_status, error=error_text, ms=median, p20=p20,
                        p80=p80, samples=samples, bound_ms=bound, sol=sol, runs=max(len(run_ms), 1),
                        run_ms=run_ms, repeats=repeats, floor=sample_floor(p20, p80, median),
                        l2=_one(l2[at]), gpu=_one(gpu_name[at]),
                        clock=_median(clocks[ok])))
    return pd.DataFrame(out, columns=CASE_COLUMNS)


def _one(values):
    vals = sorted({str(v) for v in values if not _isna(v)})
    return "/".join(vals) if vals else None


def load(paths, what: str) -> pd.DataFrame:
    """Read runs or raise UsageError naming the first problem (exit code 2)."""
    df, problems = store.read_runs(paths)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise UsageError(f"{what}: {problems[0]}{more}")
    if df.empty:
        raise UsageError(f"{what}: no runs found in {', '.join(map(str, paths))}")
    return df


# ---------------------------------------------------------------- comparison
@dataclass
class Options:
    threshold: float = 0.05
    floor_us: float = 0.0  # an absolute floor on top of the band (off by default)
    alpha: float = 0.01
    fail_on_improvement: bool = False
    gate: str = "own"  # "own": triton, cuda, plugins; "all": every implementation
    run_spread: float | None = None  # the prior between-run spread (compare_stats.PRIOR_SIGMA)

    def gated(self, impl: str) -> bool:
        return self.gate == "all" or owned(impl)


@dataclass
class Result:
    base: dict
    candidate: dict
    gpus_differ: bool
    notes: list[str]
    rows: list[dict]
    rollup: list[dict]

    @property
    def regressions(self) -> list[dict]:
        return [r for r in self.rows if r["regression"]]

    @property
    def improvements(self) -> list[dict]:
        return [r for r in self.rows if r["improvement"]]

    @property
    def compared(self) -> int:
        return sum(r["ratio"] is not None for r in self.rows)


def compare(base: Side, cand: Side, opt: Options, history: pd.DataFrame | None = None) -> Result:
    """``history``: earlier runs whose rows of a case (same GPU, same l2) estimate its spread."""
    gpus_differ = bool(base.gpus and cand.gpus and base.gpus != cand.gpus)
    notes = []
    if gpus_differ:
        notes.append(f"GPUs differ ({', '.join(base.gpus)} vs {', '.join(cand.gpus)}): "
                     "verdicts use SOL, each run against its own measured ceilings")
    for side in (base, cand):
        if side.describe()["dirty"]:
            notes.append(f"{side.label} was run from a tree with uncommitted changes")
    seen = baselines.evidence([history, base.frame], cand.runs)
    cover = baselines.Coverage.of(cand.frame)
    b, c = base.cases, cand.cases
    merged = b.merge(c, on=store.ROW_KEY, how="outer", suffixes=("_b", "_c"), indicator="side")
    rows = [_verdict(r, opt, gpus_differ, seen, cover) for r in merged.itertuples(index=False)]
    rows = _pair_protocols(rows)
    if not any(r["ratio"] is not None or r["verdict"] in LOSSES + ("fixed", "status") for r in rows):
        raise UsageError(f"no case of {cand.label} matches {base.label} on "
                         f"({', '.join(store.ROW_KEY)}): {_why_none(rows)}")
    skipped = [r for r in rows if r["verdict"] == "not comparable"]
    if skipped:
        notes.append(f"{len(skipped)} case(s) not comparable (different timer or l2)")
    notes += environment_notes(base.frame, cand.frame, rows)
    return Result(base.describe(), cand.describe(), gpus_differ, notes, rows, rollup(rows, b, c))


def _why_none(rows: list[dict]) -> str:
    count = lambda v: sum(r["verdict"] == v for r in rows)  # noqa: E731
    parts = [f"{count('gone')} case(s) only in base", f"{count('new')} only in candidate"]
    protos = sorted({r["reason"] for r in rows if r["verdict"] == "not comparable"})
    if protos:
        parts.append(f"{count('not comparable')} under different protocols ({protos[0]}: "
                     "different protocols are never compared)")
    idle = count("same")
    if idle:
        parts.append(f"{idle} not ok on either side")
    return "; ".join(parts)


def _row(r) -> dict:
    row = {k: getattr(r, k) for k in store.ROW_KEY}
    row.update(base_status=r.status_b if r.side != "right_only" else None,
               cand_status=r.status_c if r.side != "left_only" else None,
               base_ms=_f(r.ms_b), cand_ms=_f(r.ms_c), base_sol=_f(r.sol_b), cand_sol=_f(r.sol_c),
               speedup=None, sol_ratio=None, ratio=None, band=None, band_source=None, ci=None,
               p_value=None, test=None, basis=None, reason="", regression=False,
               improvement=False, context=False, gated=False)
    return row


def _verdict(r, opt: Options, gpus_differ: bool, seen: dict, cover: baselines.Coverage) -> dict:
    row = _row(r)
    gated = row["gated"] = opt.gated(r.impl)
    bs, cs = row["base_status"], row["cand_status"]

    def flag(verdict: str, reason: str, bad: bool) -> dict:
        return {**row, "verdict": verdict, "reason": reason, "regression": bad and gated,
                "improvement": not bad and gated, "context": not gated}

    if r.side == "left_only":
        if bs == "ok" and cover.covers(r.workload, r.impl, r.dtype, r.shape, r.timer):
            return flag("missing", "no candidate row, though its sweep covers the case", True)
        return {**row, "verdict": "gone", "reason": "only in base"}
    if cs == "suspect":  # a time no kernel can reach: never a number to keep, whoever owns it
        return {**row, "verdict": "suspect", "reason": f"{bs or 'new'} -> suspect: {_text(r.error_c)}",
                "regression": True, "context": False}
    if r.side == "right_only":
        return {**row, "verdict": "new", "reason": "only in candidate"}
    if bs == "ok" and cs in BAD_STATUS:
        return flag("broke", f"ok -> {cs}", True)
    if bs == "ok" and cs in GONE_STATUS:
        return flag("lost", f"ok -> {cs}", True)
    if bs in BAD_STATUS + ("suspect",) and cs == "ok":
        return flag("fixed", f"{bs} -> ok", False)
    if bs == cs and bs != "ok":  # unsupported (say) on both sides: nothing changed
        return {**row, "verdict": "same", "reason": f"{bs} in both"}
    if bs != "ok" or cs != "ok":
        return {**row, "verdict": "status", "reason": f"{bs} -> {cs}"}
    # only two timed rows have a protocol to differ in (a row that never timed has no l2)
    if _text(r.l2_b) != _text(r.l2_c):
        return {**row, "verdict": "not comparable", "reason": f"l2 {r.l2_b} vs {r.l2_c}"}
    return _timed(r, row, opt, gpus_differ, seen)


def _timed(r, row: dict, opt: Options, gpus_differ: bool, seen: dict) -> dict:
    if r.ms_b > 0 and r.ms_c > 0:
        row["speedup"] = r.ms_b / r.ms_c
    if r.sol_b > 0 and r.sol_c > 0:
        row["sol_ratio"] = r.sol_c / r.sol_b
    # Across GPUs compare time normalised by each run's own bound (= 1 / SOL).
    use_sol = gpus_differ and r.bound_ms_b > 0 and r.bound_ms_c > 0
    scale_b, scale_c = (r.bound_ms_b, r.bound_ms_c) if use_sol else (1.0, 1.0)
    row["basis"] = "sol" if use_sol else "time"
    notes = ["no SOL (no ceilings); compared time"] if gpus_differ and not use_sol else []
    ratio = row["ratio"] = (r.ms_c / scale_c) / (r.ms_b / scale_b)
    groups = seen.get(tuple(getattr(r, k) for k in store.ROW_KEY) + (_text(r.l2_b) or "-",), [])
    groups = groups + ([r.run_ms_c] if len(r.run_ms_c) >= 2 else [])
    prior = {} if opt.run_spread is None else {"prior": opt.run_spread}
    spread = run_spread(groups, list(r.repeats_b) + list(r.repeats_c), **prior)
    bnd = band(opt.threshold, spread, r.runs_b, r.runs_c, max(r.floor_b, r.floor_c))
    row.update(band=bnd.rel, band_source=bnd.source)
    outside = abs(math.log(ratio)) > bnd.log and abs(ratio - 1.0) * r.ms_b * 1e3 > opt.floor_us
    sig, p, test = _significant(r, scale_b, scale_c, opt.alpha)
    row.update(p_value=p, test=test)
    if outside and sig:
        slower = ratio > 1.0
        gated = row["gated"]
        reason = "; ".join(notes + [x for x in (_clock_note(r),) if x])
        return {**row, "verdict": "slower" if slower else "faster", "regression": slower and gated,
                "improvement": not slower and gated, "context": not gated, "reason": reason}
    if not outside:
        why = f"within {bnd.text()}"
    else:
        why = "not significant" + (f" (U test p={p:.2g})" if p is not None else "")
    return {**row, "verdict": "same", "reason": "; ".join(notes + [why])}


def _clock_note(r) -> str:
    """A note such as "SM clock 1980 -> 1712 MHz" when the two sides' mean clocks while
    timed differ by more than CLOCK_NOTE (else ""): the card, not only the code, may
    have changed the time.  The verdict stands; the note says what to check before
    believing it."""
    b, c = getattr(r, "clock_b", math.nan), getattr(r, "clock_c", math.nan)
    if not (b > 0 and c > 0) or abs(c / b - 1.0) <= CLOCK_NOTE:
        return ""
    return f"SM clock {b:.0f} -> {c:.0f} MHz"


def _significant(r, scale_b: float, scale_c: float, alpha: float) -> tuple[bool, float | None, str]:
    a, b = r.samples_b, r.samples_c
    if len(a) >= MIN_SAMPLES and len(b) >= MIN_SAMPLES:
        p = mann_whitney_p(a / scale_b, b / scale_c)
        return p < alpha, p, "mann-whitney"
    if all(np.isfinite([r.p20_b, r.p80_b, r.p20_c, r.p80_c])):
        lo_b, hi_b = r.p20_b / scale_b, r.p80_b / scale_b
        lo_c, hi_c = r.p20_c / scale_c, r.p80_c / scale_c
        return hi_b < lo_c or hi_c < lo_b, None, "p20-p80 overlap"
    return True, None, "band only"


def _pair_protocols(rows: list[dict]) -> list[dict]:
    """A case present on both sides but under different timers is not comparable."""
    gone = {}
    for r in rows:
        if r["verdict"] in ("gone", "missing"):
            gone.setdefault(tuple(r[k] for k in store.ROW_KEY[:-1]), []).append(r)
    out = []
    paired = set()
    for r in rows:
        if r["verdict"] == "new":
            others = gone.get(tuple(r[k] for k in store.ROW_KEY[:-1]))
            if others:
                o = others[0]
                paired.add(id(o))
                out.append({**r, "verdict": "not comparable", "base_status": o["base_status"],
                            "base_ms": o["base_ms"], "timer": f"{o['timer']} vs {r['timer']}",
                            "reason": f"timer {o['timer']} vs {r['timer']}"})
                continue
        out.append(r)
    return [r for r in out if id(r) not in paired]


def environment_notes(base: pd.DataFrame, cand: pd.DataFrame, rows: list[dict]) -> list[str]:
    """Versions that differ between the sides, and how far PyTorch's own implementations
    moved: when they move, the machine or its libraries did, not only our code."""
    notes = []
    moved = []
    for col in VERSIONS:
        b = sorted({str(v) for v in base.get(col, pd.Series(dtype=object)).dropna()})
        c = sorted({str(v) for v in cand.get(col, pd.Series(dtype=object)).dropna()})
        if b and c and b != c:
            moved.append(f"{col} {'/'.join(b)} -> {'/'.join(c)}")
    if moved:
        notes.append("the environment moved: " + ", ".join(moved))
    ref = [r["ratio"] for r in rows if r["ratio"] is not None and not owned(r["impl"])]
    g = geomean(ref)
    if ref and abs(math.log(g)) > math.log1p(MOVED_NOTE):
        notes.append(f"PyTorch's own implementations (eager, torch, compile) take {g:.3f}x the "
                     f"base's time over {len(ref)} cases: the machine or its libraries moved")
    return notes


def rollup(rows: list[dict], b: pd.DataFrame, c: pd.DataFrame) -> list[dict]:
    def pass_rate(cases: pd.DataFrame, impl: str) -> float | None:
        s = cases.loc[cases["impl"] == impl, "status"]
        s = s[s.isin(("ok",) + BAD_STATUS)]
        return float((s == "ok").mean()) if len(s) else None

    out = []
    for impl in sorted({r["impl"] for r in rows}):
        mine = [r for r in rows if r["impl"] == impl]
        both_ok = [r for r in mine if r["speedup"] is not None]
        out.append({"impl": impl, "gated": owned(impl) or any(r["gated"] for r in mine),
                    "matched": len(both_ok),
                    "geomean_speedup": _f(geomean(r["speedup"] for r in both_ok)),
                    "geomean_sol_ratio": _f(geomean(r["sol_ratio"] for r in both_ok)),
                    "base_pass_rate": pass_rate(b, impl), "cand_pass_rate": pass_rate(c, impl),
                    "regressions": sum(r["regression"] for r in mine),
                    "improvements": sum(r["improvement"] for r in mine),
                    "context": sum(r["context"] for r in mine)})
    return out


def _text(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def _f(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------- grouping
def split(df: pd.DataFrame, by: str, base: str | None) -> list[tuple[Side, Side]]:
    """One set -> (base group, other group) pairs for ``--by gpu`` / ``--by commit``.

    ``--by gpu`` groups by the GPU's name, and, where one name ran on several
    GPUs of a host (``run --gpus``), by name and ``device_index`` ("NVIDIA
    H200 #1"): the two halves of a two-GPU run compare like two machines."""
    col = {"gpu": "gpu_name", "commit": "commit"}[by]
    keyed = df.assign(_g=df[col].fillna("unknown").astype(str))
    if by == "gpu" and "device_index" in df.columns:
        index = pd.to_numeric(df["device_index"], errors="coerce")
        several = index.groupby(keyed["_g"]).transform("nunique") > 1
        keyed.loc[several, "_g"] = keyed.loc[several, "_g"] + " #" + index[several].astype("Int64").astype(str)
    if by == "commit":
        first = pd.to_datetime(keyed["timestamp"], utc=True, errors="coerce")
        order = keyed.assign(_t=first).groupby("_g")["_t"].min().sort_values(na_position="last")
        groups = list(order.index)
    else:
        groups = sorted(keyed["_g"].unique())
    if len(groups) < 2:
        raise UsageError(f"--by {by}: the runs hold only one {by} ({', '.join(groups) or 'none'}); "
                         "nothing to compare")
    if base is not None:
        hits = [g for g in groups if g == base or (by == "commit" and g.startswith(base))]
        if not hits:
            raise UsageError(f"--base {base}: no such {by} in the runs (have {', '.join(groups)})")
        groups.remove(hits[0])
        groups.insert(0, hits[0])

    def side(g):
        label = g[:7] if by == "commit" else g
        return Side(f"{by} {label}", keyed[keyed["_g"] == g].drop(columns="_g"))

    ref = side(groups[0])
    return [(ref, side(g)) for g in groups[1:]]


def per_case_base(cand: pd.DataFrame, stored: pd.DataFrame, root: str) -> Side:
    """The base of ``--baselines``: the newest stored row of each case the candidate covers,
    on its GPU under its protocol (baselines.per_case); UsageError when there is none."""
    rows, what = baselines.per_case(cand, stored)
    if rows.empty:
        raise UsageError(f"nothing comparable: no stored row under {root} for {what}; commit a "
                         "run of this GPU and protocol (results/MANIFEST.md) to give it a baseline")
    return Side("baselines", rows)


def exit_code(results: list[Result], opt: Options) -> int:
    if any(r.regressions for r in results):
        return 1
    if opt.fail_on_improvement and any(r.improvements for r in results):
        return 1
    return 0


def as_dict(result: Result) -> dict:
    d = asdict(result)
    d["regressions"] = len(result.regressions)
    d["improvements"] = len(result.improvements)
    d["compared"] = result.compared
    return d
