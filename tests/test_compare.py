"""python -m suite compare: the regression gate, on runs derived from a real one.

The base run is the newest committed run under results/, else a CPU run of
the suite's runner, else synthetic rows (see compare_fixtures).  Each test
injects one change into a copy and checks what the gate makes of it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import compare_fixtures as cf
from suite import cli, compare, compare_cli, store


@pytest.fixture(scope="session")
def real(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real")
    df, origin = cf.base_run(tmp)
    assert len(cf.measurable(df)) >= 2, f"{origin} rows have too few steady cases"
    return df, cf.write(df, tmp / "base.parquet")


@pytest.fixture
def steady(real):
    """The base run and its steadiest case, where a 10% change stands out of the noise."""
    df, path = real
    return df, path, cf.measurable(df).iloc[0]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["compare", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, *argv) -> tuple[int, dict]:
    code, out, _ = run(capsys, *argv, "--format", "json")
    return code, json.loads(out)


def rows_of(doc: dict) -> list[dict]:
    return [r for c in doc["comparisons"] for r in c["rows"]]


def same_key(r: dict, case) -> bool:
    return all(str(r[k]) == str(case[k]) for k in store.ROW_KEY)


def test_ten_percent_slowdown_is_flagged_and_named(steady, tmp_path, capsys):
    df, base, case = steady
    cand = cf.write(cf.scale_case(cf.jitter(df, 0.02), case, 1.10), tmp_path / "cand.parquet")
    code, doc = as_json(capsys, base, cand)
    assert code == 1 and doc["exit_code"] == 1
    flagged = [r for r in rows_of(doc) if r["regression"]]
    assert len(flagged) == 1 and same_key(flagged[0], case), flagged
    assert flagged[0]["verdict"] == "slower" and flagged[0]["p_value"] < 0.01
    assert flagged[0]["speedup"] == pytest.approx(1 / 1.10, rel=0.03)
    code, out, _ = run(capsys, base, cand)
    assert code == 1
    line = next(ln for ln in out.splitlines() if "REGRESSION" in ln)
    for k in ("workload", "impl", "dtype"):
        assert str(case[k]) in line


def test_a_slowdown_at_a_lower_clock_names_both_clocks(steady, tmp_path, capsys):
    df, base, case = steady
    df = df.assign(sm_clock_mhz=1980.0)
    base = cf.write(df, tmp_path / "base.parquet")
    cand = cf.scale_case(cf.jitter(df, 0.02), case, 1.10)
    cand.loc[cf.key_mask(cand, case), "sm_clock_mhz"] = 1780.0
    cand.loc[~cf.key_mask(cand, case), "sm_clock_mhz"] = 1960.0  # within 3%: not named
    code, doc = as_json(capsys, base, cf.write(cand, tmp_path / "cand.parquet"))
    assert code == 1  # the verdict stands; the note says what to check
    flagged = [r for r in rows_of(doc) if r["regression"]]
    assert len(flagged) == 1 and flagged[0]["reason"] == "SM clock 1980 -> 1780 MHz"
    assert not [r for r in rows_of(doc) if "SM clock" in r["reason"] and not r["regression"]]


def test_two_percent_jitter_is_not_flagged(steady, tmp_path, capsys):
    df, base, case = steady
    cand = cf.write(cf.scale_case(cf.jitter(df, 0.02), case, 1.02), tmp_path / "cand.parquet")
    code, doc = as_json(capsys, base, cand)
    assert code == 0
    assert not [r for r in rows_of(doc) if r["regression"] or r["improvement"]]
    mine = next(r for r in rows_of(doc) if same_key(r, case))
    assert mine["verdict"] == "same" and mine["speedup"] == pytest.approx(1 / 1.02, rel=0.02)


def _triton_row(n: int = 40) -> dict:
    return next(r for r in cf.synthetic_rows(n=n, impls=cf.GATED) if r["impl"] == "triton")


def test_large_change_inside_the_samples_spread_is_not_flagged(tmp_path, capsys):
    noisy = np.array([1.0, 1.5, 0.7, 1.2, 0.9, 1.3])
    base = dict(_triton_row(6), samples_ms=noisy.tolist(), ms_median=float(np.median(noisy)))
    slow = dict(base, samples_ms=(noisy[::-1] * 1.10).tolist(), ms_median=float(np.median(noisy)) * 1.1)
    b = cf.write(store.to_frame([base]), tmp_path / "b.parquet")
    c = cf.write(store.to_frame([slow]), tmp_path / "c.parquet")
    code, doc = as_json(capsys, b, c)
    (r,) = rows_of(doc)
    assert code == 0 and r["verdict"] == "same" and "within" in r["reason"]
    assert r["band_source"] == "sample spread" and r["band"] > 0.15
    assert r["p_value"] > 0.01 and r["speedup"] == pytest.approx(1 / 1.1)


def test_short_kernel_floor_comes_from_its_spread(tmp_path, capsys):
    """A 20% change of a 5 us kernel is judged against its samples' spread, not hidden
    under a fixed microsecond floor; a 10% change inside a 15% spread is not flagged."""
    rng = np.random.default_rng(5)
    steady = 0.005 * rng.uniform(0.98, 1.02, 40)
    wide = 0.005 * rng.uniform(0.70, 1.30, 40)
    row = _triton_row()
    for samples, factor, want in ((steady, 1.2, 1), (wide, 1.1, 0)):
        b = cf.write(store.to_frame([dict(row, samples_ms=samples.tolist())]), tmp_path / "b.parquet")
        c = cf.write(store.to_frame([dict(row, samples_ms=(samples[::-1] * factor).tolist())]),
                     tmp_path / "c.parquet")
        code, doc = as_json(capsys, b, c)
        assert code == want, rows_of(doc)
    b = cf.write(store.to_frame([dict(row, samples_ms=steady.tolist())]), tmp_path / "b.parquet")
    c = cf.write(store.to_frame([dict(row, samples_ms=(steady * 1.2).tolist())]), tmp_path / "c.parquet")
    assert run(capsys, b, c, "--floor-us", "2")[0] == 0  # an absolute floor still hides it when asked


@pytest.mark.parametrize("status", ["incorrect", "error"])
def test_status_change_is_a_regression(steady, tmp_path, capsys, status):
    df, base, _ = steady
    case = cf.measurable(df).iloc[-1]
    cand = df.copy()
    cand.loc[cf.key_mask(cand, case), "status"] = status
    cand.loc[cf.key_mask(cand, case), "l2"] = None  # as the worker writes a row it never timed
    code, doc = as_json(capsys, base, cf.write(cand, tmp_path / "cand.parquet"))
    assert code == 1
    (r,) = [r for r in rows_of(doc) if r["regression"]]
    assert same_key(r, case) and r["verdict"] == "broke" and status in r["reason"]
    # and the reverse is a fix, not a regression
    code, doc = as_json(capsys, tmp_path / "cand.parquet", base)
    assert code == 0 and [r["verdict"] for r in rows_of(doc) if r["improvement"]] == ["fixed"]


def test_a_suspect_candidate_row_fails_with_its_reason(steady, tmp_path, capsys):
    """Faster than its roof allows: a regression from ok, and from suspect too."""
    df, base, _ = steady
    case = cf.measurable(df).iloc[-1]
    cand = df.copy()
    mask = cf.key_mask(cand, case)
    cand.loc[mask, "status"] = "suspect"
    cand.loc[mask, "error"] = "SOL 1.031 > 1.02 of its memory roof (4420 GB/s for 67% reads)"
    cand_path = cf.write(cand, tmp_path / "cand.parquet")
    code, doc = as_json(capsys, base, cand_path)
    (r,) = [r for r in rows_of(doc) if r["regression"]]
    assert code == 1 and same_key(r, case) and r["verdict"] == "suspect"
    assert r["reason"] == "ok -> suspect: SOL 1.031 > 1.02 of its memory roof (4420 GB/s for 67% reads)"
    assert run(capsys, cand_path, cand_path)[0] == 1
    code, doc = as_json(capsys, cand_path, base)
    assert code == 0 and [r["verdict"] for r in rows_of(doc) if same_key(r, case)] == ["fixed"]


def test_improvement_passes_unless_asked_to_fail(steady, tmp_path, capsys):
    df, base, case = steady
    cand = cf.write(cf.scale_case(df, case, 0.8), tmp_path / "cand.parquet")
    code, doc = as_json(capsys, base, cand)
    assert code == 0 and [r["verdict"] for r in rows_of(doc) if r["improvement"]] == ["faster"]
    assert run(capsys, base, cand, "--fail-on-improvement")[0] == 1


def _md_tables(text: str) -> list[list[list[str]]]:
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            cur.append(cells)
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def test_markdown_and_json_parse(steady, tmp_path, capsys):
    df, base, case = steady
    cand = cf.write(cf.scale_case(df, case, 1.25), tmp_path / "cand.parquet")
    code, md, _ = run(capsys, base, cand, "--format", "markdown")
    assert code == 1 and md.startswith("## Benchmark comparison: regression")
    tables = _md_tables(md)
    assert len(tables) == 3  # roll-up, changes, all cases
    for t in tables:
        assert all(set(c) <= {"-"} for c in t[1]), "second line must be the separator"
        assert {len(r) for r in t} == {len(t[0])}, "every row has the header's cell count"
    rollup, changes, every = tables
    assert rollup[0][:3] == ["impl", "matched", "geomean speedup"]
    assert {r[0] for r in rollup[2:]} == set(df["impl"])
    assert len(changes) == 3 and changes[2][0] == case["workload"] and "REGRESSION" in changes[2][-1]
    assert len(every) - 2 == df[store.ROW_KEY].drop_duplicates().shape[0]
    code, doc = as_json(capsys, base, cand)
    (c,) = doc["comparisons"]
    assert c["regressions"] == 1 and not c["gpus_differ"]
    roll = {r["impl"]: r for r in c["rollup"]}
    assert roll[case["impl"]]["regressions"] == 1 and roll[case["impl"]]["cand_pass_rate"] == 1.0
    others = [r["speedup"] for r in c["rows"] if r["speedup"] and not same_key(r, case)
              and r["impl"] == case["impl"]]
    expected = compare.geomean(others + [1 / 1.25])
    assert roll[case["impl"]]["geomean_speedup"] == pytest.approx(expected, rel=1e-3)


def test_cross_gpu_comparison_reports_sol(steady, tmp_path, capsys):
    df, _, case = steady
    base_df = cf.set_gpu(df, "NVIDIA H100 80GB HBM3", 3350.0, 60.0)
    # A GPU 1.5x faster on both roofs that runs every kernel 1.5x faster: same SOL ...
    cand_df = cf.set_gpu(cf.scale_case_all(df, 1 / 1.5), "NVIDIA H200", 3350.0 * 1.5, 90.0)
    # ... except one case that lost 20% of its SOL.
    cand_df = cf.scale_case(cand_df, case, 1.25)
    b = cf.write(base_df, tmp_path / "h100.parquet")
    c = cf.write(cand_df, tmp_path / "h200.parquet")
    code, doc = as_json(capsys, b, c)
    (cmp_,) = doc["comparisons"]
    assert cmp_["gpus_differ"] and any("GPUs differ" in n for n in cmp_["notes"])
    assert code == 1
    (r,) = [r for r in cmp_["rows"] if r["regression"]]
    assert same_key(r, case) and r["basis"] == "sol"
    assert r["cand_sol"] / r["base_sol"] == pytest.approx(1 / 1.25, rel=0.02)
    assert r["speedup"] == pytest.approx(1.5 / 1.25, rel=0.02)  # faster in time, worse in SOL
    code, out, _ = run(capsys, b, c, "--format", "markdown")
    assert "GPUs differ" in out and "base SOL" in out and "cand SOL" in out


def test_different_protocols_are_not_compared(steady, tmp_path, capsys):
    df, base, case = steady
    other_timer = df.assign(timer="graph")
    code, out, err = run(capsys, base, cf.write(other_timer, tmp_path / "graph.parquet"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "timer" in err and "different protocols" in err
    other_l2 = df.copy()
    other_l2.loc[cf.key_mask(other_l2, case), "l2"] = "warm-test"
    code, doc = as_json(capsys, base, cf.write(other_l2, tmp_path / "l2.parquet"))
    (r,) = [r for r in rows_of(doc) if r["verdict"] == "not comparable"]
    assert code == 0 and same_key(r, case) and "l2" in r["reason"]


def test_by_commit_and_by_gpu_on_one_set(steady, tmp_path, capsys):
    df, _, case = steady
    folder = tmp_path / "runs"
    old = df.assign(commit="1" * 40, timestamp="2025-01-01T00:00:00Z")
    new = cf.scale_case(df, case, 1.2).assign(commit="2" * 40, timestamp="2025-02-01T00:00:00Z")
    cf.write(new, folder / "b.parquet")
    cf.write(old, folder / "a.parquet")
    code, doc = as_json(capsys, folder, "--by", "commit")
    (c,) = doc["comparisons"]
    assert code == 1 and c["base"]["commits"] == ["1111111"] and c["candidate"]["commits"] == ["2222222"]
    assert run(capsys, folder, "--by", "commit", "--base", "2222")[0] == 0  # reversed: faster
    code, out, err = run(capsys, folder, "--by", "gpu")
    assert code == 2 and "only one gpu" in err
    cf.write(cf.set_gpu(old, "NVIDIA H100", 3000.0, 50.0), folder / "h100.parquet")
    code, doc = as_json(capsys, folder, "--by", "gpu", "--base", "NVIDIA H100")
    assert doc["comparisons"][0]["gpus_differ"] and code in (0, 1)


def _one_line_error(capsys, *argv, match: str):
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert match in err, err


def test_bad_inputs_exit_2_with_one_clear_line(real, tmp_path, capsys):
    df, base = real
    _one_line_error(capsys, base, tmp_path / "missing.parquet", match="missing.parquet: no such file")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    _one_line_error(capsys, base, corrupt, match="corrupt.parquet: not a readable Parquet file")
    other = cf.write(df.assign(workload="nothing_like_it"), tmp_path / "other.parquet")
    _one_line_error(capsys, base, other, match="no case of candidate matches base")
    (tmp_path / "empty").mkdir()
    _one_line_error(capsys, base, tmp_path / "empty", match="no runs found")
    _one_line_error(capsys, base, match="give BASE and CANDIDATE")
    _one_line_error(capsys, base, base, "--threshold", "lots", match="--threshold")
    # and through the real entry point, as CI calls it
    r = subprocess.run([sys.executable, "-m", "suite", "compare", str(base), str(corrupt)],
                       cwd=cf.ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_threshold_parsing():
    assert compare_cli.parse_threshold("5%") == pytest.approx(0.05)
    assert compare_cli.parse_threshold("0.05") == pytest.approx(0.05)
    assert compare_cli.parse_threshold("10") == pytest.approx(0.10)


def test_mann_whitney_fallback_matches_scipy_and_hand_value():
    # a = 1,2,3 vs b = 4,5,6: U = 0, mean 4.5, var 5.25, z = (4.5 - 0.5) / sqrt(5.25)
    assert compare.mann_whitney_p_normal([1, 2, 3], [4, 5, 6]) == pytest.approx(0.080856, rel=1e-4)
    assert compare.mann_whitney_p_normal([1, 1, 1], [1, 1, 1]) == 1.0
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for shift in (0.0, 0.05, 0.3):
        a = np.round(rng.normal(1.0, 0.1, 40), 2)  # rounding makes ties
        b = np.round(rng.normal(1.0 + shift, 0.1, 55), 2)
        want = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert compare.mann_whitney_p_normal(a, b) == pytest.approx(want, rel=1e-6, abs=1e-12)


# ---------------------------------------------------------------- baseline + workflow
def _results_tree(root, df):
    runs = {
        "h200/20250101T000000Z-aaaaaaa.parquet": ("NVIDIA H200", "2025-01-01T00:00:00Z"),
        "h200/20250301T000000Z-ccccccc.parquet": ("NVIDIA H200", "2025-03-01T00:00:00Z"),
        "h100/20250401T000000Z-ddddddd.parquet": ("NVIDIA H100 80GB HBM3", "2025-04-01T00:00:00Z"),
    }
    for rel, (gpu, ts) in runs.items():
        cf.write(df.assign(gpu_name=gpu, timestamp=ts, run_id=rel), root / rel)
    # newer, same GPU, but timed with another timer: not a baseline for an events run
    cf.write(df.assign(gpu_name="NVIDIA H200", timestamp="2025-06-01T00:00:00Z", timer="other",
                       run_id="e"), root / "h200/20250601T000000Z-eeeeeee.parquet")
    # newer, same GPU and timer, but another l2 (e.g. cold-flush): not a baseline either
    cf.write(df.assign(gpu_name="NVIDIA H200", timestamp="2025-07-01T00:00:00Z", l2="cold-other",
                       run_id="f"), root / "h200/20250701T000000Z-fffffff.parquet")
    return root / "h200/20250301T000000Z-ccccccc.parquet"


def test_baselines_take_the_newest_row_of_each_case(real, tmp_path, capsys):
    """The newest committed run holds one workload only: the other workloads' cases keep
    their baseline from an older run instead of going unjudged."""
    df, _ = real
    steady = cf.measurable(df)
    x = steady.iloc[0]
    y = steady[steady["workload"] != x["workload"]].iloc[0]
    root = tmp_path / "results"
    _results_tree(root, df)
    newest = cf.scale_case(df[df["workload"] == x["workload"]], x, 1.3)
    cf.write(newest.assign(gpu_name="NVIDIA H200", timestamp="2025-08-01T00:00:00Z", run_id="g"),
             root / "h200/20250801T000000Z-ggggggg.parquet")
    cand = cf.write(cf.scale_case(df, y, 1.5).assign(gpu_name="NVIDIA H200", run_id="cand"),
                    tmp_path / "bench.parquet")
    code, doc = as_json(capsys, "--baselines", root, cand)
    rows = rows_of(doc)
    assert code == 1
    assert [r["verdict"] for r in rows if same_key(r, y)] == ["slower"]
    (rx,) = [r for r in rows if same_key(r, x)]  # judged against the newest row, 1.3x slower
    assert rx["base_ms"] == pytest.approx(1.3 * np.median(x["samples_ms"]), rel=1e-6)
    assert rx["speedup"] == pytest.approx(1.3, rel=0.01)
    assert doc["comparisons"][0]["compared"] == int((df["status"] == "ok").sum())
    assert {r["verdict"] for r in rows} <= {"same", "slower"}
    # a GPU with no committed row: nothing comparable is exit 2, not a pass
    lone = cf.write(df.assign(gpu_name="NVIDIA B200", run_id="b200"), tmp_path / "b200.parquet")
    _one_line_error(capsys, "--baselines", root, lone, match="nothing comparable: no stored row")
    _one_line_error(capsys, "--baselines", root, tmp_path / "nope.parquet",
                    match="nope.parquet: no such file")


WORKFLOW = cf.ROOT / ".github" / "workflows" / "gpu-bench.yml"


def workflow_step(step_id: str) -> str:
    """The ``run: |`` block of the step with ``id: step_id``, dedented."""
    lines = WORKFLOW.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == f"id: {step_id}")
    run_at = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("run:"))
    head = lines[run_at].split("run:", 1)[1].strip()
    if head and head != "|":
        return head
    indent = len(lines[run_at + 1]) - len(lines[run_at + 1].lstrip())
    block = []
    for ln in lines[run_at + 1:]:
        if ln.strip() and len(ln) - len(ln.lstrip()) < indent:
            break
        block.append(ln[indent:])
    return "\n".join(block)


def test_workflow_parses_as_yaml_and_names_its_steps():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(WORKFLOW.read_text())
    steps = {s.get("id"): s for s in doc["jobs"]["bench"]["steps"] if s.get("id")}
    for step in ("ab", "run", "gate"):
        assert steps[step]["run"].strip() == workflow_step(step).strip()
    assert steps["ab"]["if"] == "github.event_name == 'pull_request'"
    assert steps["run"]["if"] == steps["gate"]["if"] == "github.event_name != 'pull_request'"


def test_workflow_run_step_uses_flags_the_runner_accepts():
    pytest.importorskip("suite.runner")
    cmd = workflow_step("run").split()
    assert cmd[:3] == ["$PYTHON", "-m", "suite"]
    args = cli.build_parser(cmd[3]).parse_args(cmd[3:])
    assert args.verb == "run" and args.preset == "quick" and str(args.out) == "bench.parquet"


def test_workflow_ab_step_uses_flags_ab_accepts():
    from suite import ab

    line = next(ln for ln in workflow_step("ab").splitlines() if " -m suite ab " in ln)
    cmd = line.split(">")[0].split()
    assert cmd[:4] == ["$PYTHON", "-m", "suite", "ab"] and cmd[4:6] == ['"$base"', "HEAD"]
    args, run_args = ab.split_args(cli.build_parser("ab").parse_args(cmd[3:]))
    ab.check_run_args(run_args)
    assert args.format == "markdown" and str(args.out) == "ab-runs" and "--preset" in run_args
    assert run_args[run_args.index("--settle-ms") + 1] == "300"  # docs/protocol.md, --settle-ms


def _gate(tmp_path, bench_df, results_df=None):
    work = tmp_path / "ws"
    work.mkdir(parents=True)
    if results_df is not None:
        _results_tree(work / "results", results_df)
    cf.write(bench_df.assign(run_id="bench"), work / "bench.parquet")
    summary = work / "summary.md"
    env = dict(os.environ, PYTHON=sys.executable, GITHUB_STEP_SUMMARY=str(summary),
               PYTHONPATH=str(cf.ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(["bash", "-c", workflow_step("gate")], cwd=work, env=env,
                       capture_output=True, text=True, timeout=300)
    return r, summary.read_text() if summary.exists() else ""


def test_workflow_gate_fails_on_regression(steady, tmp_path):
    df, _, case = steady
    bench = cf.scale_case(df, case, 1.10).assign(gpu_name="NVIDIA H200")
    r, summary = _gate(tmp_path, bench, results_df=df)
    assert r.returncode == 1, r.stderr
    assert "## Benchmark comparison: regression" in summary and str(case["shape"]) in summary


def test_workflow_gate_passes_clean_run_and_fails_without_baseline(steady, tmp_path):
    df, _, _ = steady
    r, summary = _gate(tmp_path, cf.jitter(df, 0.01).assign(gpu_name="NVIDIA H200"), results_df=df)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "no regression" in summary
    r, summary = _gate(tmp_path / "x", df.assign(gpu_name="NVIDIA H200"))
    assert r.returncode == 2 and "::error title=Nothing compared" in r.stdout
    assert "Nothing compared (exit 2)" in summary and "results/" in summary


def test_gate_works_without_scipy(steady, tmp_path, capsys, monkeypatch):
    """The GPU image may lack scipy: the built-in U test must carry the gate alone."""
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    df, base, case = steady
    cand = cf.write(cf.scale_case(cf.jitter(df, 0.02), case, 1.10), tmp_path / "cand.parquet")
    code, doc = as_json(capsys, base, cand)
    flagged = [r for r in rows_of(doc) if r["regression"]]
    assert code == 1 and len(flagged) == 1 and same_key(flagged[0], case)


def test_by_gpu_splits_one_model_by_device_index(steady, tmp_path, capsys):
    """The two halves of a `run --gpus 0,1` on two GPUs of one model compare like two machines."""
    df, _, case = steady
    folder = tmp_path / "two-gpus"
    halves = pd.concat([df.assign(device_index=0), cf.scale_case(df, case, 1.3).assign(device_index=1)])
    cf.write(halves, folder / "run.parquet")
    code, doc = as_json(capsys, folder, "--by", "gpu")
    (c,) = doc["comparisons"]
    assert code == 1, "device 1 is 30% slower on one case"
    assert "#0" in c["base"]["label"] and "#1" in c["candidate"]["label"]
    code, doc = as_json(capsys, folder, "--by", "gpu", "--base", f"{df['gpu_name'].iloc[0]} #1")
    assert code == 0
