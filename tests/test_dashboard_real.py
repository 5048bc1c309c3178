"""Every page over the committed GPU runs under results/, through AppTest.

The fixtures are synthetic; these files are what the runner really writes:
list-typed samples, all-null columns typed differently from file to file, and
a resumed run whose rows carry two commits (the reference runs listed in
results/MANIFEST.md).  Skipped only when results/ holds no Parquet file.
"""
from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

from streamlit.testing.v1 import AppTest  # noqa: E402

import dashboard_apptest as apptest  # noqa: E402
from dashboard import charts_profile, data  # noqa: E402
from dashboard_apptest import figures, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PAGES = {"overview": "Overview", "case": "Case", "bandwidth": "Bandwidth", "roofline": "Roofline", "fusion": "Fusion",
         "profile": "Profile", "compare": "Compare", "history": "History", "data_table": "Data"}

pytestmark = pytest.mark.skipif(not any(RESULTS.rglob("*.parquet")),
                                reason="no committed results under results/")


@pytest.fixture(scope="module")
def loaded():
    return data.build([str(RESULTS)])


def app(monkeypatch, page="overview", params=None) -> AppTest:
    return apptest.app(monkeypatch, [RESULTS], page, params)




def test_every_file_loads(loaded):
    assert loaded.problems == []
    files = {str(p) for p in RESULTS.rglob("*.parquet") if not p.name.startswith(".")}
    assert set(loaded.frame["source"]) == files, "source must name the file read here"
    assert loaded.frame.columns.is_unique


def test_runs_name_every_commit_they_hold(loaded):
    for _, run in loaded.runs.iterrows():
        rows = loaded.rows([run["run_id"]])
        assert set(run["commits"]) == set(rows["commit"])
        for c in run["commits"]:
            assert c[:7] in run["label"]
    assert set(loaded.options("commit")) == set(loaded.frame["commit"])


@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders_real_runs(monkeypatch, loaded, page):
    profiled = charts_profile.profiled(loaded.frame)
    # Profile shows the chosen runs (the newest by default): choose one that was profiled
    at = app(monkeypatch, page, {"run": profiled["run_id"].iloc[0]}
             if page == "profile" and not profiled.empty else None)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == [PAGES[page]]
    assert not at.warning, [w.value for w in at.warning]
    figs = figures(at)
    if page == "overview":  # the SOL matrix is a table: no Plotly chart on the default page
        sol = table(at, "overview_sol").value
        assert not figs and len(sol) and sol.map(lambda v: v.replace(".", "").isdigit()).any().any()
        return
    if page == "profile" and profiled.empty:
        # no committed run holds ncu or energy figures: the page says how to record them
        assert not figs and "--profile ncu" in at.code[0].value
        return
    assert figs, "no Plotly chart on the page"
    for fig in figs:
        assert fig["data"], "a figure without traces"


def test_each_run_alone_shows_all_its_workloads(monkeypatch, loaded):
    for run_id in loaded.runs["run_id"]:
        at = app(monkeypatch, "bandwidth", {"run": run_id})
        assert not at.exception, (run_id, at.exception)
        want = set(loaded.rows([run_id])["workload"])
        assert set(at.selectbox(key="bw_workload").options) == want
        assert figures(at), run_id


def test_commit_filter_keeps_only_that_commits_rows(monkeypatch, loaded):
    commit = loaded.options("commit")[0]
    at = app(monkeypatch, "data_table", {"commit": commit})
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["commit"]) == {commit}
