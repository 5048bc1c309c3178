"""benchmarks/ through pytest-benchmark on the CPU, then back into the suite's schema.

Runs a tiny subset in a subprocess (as a user would), saves it with
--benchmark-json and --benchmark-autosave, checks that --benchmark-compare
reads the autosaved run back, imports the JSON with import-pytest-benchmark,
and compares the imported run with itself.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite import cli, store
from suite.workload import discover

ROOT = Path(__file__).resolve().parents[1]
SUBSET = "gelu and (eager or torch)"

pytest.importorskip("pytest_benchmark")


def bench(tmp_path, *extra, k=SUBSET):
    # a user's own pytest session: none of this one's xdist worker settings
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    env["KSUITE_BENCH_ROUNDS"] = "5"
    cmd = [sys.executable, "-m", "pytest", "benchmarks/", "--benchmark-only", "-k", k,
           "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rs", f"--benchmark-storage=file://{tmp_path / 'store'}",
           *extra]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pb")
    out = tmp / "bench.json"
    r = bench(tmp, f"--benchmark-json={out}", "--benchmark-autosave")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return tmp, out, json.loads(out.read_text())


def expected_ids() -> set[tuple[str, str]]:
    reg = discover()
    return {(w, i.name) for (w, _), i in reg.impls.items()
            if "gelu" in w and i.name in ("eager", "torch")}


def test_every_selected_kernel_is_benchmarked_with_extra_info(saved):
    _, _, doc = saved
    got = {(b["extra_info"]["workload"], b["extra_info"]["impl"]) for b in doc["benchmarks"]}
    assert got == expected_ids()
    for b in doc["benchmarks"]:
        info, stats = b["extra_info"], b["stats"]
        assert stats["rounds"] == 5 and len(stats["data"]) == 5 and stats["iterations"] == 1
        assert info["dtype"] == "float32" and info["correct"] is True and info["device"] == "cpu"
        wl = discover().workloads[info["workload"]]
        first = ",".join(f"{k}={v}" for k, v in wl.presets["cpu"][0].items())
        assert info["shape"] == first
        ms = stats["median"] * 1e3
        assert info["gbps"] == pytest.approx(info["min_bytes"] / ms / 1e6)
        assert info["sol"] is None or info["sol"] == pytest.approx(info["bound_ms"] / ms)


def test_autosave_and_compare_work_as_usual(saved):
    tmp, _, _ = saved
    assert list((tmp / "store").rglob("*.json")), "--benchmark-autosave wrote nothing"
    r = bench(tmp, "--benchmark-compare", "--benchmark-compare-fail=median:10000%",
              k="gelu and eager and not residual")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Comparing against benchmarks from" in r.stdout + r.stderr


def test_unavailable_kernels_are_skipped_with_the_reason(tmp_path):
    cuda = [i for (w, _), i in discover().impls.items() if w == "gelu" and i.backend == "cuda"]
    if not cuda:
        pytest.skip("no CUDA implementation of gelu registered yet")
    r = bench(tmp_path, k="gelu and cuda and not residual")
    assert r.returncode == 0, r.stdout[-2000:]
    assert "skipped" in r.stdout and "CUDA" in r.stdout


def test_round_trip_into_the_suite_schema(saved, tmp_path, capsys):
    _, src, doc = saved
    out = tmp_path / "imported.parquet"
    assert cli.main(["import-pytest-benchmark", str(src), "--out", str(out)]) == 0
    df = store.read_file(out)
    assert set(store.COLUMNS) <= set(df.columns) and len(df) == len(doc["benchmarks"])
    assert set(df["timer"]) == {"pytest-benchmark"} and set(df["status"]) == {"ok"}
    assert {(w, i) for w, i in zip(df["workload"], df["impl"])} == expected_ids()
    for _, row in df.iterrows():
        b = next(b for b in doc["benchmarks"] if b["extra_info"]["impl"] == row["impl"]
                 and b["extra_info"]["workload"] == row["workload"])
        assert row["ms_median"] == pytest.approx(b["stats"]["median"] * 1e3)
        assert len(row["samples_ms"]) == 5 and row["n_samples"] == 5
        assert row["gpu_name"] == b["extra_info"]["gpu_name"]
    capsys.readouterr()
    assert cli.main(["compare", str(out), str(out), "--format", "json"]) == 0
    res = json.loads(capsys.readouterr().out)["comparisons"][0]
    assert {r["verdict"] for r in res["rows"]} == {"same"}


@pytest.mark.gpu
def test_gpu_benchmarks_flush_l2_and_report_sol(tmp_path):
    """On the GPU: the first quick shape, every dtype, cold L2, SOL from measured ceilings."""
    out = tmp_path / "gpu.json"
    r = bench(tmp_path, f"--benchmark-json={out}", k="(gelu or softmax) and not compile")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["benchmarks"], "nothing was benchmarked"
    for b in doc["benchmarks"]:
        info = b["extra_info"]
        assert info["device"] == "cuda" and info["l2"] == "cold-clean" and info["correct"] is True
        assert info["sol"] is not None and 0 < info["sol"] <= 1.05, (b["name"], info["sol"])
    dtypes = {b["extra_info"]["dtype"] for b in doc["benchmarks"]}
    assert {"float32", "bfloat16"} <= dtypes
