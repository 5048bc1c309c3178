"""Nsight Compute on a row: the raw CSV's parsing, the per-call sums, the error paths.

The fixture ``ncu_data/raw_two_kernels_3_calls.csv`` is written in the layout of
``ncu --import R --page raw --csv --print-units base`` (a header of metric
names, a units row, one row per kernel, thousands separators): three calls of
an implementation launching two kernels.  The error paths run a fake ``ncu``
(a small script) through the real subprocess code.
"""
from __future__ import annotations

import math
import stat
import sys
from pathlib import Path

import pytest

from suite import ncu

DATA = Path(__file__).parent / "ncu_data"
FIXTURE = (DATA / "raw_two_kernels_3_calls.csv").read_text()
A = "triton_per_fused_add_native_layer_norm_0"
B = "triton_poi_fused_gelu_1"


def test_the_raw_csv_has_one_dict_per_kernel_in_base_units():
    kernels, errors = ncu.parse_raw_csv(FIXTURE)
    assert errors == []
    assert [k["Kernel Name"] for k in kernels] == [A, B] * 3
    assert kernels[0][ncu.TIME] == 401_000.0  # "401,000" nsecond
    assert kernels[0][ncu.DRAM_BYTES] == 335_544_320.0
    assert kernels[0][ncu.SMEM_DYNAMIC] == 1024.0


def test_a_call_sums_its_kernels_and_names_the_heaviest():
    row = ncu.from_csv(FIXTURE, calls=3, ms_median=0.5)
    assert row["ncu_error"] is None
    assert row["ncu_kernels"] == 2
    assert row["ncu_ms"] == pytest.approx(0.5)  # (1200 + 300) us over three calls
    assert row["ncu_ratio"] == pytest.approx(1.0)
    assert row["ncu_dram_bytes"] == pytest.approx(335_544_320 + 167_772_160)
    assert row["ncu_dram_gbps"] == pytest.approx((335_544_320 + 167_772_160) / 500_000)
    assert row["ncu_local_bytes"] == pytest.approx(8192)
    # duration-weighted: A holds 4/5 of the time
    assert row["ncu_dram_pct"] == pytest.approx(0.8 * 80 + 0.2 * 85)
    assert row["ncu_sm_pct"] == pytest.approx(0.8 * 30 + 0.2 * 20)
    assert row["ncu_occupancy_pct"] == pytest.approx(0.8 * 85 + 0.2 * 90)
    assert row["ncu_l2_hit_pct"] == pytest.approx(0.8 * 20 + 0.2 * 40)
    assert row["ncu_tensor_pct"] == 0
    assert row["ncu_top_kernel"] == A
    assert row["ncu_regs"] == 32 and row["ncu_smem_bytes"] == 1024


def test_tensor_is_the_busier_pipe_and_a_missing_metric_is_skipped():
    kernels = [{"Kernel Name": "k", ncu.TIME: 100.0, ncu.HMMA_PCT: 10.0, ncu.GMMA_PCT: 70.0},
               {"Kernel Name": "j", ncu.TIME: 300.0, ncu.HMMA_PCT: 50.0}]
    row = ncu.summarize(kernels, calls=1, ms_median=math.nan)
    assert row["ncu_tensor_pct"] == pytest.approx((70 * 100 + 50 * 300) / 400)
    assert row["ncu_top_kernel"] == "j"
    assert math.isnan(row["ncu_ratio"]) and math.isnan(row["ncu_dram_pct"])


def test_scaled_units_are_read_in_base_units():
    text = "\n".join([
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","dram__bytes.sum","gpu__time_duration.sum","launch__registers_per_thread"',
        '"","","","","","","","","","","","Mbyte","usecond","register/thread"',
        '"0","1","python3","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","1.50","2.5","40"'])
    row = ncu.from_csv(text, calls=1, ms_median=0.0025)
    assert row["ncu_ms"] == pytest.approx(0.0025)
    assert row["ncu_dram_bytes"] == pytest.approx(1.5e6)
    assert row["ncu_regs"] == 40 and row["ncu_ratio"] == pytest.approx(1.0)


def test_na_values_are_nan_and_no_kernel_is_a_note():
    row = ncu.from_csv(FIXTURE.replace('"20.00"', '"n/a"'), calls=3, ms_median=0.5)
    assert row["ncu_l2_hit_pct"] == pytest.approx(40)  # only B's value is left
    header_only = "\n".join(FIXTURE.splitlines()[:2])
    empty = ncu.from_csv(header_only, calls=3, ms_median=0.5)
    assert empty["ncu_kernels"] == 0 and "no kernel" in empty["ncu_error"]
    assert math.isnan(empty["ncu_ms"])


def _fake_ncu(tmp_path: Path, profiling: str, rc: int = 0, csv: str = FIXTURE) -> str:
    """An ``ncu`` that prints ``profiling`` and exits ``rc`` when asked to profile
    (writing the report named after --export), and prints ``csv`` for --import."""
    (tmp_path / "fixture.csv").write_text(csv)
    (tmp_path / "profiling.txt").write_text(profiling)
    script = tmp_path / "ncu"
    script.write_text(f"""#!{sys.executable}
import sys
from pathlib import Path
here = Path({str(tmp_path)!r})
args = sys.argv[1:]
(here / "argv.txt").write_text("\\n".join(args))
if "--import" in args:
    sys.stdout.write((here / "fixture.csv").read_text())
    sys.exit(0)
Path(args[args.index("--export") + 1] + ".ncu-rep").write_text("report")
sys.stdout.write((here / "profiling.txt").read_text())
sys.exit({rc})
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


SPEC = {"workload": "gelu", "impl": "triton", "calls": 3}


def test_a_profile_keeps_its_report_and_csv_and_asks_for_the_protocol(tmp_path):
    fake = _fake_ncu(tmp_path, "==PROF== Disconnected from process 1\n")
    row = ncu.profile(SPEC, tmp_path / "out", "gelu-triton", 0.5, ncu=fake)
    assert row["ncu_error"] is None and row["ncu_kernels"] == 2
    assert Path(row["ncu_csv"]).read_text() == FIXTURE
    argv = (tmp_path / "argv.txt").read_text().splitlines()  # the last call: --import
    assert argv[0] == "--import" and "--csv" in argv
    assert argv[argv.index("--page") + 1] == "raw" and argv[argv.index("--print-units") + 1] == "base"
    cmd = ncu.command("ncu", ncu.METRICS, tmp_path / "r", SPEC)
    for flag, value in [("--clock-control", "none"), ("--profile-from-start", "off"),
                        ("--metrics", ",".join(ncu.METRICS))]:
        assert cmd[cmd.index(flag) + 1] == value
    assert cmd[-3:-1] == ["-m", "suite.replay"]


def test_ncu_missing_leaves_nan_and_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    row = ncu.profile(SPEC, tmp_path, "x", 0.5)
    assert "ncu not found" in row["ncu_error"] and "/opt/nvidia/nsight-compute" in row["ncu_error"]
    assert all(math.isnan(row[f]) for f in ncu.FIELDS if f != "ncu_top_kernel")


def test_find_ncu_looks_on_path_first(monkeypatch, tmp_path):
    fake = _fake_ncu(tmp_path, "")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ncu.find_ncu() == fake


def test_no_permission_is_one_clear_line(tmp_path):
    fake = _fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                               "NVIDIA GPU Performance Counters on the target device 0.\n", rc=1)
    row = ncu.profile(SPEC, tmp_path / "out", "x", 0.5, ncu=fake)
    assert "ERR_NVGPUCTRPERM" in row["ncu_error"] and "\n" not in row["ncu_error"]
    assert math.isnan(row["ncu_ms"])


def test_a_kernel_that_fails_to_profile_leaves_the_figures_nan(tmp_path):
    fake = _fake_ncu(tmp_path, '==ERROR== Failed to profile "triton_poi_fused_gelu_1" in process 7\n'
                               "==PROF== Trying to shutdown target application\n", rc=0)
    row = ncu.profile(SPEC, tmp_path / "out", "x", 0.5, ncu=fake)
    assert row["ncu_error"].startswith("ncu failed on a kernel") and "triton_poi_fused_gelu_1" in row["ncu_error"]
    assert math.isnan(row["ncu_ms"]) and math.isnan(row["ncu_kernels"])
    assert (tmp_path / "out" / "x.log").read_text().startswith("==ERROR==")


def test_a_failing_replay_is_named_by_its_last_line(tmp_path):
    fake = _fake_ncu(tmp_path, "Traceback ...\nRuntimeError: CUDA out of memory\n", rc=1)
    row = ncu.profile(SPEC, tmp_path / "out", "x", 0.5, ncu=fake)
    assert row["ncu_error"] == "ncu exited with code 1: RuntimeError: CUDA out of memory"


def test_an_unknown_optional_metric_is_dropped_and_retried(tmp_path):
    fake = _fake_ncu(tmp_path, f"==ERROR== Failed to find metric {ncu.GMMA_PCT}\n", rc=1)
    # the fake fails both times (it ignores --metrics); the retry must not ask for the optional one
    ncu.profile(SPEC, tmp_path / "out", "x", 0.5, ncu=fake)
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert ncu.GMMA_PCT not in metrics and ncu.HMMA_PCT in metrics


def test_the_worker_keeps_the_timing_and_status_of_its_rows(monkeypatch):
    torch = pytest.importorskip("torch")
    from suite import worker
    from suite.workload import Case

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    rows = [{"status": "ok", "ms_median": 0.5, "error": None},
            {"status": "suspect", "ms_median": 0.4, "error": "above its roof"},
            {"status": "incorrect", "ms_median": math.nan, "error": "wrong"}]
    before = [dict(r) for r in rows]
    impl = type("Impl", (), {"name": "triton"})()
    opts = worker.Options(device="cuda", timers=("events",), preset="quick", seed=1, peaks_gbps=1.0,
                          peaks_tflops={}, profile="ncu")
    worker._add_ncu(rows, Case.make("gelu", "float32", N=1024), impl, opts, seed=3)
    for r, b in zip(rows, before):
        assert {k: r[k] for k in b} == b  # status, timing and error untouched
    assert "ncu not found" in rows[0]["ncu_error"] and "ncu not found" in rows[1]["ncu_error"]
    assert "ncu_error" not in rows[2]  # not timed: not profiled


def test_profile_ncu_on_the_cpu_is_a_usage_error(capsys):
    pytest.importorskip("torch")
    from suite.cli import main

    assert main(["run", "--device", "cpu", "--preset", "cpu", "--profile", "ncu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile ncu" in err[0] and "CPU" in err[0]


@pytest.mark.parametrize("csv,impl", [("h200_gemm_cuda_bf16_8192_3_calls.csv", "cuda"),
                                      ("h200_attention_torch_bf16_3_calls.csv", "torch")])
def test_recorded_h200_csvs_give_the_figures_the_run_stored(csv, impl):
    """Raw CSVs recorded on an H200 by scripts/profile_targets.sh, parsed again,
    give the ncu columns that run stored (results/h200/20261202T043036Z-3c65596)."""
    import pandas as pd

    root = Path(__file__).resolve().parents[1]
    runs = pd.read_parquet(root / "results/h200/20261202T043036Z-3c65596.parquet")
    workload = csv.split("_")[1]
    stored = runs[(runs.workload == workload) & (runs.impl == impl)].iloc[0]
    got = ncu.from_csv((DATA / csv).read_text(), calls=3, ms_median=float(stored.ms_median))
    for col in ("ncu_kernels", "ncu_ms", "ncu_ratio", "ncu_dram_bytes", "ncu_dram_pct", "ncu_sm_pct",
                "ncu_tensor_pct", "ncu_occupancy_pct", "ncu_l2_hit_pct", "ncu_regs", "ncu_local_bytes"):
        assert got[col] == pytest.approx(float(stored[col]), rel=1e-9), col
    assert got["ncu_top_kernel"] == stored.ncu_top_kernel and got["ncu_kernels"] == 1
