"""The statistics behind ``compare`` and ``ab``: noise bands, paired intervals, the U test.

Everything works on log times, so that a ratio and its inverse are equally far
from 1 and a band of +-x applies to faster and slower alike.

Between-run spread.  One run's samples hold no run-to-run or machine-to-machine
variance: two H200 machines timed identical compute-bound code 2.3% apart
(standard deviation of the log ratio over compute-bound cases, tails to 7%),
while the medians of one case's samples in one run vary by a few tenths of a
percent.  So a run-vs-run verdict is judged against ``sigma``, the spread of
one run's median between runs, estimated per case from the evidence there is:
runs of the case on either side, earlier runs of it on the same GPU under the
same protocol (the history), and a prior (``PRIOR_SIGMA``, worth ``PRIOR_DF``
runs) that the evidence outweighs as it accumulates.  A ``--repeat`` pair in
one run measures within-run noise only, so it can raise sigma but not lower it.

A short kernel's band also has a floor from its own samples: half their p20-p80
width relative to the median, so that a 20% change of a 5 us kernel whose
samples spread 4% is judged, not hidden under a fixed number of microseconds.

Paired rounds (``ab``).  Both sides are timed in the same round on the same
GPU, so the log ratio of their medians cancels the GPU's drift; the rounds'
mean log ratio and its t interval give the geometric-mean ratio and its 95% CI.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

PRIOR_SIGMA = 0.02  # one run's median, between runs and machines, with no evidence
PRIOR_DF = 3.0      # the prior counts as this many degrees of freedom of evidence
BAND_Z = 3.0        # a change counts beyond this many standard errors of the log ratio

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t (a 95% two-sided interval)."""
    if df < 1:
        return math.inf
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def t_two_sided(level: float, df: int) -> float:
    """The t with P(|T| < t) = ``level`` for Student's T with ``df`` (whole) degrees of
    freedom: bisection on the closed form of P(|T| < t) (Abramowitz & Stegun 26.7.3-4)."""
    if df < 1:
        return math.inf

    def inside(t: float) -> float:
        theta = math.atan(t / math.sqrt(df))
        c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
        if df % 2 == 0:
            for k in range(1, df // 2):
                term *= c2 * (2 * k - 1) / (2 * k)
                total += term
            return math.sin(theta) * total
        if df == 1:
            return 2 * theta / math.pi
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)

    lo, hi = 0.0, 1.0
    while inside(hi) < level:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if inside(mid) < level else (lo, mid)
    return (lo + hi) / 2


# ---------------------------------------------------------------- between-run spread
@dataclass(frozen=True)
class Spread:
    """The estimated spread of one run's log median between runs, and what it rests on."""

    sigma: float
    runs_df: float  # degrees of freedom of real evidence (the prior's not counted)
    source: str


def sum_squares(medians) -> tuple[float, int]:
    """Sum of squared deviations of log medians and its degrees of freedom."""
    logs = np.log([m for m in medians if m is not None and np.isfinite(m) and m > 0])
    if len(logs) < 2:
        return 0.0, 0
    return float(((logs - logs.mean()) ** 2).sum()), len(logs) - 1


def run_spread(groups, repeats=(), prior: float = PRIOR_SIGMA, prior_df: float = PRIOR_DF) -> Spread:
    """Pool the evidence for one case.

    ``groups``: lists of per-run medians that measure the same thing (one list per
    side or per history set); ``repeats``: (median, repeat median) pairs of one run.
    """
    ss, df, runs = prior_df * prior ** 2, 0, 0
    for g in groups:
        s, d = sum_squares(g)
        ss, df, runs = ss + s, df + d, runs + (d + 1 if d else 0)
    sigma = math.sqrt(ss / (prior_df + df)) if prior_df + df > 0 else prior
    source = f"{runs} runs" if df else "prior"
    pairs = [(a, b) for a, b in repeats if a and b and a > 0 and b > 0
             and math.isfinite(a) and math.isfinite(b)]
    if pairs:
        rep = math.sqrt(sum(math.log(b / a) ** 2 for a, b in pairs) / (2 * len(pairs)))
        if rep > sigma:
            sigma, source = rep, "--repeat"
    return Spread(sigma, df, source)


def sample_floor(p20: float, p80: float, median: float) -> float:
    """Half the p20-p80 width of one side's samples, relative to their median (0 if unknown)."""
    if not (median > 0 and np.isfinite(p20) and np.isfinite(p80)):
        return 0.0
    return max(0.0, (p80 - p20) / (2.0 * median))


@dataclass(frozen=True)
class Band:
    """Half-width of the no-change band around a log ratio of 0, and what set it."""

    log: float
    source: str

    @property
    def rel(self) -> float:
        return math.expm1(self.log)

    def text(self) -> str:
        return f"+-{self.rel:.1%} ({self.source})"


def band(threshold: float, spread: Spread, runs_b: int, runs_c: int, floor_rel: float = 0.0,
         z: float = BAND_Z) -> Band:
    """The widest of: the threshold, ``z`` standard errors of the log ratio of the
    two sides' means over their runs, and the samples' own floor."""
    se = spread.sigma * math.sqrt(1.0 / max(runs_b, 1) + 1.0 / max(runs_c, 1))
    parts = [(math.log1p(threshold), "threshold"),
             (z * se, f"{z:g} x run spread {spread.sigma:.1%}, {spread.source}"),
             (math.log1p(floor_rel), "sample spread")]
    log, source = max(parts, key=lambda p: p[0])
    return Band(log, source)


# ---------------------------------------------------------------- paired rounds
@dataclass(frozen=True)
class Paired:
    """Paired rounds' log ratios (candidate / base) summarised as a ratio and its CI."""

    n: int
    ratio: float
    lo: float
    hi: float
    sd: float


def paired(log_ratios, level: float = 0.95) -> Paired:
    """The geometric-mean ratio and its two-sided ``level`` t interval."""
    x = np.asarray([v for v in log_ratios if np.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return Paired(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if n == 1:
        return Paired(1, math.exp(mean), 0.0, math.inf, math.nan)
    sd = float(x.std(ddof=1))
    half = (t975(n - 1) if level == 0.95 else t_two_sided(level, n - 1)) * sd / math.sqrt(n)
    return Paired(n, math.exp(mean), math.exp(mean - half), math.exp(mean + half), sd)


# ---------------------------------------------------------------- U test and means
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
