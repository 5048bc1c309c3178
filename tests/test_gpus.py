"""--gpus on fake devices (KSUITE_FAKE_GPUS: the CPU stands in for N GPUs): the cost
estimate, the schedule, one run file from several workers, per-GPU ceilings, resume."""
import json
import random
from dataclasses import asdict

import pytest

from suite import gpus, scheduling, store
from suite.args import UsageError
from suite.ceilings import Ceilings
from suite.sweep import gpu_slots
from suite.timing import Protocol
from suite.workload import discover
from tests.helpers import suite, suite_here

FAKE = {gpus.FAKE_ENV: "2"}
SMALL = ["--device", "cpu", "--preset", "cpu", "--workloads", "gelu,softmax", "--impls", "eager,torch",
         "--dtypes", "float32", "--samples", "3,3", "--no-progress", "--reuse-ceilings", "--seed", "7"]


def _keys(df):
    return sorted(map(tuple, df[store.ROW_KEY + ["status"]].astype(str).values.tolist()))


# ---------------------------------------------------------------- planning and balancing

def test_the_estimate_puts_big_cases_and_compiled_backends_first():
    reg = discover()
    rates = scheduling.Rates.for_device("cuda", None, "NVIDIA H200")
    p = Protocol()

    def cost(wl, case, impls):
        return scheduling.case_s(reg.workloads[wl], case, impls, rates, p, 1)

    gemm = reg.workloads["gemm"].cases("quick", ["bfloat16"])
    big = max(gemm, key=lambda c: reg.workloads["gemm"].flops(c))
    tiny = min(reg.workloads["gelu"].cases("quick", ["float32"]), key=lambda c: reg.workloads["gelu"].size(c))
    assert cost("gemm", big, ["torch"]) > cost("gelu", tiny, ["torch"])
    for slower, faster in (("compile", "eager"), ("triton", "torch"), ("compile:max-autotune", "compile")):
        assert cost("gelu", tiny, [slower]) > cost("gelu", tiny, [faster])
    # more work at the same fixed overhead costs more; the order is most expensive first
    cases = reg.workloads["gelu"].cases("quick", ["float32"])
    ordered = scheduling.by_cost(cases, lambda c: cost("gelu", c, ["torch"]))
    sizes = [reg.workloads["gelu"].size(c) for c in ordered]
    assert sizes == sorted(sizes, reverse=True)


def test_greedy_beats_round_robin_on_a_sweep_shaped_set():
    # a preset's order: each workload's shapes small to large, a few expensive compiled ones
    rng = random.Random(3)
    costs = [s * f for _ in range(5) for s in (0.1, 0.3, 1.0, 3.0, 10.0) for f in (1, 1, 8)]
    rng.shuffle(costs)
    costs += [40.0, 1.0, 1.0, 1.0] * 4  # round robin puts every expensive one on worker 0
    for workers in (2, 3, 4, 8):
        g = scheduling.makespan(costs, scheduling.greedy(costs, workers))
        rr = scheduling.makespan(costs, scheduling.round_robin(costs, workers))
        lower = max(sum(costs) / workers, max(costs))
        assert g <= rr and g <= 4 / 3 * lower + 1e-9, (workers, g, rr, lower)
    assert scheduling.makespan(costs, scheduling.greedy(costs, 4)) < 0.8 * scheduling.makespan(
        costs, scheduling.round_robin(costs, 4))
    # every item placed once
    placed = sorted(i for w in scheduling.greedy(costs, 3) for i in w)
    assert placed == list(range(len(costs)))


def test_gpus_lists_indices_and_refuses_what_the_host_lacks(monkeypatch):
    monkeypatch.setenv(gpus.FAKE_ENV, "3")
    assert gpus.parse("all", "cpu") == [0, 1, 2]
    assert gpus.parse("0,0", "cpu") == [0, 0]
    assert gpus.parse(None, "cpu") is None
    for bad in ("3", "a", "", "-1"):
        with pytest.raises(UsageError, match="--gpus"):
            gpus.parse(bad, "cpu")
    monkeypatch.delenv(gpus.FAKE_ENV)
    with pytest.raises(UsageError, match="no GPU"):
        gpus.parse("all", "cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert gpus.visible(1) == "7"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus.visible(1) == "1"


def test_a_repeated_index_shares_its_first_slots_ceilings():
    ceil = Ceilings("cpu", "x", "f", 1.0, {"float32": 1.0}, 1.0, 1.0, 1.0, "t", 0.0)
    a, b, c = gpu_slots([0, 0, 1], {1: ceil})
    assert b.leader is a and a.leader is None and c.leader is None
    assert a.ceil is None and c.ceil is ceil
    assert [s.index for s in (a, b, c)] == [0, 0, 1]


# ---------------------------------------------------------------- end to end on the CPU

def _seed_ceilings(cache, figures: dict[str, float]) -> None:
    """Cached ceilings per fake GPU, each with its own copy bandwidth."""
    from suite import environment

    env = environment.collect("cpu")
    data = {}
    for key, gbps in figures.items():
        c = Ceilings("cpu", env["gpu_name"], f"{env['fingerprint']}/{key}", gbps, {"float32": 0.01},
                     gbps, gbps, gbps, "2026-01-01T00:00:00Z", 0.0)
        data[c.fingerprint] = asdict(c)
    (cache / "kernel-suite").mkdir(parents=True)
    (cache / "kernel-suite" / "ceilings.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpus")
    _seed_ceilings(tmp / "cache", {"gpu0": 111.0, "gpu1": 222.0})
    env = dict(FAKE, KSUITE_CACHE_DIR=str(tmp / "cache"))
    out = {}
    for name, extra in (("plain", []), ("two", ["--gpus", "0,1"]), ("shared", ["--gpus", "0,0"])):
        out[name] = tmp / f"{name}.parquet"
        r = suite("run", *SMALL, *extra, "--out", str(out[name]), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    return out, env


def test_two_workers_write_one_run_with_the_rows_of_a_plain_run(runs):
    out, _ = runs
    plain, two, shared = (store.read_file(out[k]) for k in ("plain", "two", "shared"))
    assert _keys(two) == _keys(plain) == _keys(shared)
    assert len(two) == len(set(map(tuple, two[store.ROW_KEY].values.tolist()))), "no case twice"
    assert two["run_id"].nunique() == 1 and two["run_args"].nunique() == 1
    assert set(two["device_index"]) == {0, 1}, "both workers took cases"
    assert set(shared["device_index"]) == {0}
    assert plain["device_index"].isna().all()  # a plain CPU run names no GPU


def test_each_gpus_rows_keep_its_own_ceilings(runs):
    out, _ = runs
    two, shared = store.read_file(out["two"]), store.read_file(out["shared"])
    by_gpu = two.groupby("device_index")["copy_gbps"].agg(set).to_dict()
    assert by_gpu == {0: {111.0}, 1: {222.0}}
    recorded = two.groupby("device_index")["ceilings"].agg(lambda s: {json.loads(x)["copy_gbps"] for x in s})
    assert recorded.to_dict() == {0: {111.0}, 1: {222.0}}
    # two workers on one GPU: the second takes the first's ceilings
    assert set(shared["copy_gbps"]) == {111.0}


def test_a_partial_run_of_two_gpus_resumes_to_the_whole(runs, tmp_path):
    out, env = runs
    whole = store.read_file(out["two"])
    part = tmp_path / "part.parquet"
    store.write_atomic(whole[whole["workload"] == "gelu"].drop(columns="source"), part)
    # --reuse-ceilings: a GPU none of whose rows was kept (the first run's race may have
    # given every gelu case to one worker) loads its cached ceilings instead of measuring
    r = suite("run", "--resume", str(part), "--gpus", "1,0", "--no-progress", "--reuse-ceilings", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "keep the run's own" in r.stderr
    resumed = store.read_file(part)
    assert _keys(resumed) == _keys(whole)
    assert resumed["run_id"].nunique() == 1
    # which worker pulls which of the remaining cases is a race; each row, kept or
    # new, carries the ceilings of the GPU it names
    want = {0: 111.0, 1: 222.0}
    assert (resumed["copy_gbps"] == resumed["device_index"].map(want)).all(), \
        resumed.groupby("device_index")["copy_gbps"].agg(set).to_dict()
    kept = resumed[resumed["workload"] == "gelu"].set_index(store.ROW_KEY)["device_index"].sort_index()
    assert kept.equals(whole[whole["workload"] == "gelu"].set_index(store.ROW_KEY)["device_index"].sort_index())


def test_a_crash_or_a_hang_on_one_gpu_costs_only_its_own_row(tmp_path):
    out = tmp_path / "faults.parquet"
    r = suite("run", "--device", "cpu", "--workloads", "gelu", "--shape", "N=1000", "--shape", "N=3000",
              "--dtypes", "float32", "--impls", "torch,fault:segfault,fault:hang", "--plugin",
              "tests.fault_impls", "--timeout", "10", "--samples", "3,3", "--no-progress",
              "--reuse-ceilings", "--gpus", "0,1", "--out", str(out), env=FAKE)
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out)
    st = df.groupby("impl")["status"].agg(set).to_dict()
    assert st == {"torch": {"ok"}, "fault:segfault": {"error"}, "fault:hang": {"error"}}
    assert len(df) == 6 and df["device_index"].notna().all()


def test_gpus_needs_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.FAKE_ENV, "")
    r = suite_here("run", *SMALL, "--gpus", "0", "--out", str(tmp_path / "x.parquet"))
    assert r.returncode == 2 and "--gpus 0: no GPU to list on cpu" in r.stderr, r.stderr[-2000:]


# ---------------------------------------------------------------- shards of many hosts

@pytest.fixture(scope="module")
def shard_folder(tmp_path_factory):
    """A sweep in three shards, each run as a scheduler's array task would."""
    folder = tmp_path_factory.mktemp("shards")
    for k in (1, 2, 3):
        r = suite("run", "--device", "cpu", "--workloads", "softmax", "--shape", "M=3,N=5",
                  "--shape", "M=7,N=9", "--shape", "M=2,N=33", "--impls", "torch", "--dtypes",
                  "float32", "--samples", "3,3", "--no-progress", "--reuse-ceilings",
                  "--shard", f"{k}/3", "--out", str(folder / f"shard-{k}.parquet"))
        assert r.returncode == 0, r.stderr[-3000:]
    return folder


def test_shards_names_the_missing_and_the_duplicated(shard_folder, tmp_path, capsys):
    from suite.cli import main

    assert main(["shards", str(shard_folder)]) == 0
    assert "in 3 shards (workloads softmax, impls torch, dtypes float32): complete, 3 files" in capsys.readouterr().out
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.parquet").write_bytes((shard_folder / "shard-1.parquet").read_bytes())
    (broken / "b.parquet").write_bytes((shard_folder / "shard-3.parquet").read_bytes())
    (broken / "c.parquet").write_bytes((shard_folder / "shard-3.parquet").read_bytes())
    assert main(["shards", str(broken)]) == 1
    line = capsys.readouterr().out
    assert "missing 2/3" in line and "3/3 held 2 times" in line and "b.parquet" in line and "c.parquet" in line
    # compare refuses the folder, names why, and still takes one shard named on its own
    assert main(["compare", str(shard_folder), str(broken)]) == 2
    assert "CANDIDATE: incomplete shards" in capsys.readouterr().err
    assert main(["compare", str(shard_folder / "shard-3.parquet"), str(broken / "b.parquet")]) == 0
    assert "incomplete" not in capsys.readouterr().err


def test_shards_without_shards_or_with_a_bad_one_is_bad_input(shard_folder, tmp_path, capsys):
    from suite.cli import main

    df = store.read_file(shard_folder / "shard-1.parquet").drop(columns="source")
    store.write_atomic(df.assign(shard=None), tmp_path / "plain" / "x.parquet")
    assert main(["shards", str(tmp_path / "plain")]) == 2
    assert "none with --shard" in capsys.readouterr().err
    store.write_atomic(df.assign(shard="4/3"), tmp_path / "bad" / "x.parquet")
    assert main(["shards", str(tmp_path / "bad")]) == 2
    assert "not one K/N" in capsys.readouterr().err
    assert main(["shards", str(tmp_path / "nothing-here")]) == 2
