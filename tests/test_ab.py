"""python -m suite ab: the schedule, the paired verdicts, and the orchestration over real git worktrees.

The orchestration tests build a temporary git repository whose ``suite`` is a
fake: ``python -m suite run`` there writes a few rows whose times come from
the commit's spec.json (with a little seeded noise) and logs each run, so that
the worktrees, the subprocess per side, the alternation, the seeds and the
per-side environment are checked for real in seconds.  One slow test runs the
real suite from a copy of this tree, on the CPU, with tests/slow_impls.py.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite import ab, cli, compare, store

ROOT = Path(__file__).resolve().parents[1]

FAKE_MAIN = '''
import json, os, random, sys, pathlib, time
import pandas as pd
args = sys.argv[1:]
assert args[0] == "run", args
out, seed = args[args.index("--out") + 1], int(args[args.index("--seed") + 1])
spec = json.loads((pathlib.Path(__file__).parent / "spec.json").read_text())
with open(os.environ["FAKE_AB_LOG"], "a") as fh:
    fh.write(f"{spec['name']} {seed} {os.environ.get('FAKE_AB_FLAG', '-')} "
             f"{'extra:' + args[args.index('--impls') + 1] if '--shapes' in args else 'full'} {os.getpid()}\\n")
time.sleep(spec.get("sleep", 0))
if spec.get("rc"):
    sys.exit(spec["rc"])
rows = []
for i, (impl, status, ms, *amp) in enumerate(spec["rows"]):
    # seeded noise of its own per commit, round and row
    noise = 1 + (amp[0] if amp else 0.002) * random.Random(f"{spec['name']} {seed} {i}").uniform(-1, 1)
    rows.append(dict(schema_version=1, run_id=f"{spec['name']}-{seed}", timestamp="2025-01-01T00:00:00Z",
                     workload="gemm", impl=impl, backend=impl.split(":")[0], dtype="float32",
                     shape="M=1,N=2,K=3", timer="wall", l2="n/a", status=status,
                     ms_median=ms * noise if status == "ok" else None, gpu_name="cpu",
                     torch="2.0", commit=spec["name"], dirty=False))
pd.DataFrame(rows).to_parquet(out)
'''

BASE_ROWS = [["triton", "ok", 1.0], ["cuda", "ok", 2.0], ["torch", "ok", 1.0], ["eager", "ok", 3.0],
             ["triton:x", "unsupported", None]]
CAND_ROWS = [["triton", "ok", 1.2], ["torch", "ok", 1.5], ["eager", "ok", 3.0],
             ["triton:x", "ok", 1.0], ["cuda:new", "ok", 1.0]]


def _commit(repo: Path, name: str, rows, rc: int = 0, sleep: float = 0) -> str:
    (repo / "suite" / "spec.json").write_text(json.dumps({"name": name, "rows": rows, "rc": rc,
                                                          "sleep": sleep}))
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "-m", name], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "suite").mkdir(parents=True)
    (repo / "suite" / "__init__.py").write_text("")
    (repo / "suite" / "__main__.py").write_text(FAKE_MAIN)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    refs = {"A": _commit(repo, "A", BASE_ROWS), "B": _commit(repo, "B", CAND_ROWS),
            "dead": _commit(repo, "dead", [], rc=3),
            # triton 2.5% slower under 3% noise a round: undecided after a few rounds
            "noisyA": _commit(repo, "noisyA", [["triton", "ok", 1.0, 0.03], ["eager", "ok", 3.0]]),
            "noisyB": _commit(repo, "noisyB", [["triton", "ok", 1.025, 0.03], ["eager", "ok", 3.0]]),
            "sleepy": _commit(repo, "sleepy", BASE_ROWS, sleep=60)}
    log = tmp_path / "runs.log"
    monkeypatch.setenv("FAKE_AB_LOG", str(log))
    return repo, refs, log


def _ab(capsys, repo, *argv) -> tuple[int, dict | None, str]:
    code = cli.main(["ab", *map(str, argv), "--repo", str(repo), "--seed", "100", "--format", "json",
                     "--workloads", "gemm"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def _rows(doc) -> dict[str, dict]:
    return {r["impl"]: r for r in doc["comparisons"][0]["rows"]}


def test_schedule_alternates_the_first_side_after_a_warm_up():
    assert ab.schedule(3) == [(0, "base"), (0, "cand"), (1, "base"), (1, "cand"),
                              (2, "cand"), (2, "base"), (3, "base"), (3, "cand")]


def test_ab_runs_both_refs_in_worktrees_and_judges_paired_rounds(fake_repo, capsys):
    repo, refs, log = fake_repo
    code, doc, err = _ab(capsys, repo, refs["A"], refs["B"], "--rounds", "3",
                         "--cand-env", "FAKE_AB_FLAG=slow")
    assert code == 1, err
    runs = [ln.split() for ln in log.read_text().splitlines()]
    assert [r[0] for r in runs] == ["A", "B", "A", "B", "B", "A", "A", "B"]
    assert [int(r[1]) for r in runs] == [100, 100, 101, 101, 102, 102, 103, 103]
    assert {r[2] for r in runs if r[0] == "B"} == {"slow"} and {r[2] for r in runs if r[0] == "A"} == {"-"}
    rows = _rows(doc)
    assert rows["cuda"]["verdict"] == "missing" and rows["cuda"]["regression"]
    assert rows["triton"]["verdict"] == "slower" and rows["triton"]["regression"]
    assert rows["triton"]["ratio"] == pytest.approx(1.2, rel=0.01) and rows["triton"]["rounds"] == 3
    lo, hi = rows["triton"]["ci"]
    assert lo <= 1 / 1.2 <= hi and hi < 1 / 1.02
    assert rows["torch"]["verdict"] == "slower" and rows["torch"]["context"] and not rows["torch"]["regression"]
    assert rows["eager"]["verdict"] == "same" and "within" in rows["eager"]["reason"]
    assert rows["triton:x"]["verdict"] == "status" and rows["cuda:new"]["verdict"] == "new"
    order = [r["impl"] for r in sorted(doc["comparisons"][0]["rows"], key=lambda r: not r["regression"])]
    assert set(order[:2]) == {"cuda", "triton"}
    # the worktrees and their folder are gone
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                            capture_output=True, text=True).stdout
    assert listed.count("worktree ") == 1
    assert "ab: round 3/3" in err


def test_undecided_cases_get_extra_rounds_of_their_own(fake_repo, capsys):
    """A gated case whose interval crosses the band's edge is timed again, alone, in
    alternating rounds up to --max-rounds; a case decided in the first rounds is not."""
    repo, refs, log = fake_repo
    code, doc, err = _ab(capsys, repo, refs["noisyA"], refs["noisyB"], "--rounds", "3", "--max-rounds", "6")
    runs = [ln.split() for ln in log.read_text().splitlines()]
    assert [r[3] for r in runs[:8]] == ["full"] * 8
    extra = runs[8:]
    assert extra and len(extra) % 2 == 0 and len(runs) <= 14, runs
    assert {r[3] for r in extra} == {"extra:triton"}
    assert [int(r[1]) for r in extra] == [104 + i // 2 for i in range(len(extra))]
    assert [r[0] for r in extra[:2]] == ["noisyB", "noisyA"]  # round 4: the candidate first
    rows = _rows(doc)
    assert rows["eager"]["rounds"] == 3 and rows["eager"]["verdict"] == "same"
    assert rows["triton"]["rounds"] == 3 + len(extra) // 2
    assert rows["triton"]["verdict"] in ("slower", "unsure")
    assert (code == 1) == (rows["triton"]["verdict"] == "slower")
    assert any("extra round" in n for n in doc["comparisons"][0]["notes"])
    assert any("99.38% ones" in n and "judged up to 4 time(s)" in n for n in doc["comparisons"][0]["notes"])
    if rows["triton"]["verdict"] == "unsure":
        assert len(extra) == 6 and not rows["triton"]["regression"]
    assert "undecided case(s) again" in err
    # no extra round where --max-rounds is --rounds
    log.write_text("")
    code, doc, err = _ab(capsys, repo, refs["noisyA"], refs["noisyB"], "--rounds", "3", "--max-rounds", "3")
    assert len(log.read_text().splitlines()) == 8
    assert _rows(doc)["triton"]["verdict"] in ("unsure", "slower", "same")
    code, _, err = _ab(capsys, repo, refs["noisyA"], refs["noisyB"], "--rounds", "3", "--max-rounds", "2")
    assert code == 2 and "--max-rounds 2 is below --rounds 3" in err


def test_extra_round_args_keep_the_protocol_and_name_only_the_cases(tmp_path):
    from suite.shapes import file_cases
    from suite.workload import discover

    run_args = ["--preset", "quick", "--workloads", "gemm,gelu", "--dtypes", "bfloat16", "--samples", "5,40",
                "--plugin", "tests.slow_impls", "--timer=events", "--budget-ms", "60", "--backends", "torch"]
    keys = [("gemm", "slow:3", "bfloat16", "M=8192,N=8192,K=8192", "events"),
            ("gemm", "triton", "float16", "M=8192,N=8192,K=8192", "events"),
            ("gelu", "triton", "bfloat16", "N=268435456", "events")]
    args = ab.extra_round_args(run_args, keys, tmp_path / "cases.toml")
    for gone in ("--preset", "--workloads", "--dtypes", "--backends"):
        assert gone not in args
    assert args[args.index("--samples") + 1] == "5,40" and args[args.index("--budget-ms") + 1] == "60.0"
    assert args[args.index("--plugin") + 1] == "tests.slow_impls" and args[args.index("--timer") + 1] == "events"
    assert args[args.index("--impls") + 1] == "slow:3,triton"
    cases = file_cases(args[args.index("--shapes") + 1], discover().workloads, None, None)
    assert sorted((c.workload, c.dtype, c.label) for c in cases) == [
        ("gelu", "bfloat16", "N=268435456"), ("gemm", "bfloat16", "M=8192,N=8192,K=8192"),
        ("gemm", "float16", "M=8192,N=8192,K=8192")]


def test_ab_of_a_commit_against_itself_passes(fake_repo, capsys):
    repo, refs, _ = fake_repo
    code, doc, err = _ab(capsys, repo, refs["A"], refs["A"], "--rounds", "2", "--gate", "all")
    assert code == 0, err
    assert {r["verdict"] for r in doc["comparisons"][0]["rows"]} == {"same"}
    assert any("A/A" in n for n in doc["comparisons"][0]["notes"])


def test_uncommitted_changes_of_a_ref_checked_out_are_warned_of_not_timed(fake_repo, capsys):
    repo, refs, _ = fake_repo
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", refs["A"]], check=True)
    code, _, err = _ab(capsys, repo, refs["A"], "HEAD", "--rounds", "2")
    assert code == 0 and "uncommitted" not in err, err
    (repo / "suite" / "spec.json").write_text(json.dumps({"name": "edited", "rows": CAND_ROWS}))
    code, doc, err = _ab(capsys, repo, refs["A"], "HEAD", "--rounds", "2")
    assert code == 0, err  # timed as committed, not refused
    warned = [ln for ln in err.splitlines() if "uncommitted" in ln]
    assert warned == [f"ab: warning: {repo} has uncommitted changes; they are not part of the refs, "
                      f"which are timed as committed"], err
    assert {r["verdict"] for r in doc["comparisons"][0]["rows"]} == {"same"}


def test_losses_come_first_in_the_table(fake_repo, capsys):
    repo, refs, _ = fake_repo
    code = cli.main(["ab", refs["A"], refs["B"], "--repo", str(repo), "--rounds", "2", "--seed", "1"])
    out, _ = capsys.readouterr()
    assert code == 1
    lines = [ln for ln in out.splitlines() if "REGRESSION" in ln or "(context)" in ln]
    assert "missing" in lines[0] and "cuda" in lines[0] and "(context)" in lines[-1]
    assert "FAIL" in out


def test_ab_bad_input_and_failed_sides(fake_repo, capsys, tmp_path):
    repo, refs, _ = fake_repo
    code, doc, err = _ab(capsys, repo, "no-such-ref", refs["A"])
    assert code == 2 and doc is None and err.startswith("error: 'no-such-ref' is not a commit")
    code, _, err = _ab(capsys, repo, refs["A"], refs["B"], "--rounds", "1")
    assert code == 2 and "--rounds 1" in err
    code, _, err = _ab(capsys, repo, refs["A"], refs["B"], "--out", "x.parquet", "--frobnicate")
    assert code == 2 and "--frobnicate" in err
    code, _, err = _ab(capsys, repo, refs["dead"], refs["A"], "--rounds", "2")
    assert code == 2 and "wrote no rows (exit 3)" in err.splitlines()[-1]
    assert err.splitlines()[-1].startswith(f"error: base {refs['dead']} ({refs['dead'][:7]}) wrote no rows")
    # a candidate that cannot run loses every row the base has
    keep = tmp_path / "kept"
    code, doc, err = _ab(capsys, repo, refs["A"], refs["dead"], "--rounds", "2", "--out", keep)
    assert code == 1
    assert {r["verdict"] for r in doc["comparisons"][0]["rows"] if r["base_status"] == "ok"} == {"missing"}
    assert sorted(p.name for p in keep.iterdir()) == ["00-base.log", "00-base.parquet", "00-cand.log"]


def test_ab_without_refs_names_only_the_refs_as_required(capsys):
    """The run options may be left out (run's defaults), so a refusal never asks for them."""
    for argv, missing in ((["ab"], "BASE_REF, CAND_REF"), (["ab", "HEAD"], "CAND_REF")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"error: the following arguments are required: {missing} "
                       "(see python -m suite ab --help)"), err


def test_a_terminated_ab_removes_its_worktrees_and_stops_its_run(fake_repo, tmp_path):
    """SIGTERM (a cancelled CI job, timeout(1)) while a side runs: the side's run is
    stopped, the worktrees and their folder are removed, and the exit status says so."""
    import os
    import signal
    import time

    repo, refs, log = fake_repo
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "suite", "ab", refs["sleepy"], refs["A"], "--repo", str(repo),
                             "--rounds", "2", "--workloads", "gemm"], cwd=ROOT,
                            env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(log.read_text().split()[-1])
    assert list(tmp.glob("ksuite-ab-*"))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM, err
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                            capture_output=True, text=True).stdout
    assert listed.count("worktree ") == 1, listed
    assert not list(tmp.glob("ksuite-ab-*"))
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_the_heading_names_the_kept_files(fake_repo, capsys, tmp_path):
    """With --out DIR each side's heading names its Parquet files there; without it the runs go
    to a temporary folder, and the heading says that they were not kept."""
    repo, refs, _ = fake_repo
    keep = tmp_path / "kept"
    argv = ["ab", refs["A"], refs["B"], "--repo", str(repo), "--rounds", "2", "--max-rounds", "2", "--seed", "1",
            "--workloads", "gemm"]
    assert cli.main([*argv, "--out", str(keep)]) == 1
    heads = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("base ")]
    assert len(heads) == 1 and "(00-base.parquet, 01-base.parquet, 02-base.parquet; cpu;" in heads[0], heads
    assert "(00-cand.parquet, 01-cand.parquet, 02-cand.parquet; cpu;" in heads[0] and "no files" not in heads[0]
    assert cli.main(argv) == 1
    heads = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("base ")]
    assert heads[0].count("(files not kept; cpu;") == 2, heads


def _side(frames) -> list[ab.SideRun]:
    return [ab.SideRun(0, store.to_frame(f) if f is not None else None, 1.0, Path("x.log")) for f in frames]


def _run(rows_by_impl: dict[str, tuple[str, float]], seed: int = 0) -> list[dict]:
    return [dict(schema_version=1, run_id=f"r{seed}", workload="gemm", impl=i, backend=i.split(":")[0],
                 dtype="float32", shape="M=1", timer="events", l2="cold-clean", status=s, ms_median=m,
                 gpu_name="NVIDIA H200") for i, (s, m) in rows_by_impl.items()]


def test_paired_verdicts_from_rounds_with_drift():
    """The GPU drifts 5% per round; the pairing cancels it, so a steady 3% slowdown is
    caught and a 0.5% one is the same."""
    drift = [1.0, 1.05, 0.97, 1.08, 1.01, 0.95]
    base = [_run({"triton": ("ok", 0.5 * d), "cuda": ("ok", 0.3 * d), "torch": ("ok", 1.0 * d)}, i)
            for i, d in enumerate(drift)]
    cand = [_run({"triton": ("ok", 0.5 * d * 1.03 * (1 + 0.002 * (-1) ** i)),
                  "cuda": ("ok", 0.3 * d * 1.005), "torch": ("ok", 1.0 * d * (1 + 0.01 * (-1) ** i))}, i)
            for i, d in enumerate(drift)]
    opt = compare.Options(threshold=0.02)
    res = ab.verdicts({"base": _side(base), "cand": _side(cand)}, opt,
                      {"base": "base", "cand": "cand"}, {"base": "a" * 40, "cand": "b" * 40})
    rows = {r["impl"]: r for r in res.rows}
    assert rows["triton"]["verdict"] == "slower" and rows["triton"]["regression"]
    assert rows["triton"]["ratio"] == pytest.approx(1.03, rel=0.003)
    assert rows["cuda"]["verdict"] == "same" and rows["torch"]["verdict"] == "same"
    assert "inconclusive" in rows["torch"]["reason"] or "within" in rows["torch"]["reason"]
    # unpaired, the drift (sd about 5%) would swamp the 3%: the pairing is what catches it
    assert math.log(max(drift) / min(drift)) > 0.1


def _capped(first: float, slow: float, n: int, rng) -> list[float]:
    """Samples of a kernel at a power cap: ``first`` ms while the clock holds, then
    climbing by ``slow`` (a fraction) as the limiter engages, with 0.1% jitter."""
    ramp = [first * (1 + slow * min(1.0, max(0.0, (i - n // 5) / (n // 2)))) for i in range(n)]
    return [t * (1 + 0.001 * rng.uniform(-1, 1)) for t in ramp]


def test_the_fast_end_decides_a_power_capped_kernel():
    """Each side's median lands anywhere on the limiter's ramp (2-8% per run), the fast end
    repeats: a 3% loss is caught there, an A/A stays silent, and each verdict names the fast end."""
    import random
    rng = random.Random(5)

    def side(scale: dict[str, float]) -> list[list[dict]]:
        rounds = []
        for i in range(7):
            rows = []
            for impl, k in scale.items():
                x = _capped(1.4 * k, rng.uniform(0.02, 0.08), 60, rng)
                rows += [dict(r, samples_ms=x, ms_median=float(pd.Series(x).median()))
                         for r in _run({impl: ("ok", 0.0)}, i)]
            rounds.append(rows)
        return rounds

    base = side({"triton": 1.0, "cuda": 1.0, "torch": 1.0})
    cand = side({"triton": 1.03, "cuda": 1.0, "torch": 0.97})
    res = ab.verdicts({"base": _side(base), "cand": _side(cand)}, compare.Options(threshold=0.02),
                      {"base": "base", "cand": "cand"}, {"base": "a" * 40, "cand": "a" * 40})
    rows = {r["impl"]: r for r in res.rows}
    assert rows["triton"]["verdict"] == "slower" and rows["triton"]["regression"]
    assert rows["triton"]["fast_ratio"] == pytest.approx(1.03, rel=0.003)
    assert "fast end" in rows["triton"]["reason"]
    # the median alone: too wide to decide (the ramp's spread is the point of the test)
    med = ab.paired([math.log(c[1] / b[1]) for b, c in ab_pairs(base, cand, "triton")])
    assert math.log(med.lo) < math.log(1.02)
    assert rows["cuda"]["verdict"] in ("same", "unsure") and not rows["cuda"]["regression"]
    assert rows["torch"]["verdict"] == "faster" and not rows["torch"]["regression"]
    # undecided cases are those still unsure: cuda at most, never the decided ones
    assert set(k[1] for k in ab.undecided({"base": _side(base), "cand": _side(cand)},
                                          compare.Options(threshold=0.02))) <= {"cuda"}


def ab_pairs(base, cand, impl):
    """(base, cand) medians of ``impl`` over the timed rounds (the first is the warm-up)."""
    pick = lambda rows: next(r for r in rows if r["impl"] == impl)  # noqa: E731
    return [((0, pick(b)["ms_median"]), (0, pick(c)["ms_median"])) for b, c in zip(base[1:], cand[1:])]


def test_statistics_that_disagree_are_unsure_and_one_without_samples_is_the_median():
    assert ab._combine("slower", "inside") == "slower"
    assert ab._combine("crosses", "slower") == "slower"
    assert ab._combine("faster", "crosses") == "faster"
    assert ab._combine("slower", "faster") == "unsure"
    assert ab._combine("inside", "crosses") == "unsure"
    assert ab._combine("inside", "inside") == "same"
    assert ab._combine("inside", None) == "same" and ab._combine("crosses", None) == "unsure"
    assert math.isnan(ab.fast_end([])) and math.isnan(ab.fast_end(None))
    assert ab.fast_end([float(i) for i in range(1, 11)]) == pytest.approx(1.9)


def test_nothing_comparable_is_bad_input():
    base = [_run({"triton": ("unsupported", math.nan)}, i) for i in range(3)]
    with pytest.raises(ab.UsageError, match="nothing comparable"):
        ab.verdicts({"base": _side(base), "cand": _side(base)}, compare.Options(),
                    {"base": "b", "cand": "c"}, {"base": "a" * 40, "cand": "a" * 40})


def _copy_tree(dst: Path) -> None:
    """The working tree's code (not its git history) as a one-commit repository."""
    ignore = shutil.ignore_patterns("__pycache__", "*.parquet", ".pytest_cache", "*.so", "build")
    for name in ("suite", "implementations"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    (dst / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "slow_impls.py", dst / "tests" / "slow_impls.py")
    subprocess.run(["git", "init", "-q", str(dst)], check=True)
    subprocess.run(["git", "-C", str(dst), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(dst), "-c", "user.name=t", "-c", "user.email=t@t", "commit",
                    "-q", "-m", "snapshot"], check=True)


@pytest.mark.slow
def test_real_suite_ab_flags_the_slow_plugin_on_the_cpu(tmp_path):
    """Eight real runs (a few minutes): slow:10 at KSUITE_SLOW=40 takes 5x its time on the
    candidate's side only."""
    repo = tmp_path / "repo"
    _copy_tree(repo)
    r = subprocess.run(
        [sys.executable, "-m", "suite", "ab", "HEAD", "HEAD", "--rounds", "3", "--seed", "7",
         "--format", "json", "--cand-env", "KSUITE_SLOW=40", "--device", "cpu", "--preset", "cpu",
         "--workloads", "gelu", "--impls", "torch,slow:10", "--dtypes", "float32",
         "--plugin", "tests.slow_impls", "--samples", "5,30", "--budget-ms", "30"],
        cwd=repo, capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stderr[-2000:] + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    rows = doc["comparisons"][0]["rows"]
    slow = [x for x in rows if x["impl"] == "slow:10"]
    seen = [(x["shape"], x["verdict"], x["ratio"], x["ci"]) for x in slow]
    assert len(slow) == 4 and all(x["ratio"] and x["ratio"] > 2.5 for x in slow), seen
    # a loaded CPU's microsecond calls swing widely between processes: the longest case
    # (milliseconds) is the one whose interval must clear the band
    big = max(slow, key=lambda x: x["base_ms"] or 0)
    assert big["verdict"] == "slower" and big["regression"] and 3 < big["ratio"] < 8, seen
    assert not [x for x in rows if x["impl"] == "torch" and x["regression"]]
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True)
    assert len(listed.stdout.strip().splitlines()) == 1


def test_run_options_are_checked_before_anything_runs():
    ab.check_run_args(["--workloads", "gemm", "--preset", "quick"])
    with pytest.raises(ab.UsageError, match="ab sets --seed"):
        ab.check_run_args(["--seed", "3"])
    with pytest.raises(ab.UsageError, match="not an option"):
        ab.check_run_args(["--frobnicate"])
    # fuzz shapes come from the seed, and every round has its own: the sides
    # would not time the same cases round to round
    with pytest.raises(ab.UsageError, match="--preset fuzz draws its shapes from the seed"):
        ab.check_run_args(["--preset", "fuzz", "--workloads", "gemm"])


def test_a_power_capped_case_without_a_settle_gets_a_note():
    """Rows that ran at the power cap with no --settle-ms in their run_args: the notes say
    so and name the option; with a settle recorded, or no cap, they do not."""
    def rounds(limits: str, settle: float | None):
        args = json.dumps({"device": "cuda", **({"settle_ms": settle} if settle is not None else {})})
        return [[dict(row, clock_limits=limits if row["impl"] == "torch" else "", run_args=args)
                 for row in _run({"triton": ("ok", 0.5), "torch": ("ok", 1.0)}, i)] for i in range(3)]

    def notes(limits, settle):
        sides = {s: _side(rounds(limits, settle)) for s in ("base", "cand")}
        res = ab.verdicts(sides, compare.Options(threshold=0.02), {"base": "b", "cand": "c"},
                          {"base": "a" * 40, "cand": "a" * 40})
        return [n for n in res.notes if "power limit" in n]

    (note,) = notes("power cap", None)
    assert note.startswith("1 case(s) ran at the GPU's power limit") and "--settle-ms 300" in note
    assert notes("power cap", 0.0) == [note]
    assert notes("power cap", 300.0) == [] and notes("", None) == [] and notes("thermal", None) == []


def test_identical_code_on_a_noisy_machine_is_seldom_called_slower_or_faster():
    """A/A rounds with 30% noise (a loaded CPU): judged as ab judges them, after --rounds 5 and
    again after every extra round up to 10 while a case is unsure, with either statistic
    able to decide.  Each interval at 95% would call about one case in six slower or
    faster; the verdict is a 95% one over both statistics and all six looks."""
    import numpy as np

    rng = np.random.default_rng(3)
    band, key, looks = math.log1p(0.02), ("gemm", "triton", "float32", "M=1", "wall"), 6
    flagged, cases = 0, 400
    for _ in range(cases):
        z = rng.standard_normal((2, 10))
        med, fast = 0.3 * z[0], 0.3 * (0.5 * z[0] + 0.75 ** 0.5 * z[1])
        for n in range(5, 11):
            keyed = {"base": [{}] + [{key: ("ok", 1.0, 1.0)}] * n,
                     "cand": [{}] + [{key: ("ok", math.exp(m), math.exp(f))} for m, f in zip(med[:n], fast[:n])]}
            verdict = ab._decide(keyed, key, band, looks)
            if verdict != "unsure":
                break
        flagged += verdict in ("slower", "faster")
    assert flagged <= 0.05 * cases, flagged
