"""The runner end to end on the CPU: rows, faults, resume, shards, bad files."""
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from suite import store
from suite.runner import shard
from tests.helpers import ROOT, suite, suite_here

FAULTS = ["fault:raises", "fault:wrong", "fault:nan", "fault:unwritten", "fault:segfault",
          "fault:hang", "fault:picky", "fault:absent"]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "cpu.parquet"
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--backends", "eager,torch",
              "--out", str(out), "--no-progress", "--samples", "3,10")
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r


def test_cpu_run_writes_every_required_column(cpu_run):
    out, r = cpu_run
    df = store.read_file(out)
    assert set(store.REQUIRED) <= set(df.columns)
    assert (df["status"] == "ok").sum() > 50
    ok = df[df["status"] == "ok"]
    assert ok["ms_median"].gt(0).all() and ok["gbps"].gt(0).all() and ok["correct"].all()
    assert (ok["ms_p20"] <= ok["ms_median"]).all() and (ok["ms_median"] <= ok["ms_p80"]).all()
    assert ok["samples_ms"].map(len).ge(3).all()
    assert df["run_id"].nunique() == 1 and (df["timer"] == "wall").all()
    # the card's clock, power and limits are GPU-only: present as columns, empty here
    assert {"sm_clock_mhz", "power_w", "clock_limits"} <= set(df.columns)
    assert ok["sm_clock_mhz"].isna().all() and ok["clock_limits"].isna().all()
    assert set(df["workload"]) == {"gelu", "residual_layernorm_gelu", "softmax", "gemm", "attention"}
    # the attention SDPA variants pinned to GPU kernels are recorded, with their reason
    flash = df[df["impl"] == "torch:flash"]
    assert len(flash) and (flash["status"] == "unavailable").all()
    assert flash["error"].str.contains("CUDA").all()
    assert "best correct implementation" in r.stdout


def test_faults_are_contained_and_every_other_row_is_present(tmp_path):
    out = tmp_path / "faults.parquet"
    # two shapes, one each side of fault:picky's limit: every crash and hang restarts the
    # worker (a torch import), and a hang costs its --timeout, once per case
    r = suite("run", "--device", "cpu", "--workloads", "gelu", "--shape", "N=1823", "--shape", "N=65537",
              "--dtypes", "float32", "--impls", ",".join(["torch"] + FAULTS), "--plugin",
              "tests.fault_impls", "--timeout", "10", "--out", str(out), "--no-progress",
              "--samples", "3,5", "--reuse-ceilings")
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out)
    cases = 2
    assert len(df) == cases * (1 + len(FAULTS))
    st = df.groupby("impl")["status"].agg(lambda s: set(s))
    assert st["torch"] == {"ok"}
    assert st["fault:raises"] == {"error"}
    assert st["fault:wrong"] == {"incorrect"}
    assert st["fault:nan"] == {"incorrect"}
    assert st["fault:unwritten"] == {"incorrect"}
    assert st["fault:segfault"] == {"error"}
    assert st["fault:hang"] == {"error"}
    assert st["fault:picky"] == {"ok", "unsupported"}
    assert st["fault:absent"] == {"unavailable"}
    err = df.set_index("impl")["error"]
    assert err["fault:raises"].str.contains("deliberate failure").all()
    assert err["fault:nan"].str.contains("NaN").all()
    assert err["fault:segfault"].str.contains("SIGSEGV").all()
    assert err["fault:hang"].str.contains("timed out after 10 s").all()
    assert err["fault:picky"].dropna().str.contains("only N < 10000").all()
    assert err["fault:absent"].str.contains("lacks").all()
    source = df.groupby("impl")["impl_source"].agg(set)
    assert source["torch"] == {"builtin"}
    assert all(source[f] == {"plugin:tests.fault_impls"} for f in FAULTS)
    # incorrect rows are never timed
    assert df[df["status"] != "ok"]["ms_median"].isna().all()


CHECK_FAULTS = ["fault:skip-last", "fault:wrong-dtype", "fault:timed-wrong", "fault:zero-row",
                "fault:uniform-row"]


def test_injected_wrong_outputs_end_incorrect_in_every_dtype(tmp_path):
    """An unwritten last element, a wrong dtype, a kernel right only on the checked call,
    one zeroed row and one uniform row: every cpu shape in every dtype ends incorrect
    (save a uniform row of one element, which is the right answer)."""
    out = tmp_path / "checks.parquet"
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--workloads",
              "gelu,softmax,residual_layernorm_gelu", "--impls", ",".join(CHECK_FAULTS), "--plugin",
              "tests.fault_impls", "--timeout", "60", "--out", str(out), "--no-progress",
              "--samples", "3,5", "--reuse-ceilings")
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out)
    assert set(df["dtype"]) == {"float32", "float16", "bfloat16"}
    assert len(df) == 4 * 3 * 3 + 5 * 3 * 2 + 4 * 3  # gelu x 3 faults, softmax x 2, rlg x 1
    right = (df["impl"] == "fault:uniform-row") & (df["shape"] == "M=1,N=1")
    assert (df.loc[right, "status"] == "ok").all()
    wrong = df[~right]
    assert (wrong["status"] == "incorrect").all(), wrong[wrong["status"] != "incorrect"]
    assert wrong["ms_median"].isna().all()
    checks = wrong.groupby("impl")["check"].agg(set)
    assert checks["fault:skip-last"] == {"finite"}
    assert checks["fault:wrong-dtype"] == {"dtype"}
    assert checks["fault:timed-wrong"] == {"timed:normwise"}
    # one row of 1823 in bfloat16 sits near the normwise tolerance; the elementwise test
    # catches what it lets through (one row of 32768: tests/test_verify.py)
    assert checks["fault:zero-row"] | checks["fault:uniform-row"] <= {"normwise", "elementwise"}
    timed = wrong[wrong["impl"] == "fault:timed-wrong"]
    assert timed["error"].str.startswith("the last timed call").all()
    assert "incorrect (dtype)" in r.stdout


def _keys(df):
    return set(map(tuple, df[store.ROW_KEY].astype(str).values))


def test_interrupted_run_resumes_to_the_same_rows(tmp_path):
    # --settle-ms: an idle wait before each measurement keeps the run going for seconds
    # after its first checkpoint, so that the interrupt below lands mid-run on a busy machine
    args = ["run", "--device", "cpu", "--preset", "cpu", "--workloads", "gelu,softmax,gemm", "--dtypes",
            "float32", "--impls", "eager,torch", "--no-progress", "--samples", "3,5", "--budget-ms", "50",
            "--settle-ms", "100"]
    full = tmp_path / "full.parquet"
    assert suite(*args, "--out", str(full)).returncode == 0
    part = tmp_path / "part.parquet"
    # SIGINT restored to its default in the child: a shell that starts the
    # tests in the background hands them SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler.
    proc = subprocess.Popen([sys.executable, "-m", "suite", *args, "--out", str(part)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not part.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "--resume" in err
    partial = store.read_file(part)
    assert 0 < len(partial) < len(store.read_file(full))
    r = suite(*args, "--resume", str(part))
    assert r.returncode == 0, r.stderr[-2000:]
    resumed = store.read_file(part)
    assert _keys(resumed) == _keys(store.read_file(full))
    assert len(resumed) == len(_keys(resumed)), "no case was done twice"
    assert resumed["run_id"].nunique() == 1
    assert "source" not in pd.read_parquet(part).columns, "the reader's column must not be stored back"


def test_resume_keeps_the_runs_filters_seed_and_ceilings(tmp_path):
    """A resumed run finishes the cases it was started with, on the same inputs, scored
    against the ceilings it was started with; a filter that disagrees is refused."""
    full = tmp_path / "full.parquet"
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--workloads", "gelu,softmax", "--impls", "torch",
              "--dtypes", "float32", "--samples", "3,3", "--no-progress", "--reuse-ceilings", "--out", str(full))
    assert r.returncode == 0, r.stderr[-3000:]
    done = store.read_file(full)
    assert done["run_args"].nunique() == 1 and done["ceilings"].nunique() == 1
    # the checkpoint of a run interrupted after its gelu cases
    part = tmp_path / "part.parquet"
    store.write_atomic(done[done["workload"] == "gelu"].drop(columns="source"), part)
    for conflict in (["--workloads", "gemm"], ["--impls", "eager"], ["--seed", "1"]):
        r = suite_here("run", "--resume", str(part), *conflict)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert r.stderr.startswith(f"error: --resume {part}: the run was started with {conflict[0]}")
    r = suite("run", "--resume", str(part), "--no-progress", "--workloads", "softmax,gelu")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "measuring ceilings" not in r.stderr and "the run's own" in r.stderr
    resumed = store.read_file(part)
    assert _keys(resumed) == _keys(done)  # softmax torch float32 and nothing else
    assert resumed["seed"].nunique() == 1 and resumed["seed"].iloc[0] == done["seed"].iloc[0]
    assert resumed["ceilings"].nunique() == 1 and resumed["peak_gbps"].nunique() == 1


def _tiny_run_file(path, run_args):
    """A one-row checkpoint of a gelu run whose recorded options are ``run_args`` (JSON text)."""
    row = {"schema_version": store.SCHEMA_VERSION, "run_id": "tiny", "timestamp": "2026-01-01T00:00:00Z",
           "workload": "gelu", "impl": "torch", "backend": "torch", "dtype": "float32", "shape": "N=7",
           "shape_N": 7, "timer": "wall", "status": "ok", "ms_median": 0.01, "device": "cpu",
           "gpu_name": "CPU", "run_args": run_args}
    return store.write_atomic(store.to_frame([row]), path)


TINY_ARGS = ('{"device": "cpu", "preset": null, "workloads": "gelu", "impls": "torch", "dtypes": "float32", '
             '"timer": "wall", "shape": ["N=5"], "samples": "3,3"}')


def test_resume_refuses_a_folder_before_any_case(tmp_path):
    """A folder would be read by pandas as one dataset, and its first checkpoint could not replace it."""
    part = _tiny_run_file(tmp_path / "runs" / "part.parquet", TINY_ARGS)
    r = suite_here("run", "--resume", str(part.parent), "--reuse-ceilings", "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith(f"error: --resume {part.parent}: a folder; name the run file"), r.stderr


def test_resume_refuses_an_out_naming_another_file(tmp_path):
    """--resume FILE writes back to FILE: an --out naming another file would be ignored."""
    part = _tiny_run_file(tmp_path / "part.parquet", TINY_ARGS)
    other = tmp_path / "other.parquet"
    r = suite_here("run", "--resume", str(part), "--out", str(other), "--reuse-ceilings", "--no-progress")
    assert r.returncode == 2 and not other.exists(), r.stderr[-2000:]
    assert r.stderr.startswith(f"error: --resume {part} writes the run back to that file; leave out --out")
    assert len(store.read_file(part)) == 1


def test_resume_refuses_a_file_with_no_rows(tmp_path):
    """A run is checkpointed only once it has rows: a file with the schema and no row records no
    options to finish, and resuming it would sweep whatever the command line says instead."""
    empty = store.write_atomic(store.to_frame([]), tmp_path / "empty.parquet")
    r = suite_here("run", "--resume", str(empty), "--device", "cpu", "--workloads", "gelu", "--impls", "torch",
                   "--dtypes", "float32", "--shape", "N=5", "--samples", "3,3", "--reuse-ceilings",
                   "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith(f"error: --resume {empty}: the file holds no rows, so there is nothing to "
                               f"resume"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and len(store.read_file(empty)) == 0


def test_resume_of_a_file_whose_run_args_are_not_options(tmp_path):
    """run_args that parse as JSON but are not an object of options count as no record."""
    part = _tiny_run_file(tmp_path / "part.parquet", "[1, 2]")
    r = suite_here("run", "--resume", str(part), "--device", "cpu", "--workloads", "gelu", "--impls", "torch",
                   "--dtypes", "float32", "--shape", "N=5", "--samples", "3,3", "--reuse-ceilings",
                   "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "records no run options" in r.stderr
    assert set(store.read_file(part)["shape"]) == {"N=7", "N=5"}


def test_a_run_goes_to_runs_and_a_cpu_run_is_a_smoke_run(tmp_path):
    """Without --out a run is written under runs/ (ignored by git), readable by others, and
    ends with the command that opens it; a CPU run says it is not scored on a roofline."""
    r = subprocess.run([sys.executable, "-m", "suite", "run", "--device", "cpu", "--workloads", "gelu,gemm",
                        "--impls", "torch", "--dtypes", "float32", "--samples", "3,3", "--no-progress",
                        "--reuse-ceilings"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=lambda: os.umask(0o022))
    assert r.returncode == 0, r.stderr[-3000:]
    (path,) = (tmp_path / "runs").rglob("*.parquet")
    assert path.stat().st_mode & 0o777 == 0o644
    rel = path.relative_to(tmp_path)
    assert r.stderr.strip().splitlines()[-1].endswith(f"-m suite dashboard {rel}")
    assert "CPU run: a smoke run, not scored on a roofline" in r.stderr
    assert "CPU run: a smoke run, not scored on a roofline" in r.stdout
    assert "SMs" not in r.stderr.splitlines()[0]
    df = store.read_file(path)
    assert (df["status"] == "ok").all() and set(df["workload"]) == {"gelu", "gemm"}
    assert df["sol"].isna().all() and df["bound_ms"].isna().all()
    assert df["peak_gbps"].gt(0).all() and df["gbps"].gt(0).all()  # measured, not scored


def test_nothing_runnable_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "never.parquet"
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--workloads", "softmax", "--impls", "triton",
              "--out", str(out), timeout=120, env={"TRITON_INTERPRET": "0"})
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr == ("error: nothing can run on cpu: every selected implementation is unavailable "
                        "(triton: Triton on the CPU needs TRITON_INTERPRET=1)\n")
    assert not out.exists()


def test_shards_are_disjoint_and_cover_the_sweep():
    items = list(range(23))
    parts = [shard(items, f"{k}/4") for k in range(1, 5)]
    assert sorted(sum(parts, [])) == items
    assert all(set(a).isdisjoint(b) for i, a in enumerate(parts) for b in parts[i + 1:])


def test_shard_runs_merge_into_the_whole(tmp_path):
    base = ["run", "--device", "cpu", "--preset", "cpu", "--workloads", "softmax", "--impls", "torch",
            "--dtypes", "float32", "--no-progress", "--samples", "3,3"]
    for k in (1, 2):
        assert suite(*base, "--shard", f"{k}/2", "--out", str(tmp_path / f"s{k}.parquet")).returncode == 0
    df, problems = store.read_runs([str(tmp_path / "s*.parquet")])
    assert not problems
    assert sorted(df["shape"]) == sorted(["M=1,N=1", "M=5,N=3", "M=1823,N=781", "M=4,N=131072", "M=300,N=128"])


def test_corrupt_and_foreign_files_are_named_and_the_rest_loads(tmp_path, cpu_run):
    good, _ = cpu_run
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "good.parquet").write_bytes(good.read_bytes())
    (tmp_path / "runs" / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "runs" / "foreign.parquet")
    df, problems = store.read_runs([tmp_path / "runs"])
    assert len(df) == len(store.read_file(good))
    assert any("broken.parquet" in p and "not a readable Parquet" in p for p in problems)
    assert any("foreign.parquet" in p and "not a kernel-suite results file" in p for p in problems)
    r = suite("show", str(tmp_path / "runs"))
    assert r.returncode == 0 and "broken.parquet" in r.stderr and "best correct" in r.stdout
    r = suite("show", str(tmp_path / "runs" / "broken.parquet"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_atomic_write_leaves_no_temp_files(tmp_path):
    df = store.to_frame([{"workload": "gelu", "impl": "x", "status": "ok", "schema_version": 1}])
    for _ in range(3):
        store.write_atomic(df, tmp_path / "a.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]


def test_written_files_are_readable_by_others(tmp_path):
    """mkstemp creates 0600; a results file is written for sharing, as the umask allows."""
    df = store.to_frame([{"workload": "gelu", "impl": "x", "status": "ok", "schema_version": 1}])
    old = os.umask(0o022)
    try:
        path = store.write_atomic(df, tmp_path / "a.parquet")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_written_files_are_zstd_and_read_back_the_same(tmp_path):
    import pyarrow.parquet as pq

    df = store.to_frame([{"workload": "gemm", "impl": "x", "status": "ok", "schema_version": 1,
                          "ms_median": 0.25, "samples_ms": [0.25, 0.26, 0.24]}])
    path = store.write_atomic(df, tmp_path / "a.parquet")
    meta = pq.ParquetFile(path).metadata
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
    pd.testing.assert_frame_equal(pd.read_parquet(path), df)


def test_default_path_layout():
    p = store.default_path("results", "NVIDIA H200", "2026-11-29T10:15:00Z", "abcdef0123")
    assert p.as_posix() == "results/h200/20261129T101500Z-abcdef0.parquet"
