"""Run vs run: commit vs commit, GPU vs GPU, and the regression gate for CI.

Rows are matched on ``store.ROW_KEY``.  A time change counts only when it is
both large (``--threshold``, with an absolute floor so that a microsecond
kernel's jitter never trips the gate) and unlikely to be noise (a Mann-Whitney
U test on the raw samples).  A status change from ok to incorrect or error is a
regression whatever the times, and a candidate row timed faster than its roof
allows (``suspect``) fails the gate whatever the base says.  Across different
GPUs the verdict is taken on SOL, each run against its own measured ceilings,
because raw time mostly measures the hardware there.  Rows timed under different protocols (timer or
``l2``) are listed as not comparable, never compared.

Exit codes: 0 nothing regressed, 1 a regression (or, with
``--fail-on-improvement``, an improvement), 2 bad input.
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from suite import store
from suite.args import UsageError

BAD_STATUS = ("incorrect", "error", "suspect")
# Which status wins when one key appears in several pooled runs.
_STATUS_RANK = {"error": 0, "incorrect": 1, "suspect": 2, "ok": 3, "unsupported": 4, "unavailable": 5}
MIN_SAMPLES = 3


# ---------------------------------------------------------------- statistics
def mann_whitney_p(a, b) -> float:
    """Two-sided Mann-Whitney U p-value: scipy's when importable, else our own."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        return mann_whitney_p_normal(a, b)
    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0  # identical constant samples: scipy would warn and return nan
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def mann_whitney_p_normal(a, b) -> float:
    """The U test with the normal approximation, tie correction and continuity correction."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n1, n2 = len(a), len(b)
    n = n1 + n2
    ranks = pd.Series(np.concatenate([a, b])).rank(method="average").to_numpy()
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    _, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    ties = float(((counts ** 3) - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def geomean(values) -> float:
    vals = [v for v in values if v is not None and np.isfinite(v) and v > 0]
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals))) if vals else math.nan


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

    def describe(self) -> dict:
        files = sorted({Path(s).name for s in self.frame.get("source", pd.Series(dtype=str)).dropna()})
        return {"label": self.label, "files": files, "gpus": self.gpus, "commits": self.commits,
                "rows": int(len(self.frame)), "dirty": bool(self.frame["dirty"].fillna(False).any())}


def _samples(values) -> np.ndarray:
    parts = [np.asarray(v, dtype=float) for v in values if v is not None and not _isna(v)]
    return np.concatenate(parts) if parts else np.array([])


def _isna(v) -> bool:
    return not isinstance(v, (list, tuple, np.ndarray)) and pd.isna(v)


def collapse(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ROW_KEY; several runs of a key pool their samples."""
    df = df.copy()
    for col in store.ROW_KEY:
        df[col] = df[col].fillna("").astype(str)
    out = []
    for key, g in df.groupby(store.ROW_KEY, sort=True):
        statuses = [s for s in g["status"].fillna("error")]
        status = min(statuses, key=lambda s: _STATUS_RANK.get(s, 0))
        errors = g.loc[g["status"].fillna("error") == status, "error"].dropna()
        error = str(errors.iloc[0]) if len(errors) else ""
        ok = g[g["status"] == "ok"]
        samples = _samples(ok["samples_ms"])
        if len(samples):
            median = float(np.median(samples))
            p20, p80 = (float(x) for x in np.percentile(samples, [20, 80]))
        else:
            median = float(ok["ms_median"].median()) if len(ok) else math.nan
            p20, p80 = float(ok["ms_p20"].median()), float(ok["ms_p80"].median())
        bound = float(ok["bound_ms"].median()) if len(ok) else math.nan
        sol = bound / median if bound > 0 and median > 0 else (
            float(ok["sol"].median()) if len(ok) else math.nan)
        clock = pd.to_numeric(ok["sm_clock_mhz"], errors="coerce").median() if "sm_clock_mhz" in ok else math.nan
        out.append(dict(zip(store.ROW_KEY, key), status=status, error=error, ms=median, p20=p20, p80=p80,
                        samples=samples, bound_ms=bound, sol=sol, runs=len(g),
                        l2=_one(g["l2"]), gpu=_one(g["gpu_name"]), clock=float(clock)))
    return pd.DataFrame(out, columns=store.ROW_KEY + ["status", "error", "ms", "p20", "p80", "samples",
                                                      "bound_ms", "sol", "runs", "l2", "gpu", "clock"])


def _one(col: pd.Series):
    vals = sorted({str(v) for v in col.dropna()})
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
    floor_us: float = 1.0
    alpha: float = 0.01
    fail_on_improvement: bool = False


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


def compare(base: Side, cand: Side, opt: Options) -> Result:
    gpus_differ = bool(base.gpus and cand.gpus and base.gpus != cand.gpus)
    notes = []
    if gpus_differ:
        notes.append(f"GPUs differ ({', '.join(base.gpus)} vs {', '.join(cand.gpus)}): "
                     "verdicts use SOL, each run against its own measured ceilings")
    for side in (base, cand):
        if side.describe()["dirty"]:
            notes.append(f"{side.label} was run from a tree with uncommitted changes")
    b, c = base.cases, cand.cases
    merged = b.merge(c, on=store.ROW_KEY, how="outer", suffixes=("_b", "_c"), indicator="side")
    rows = [_verdict(r, opt, gpus_differ) for r in merged.itertuples(index=False)]
    rows = _pair_protocols(rows)
    if not any(r["verdict"] not in ("new", "gone", "not comparable") for r in rows):
        protos = sorted({r["reason"] for r in rows if r["verdict"] == "not comparable"})
        why = f"; {protos[0]}: different protocols are never compared" if protos else ""
        raise UsageError(f"no case of {cand.label} matches {base.label} on "
                         f"({', '.join(store.ROW_KEY)}){why}")
    skipped = [r for r in rows if r["verdict"] == "not comparable"]
    if skipped:
        notes.append(f"{len(skipped)} case(s) not comparable (different timer or l2)")
    return Result(base.describe(), cand.describe(), gpus_differ, notes, rows, _rollup(rows, b, c))


def _verdict(r, opt: Options, gpus_differ: bool) -> dict:
    row = {k: getattr(r, k) for k in store.ROW_KEY}
    bs = r.status_b if r.side != "right_only" else None
    cs = r.status_c if r.side != "left_only" else None
    row.update(base_status=bs, cand_status=cs, base_ms=_f(r.ms_b), cand_ms=_f(r.ms_c),
               base_sol=_f(r.sol_b), cand_sol=_f(r.sol_c), speedup=None, sol_ratio=None,
               p_value=None, test=None, basis=None, reason="", regression=False, improvement=False)
    if r.side == "left_only":
        return {**row, "verdict": "gone", "reason": "only in base"}
    if cs == "suspect":  # a time no kernel can reach: never a number to keep
        return {**row, "verdict": "suspect", "reason": f"{bs or 'new'} -> suspect: {_text(r.error_c)}",
                "regression": True}
    if r.side == "right_only":
        return {**row, "verdict": "new", "reason": "only in candidate"}
    if _text(r.l2_b) != _text(r.l2_c):
        return {**row, "verdict": "not comparable", "reason": f"l2 {r.l2_b} vs {r.l2_c}"}
    if bs == "ok" and cs in BAD_STATUS:
        why = _text(r.error_c)
        return {**row, "verdict": "broke", "reason": f"ok -> {cs}" + (f": {why[:200]}" if why else ""),
                "regression": True}
    if bs in BAD_STATUS and cs == "ok":
        return {**row, "verdict": "fixed", "reason": f"{bs} -> ok", "improvement": True}
    if bs == cs and bs != "ok":  # unsupported (say) on both sides: nothing changed
        return {**row, "verdict": "same", "reason": f"{bs} in both"}
    if bs != "ok" or cs != "ok":
        return {**row, "verdict": "status", "reason": f"{bs} -> {cs}"}
    if r.ms_b > 0 and r.ms_c > 0:
        row["speedup"] = r.ms_b / r.ms_c
    if r.sol_b > 0 and r.sol_c > 0:
        row["sol_ratio"] = r.sol_c / r.sol_b
    # Across GPUs compare time normalised by each run's own bound (= 1 / SOL).
    use_sol = gpus_differ and r.bound_ms_b > 0 and r.bound_ms_c > 0
    scale_b, scale_c = (r.bound_ms_b, r.bound_ms_c) if use_sol else (1.0, 1.0)
    row["basis"] = "sol" if use_sol else "time"
    if gpus_differ and not use_sol:
        row["reason"] = "no SOL (no ceilings); compared time"
    ratio = (r.ms_c / scale_c) / (r.ms_b / scale_b)
    delta_us = abs(ratio - 1.0) * r.ms_b * 1e3
    big = abs(ratio - 1.0) > opt.threshold and delta_us > opt.floor_us
    sig, p, test = _significant(r, scale_b, scale_c, opt.alpha)
    row.update(p_value=p, test=test)
    if big and sig:
        slower = ratio > 1.0
        return {**row, "verdict": "slower" if slower else "faster", "regression": slower,
                "improvement": not slower, "reason": "; ".join(x for x in (row["reason"], _clock_note(r)) if x)}
    why = "within threshold" if not big else "not significant"
    return {**row, "verdict": "same", "reason": "; ".join(x for x in (row["reason"], why) if x)}


CLOCK_NOTE = 0.03  # SM clocks this far apart are named beside a time verdict


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
    return True, None, "threshold only"


def _pair_protocols(rows: list[dict]) -> list[dict]:
    """A case present on both sides but under different timers is not comparable."""
    gone = {}
    for r in rows:
        if r["verdict"] == "gone":
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


def _rollup(rows: list[dict], b: pd.DataFrame, c: pd.DataFrame) -> list[dict]:
    def pass_rate(cases: pd.DataFrame, impl: str) -> float | None:
        s = cases.loc[cases["impl"] == impl, "status"]
        s = s[s.isin(("ok",) + BAD_STATUS)]
        return float((s == "ok").mean()) if len(s) else None

    out = []
    for impl in sorted({r["impl"] for r in rows}):
        mine = [r for r in rows if r["impl"] == impl]
        both_ok = [r for r in mine if r["speedup"] is not None]
        out.append({"impl": impl, "matched": len(both_ok),
                    "geomean_speedup": _f(geomean(r["speedup"] for r in both_ok)),
                    "geomean_sol_ratio": _f(geomean(r["sol_ratio"] for r in both_ok)),
                    "base_pass_rate": pass_rate(b, impl), "cand_pass_rate": pass_rate(c, impl),
                    "regressions": sum(r["regression"] for r in mine),
                    "improvements": sum(r["improvement"] for r in mine)})
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
    """One set -> (base group, other group) pairs for ``--by gpu`` / ``--by commit``."""
    col = {"gpu": "gpu_name", "commit": "commit"}[by]
    keyed = df.assign(_g=df[col].fillna("unknown").astype(str))
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


# ---------------------------------------------------------------- baseline
def newest_baseline(candidate: str, roots: list[str]) -> tuple[Path | None, str]:
    """The newest run under ``roots`` on the candidate's GPU that shares a protocol (timer and
    l2) with it: a run under another protocol has no case it could be compared on."""
    try:
        cand = store.read_file(candidate)
    except store.StoreError as exc:
        raise UsageError(str(exc)) from None
    gpus = {store.slug(g) for g in cand["gpu_name"].dropna()} or {"unknown"}
    protocols = _protocols(cand)
    files, problems = store.expand(roots)
    for problem in problems:  # no results/ yet simply means no baseline yet
        print(f"notice: {problem}", file=sys.stderr)
    best, best_key = None, None
    me = Path(candidate).resolve()
    for f in files:
        if f.resolve() == me:
            continue
        try:
            df = store.read_file(f)
        except store.StoreError as exc:
            print(f"warning: skipped {exc}", file=sys.stderr)
            continue
        if not ({store.slug(g) for g in df["gpu_name"].dropna()} & gpus):
            continue
        if not (_protocols(df) & protocols) or not (df["status"] == "ok").any():
            continue
        stamp = pd.to_datetime(df["timestamp"], utc=True, errors="coerce").max()
        key = (stamp if not pd.isna(stamp) else pd.Timestamp(0, tz="UTC"), f.name)
        if best_key is None or key > best_key:
            best, best_key = f, key
    what = f"GPU {', '.join(sorted(gpus))}, " + "; ".join(f"timer {t}, L2 {l2}" for t, l2 in sorted(protocols))
    return best, what


def _protocols(df: pd.DataFrame) -> set[tuple[str, str]]:
    """The (timer, l2) pairs of a run's rows ("-" where l2 is missing)."""
    return {(t, l2) for t, l2 in zip(df["timer"], store.l2_column(df)) if isinstance(t, str)}


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
    return d
