"""python -m suite compare on synthetic runs: run-to-run drift, the band's evidence, what is
gated, losses, and what exits 2.

The runs are synthetic (compare_fixtures.synthetic_rows: lognormal sample noise around
times from the workloads' own byte counts), so that each test sets exactly the drift,
spread or loss it is about.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import compare_fixtures as cf
from suite import cli, compare_stats, store

# What two H200 machines did to identical code (relative change of a case's median):
# the largest A/A moves seen between two quick runs on two days, and smaller ones.
MACHINE_DRIFT = [-0.07, -0.045, -0.02, 0.0, 0.015, 0.03, 0.05, 0.064, 0.074]


def _frame(rows) -> pd.DataFrame:
    return store.to_frame(rows)


def _drifted(df: pd.DataFrame, seed: int = 3) -> pd.DataFrame:
    """Another machine's run: fresh sample noise and one drift per case."""
    fresh = _frame(cf.synthetic_rows(seed=seed, impls=cf.GATED)).assign(run_id="other-machine")
    factors = [1 + MACHINE_DRIFT[i % len(MACHINE_DRIFT)] for i in range(len(fresh))]
    for i, f in enumerate(factors):
        fresh.at[i, "samples_ms"] = list(np.asarray(fresh.at[i, "samples_ms"]) * f)
        fresh.at[i, "ms_median"] = fresh.at[i, "ms_median"] * f
    return fresh


def _json(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(["compare", *map(str, argv), "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {"error": err})


def _rows(doc) -> list[dict]:
    return [r for c in doc["comparisons"] for r in c["rows"]]


def _key(df: pd.DataFrame, i: int) -> dict:
    return {k: str(df.iloc[i][k]) for k in store.ROW_KEY}


def _match(r: dict, key: dict) -> bool:
    return all(str(r[k]) == v for k, v in key.items())


def test_machine_drift_is_not_a_regression_but_a_real_slowdown_is(tmp_path, capsys):
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED))
    cand = _drifted(base)
    b, c = cf.write(base, tmp_path / "b.parquet"), cf.write(cand, tmp_path / "c.parquet")
    code, doc = _json(capsys, b, c)
    rows = _rows(doc)
    assert code == 0 and not [r for r in rows if r["regression"] or r["improvement"]]
    drifted = [r for r in rows if r["ratio"] and abs(math.log(r["ratio"])) > 0.06]
    # the samples alone call these certain (what a gate on one run's samples would flag) ...
    assert drifted and all(r["p_value"] < 1e-6 for r in drifted)
    # ... the band from the between-run spread does not, and says so
    assert all("run spread 2.0%, prior" in r["band_source"] for r in drifted)
    # a 10% slowdown of a case of at least 50 us on that machine stands out of the drift
    i = next(i for i, r in cand.iterrows() if r["ms_median"] >= 0.05 and r["impl"] == "triton")
    slow = cand.copy()
    undrift = 1.10 / (1 + MACHINE_DRIFT[i % len(MACHINE_DRIFT)])
    slow.at[i, "samples_ms"] = list(np.asarray(slow.at[i, "samples_ms"]) * undrift)
    code, doc = _json(capsys, b, cf.write(slow, tmp_path / "slow.parquet"))
    flagged = [r for r in _rows(doc) if r["regression"]]
    assert code == 1 and len(flagged) == 1 and _match(flagged[0], _key(cand, i))


def test_band_follows_the_evidence_history_and_repeat(tmp_path, capsys):
    """Earlier runs of a case on the same GPU narrow its band when they agree and widen it
    when they scatter; a --repeat pair can widen it, never narrow it."""
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED))
    i = next(i for i, r in base.iterrows() if r["impl"] == "triton" and r["ms_median"] >= 0.05)
    key = _key(base, i)
    cand = _frame(cf.synthetic_rows(seed=1, impls=cf.GATED)).assign(run_id="cand")
    cand.at[i, "samples_ms"] = list(np.asarray(cand.at[i, "samples_ms"]) * 1.065)
    b, c = cf.write(base, tmp_path / "b.parquet"), cf.write(cand, tmp_path / "c.parquet")

    def verdict(*extra) -> dict:
        code, doc = _json(capsys, b, c, *extra)
        return next(r for r in _rows(doc) if _match(r, key))

    assert verdict()["verdict"] == "same"  # 6.5% is inside the prior's +-8.5%
    for spread, want in ((0.002, "slower"), (0.05, "same")):
        hist = tmp_path / f"hist{spread}"
        for k, f in enumerate([1 - spread, 1 + spread, 1 - spread / 2, 1 + spread / 2, 1.0]):
            run = base.assign(run_id=f"h{k}", ms_median=base["ms_median"] * f)
            cf.write(run, hist / f"{k}.parquet")
        r = verdict("--history", hist)
        assert r["verdict"] == want and "6 runs" in r["band_source"], r
    rep = base.assign(ms_median_repeat=base["ms_median"] * 1.12)
    b = cf.write(rep, tmp_path / "b.parquet")
    r = verdict("--history", tmp_path / "hist0.002")
    assert r["verdict"] == "same" and "--repeat" in r["band_source"] and r["band"] > 0.2


def test_pytorch_changes_are_context_unless_everything_is_gated(tmp_path, capsys):
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED))
    cand = base.copy()
    eager = cand["impl"] == "eager"
    cand.loc[eager, "samples_ms"] = cand.loc[eager, "samples_ms"].map(lambda s: list(np.asarray(s) * 1.3))
    cand.loc[eager, "ms_median"] *= 1.3
    cand["torch"] = "2.99"
    b, c = cf.write(base.assign(torch="2.11"), tmp_path / "b.parquet"), cf.write(cand, tmp_path / "c.parquet")
    code, doc = _json(capsys, b, c)
    rows = _rows(doc)
    assert code == 0 and any(r["verdict"] == "slower" and r["context"] for r in rows)
    notes = doc["comparisons"][0]["notes"]
    assert any("torch 2.11 -> 2.99" in n for n in notes)
    assert any("PyTorch's own implementations" in n for n in notes)
    code, doc = _json(capsys, b, c, "--gate", "all")
    assert code == 1 and all(r["impl"] == "eager" for r in _rows(doc) if r["regression"])


@pytest.mark.parametrize("status", ["unsupported", "unavailable", None])
def test_losses_are_regressions_listed_first(tmp_path, capsys, status):
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED))
    i = next(i for i, r in base.iterrows() if r["impl"] == "triton")
    cand = base.copy()
    if status is None:  # no row at all, though the candidate ran the case (eager) and triton
        cand = cand.drop(index=i)
    else:
        cand.at[i, "status"] = status
    b, c = cf.write(base, tmp_path / "b.parquet"), cf.write(cand, tmp_path / "c.parquet")
    code, doc = _json(capsys, b, c)
    (r,) = [r for r in _rows(doc) if r["regression"]]
    assert code == 1 and _match(r, _key(base, i))
    assert r["verdict"] == ("missing" if status is None else "lost")
    code = cli.main(["compare", str(b), str(c), "--format", "markdown"])
    md = capsys.readouterr()[0]
    changes = md.split("#### Changes")[1].splitlines()
    assert code == 1 and "REGRESSION" in next(ln for ln in changes if ln.startswith("| ") and "workload" not in ln)


def test_a_workload_the_candidate_did_not_run_is_not_a_loss(tmp_path, capsys):
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED))
    cand = base[base["workload"] != "softmax"]
    b, c = cf.write(base, tmp_path / "b.parquet"), cf.write(cand, tmp_path / "c.parquet")
    code, doc = _json(capsys, b, c)
    assert code == 0 and {r["verdict"] for r in _rows(doc) if r["workload"] == "softmax"} == {"gone"}


def test_nothing_comparable_exits_2_and_says_why(tmp_path, capsys):
    """Cases matched only as unsupported on both sides are no comparison: not a pass."""
    base = _frame(cf.synthetic_rows(seed=0, impls=cf.GATED)).assign(status="unsupported")
    b, c = cf.write(base, tmp_path / "b.parquet"), cf.write(base, tmp_path / "c.parquet")
    code = cli.main(["compare", str(b), str(c)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "not ok on either side" in err and len(err.splitlines()) == 1


def test_spread_and_paired_statistics():
    # the prior alone, then evidence outweighing it
    assert compare_stats.run_spread([]).sigma == pytest.approx(compare_stats.PRIOR_SIGMA)
    tight = compare_stats.run_spread([[1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0, 1.0002, 0.9998]])
    assert tight.sigma < 0.6 * compare_stats.PRIOR_SIGMA and tight.source == "8 runs"
    assert compare_stats.run_spread([], repeats=[(1.0, 1.2)]).source == "--repeat"
    band = compare_stats.band(0.05, compare_stats.run_spread([]), 1, 1)
    assert band.rel == pytest.approx(math.expm1(3 * 0.02 * math.sqrt(2)))
    p = compare_stats.paired(np.log([1.03, 1.031, 1.029, 1.0305, 1.0295]))
    assert p.n == 5 and p.lo < 1.03 < p.hi and p.hi - p.lo < 0.003
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in (1, 4, 29, 31, 60):
        assert compare_stats.t975(df) == pytest.approx(scipy_stats.t.ppf(0.975, df), rel=2e-3)
