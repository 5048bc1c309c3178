"""Parallel extension builds before a sweep: each module in its own process, failures reported."""
import os
import time

from suite import cuda_build


def test_prebuild_runs_modules_in_parallel_and_reports_failures(tmp_path, monkeypatch):
    (tmp_path / "kspb_good_a.py").write_text(
        "import time, pathlib\n"
        f"def ops():\n    time.sleep(1.5); pathlib.Path({str(tmp_path / 'a.done')!r}).write_text('x')\n")
    (tmp_path / "kspb_good_b.py").write_text(
        "import time, pathlib\n"
        f"def ops():\n    time.sleep(1.5); pathlib.Path({str(tmp_path / 'b.done')!r}).write_text('x')\n")
    (tmp_path / "kspb_bad.py").write_text("def ops():\n    raise RuntimeError('nvcc failed')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    built = cuda_build.prebuild(["kspb_good_a", "kspb_good_b", "kspb_bad"])
    elapsed = time.perf_counter() - t0
    assert built["kspb_bad"] is None
    assert built["kspb_good_a"] >= 1.5 and built["kspb_good_b"] >= 1.5
    assert (tmp_path / "a.done").exists() and (tmp_path / "b.done").exists()
    assert elapsed < 2.9, f"the two 1.5 s builds ran one after the other ({elapsed:.1f} s)"


def test_prebuild_kills_a_build_past_its_timeout(tmp_path, monkeypatch):
    (tmp_path / "kspb_slow.py").write_text("import time\ndef ops():\n    time.sleep(30)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    t0 = time.perf_counter()
    assert cuda_build.prebuild(["kspb_slow"], timeout=1.0) == {"kspb_slow": None}
    assert time.perf_counter() - t0 < 10
