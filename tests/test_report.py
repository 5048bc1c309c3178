"""`suite report`: Markdown tables whose every figure comes from the rows given."""
import re

import pandas as pd
import pytest

from suite import store
from suite.report import render
from tests.compare_fixtures import synthetic_rows
from tests.helpers import suite


def _run(tmp_path, rows):
    path = tmp_path / "run.parquet"
    store.write_atomic(store.to_frame(rows), path)
    return path


def test_cells_are_the_rows_rates_and_sol(tmp_path):
    rows = synthetic_rows()
    # one of our own implementations, twice as fast as the library op
    extra = []
    for r in rows:
        if r["impl"] == "torch":
            extra.append({**r, "impl": "triton", "backend": "triton", "ms_median": r["ms_median"] / 2,
                          "gbps": r["gbps"] * 2, "sol": r["sol"] * 2})
    df = store.read_file(_run(tmp_path, rows + extra))
    text = render(df, "T")
    assert text.startswith("# T\n")
    # every GB/s printed for the largest float32 softmax shape is one of its rows' rates
    wl = df[(df["workload"] == "softmax") & (df["dtype"] == "float32")]
    largest = wl.loc[wl["min_bytes"].idxmax(), "shape"]
    sm_line = next(l for l in text.split("### softmax")[1].splitlines() if f"| {largest} |" in l
                   and l.startswith("| float32"))
    printed = [int(x) for x in re.findall(r"\| (\d+) \(", sm_line)]
    expected = sorted(round(g) for g in wl[wl["shape"] == largest]["gbps"])
    assert sorted(printed) == expected
    assert sm_line.rstrip(" |").endswith("2.00")  # ours (triton) vs peer (torch): twice as fast


def test_failed_rows_show_their_status_not_a_rate(tmp_path):
    rows = synthetic_rows()
    for r in rows:
        if r["impl"] == "torch":
            r.update(status="incorrect", ms_median=float("nan"), gbps=float("nan"), sol=float("nan"))
    text = render(store.read_file(_run(tmp_path, rows)), "T")
    assert "incorrect" in text
    assert "nan" not in text.lower()


def test_cli_report_and_bad_input(tmp_path):
    path = _run(tmp_path, synthetic_rows())
    r = suite("report", str(path), "--title", "Results here")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# Results here")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    r = suite("report", str(bad))
    assert r.returncode == 2 and r.stderr.startswith("error:") and len(r.stderr.splitlines()) == 1
    r = suite("report", str(path), "--largest", "0")
    assert r.returncode == 2


@pytest.mark.parametrize("name", ["results-h200.md", "fuzz-h200.md"])
def test_committed_results_document_is_the_reports_output(name):
    """The results documents are printed by `suite report` from the files they name."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = root / "docs" / name
    text = doc.read_text()
    names = re.findall(r"^## `([^`]+\.parquet)`", text, flags=re.M)
    assert names, "the document names no run"
    files = [str(p) for n in names for p in root.glob(f"results/*/{n}")]
    assert len(files) == len(names), "every run the document names is committed under results/"
    title = text.splitlines()[0][2:]
    df, problems = store.read_runs(files)
    assert not problems
    assert render(df, title) == text
    # a page, or for the fuzz runs about a screen a run (each prints its largest case and its summary)
    assert len(text.splitlines()) <= (150 if name == "results-h200.md" else 32 * len(names))
    assert isinstance(df, pd.DataFrame)


def test_a_fuzz_run_gets_a_robustness_table():
    """Over a seeded fuzz run, the report adds each implementation's geomean and worst."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    df, _ = store.read_runs([str(root / "results/h200/20261202T142945Z-d23561e.parquet")])
    text = render(df, "t")
    assert "### robustness over the 24 shapes of seed 1" in text
    row = next(line for line in text.splitlines() if line.startswith("| gemm | triton | bfloat16 | x torch |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "24" and float(cells[6]) < float(cells[5])  # worst below the geomean
    quick, _ = store.read_runs([str(root / "results/h200/20261202T042019Z-13a55e6.parquet")])
    assert "### robustness" not in render(quick, "t")


def test_stored_text_is_escaped_in_the_markdown(tmp_path):
    """Values from a file (implementation, shape, GPU name, commit, status) reach the document
    as their own characters: no link, image or HTML tag, and no extra table cell."""
    rows = [{"schema_version": store.SCHEMA_VERSION, "run_id": "r1", "timestamp": "2026-11-30T00:00:00Z",
             "workload": "softmax", "dtype": "float32", "shape": "M=64,N=100|<b>x</b>", "shape_M": 64,
             "shape_N": 100, "timer": "events", "l2": "cold-clean", "flops": 5 * 6400, "min_bytes": 51200,
             "bound": "memory", "size": 6400, "gpu_name": "![gpu](http://evil.example/b.png)", "device": "cuda",
             "commit": "[c](http://e)", "torch": "2.11", "triton": "3.6", "peak_gbps": 4000.0,
             "impl": impl, "backend": backend, "status": status, "ms_median": 0.01, "gbps": 5.0, "sol": 0.5}
            for impl, backend, status in (("triton:[x](http://evil.example)", "triton", "ok"),
                                          ("torch", "torch", "ok"))]
    text = render(store.to_frame(rows), "t")
    assert "](http" not in text.replace("\\](http", ""), text
    assert "<b>" not in text and "\\<b\\>" in text and "M=64,N=100\\|" in text
    assert "triton:\\[x\\](http://evil.example)" in text and "\\!\\[gpu\\]" in text


def test_a_cpu_runs_rates_are_printed_not_rounded_to_zero(tmp_path):
    """A CPU smoke run moves well under 1 TFLOP/s: its cells and roofs keep two significant
    digits, as show prints them, rather than a row of zeros."""
    base = {"schema_version": store.SCHEMA_VERSION, "run_id": "cpu", "timestamp": "2026-01-01T00:00:00Z",
            "gpu_name": "CPU x86_64", "device": "cpu", "dtype": "float32", "timer": "wall", "l2": "n/a",
            "status": "ok", "commit": "abc1234", "peak_gbps": 0.45, "peak_tflops": 0.0168}
    rows = [dict(base, workload="gemm", impl="torch", backend="torch", bound="compute", shape="M=200,N=300,K=100",
                 size=200 * 300 * 100, ms_median=16.0, tflops=0.00075, gbps=0.028),
            dict(base, workload="softmax", impl="torch", backend="torch", bound="memory", shape="M=1823,N=781",
                 size=1823 * 781, ms_median=8.0, tflops=0.00089, gbps=0.71)]
    text = render(store.read_file(_run(tmp_path, rows)), "T")
    assert "| float32 | M=200,N=300,K=100 | 0.00075 (-) |" in text, text
    assert "| float32 | M=1823,N=781 | 0.71 (-) |" in text, text
    assert "roofs: memory 0.45 GB/s, float32 matmul 0.017 TFLOP/s." in text, text


def test_a_run_file_found_twice_is_two_sections_of_its_own_rows(tmp_path):
    """A run kept in two folders (runs/ and results/, say) is two files of one run_id: each
    is printed as it is, as show does, not merged into one section of twice the rows."""
    base = {"schema_version": store.SCHEMA_VERSION, "run_id": "same", "timestamp": "2026-01-01T00:00:00Z",
            "gpu_name": "NVIDIA H200", "device": "cuda", "dtype": "float32", "timer": "events",
            "l2": "cold-clean", "status": "ok", "commit": "abc1234", "workload": "softmax", "bound": "memory",
            "shape": "M=64,N=100", "size": 6400, "ms_median": 0.01, "gbps": 500.0, "sol": 0.5}
    rows = [dict(base, impl="torch", backend="torch"), dict(base, impl="triton", backend="triton")]
    for folder in ("a", "b"):
        store.write_atomic(store.to_frame(rows), tmp_path / folder / "run.parquet")
    df, problems = store.read_runs([tmp_path])
    assert not problems and len(df) == 4
    text = render(df, "T")
    assert text.count("## `run.parquet`") == 2, text
    assert text.count("2 rows (ok 2)") == 2 and "4 rows" not in text, text
    assert text.count("| float32 | M=64,N=100 | 500 (0.50) | 500 (0.50) | 1.00 |") == 2, text
