"""dashboard/data.py: what is loaded from which paths, and what is refused."""
import json

import pandas as pd
import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")

import fixtures_dashboard as fx  # noqa: E402
from dashboard import data  # noqa: E402
from suite import store  # noqa: E402


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return fx.write_fixture_tree(tmp_path_factory.mktemp("dash"))


def _same(a: pd.Series, b: pd.Series) -> bool:
    na, nb = a.isna().to_numpy(), b.isna().to_numpy()
    return bool((na == nb).all() and (a[~na].astype(object).to_numpy() == b[~nb].astype(object).to_numpy()).all())


def test_read_matches_store_read_runs(tree):
    ours, p1 = data.read([tree["results"]])
    theirs, p2 = store.read_runs([tree["results"]])
    assert p1 == p2 == []
    # the old H200 run has two timers, the others one
    assert len(ours) == len(theirs) == 4 * len(fx.make_run())
    assert "samples_ms" not in ours.columns
    for col in theirs.columns.drop("samples_ms"):
        assert _same(ours[col], theirs[col]), col
        if col in store.COLUMNS and pd.api.types.is_numeric_dtype(theirs[col]):
            assert ours[col].dtype == theirs[col].dtype, col


def test_corrupt_file_is_named_and_the_rest_loads(tree):
    loaded = data.build([str(tree["results"]), str(tree["corrupt"])])
    assert len(loaded.problems) == 1 and str(tree["corrupt"]) in loaded.problems[0]
    assert len(loaded.runs) == 3 and len(loaded.frame) > 0


def test_a_file_without_required_columns_is_named_with_them_and_the_rest_loads(tree, tmp_path):
    # without gbps and sol, the Bandwidth and Roofline charts of its run would be empty or partial
    rows = store.to_frame(fx.make_run("h100", "ccccccc", "2025-06-04T09:00:00Z"))
    partial = tmp_path / "partial.parquet"
    rows.drop(columns=["samples_ms", "gbps", "sol"]).to_parquet(partial)
    loaded = data.build([str(tree["results"]), str(partial)])
    assert len(loaded.problems) == 1
    assert loaded.problems[0].startswith(f"{partial}: ") and "gbps, sol" in loaded.problems[0]
    assert len(loaded.runs) == 3 and str(partial) not in set(loaded.frame["source"])
    assert loaded.frame["sol"].notna().any()


def test_empty_folder_and_missing_path(tree, tmp_path):
    loaded = data.build([str(tree["empty"])])
    assert loaded.frame.empty and loaded.problems == [] and loaded.runs.empty
    loaded = data.build([str(tmp_path / "nowhere")])
    assert loaded.frame.empty and "no such file" in loaded.problems[0]


def test_foreign_and_newer_files_are_refused(tmp_path):
    pd.DataFrame({"a": [1.0]}).to_parquet(tmp_path / "foreign.parquet")
    rows = store.to_frame(fx.make_run()[:3]).assign(schema_version=store.SCHEMA_VERSION + 1)
    rows.drop(columns=["samples_ms"]).to_parquet(tmp_path / "future.parquet")
    df, problems = data.read([tmp_path])
    assert df.empty
    assert any("foreign.parquet: not a kernel-suite results file" in p for p in problems)
    assert any("future.parquet: schema_version" in p for p in problems)


def test_runs_table_newest_first_and_index(tree):
    loaded = data.build([str(tree["results"])])
    assert list(loaded.runs["commit"]) == ["bbbbbbb", "bbbbbbb", "aaaaaaa"]
    assert list(loaded.runs["gpu"]) == ["h100-80gb-hbm3", "h200", "h200"]
    rid = loaded.runs["run_id"].iloc[2]
    rows = loaded.rows([rid])
    assert len(rows) == loaded.runs["rows"].iloc[2] and set(rows["run_id"]) == {rid}
    assert loaded.rows(["not-a-run"]).empty


def test_gpu_falls_back_to_the_name_slug(tmp_path):
    rows = fx.make_run()[:4]
    for r in rows:
        r["gpu_slug"] = None
    fx.write_run(rows, tmp_path)
    loaded = data.build([str(tmp_path)])
    assert set(loaded.frame["gpu"]) == {"h200"}


def test_paths_come_from_the_environment_only(monkeypatch):
    monkeypatch.delenv(data.PATHS_ENV, raising=False)
    assert data.configured_paths() == data.default_paths()
    monkeypatch.setenv(data.PATHS_ENV, json.dumps(["/a b/c", "/d"]))
    assert data.configured_paths() == ("/a b/c", "/d")
    monkeypatch.setenv(data.PATHS_ENV, "not json")
    assert data.configured_paths() == data.default_paths()


def test_fingerprint_changes_when_a_run_is_added(tmp_path):
    fx.write_run(fx.make_run()[:5], tmp_path)
    before = data.fingerprint([str(tmp_path)])
    fx.write_run(fx.make_run(commit="ccccccc")[:5], tmp_path)
    assert data.fingerprint([str(tmp_path)]) != before


def test_fixture_napkin_math_matches_the_workloads():
    import implementations.attention  # noqa: F401  registers the workloads only
    import implementations.gelu  # noqa: F401
    import implementations.gemm  # noqa: F401
    import implementations.residual_layernorm_gelu  # noqa: F401
    import implementations.softmax  # noqa: F401
    from suite.workload import REGISTRY, Case

    for name, shapes in fx.SHAPES.items():
        wl = REGISTRY.workloads[name]
        for s in shapes:
            for dtype in fx.DTYPES:
                case = Case.make(name, dtype, **s)
                assert fx.napkin(name, s, dtype) == (wl.flops(case), wl.min_bytes(case),
                                                     wl.eager_bytes(case)), case
                assert fx.size(name, s) == wl.size(case)


def test_resumed_run_with_stale_source_and_two_commits(tmp_path):
    # what store.RunFile.resume writes: rows read back by store.read_file keep its
    # "source" column, and the rows added after the resume carry a newer commit
    old = fx.make_run(commit="aaaaaaa")[:6]
    new = [dict(r, commit="bbbbbbb") for r in fx.make_run(commit="aaaaaaa")[6:10]]
    df = store.to_frame(old + new)
    df["source"] = ["/gpu/results/partial.parquet"] * len(old) + [None] * len(new)
    df["traceback"] = float("nan")  # an all-null column typed float64 in this file only
    path = tmp_path / "h200" / "resumed.parquet"
    path.parent.mkdir()
    df.to_parquet(path, index=False)
    fx.write_run(fx.make_run(commit="ccccccc", timestamp="2025-05-01T00:00:00Z")[:3], tmp_path)

    loaded = data.build([str(tmp_path)])
    assert loaded.problems == [] and loaded.frame.columns.is_unique
    resumed = loaded.frame[loaded.frame["commit"] != "ccccccc"]
    assert set(resumed["source"]) == {str(path)}
    run = loaded.runs.iloc[0]
    assert run["commits"] == ("aaaaaaa", "bbbbbbb") and "aaaaaaa+bbbbbbb" in run["label"]
    # every commit is offered, newest first; choosing one keeps only its rows
    assert loaded.options("commit") == ["bbbbbbb", "aaaaaaa", "ccccccc"]
    from dashboard.analysis import Filters, at_commits, select_runs
    f = Filters(commit=("bbbbbbb",))
    assert select_runs(loaded.runs, f) == [run["run_id"]]
    assert len(at_commits(loaded.rows([run["run_id"]]), f)) == len(new)


def test_a_shared_result_is_computed_once_per_key_and_the_oldest_goes_first(tree, monkeypatch):
    loaded = data.build([str(tree["results"])])
    calls = []

    def compute(k):
        return lambda: calls.append(k) or [k]

    first = loaded.shared(("a",), compute("a"))
    assert loaded.shared(("a",), compute("a")) is first and calls == ["a"]
    monkeypatch.setattr(data, "SHARED_MAX", 2)
    loaded.shared(("b",), compute("b"))
    loaded.shared(("c",), compute("c"))  # a, the oldest, goes
    loaded.shared(("b",), compute("b"))
    loaded.shared(("a",), compute("a"))
    assert calls == ["a", "b", "c", "a"]
    assert data.build([str(tree["results"])]).shared(("a",), compute("a")) == ["a"]  # per load


def test_a_file_with_the_required_columns_only_is_plotted(tmp_path, monkeypatch):
    # size and bound are extra columns (suite.store.EXTRA) that an older file may lack: the
    # views plot against size and pick the rate by bound, so they are filled from the shape
    # and the roofs, and the Overview still finds each workload's largest case
    rows = store.to_frame(fx.make_run())
    keep = store.REQUIRED + [c for c in store.SHAPE_COLUMNS if c in rows.columns]
    rows[keep].to_parquet(tmp_path / "old.parquet")
    df = data.build([str(tmp_path / "old.parquet")]).frame
    full = store.to_frame(fx.make_run())
    assert (df["size"].to_numpy() == full["size"].to_numpy()).all()
    assert (df["bound"].to_numpy() == full["bound"].to_numpy()).all()
    from dashboard_apptest import app, table

    at = app(monkeypatch, [tmp_path / "old.parquet"])
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["workload"]) == set(fx.SHAPES)
    assert len(table(at, "overview_sol").value.columns) == len(fx.SHAPES)
