"""import-pytest-benchmark and the exporters, checked against each tool's documented format.

github-action-benchmark, customSmallerIsBetter: a JSON list of objects with
``name`` (string), ``unit`` (string), ``value`` (number) and optional ``range``
and ``extra`` (strings).  Bencher Metric Format: an object mapping benchmark
names to objects mapping measure slugs to ``{value, lower_value?,
upper_value?}`` (numbers; ``value`` required); the built-in ``latency`` measure
is in nanoseconds.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import compare_fixtures as cf
from suite import cli, store


def pytest_benchmark_doc(with_data: bool = True) -> dict:
    """A document shaped like pytest-benchmark 4/5 writes: times in seconds."""
    data = [0.0021, 0.0020, 0.0023, 0.0022, 0.0020, 0.0025]

    def stats(vals):
        s = {"min": min(vals), "max": max(vals), "mean": float(np.mean(vals)), "stddev": 0.0001,
             "rounds": len(vals), "median": float(np.median(vals)), "iqr": 0.0002, "q1": 0.00205,
             "q3": 0.00225, "iqr_outliers": 0, "stddev_outliers": 1, "outliers": "1;0",
             "ld15iqr": 0.002, "hd15iqr": 0.0025, "ops": 470.0, "total": sum(vals), "iterations": 1}
        if with_data:
            s["data"] = vals
        return s

    return {
        "machine_info": {"node": "box", "python_version": "3.11.9", "cpu": {"brand_raw": "Some CPU"}},
        "commit_info": {"id": "0123456789abcdef0123456789abcdef01234567", "dirty": False,
                        "time": "2025-03-04T05:06:07+00:00"},
        "benchmarks": [
            {"group": "gelu-bfloat16-N=65536", "name": "test_kernel[gelu-triton-bfloat16-N=65536]",
             "fullname": "benchmarks/test_kernels.py::test_kernel[gelu-triton-bfloat16-N=65536]",
             "params": {"kernel": "x"}, "param": "gelu-triton-bfloat16-N=65536",
             "extra_info": {"workload": "gelu", "impl": "triton", "dtype": "bfloat16",
                            "shape": "N=65536", "gbps": 123.0, "sol": 0.5, "bound_ms": 0.001,
                            "gpu_name": "NVIDIA H200", "device": "cuda", "l2": "cold",
                            "correct": True},
             "options": {"timer": "perf_counter"}, "stats": stats(data)},
            {"group": None, "name": "test_sort[1000]", "fullname": "t.py::test_sort[1000]",
             "params": {"n": 1000}, "param": "1000", "extra_info": {},
             "options": {"timer": "perf_counter"}, "stats": stats([x * 2 for x in data])},
        ],
        "datetime": "2025-03-04T05:06:09.123456+00:00", "version": "5.1.0",
    }


def run(capsys, *argv):
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_import_turns_benchmarks_into_rows(tmp_path, capsys):
    src = tmp_path / "0001_run.json"
    src.write_text(json.dumps(pytest_benchmark_doc()))
    out = tmp_path / "imported.parquet"
    code, stdout, _ = run(capsys, "import-pytest-benchmark", src, "--out", out)
    assert code == 0 and "wrote 2 rows" in stdout
    df = store.read_file(out)
    assert set(store.COLUMNS) <= set(df.columns)
    ours, foreign = df.iloc[0], df.iloc[1]
    assert (ours["workload"], ours["impl"], ours["dtype"], ours["shape"]) == ("gelu", "triton", "bfloat16", "N=65536")
    assert ours["shape_N"] == 65536 and ours["backend"] == "triton" and ours["l2"] == "cold"
    assert list(df["timer"]) == ["pytest-benchmark"] * 2 and list(df["status"]) == ["ok"] * 2
    assert ours["ms_median"] == pytest.approx(2.15) and ours["n_samples"] == 6
    assert np.allclose(ours["samples_ms"], [2.1, 2.0, 2.3, 2.2, 2.0, 2.5])
    assert ours["ms_p20"] <= ours["ms_median"] <= ours["ms_p80"]
    assert ours["gbps"] == 123.0 and ours["sol"] == 0.5 and ours["gpu_name"] == "NVIDIA H200"
    assert ours["commit"].startswith("0123456") and ours["timestamp"] == "2025-03-04T05:06:09Z"
    assert (foreign["workload"], foreign["impl"]) == ("test_sort", "1000")
    assert foreign["ms_median"] == pytest.approx(4.3) and foreign["gpu_name"] == "Some CPU"


def test_import_without_samples_and_default_path(tmp_path, capsys):
    src = tmp_path / "autosaved.json"
    src.write_text(json.dumps(pytest_benchmark_doc(with_data=False)))
    code, stdout, _ = run(capsys, "import-pytest-benchmark", src, "--results", tmp_path / "res")
    assert code == 0
    (written,) = sorted((tmp_path / "res").rglob("*.parquet"))
    assert written.parent.name == "h200" and written.name == "20250304T050609Z-0123456.parquet"
    df = store.read_file(written)
    assert df["samples_ms"].isna().all() and df["ms_p20"].isna().all()
    assert df["ms_median"].iloc[0] == pytest.approx(2.15)


@pytest.mark.parametrize("content, match", [
    ("{not json", "not readable JSON"),
    ("[1, 2]", "not pytest-benchmark JSON"),
    ('{"benchmarks": [{"name": "x", "stats": {}}]}', "has no stats.median"),
])
def test_import_bad_input_is_exit_2(tmp_path, capsys, content, match):
    src = tmp_path / "bad.json"
    src.write_text(content)
    code, out, err = run(capsys, "import-pytest-benchmark", src, "--out", tmp_path / "x.parquet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and match in err and "bad.json" in err
    code, _, err = run(capsys, "import-pytest-benchmark", tmp_path / "absent.json")
    assert code == 2 and "absent.json: no such file" in err


@pytest.fixture
def runs(tmp_path):
    """Two runs of the same GPU (the newer one slower) plus a failing row."""
    rows = cf.synthetic_rows(n=20)
    old = cf.write(store.to_frame(rows).assign(timestamp="2025-01-01T00:00:00Z"), tmp_path / "r/old.parquet")
    newer = cf.scale_case_all(store.to_frame(rows), 2.0).assign(timestamp="2025-02-01T00:00:00Z",
                                                                commit="b" * 40)
    newer.loc[0, "status"] = "error"
    cf.write(newer, tmp_path / "r/new.parquet")
    return tmp_path / "r", rows, old


def test_github_action_benchmark_format(runs, tmp_path, capsys):
    folder, rows, _ = runs
    code, out, _ = run(capsys, "export", folder, "--format", "github-action-benchmark")
    assert code == 0
    doc = json.loads(out)
    assert isinstance(doc, list) and len(doc) == len(rows) - 1  # the error row is left out
    for e in doc:
        assert set(e) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(e["name"], str) and isinstance(e["unit"], str) and e["unit"] == "ms"
        assert isinstance(e["value"], (int, float)) and math.isfinite(e["value"])
        assert isinstance(e.get("range", ""), str) and isinstance(e.get("extra", ""), str)
        assert e["range"].startswith("± ")
    assert len({e["name"] for e in doc}) == len(doc)
    by_name = {e["name"]: e for e in doc}
    r = rows[1]
    want = f"{r['workload']}/{r['shape']}/{r['dtype']}/{r['impl']}/{r['timer']}"
    assert by_name[want]["value"] == pytest.approx(r["ms_median"] * 2)  # the newer run's row
    assert "commit bbbbbbb" in by_name[want]["extra"] and "SOL" in by_name[want]["extra"]
    # --out writes the same document
    dest = tmp_path / "gab.json"
    assert run(capsys, "export", folder, "--format", "github-action-benchmark", "--out", dest)[0] == 0
    assert json.loads(dest.read_text()) == doc


def test_bencher_metric_format(runs, capsys):
    folder, rows, _ = runs
    code, out, _ = run(capsys, "export", folder, "--format", "bencher")
    assert code == 0
    doc = json.loads(out)
    assert isinstance(doc, dict) and len(doc) == len(rows) - 1
    for name, measures in doc.items():
        assert isinstance(name, str) and name and isinstance(measures, dict) and "latency" in measures
        for slug, metric in measures.items():
            assert isinstance(slug, str) and 0 < len(slug) <= 64
            assert set(metric) <= {"value", "lower_value", "upper_value"} and "value" in metric
            assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metric.values())
        lat = measures["latency"]
        assert lat["lower_value"] <= lat["value"] <= lat["upper_value"]
    r = rows[1]
    name = f"{r['workload']}/{r['shape']}/{r['dtype']}/{r['impl']}/{r['timer']}"
    assert doc[name]["latency"]["value"] == pytest.approx(r["ms_median"] * 2 * 1e6)  # ms -> ns
    assert doc[name]["sol"]["value"] == pytest.approx(r["sol"] / 2)


def test_export_refuses_mixed_gpus_and_filters_by_gpu(runs, tmp_path, capsys):
    folder, rows, _ = runs
    cf.write(store.to_frame(rows).assign(gpu_name="NVIDIA H100"), folder / "h100.parquet")
    code, out, err = run(capsys, "export", folder, "--format", "bencher")
    assert code == 2 and "--gpu" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run(capsys, "export", folder, "--format", "bencher", "--gpu", "h100")
    assert code == 0 and len(json.loads(out)) == len(rows)
    code, _, err = run(capsys, "export", tmp_path / "nothing", "--format", "bencher")
    assert code == 2 and "no such file" in err


def test_export_defaults_to_the_users_runs_then_the_reference_results(runs, tmp_path, capsys, monkeypatch):
    """A user's runs go to runs/: export reads them first, so results/ holding the reference
    runs of another GPU does not make the default refuse."""
    folder, rows, _ = runs
    home = tmp_path / "repo"
    (home / "results").mkdir(parents=True)
    cf.write(store.to_frame(rows).assign(gpu_name="NVIDIA H100"), home / "results" / "h100" / "ref.parquet")
    monkeypatch.chdir(home)
    code, out, _ = run(capsys, "export", "--format", "bencher")
    assert code == 0 and len(json.loads(out)) == len(rows)  # results/ alone: the reference runs
    folder.rename(home / "runs")
    code, out, err = run(capsys, "export", "--format", "bencher")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc) == len(rows) - 1  # the user's newer run, with its error row left out


def test_import_goes_to_runs_and_show_reads_it(tmp_path, capsys, monkeypatch):
    """An imported file has no sizes, no dtype for a foreign benchmark, and CPU rows: show
    prints it (and the folder holding it) instead of failing."""
    src = tmp_path / "0001_run.json"
    src.write_text(json.dumps(pytest_benchmark_doc()))
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = run(capsys, "import-pytest-benchmark", src)
    assert code == 0
    (written,) = sorted((tmp_path / "runs" / "pytest-benchmark").rglob("*.parquet"))
    for target in (written, tmp_path / "runs"):
        code, out, err = run(capsys, "show", target)
        assert code == 0, err
        assert "test_sort" in out and "gelu" in out and "rows by status: ok 2" in out
