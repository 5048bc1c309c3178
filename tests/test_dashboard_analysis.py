"""dashboard/analysis.py on small hand-made frames: each rule, checked by value."""
import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")

from dashboard import analysis, data  # noqa: E402
from dashboard.analysis import Filters  # noqa: E402
from suite import store  # noqa: E402

BASE = {"schema_version": 1, "run_id": "r1", "timestamp": "2025-06-01T00:00:00Z", "gpu_name": "NVIDIA H200",
        "gpu_slug": "h200", "commit": "aaaaaaa", "timer": "events", "dtype": "float32", "status": "ok",
        "workload": "softmax", "backend": None, "peak_gbps": 4000.0, "peak_tflops": 50.0}


def frame(*rows: dict) -> pd.DataFrame:
    full = []
    for r in rows:
        r = {**BASE, **r}
        r.setdefault("backend", str(r["impl"]).split(":")[0])
        r["backend"] = r["backend"] or str(r["impl"]).split(":")[0]
        full.append(r)
    return data.derive(store.to_frame(full).assign(source="mem"))


def case(impl, shape, size, ms, **kw):
    return {"impl": impl, "shape": shape, "size": size, "ms_median": ms, **kw}


def test_select_runs_defaults_to_newest_per_gpu():
    runs = pd.DataFrame({"run_id": ["c", "b", "a", "z"], "gpu": ["h200", "h100", "h200", "h100"],
                         "commit": ["3", "2", "1", "1"]})  # newest first
    assert analysis.select_runs(runs, Filters()) == ["c", "b"]
    assert analysis.select_runs(runs, Filters(commit=("1",))) == ["a", "z"]
    assert analysis.select_runs(runs, Filters(run=("a", "b"))) == ["b", "a"]
    assert analysis.select_runs(runs, Filters(run=("a",), gpu=("h100",))) == []


def test_default_runs_cover_each_workload_with_its_newest_run():
    # newest first: a later gemm-only run must not hide the full sweep's other workloads
    runs = pd.DataFrame({"run_id": ["g16", "quick", "old", "h1"], "gpu": ["h200", "h200", "h200", "h100"],
                         "commit": ["3", "2", "1", "1"],
                         "workloads": [("gemm",), ("gelu", "gemm"), ("gelu", "softmax"), ("gelu",)]})
    assert analysis.select_runs(runs, Filters()) == ["g16", "quick", "old", "h1"]
    rows = pd.DataFrame({"run_id": ["g16", "quick", "quick", "old", "old", "h1"],
                         "gpu": ["h200", "h200", "h200", "h200", "h200", "h100"],
                         "workload": ["gemm", "gelu", "gemm", "gelu", "softmax", "gelu"]})
    kept = analysis.newest_per_workload(rows, ["g16", "quick", "old", "h1"])
    assert list(zip(kept["run_id"], kept["workload"])) == [
        ("g16", "gemm"), ("quick", "gelu"), ("old", "softmax"), ("h1", "gelu")]
    # Fusion's rows: the newest run that has eager rows for the workload, where one does
    rows_e = rows.assign(impl=["triton", "triton", "cuda", "eager", "eager", "eager"])
    kept_e = analysis.newest_per_workload(rows_e, ["g16", "quick", "old", "h1"], having="eager")
    assert list(zip(kept_e["run_id"], kept_e["workload"])) == [
        ("g16", "gemm"), ("old", "gelu"), ("old", "softmax"), ("h1", "gelu")]
    # widest: each workload from the newest of its runs with the most implementations, so a later
    # one-backend experiment (g16's gemm) does not hide a wider run; among equals, the newest
    kept_w = analysis.newest_per_workload(rows_e, ["g16", "quick", "old", "h1"], widest=True)
    assert sorted(set(zip(kept_w["run_id"], kept_w["workload"]))) == [
        ("g16", "gemm"), ("h1", "gelu"), ("old", "softmax"), ("quick", "gelu")]
    rows_w = pd.concat([rows_e, rows_e.iloc[[2]].assign(impl="torch")], ignore_index=True)
    kept_w = analysis.newest_per_workload(rows_w, ["g16", "quick", "old", "h1"], widest=True)
    assert sorted(set(zip(kept_w["run_id"], kept_w["workload"]))) == [
        ("h1", "gelu"), ("old", "softmax"), ("quick", "gelu"), ("quick", "gemm")]
    # (implementation, dtype) pairs count: a newer run of the same implementations in one dtype of
    # the two is narrower
    rows_d = pd.concat([rows_w.assign(dtype="bfloat16"), rows_w.iloc[[2, 6]].assign(dtype="float32")],
                       ignore_index=True)
    rows_d.loc[rows_d["run_id"] == "g16", "impl"] = "cuda"
    rows_d = pd.concat([rows_d, rows_d[rows_d["run_id"] == "g16"].assign(impl="torch")], ignore_index=True)
    kept_d = analysis.newest_per_workload(rows_d, ["g16", "quick", "old", "h1"], widest=True)
    assert ("quick", "gemm") in set(zip(kept_d["run_id"], kept_d["workload"]))
    assert analysis.newest_per_workload(rows_d.assign(dtype="bfloat16"), ["g16", "quick", "old", "h1"],
                                        widest=True).query("workload == 'gemm'")["run_id"].unique().tolist() == ["g16"]
    # with the runs' widths (implementations a workload), the default is each workload's newest widest
    # run: g16's narrow gemm run gives way to quick's, old is kept for softmax; a GPU whose only run
    # holds no rows (h2) still gets it
    runs_w = pd.concat([runs.assign(widths=[(("gemm", 1),), (("gelu", 2), ("gemm", 3)),
                                            (("gelu", 3), ("softmax", 2)), (("gelu", 1),)]),
                        pd.DataFrame({"run_id": ["e"], "gpu": ["h2"], "commit": ["1"], "workloads": [()],
                                      "widths": [()]})], ignore_index=True)
    assert analysis.select_runs(runs_w, Filters()) == ["quick", "old", "h1", "e"]
    assert analysis.select_runs(runs_w.assign(widths=[(("gemm", 3),)] + list(runs_w["widths"][1:])),
                                Filters()) == ["g16", "old", "h1", "e"]  # a tie: the newest; quick wins nothing
    # a run that adds nothing new is left out
    runs2 = runs.assign(workloads=[("gemm",), ("gemm",), ("gemm",), ("gelu",)])
    assert analysis.select_runs(runs2, Filters()) == ["g16", "h1"]


def test_narrow_and_ok_keep_failures_out():
    df = frame(case("eager", "N=1", 1, 2.0), case("triton", "N=1", 1, 1.0, status="incorrect"),
               case("cuda", "N=1", 1, None, status="error", error="boom"),
               case("cuda", "N=1", 1, 1.0, dtype="float16"))
    assert list(analysis.ok(df)["impl"]) == ["eager", "cuda"]
    bad = analysis.not_ok(df)
    assert list(bad["status"]) == ["incorrect", "error"] and bad["error"].iloc[1] == "boom"
    assert list(analysis.narrow(df, Filters(dtype=("float16",)))["impl"]) == ["cuda"]


def test_best_table_at_largest_shape_with_speedups():
    df = frame(case("eager", "small", 10, 1.0), case("triton", "small", 10, 0.1),
               case("eager", "big", 100, 8.0), case("torch", "big", 100, 4.0, sol=0.5),
               case("triton", "big", 100, 2.0, sol=0.9),
               case("cuda", "big", 100, 1.0, sol=1.0, status="incorrect"))
    best = analysis.best_table(df)
    assert len(best) == 1
    b = best.iloc[0]
    assert (b["best"], b["shape"], b["ms"], b["sol"]) == ("triton", "big", 2.0, 0.9)
    assert b["vs_eager"] == pytest.approx(4.0) and b["vs_torch"] == pytest.approx(2.0)


def test_best_table_without_eager_says_nan():
    best = analysis.best_table(frame(case("torch", "s", 1, 1.0, workload="gemm")))
    assert math.isnan(best["vs_eager"].iloc[0]) and best["vs_torch"].iloc[0] == 1.0


def test_sol_matrix_shows_status_of_failed_cells():
    df = frame(case("triton", "big", 100, 1.0, sol=0.8), case("cuda", "big", 100, None, status="error"),
               case("triton", "small", 1, 1.0, sol=0.1))
    sol, status = analysis.sol_matrix(df, "float32", "h200")
    assert sol.loc["softmax", "triton"] == 0.8 and np.isnan(sol.loc["softmax", "cuda"])
    assert status.loc["softmax", "cuda"] == "error" and status.loc["softmax", "triton"] == ""
    # the cells' case: the largest shape with an ok row, the one a click opens
    assert analysis.sol_shapes(df, "float32", "h200").to_dict() == {"softmax": "big"}


def test_overview_tables_take_each_run_of_a_gpu_apart():
    # two runs of one GPU chosen: r2 timed eager faster and triton slower (another clock, say);
    # a best-of or SOL over both would set r1's triton against r2's eager
    r1 = {"run_id": "r1", "commit": "1111111", "timestamp": "2025-06-01T00:00:00Z"}
    r2 = {"run_id": "r2", "commit": "2222222", "timestamp": "2025-06-02T00:00:00Z"}
    df = frame(case("eager", "big", 100, 2.0, sol=0.2, **r1), case("triton", "big", 100, 1.0, sol=0.5, **r1),
               case("eager", "big", 100, 1.5, sol=0.3, **r2), case("triton", "big", 100, 1.2, sol=0.9, **r2),
               case("triton", "small", 10, 0.1, sol=0.1, **r2))
    best = analysis.best_table(df).set_index("run")
    assert list(best.index) == ["1111111", "2222222"]
    assert best.loc["1111111", "vs_eager"] == pytest.approx(2.0)
    assert best.loc["2222222", "vs_eager"] == pytest.approx(1.25) and best.loc["2222222", "ms"] == 1.2
    assert analysis.sol_runs(df, "h200") == ["r2", "r1"]  # newest first
    for run, want in (("r1", 0.5), ("r2", 0.9)):
        sol, _ = analysis.sol_matrix(df, "float32", "h200", run)
        assert sol.loc["softmax", "triton"] == want
        assert analysis.sol_shapes(df, "float32", "h200", run).to_dict() == {"softmax": "big"}
    # one run of each (GPU, workload): no run column to fill, no run to choose
    one = df[df["run_id"] == "r1"]
    assert set(analysis.best_table(one)["run"]) == {""} and analysis.sol_runs(one, "h200") == []
    other = pd.concat([one, frame(case("triton", "big", 100, 1.0, workload="gelu", **r2))])
    assert set(analysis.best_table(other)["run"]) == {""} and analysis.sol_runs(other, "h200") == []


def test_pass_rate_leaves_unsupported_out_of_the_denominator():
    df = frame(case("t", "a", 1, 1.0), case("t", "b", 1, 1.0, status="incorrect"),
               case("t", "c", 1, None, status="unsupported"), case("t", "d", 1, None, status="unavailable"))
    pr = analysis.pass_rate(df).set_index("impl")
    assert pr.loc["t", "pass_rate"] == 0.5
    assert pr.loc["t", ["ok", "incorrect", "error", "unsupported", "unavailable"]].tolist() == [1, 1, 0, 1, 1]


def test_fusion_table_predicted_and_measured():
    kw = {"eager_bytes": 11.0, "min_bytes": 2.0}
    df = frame(case("eager", "s", 1, 5.5, **kw), case("triton", "s", 1, 1.1, **kw),
               case("cuda", "s", 1, 0.5, status="incorrect", **kw),
               case("torch", "s", 1, 1.0, workload="gemm", eager_bytes=3.0, min_bytes=3.0))
    ft = analysis.fusion_table(df)
    assert list(ft["impl"]) == ["triton"]
    r = ft.iloc[0]
    assert r["predicted"] == pytest.approx(5.5) and r["measured"] == pytest.approx(5.0)
    assert r["reached"] == pytest.approx(5.0 / 5.5)
    assert analysis.no_eager(df) == ["gemm"]


def test_compare_ratios_verdicts_and_failures():
    base = frame(case("a", "s", 1, 1.0, sol=0.5), case("b", "s", 1, 1.0, sol=0.5),
                 case("c", "s", 1, 1.0, sol=0.5), case("d", "s", 1, 1.0),
                 case("e", "s", 1, 1.0))
    cand = frame(case("a", "s", 1, 1.2, sol=0.4), case("b", "s", 1, 0.8, sol=0.6),
                 case("c", "s", 1, 1.02, sol=0.49), case("d", "s", 1, None, status="error"),
                 case("f", "s", 1, 1.0))
    cmp = analysis.compare(base, cand, analysis.ROW_KEY, "time", 0.05)
    t = cmp.table.set_index("impl")
    assert t.loc["a", "speedup"] == pytest.approx(1 / 1.2) and t.loc["a", "verdict"] == "regression"
    assert t.loc["b", "speedup"] == pytest.approx(1.25) and t.loc["b", "verdict"] == "improvement"
    assert t.loc["c", "verdict"] == "same"
    assert list(cmp.failed["impl"]) == ["d"] and cmp.failed["status_cand"].iloc[0] == "error"
    assert (cmp.only_base, cmp.only_cand) == (1, 1)
    sol = analysis.compare(base, cand, analysis.ROW_KEY, "sol", 0.05).table.set_index("impl")
    assert sol.loc["a", "speedup"] == pytest.approx(0.8) and sol.loc["b", "speedup"] == pytest.approx(1.2)


def test_compare_takes_the_newest_row_per_case():
    base = frame(case("a", "s", 1, 1.0, timestamp="2025-01-01T00:00:00Z"),
                 case("a", "s", 1, 2.0, timestamp="2025-02-01T00:00:00Z", run_id="r2"))
    cand = frame(case("a", "s", 1, 1.0))
    assert analysis.compare(base, cand, analysis.ROW_KEY).table["speedup"].iloc[0] == pytest.approx(2.0)


def test_compare_leaves_out_cases_timed_under_another_l2():
    base = frame(case("a", "s", 1, 1.0, l2="cold-flush"), case("b", "s", 1, 1.0, l2="cold-flush"),
                 case("c", "s", 1, 1.0))
    cand = frame(case("a", "s", 1, 0.9, l2="cold-clean"), case("b", "s", 1, 0.5, l2="cold-flush"),
                 case("c", "s", 1, 0.5))
    cmp = analysis.compare(base, cand, analysis.ROW_KEY)
    assert list(cmp.table["impl"]) == ["b", "c"]  # c: no l2 on either side, as in old files
    assert cmp.other_l2[["impl", "l2_base", "l2_cand"]].values.tolist() == [["a", "cold-flush", "cold-clean"]]
    assert (cmp.only_base, cmp.only_cand) == (0, 0)


def test_history_keeps_each_l2_apart():
    df = frame(case("t", "s", 1, 2.0, commit="c1", timestamp="2025-01-01T00:00:00Z", l2="cold-flush"),
               case("t", "s", 1, 1.8, commit="c2", timestamp="2025-02-01T00:00:00Z", run_id="2", l2="cold-clean"),
               case("t", "s", 1, 1.9, commit="c2", timestamp="2025-02-01T00:00:01Z", run_id="3", l2="cold-flush"))
    h = analysis.history(df, {"workload": "softmax", "impl": "t"}, "ms_median")
    assert h[["l2", "commit", "ms_median"]].values.tolist() == [["cold-clean", "c2", 1.8], ["cold-flush", "c1", 2.0],
                                                              ["cold-flush", "c2", 1.9]]


def test_history_orders_commits_and_gaps_failures():
    df = frame(case("t", "s", 1, 3.0, commit="c3", timestamp="2025-03-01T00:00:00Z", run_id="3"),
               case("t", "s", 1, 1.0, commit="c1", timestamp="2025-01-01T00:00:00Z", run_id="1"),
               case("t", "s", 1, None, commit="c2", timestamp="2025-02-01T00:00:00Z", run_id="2",
                    status="error"),
               case("t", "s", 1, 9.0, commit="c1", timestamp="2025-01-02T00:00:00Z", run_id="x",
                    gpu_slug="h100", gpu_name="NVIDIA H100"))
    h = analysis.history(df, {"workload": "softmax", "impl": "t"}, "ms_median")
    h200 = h[h["gpu"] == "h200"]
    assert list(h200["commit"]) == ["c1", "c2", "c3"] and list(h200["order"]) == [0, 1, 2]
    assert h200["ms_median"].iloc[0] == 1.0 and np.isnan(h200["ms_median"].iloc[1])
    assert list(h[h["gpu"] == "h100"]["ms_median"]) == [9.0]


def test_with_series_names_timer_and_gpu_only_when_they_vary():
    one = analysis.with_series(frame(case("t", "s", 1, 1.0)))
    assert list(one["series"]) == ["t"]
    two = analysis.with_series(frame(case("t", "s", 1, 1.0), case("t", "s", 1, 1.0, timer="graph",
                                                                   gpu_slug="h100")))
    assert list(two["series"]) == ["t [events] · h200", "t [graph] · h100"]
    # several runs of one GPU: each run's commit, and its time where two runs share a commit
    runs = analysis.with_series(frame(case("t", "s", 1, 1.0), case("t", "s", 1, 2.0, run_id="r2", commit="bbbbbbb")))
    assert list(runs["series"]) == ["t · aaaaaaa", "t · bbbbbbb"]
    seeds = analysis.with_series(frame(case("t", "s", 1, 1.0), case("t", "s", 1, 2.0, run_id="r2",
                                                                     timestamp="2025-06-02T08:00:00Z")))
    assert list(seeds["series"]) == ["t · aaaaaaa 2025-06-01 00:00", "t · aaaaaaa 2025-06-02 08:00"]


def test_suspects_and_roofs():
    df = frame(case("t", "s", 1, 1.0, sol=1.3), case("u", "s", 1, 1.0, sol=0.9),
               case("v", "s", 1, 1.0, sol=2.0, status="incorrect"),
               case("u", "s", 1, 1.0, dtype="bfloat16", peak_tflops=700.0))
    assert list(analysis.suspects(df)["impl"]) == ["t"]
    # a CPU run is a smoke run: its cache-resident rows beat the copy rate and are not suspects
    cpu = frame(case("t", "s", 1, 1.0, sol=6.28, device="cpu", run_id="c"), case("t", "s", 1, 1.0, sol=1.3))
    assert list(analysis.suspects(cpu)["run_id"]) == ["r1"]
    bw, tf = analysis.roofs(df)
    assert bw == 4000.0 and tf == {"bfloat16": 700.0, "float32": 50.0}
    # a suspect row is listed with its reason; tf32 rows get a roof of their own, and
    # the slope is the copy bandwidth where rows carry it beside their mix's roof
    df = frame(case("t", "s", 1, 1.0, sol=1.1, status="suspect", error="SOL 1.100 > 1.02"),
               case("u", "s", 1, 1.0, math="tf32", peak_tflops=400.0, peak_gbps=4400.0, copy_gbps=4200.0),
               case("v", "s", 1, 1.0, peak_gbps=4600.0, copy_gbps=4200.0))
    assert list(analysis.suspects(df)["impl"]) == ["t"] and not len(analysis.ok(df[df["impl"] == "t"]))
    bw, tf = analysis.roofs(df)
    assert bw == 4200.0 and tf == {"float32": 50.0, "tf32": 400.0}


def test_ok_rows_beyond_the_roof_are_never_shown_as_fast():
    # a run older than the ``suspect`` status wrote "ok" above the roofline: the Overview
    # lists it as a suspect, and no best-of, chart, case ranking or SOL cell takes it as fast
    df = frame(case("triton", "big", 100, 1.0, sol=1.03, device="cuda"),
               case("torch", "big", 100, 2.0, sol=0.52, device="cuda"),
               case("torch", "small", 1, 1.0, sol=0.1, device="cuda"))
    assert list(analysis.suspects(df)["impl"]) == ["triton"]
    assert "triton" not in set(analysis.ok(df)["impl"])
    assert list(analysis.best_table(df)["best"]) == ["torch"]
    assert list(analysis.case_table(df[df["shape"] == "big"])["impl"]) == ["torch"]
    sol, status = analysis.sol_matrix(df, "float32", "h200")
    assert np.isnan(sol.loc["softmax", "triton"]) and status.loc["softmax", "triton"] == "suspect"
    # nor does Compare compare it, or History plot it: each lists it as suspect
    cand = df.assign(run_id="r2", timestamp="2025-06-02T00:00:00Z", ms_median=df["ms_median"] * 0.9)
    cmp = analysis.compare(df, cand, analysis.ROW_KEY)
    assert set(cmp.table["impl"]) == {"torch"}
    assert list(cmp.failed[["impl", "status_base", "status_cand"]].iloc[0]) == ["triton", "suspect", "suspect"]
    h = analysis.history(pd.concat([df, cand]), {"impl": "triton", "shape": "big"}, "ms_median")
    assert h["ms_median"].isna().all() and set(h["status"]) == {"suspect"}
    # a CPU run is a smoke run, not held to a roofline: its rows stay measurements
    cpu = df.assign(device="cpu")
    assert "triton" in set(analysis.ok(cpu)["impl"])


def test_default_pair_skips_options_with_no_case_in_common():
    # newest first: "c" shares nothing with anyone (another preset), "b" shares with "a"
    df = frame(case("eager", "x", 1, 1.0, run_id="c"), case("eager", "y", 1, 1.0, run_id="b"),
               case("eager", "z", 1, 1.0, run_id="b"), case("eager", "y", 1, 2.0, run_id="a"),
               case("eager", "x", 1, 1.0, run_id="a", status="error"))
    assert analysis.default_pair(df, "run_id", ["c", "b", "a"], store.ROW_KEY) == (1, 2)
    assert analysis.default_pair(df, "run_id", ["c", "z"], store.ROW_KEY) == (0, 1)
    # "n" shares case y with "b" and "a", but timed with another l2: b against a first
    l2s = pd.concat([df, frame(case("eager", "y", 1, 1.0, run_id="n", l2="cold-clean"))])
    assert analysis.default_pair(l2s, "run_id", ["n", "c", "b", "a"], store.ROW_KEY) == (2, 3)
    # the newest run's partner is found behind more unrelated runs than the limit
    far = pd.concat([df] + [frame(case("eager", f"u{i}", 1, 1.0, run_id=f"u{i}")) for i in range(3)]
                    + [frame(case("eager", "x", 1, 1.0, run_id="new"))])
    assert analysis.default_pair(far, "run_id", ["new", "u0", "u1", "u2", "c"], store.ROW_KEY, limit=2) == (0, 4)


def test_richest_case_counts_commits_with_ok_rows():
    df = frame(case("eager", "x", 1, 1.0), case("eager", "y", 1, 1.0),
               case("eager", "y", 1, 1.0, commit="bbbbbbb"),
               case("eager", "x", 1, 1.0, commit="ccccccc"), case("eager", "x", 1, 1.0, commit="ddddddd",
                                                                 status="incorrect"))
    per = analysis.richest_case(df, ["workload", "shape"])
    assert list(per.items()) == [(("softmax", "x"), 2), (("softmax", "y"), 2)]
    df = frame(case("eager", "y", 1, 1.0, commit="bbbbbbb"), case("eager", "y", 1, 1.0),
               case("eager", "x", 1, 1.0))
    assert analysis.richest_case(df, ["workload", "shape"]).index[0] == ("softmax", "y")


def test_family_key_splits_shapes_that_share_a_size():
    def att(causal, s, b, **kw):
        shape = f"B={b},S={s},causal={causal}"
        return case("eager", shape, b * s, 1.0, workload="attention", shape_B=b, shape_S=s,
                    shape_causal=causal, **kw)

    df = frame(att(0, 512, 4), att(0, 1024, 4), att(1, 512, 4), att(1, 1024, 4), att(1, 8192, 1))
    assert analysis.shares_sizes(df)
    assert analysis.family_key(df) == "shape_causal"
    # a family of one shape is no line to draw: no key then
    df = frame(att(0, 512, 4), att(1, 512, 4), att(1, 1024, 4))
    assert analysis.shares_sizes(df) and analysis.family_key(df) is None
    assert not analysis.shares_sizes(frame(att(0, 512, 4), att(0, 1024, 4)))


def test_roofs_name_every_math_mode_and_harness_rows_stay_off():
    import json as _json

    ceil = _json.dumps({"matmul_tflops": {"float32": 51.0, "tf32": 406.0, "bfloat16": 786.0}})
    rows = pd.DataFrame({
        "impl": ["torch", "triton:tf32", "torch", "copy"], "backend": ["torch", "triton", "torch", "harness"],
        "dtype": ["float32", "float32", "bfloat16", "float32"], "math": [None, None, None, None],
        "peak_tflops": [51.0, 51.0, 786.0, 51.0], "peak_gbps": [4200.0] * 4,
        "intensity": [100.0, 100.0, 300.0, 4.7e-10], "ceilings": [ceil] * 4})
    bw, tf = analysis.roofs(rows)
    assert tf == {"float32": 51.0, "tf32": 406.0, "bfloat16": 786.0}
    assert list(analysis.kernel_rows(rows)["impl"]) == ["torch", "triton:tf32", "torch"]


def test_case_table_energy_is_the_rows_own_else_power_times_time():
    base = {"workload": "gemm", "shape": "M=N=K=4096", "dtype": "bfloat16", "gpu": "h200", "timer": "events",
            "status": "ok", "bound": "compute", "ms_p20": 0.9, "ms_p80": 1.1, "gbps": 1.0, "tflops": 100.0,
            "sol": 0.5, "flops": 1.4e11, "min_bytes": 1e8, "power_w": 500.0, "sm_clock_mhz": 1755.0}
    df = pd.DataFrame([dict(base, impl="torch", ms_median=1.0, energy_j=0.4, gflops_per_j=350.0, gb_per_j=0.25),
                       dict(base, impl="triton", ms_median=2.0, energy_j=np.nan, gflops_per_j=np.nan,
                            gb_per_j=np.nan),
                       dict(base, impl="cuda", ms_median=3.0, power_w=np.nan, energy_j=np.nan)])
    t = analysis.case_table(df).set_index("impl")
    assert t.loc["torch", "energy_j"] == 0.4 and t.loc["torch", "energy_from"] == analysis.ENERGY_BURST
    assert t.loc["triton", "energy_j"] == pytest.approx(1.0)  # 500 W x 2 ms
    assert t.loc["triton", "energy_from"] == analysis.ENERGY_ESTIMATE
    assert np.isnan(t.loc["cuda", "energy_j"]) and t.loc["cuda", "energy_from"] == ""
    # compute-bound: GFLOP/J, the row's own, else its FLOPs over the energy shown
    assert set(t["per_j_unit"]) == {"GFLOP/J"}
    assert t.loc["torch", "per_j"] == 350.0 and t.loc["triton", "per_j"] == pytest.approx(140.0)
    mem = analysis.case_table(df.assign(bound="memory")).set_index("impl")
    assert set(mem["per_j_unit"]) == {"GB/J"} and mem.loc["torch", "per_j"] == 0.25
    assert mem.loc["triton", "per_j"] == pytest.approx(0.1)
    # a file from before energy was recorded: power x time throughout
    old = analysis.case_table(df.drop(columns=["energy_j", "gflops_per_j", "gb_per_j"])).set_index("impl")
    assert old.loc["torch", "energy_j"] == pytest.approx(0.5) and old.loc["torch", "energy_from"] == analysis.ENERGY_ESTIMATE


def test_an_untimed_row_has_no_l2_to_differ():
    """An unsupported row carries no l2 (it never timed): it is a failed case, not
    one left out for its protocol."""
    base = frame(case("a", "s", 1, None, status="unsupported", l2=None), case("b", "s", 1, 1.0, l2="cold-clean"))
    cand = frame(case("a", "s", 1, 1.0, l2="cold-clean"), case("b", "s", 1, 0.9, l2="cold-clean"))
    cmp = analysis.compare(base, cand, analysis.ROW_KEY)
    assert list(cmp.table["impl"]) == ["b"] and cmp.other_l2.empty
    assert cmp.failed[["impl", "status_base", "status_cand"]].values.tolist() == [["a", "unsupported", "ok"]]
