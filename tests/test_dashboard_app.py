"""Every page through streamlit.testing.v1.AppTest, on fixture runs: no exception,
a heading, and Plotly figures whose spec can be read back."""
import html
import json

import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

from streamlit.testing.v1 import AppTest  # noqa: E402

import fixtures_dashboard as fx  # noqa: E402
from dashboard import ui  # noqa: E402
from dashboard_apptest import app, figures, select_cell, table  # noqa: E402

PAGES = {"overview": "Overview", "case": "Case", "bandwidth": "Bandwidth", "roofline": "Roofline", "fusion": "Fusion",
         "profile": "Profile", "compare": "Compare", "history": "History", "data_table": "Data"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash")
    paths = fx.write_fixture_tree(root)
    # one GPU and two commits only; one commit and two GPUs only
    two_commits = root / "two_commits"
    two_gpus = root / "two_gpus"
    for dst, names in ((two_commits, ("old", "new")), (two_gpus, ("new", "h100"))):
        for n in names:
            target = dst / paths[n].parent.name / paths[n].name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(paths[n].read_bytes())
    return {**paths, "two_commits": two_commits, "two_gpus": two_gpus}


DATASETS = {
    "all": lambda t: [t["results"], t["corrupt"]],
    "empty": lambda t: [t["empty"]],
    "corrupt": lambda t: [t["corrupt"]],
    "two_gpus": lambda t: [t["two_gpus"]],
    "two_commits": lambda t: [t["two_commits"]],
}




def unescape(markdown: str) -> str:
    """The characters a Markdown string shows (dashboard.safe.md writes punctuation as
    character references)."""
    return html.unescape(markdown)


def url(at: AppTest, key: str) -> list[str]:
    value = at.query_params.get(key)
    return value if isinstance(value, list) else [value]




@pytest.mark.parametrize("dataset", list(DATASETS))
@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders(monkeypatch, tree, page, dataset):
    at = app(monkeypatch, DATASETS[dataset](tree), page)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == [PAGES[page]]
    warnings = " ".join(w.value for w in at.warning)
    if dataset in ("all", "corrupt"):
        assert "could not be read" in warnings
        assert any(str(tree["corrupt"]) in t.value for t in at.text)
    if dataset in ("empty", "corrupt"):
        assert any("No results loaded" in i.value for i in at.info)
        assert not figures(at)
        return
    # a missing number reads as a dash, not as the grid's "None" (which looks like a value)
    assert all(el.proto.placeholder == ui.MISSING for el in at.dataframe)
    figs = figures(at)
    if page == "overview":  # no Plotly chart in a session's first run: the SOL matrix is a table
        assert not figs and len(table(at, "overview_sol").value.columns) > 0
        return
    if page == "profile":  # the fixture runs hold no ncu or energy figures: the page says how to record them
        assert not figs and "--profile ncu" in at.code[0].value
        return
    assert figs, "no Plotly chart on the page"
    for fig in figs:
        assert fig["data"], "a figure without traces"


def test_overview_content(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]])
    best = at.dataframe[0].value
    assert set(best["gpu"]) == {"h200", "h100-80gb-hbm3"}
    assert set(best["workload"]) == set(fx.SHAPES)
    sol = table(at, "overview_sol").value  # bfloat16 on the first GPU (h100-80gb-hbm3)
    assert "cuda" in sol.index and set(sol.columns) == set(fx.SHAPES)
    assert sol.loc["cuda", "gelu"] == "unavailable"  # not run on the H100
    assert sol.loc["cuda", "attention"] == "—"  # no cuda attention at all
    assert 0 < float(sol.loc["triton", "gelu"]) <= 1
    # the planted L2-resident row is flagged, not hidden
    assert any("claim more than" in w.value for w in at.warning)


def test_overview_sections_below_the_sol_table_run_only_when_opened(monkeypatch, tree):
    closed = app(monkeypatch, [tree["results"]])
    assert figures(closed) == []  # no Plotly JavaScript for the browser to load
    opened = app(monkeypatch, [tree["results"]], params={"overview_show_pass": "true",
                                                         "overview_show_env": "true"})
    # the pass rate's chart loads Plotly anyway: the speedups follow it at once
    assert [f["layout"]["title"]["text"] for f in figures(opened)] == ["rows per status",
                                                                      "bfloat16 on h100-80gb-hbm3"]
    frames = [d.value for d in opened.dataframe]
    assert any("pass_rate" in f.columns for f in frames)
    assert len(frames) >= len(closed.dataframe) + 3  # pass rate, environment, ceilings


def test_the_overview_speedups_wait_until_the_session_has_plotly(monkeypatch, tree):
    """The Overview's last chart is not drawn by the session's first runs (a filter change
    included): ui.after_first_render's timer reruns the page for it.  Once a page of the
    session has drawn a Plotly chart, the Overview draws it at once."""
    from dashboard import ui

    at = app(monkeypatch, [tree["results"]])
    at.run()
    assert figures(at) == [] and not at.session_state[ui._IN_PAGE_RUN]
    at.session_state[ui._PLOTLY] = True  # what the timer's fragment run sets before its rerun
    at.run()
    (fig,) = figures(at)
    assert fig["layout"]["title"]["text"] == "bfloat16 on h100-80gb-hbm3"
    assert [t["name"] for t in fig["data"]] == ["× eager", "× torch"]
    assert set(fig["data"][0]["x"]) <= set(fx.SHAPES) and fig["layout"]["yaxis"]["type"] == "log"
    after_chart = app(monkeypatch, [tree["results"]], "bandwidth")
    after_chart.switch_page("views/overview.py").run()
    assert [f["layout"]["title"]["text"] for f in figures(after_chart)] == ["bfloat16 on h100-80gb-hbm3"]


def test_overview_takes_each_chosen_run_of_one_gpu_apart(monkeypatch, tree):
    # two H200 runs chosen in the sidebar: the best-of has a row per run, named by it, with
    # its ratios within that run; the SOL matrix shows one run at a time, its own values
    import pandas as pd

    runs = {c: fx.make_run("h200", c, t)[0]["run_id"] for c, t in (("aaaaaaa", "2025-06-01T10:00:00Z"),
                                                                  ("bbbbbbb", "2025-06-03T09:30:00Z"))}
    at = app(monkeypatch, [tree["two_commits"]], params={"run": list(runs.values()), "timer": "events",
                                                         "overview_dtype": "float32"})
    assert not at.exception, at.exception
    best = at.dataframe[0].value
    assert set(best["run"]) == set(runs) and "run_id" not in best.columns
    assert len(best) == 2 * len(best.drop_duplicates(["workload", "dtype"]))
    rows = pd.concat([pd.read_parquet(tree[n]) for n in ("old", "new")])
    rows = rows[(rows["timer"] == "events") & (rows["dtype"] == "float32") & (rows["workload"] == "softmax")]
    rows = rows[rows["size"] == rows["size"].max()].set_index(["commit", "impl"])
    for commit in runs:
        mine = best[(best["run"] == commit) & (best["workload"] == "softmax") & (best["dtype"] == "float32")]
        b = mine.iloc[0]
        assert b["vs_eager"] == pytest.approx(rows.loc[(commit, "eager"), "ms_median"] / b["ms"])
    assert at.selectbox(key="overview_run").value == runs["bbbbbbb"]  # newest first
    for commit in ("bbbbbbb", "aaaaaaa"):
        at.selectbox(key="overview_run").set_value(runs[commit]).run()
        sol = table(at, "overview_sol").value
        assert float(sol.loc["triton", "softmax"]) == pytest.approx(rows.loc[(commit, "triton"), "sol"], abs=0.005)
    # a click on a cell opens the case in that run
    sol = table(at, "overview_sol").value
    at = select_cell(at, "overview_sol", list(sol.index).index("triton"), "softmax")
    assert [t.value for t in at.title] == ["Case"]
    assert at.selectbox(key="case_run").value == runs["aaaaaaa"]


def test_a_click_on_a_sol_cell_opens_its_case(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], params={"overview_gpu": "h200", "overview_dtype": "float32",
                                                     "dtype": "float32"})
    sol = table(at, "overview_sol").value
    at = select_cell(at, "overview_sol", list(sol.index).index("triton"), "softmax")
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Case"]
    chosen = {s.key: s.value for s in at.selectbox}
    largest = max(fx.SHAPES["softmax"], key=lambda s: s["M"] * s["N"])
    assert chosen["case_gpu"] == "h200" and chosen["case_workload"] == "softmax"
    assert chosen["case_dtype"] == "float32" and chosen["case_shape"] == f"M={largest['M']},N={largest['N']}"
    params = dict(at.query_params)
    assert params["dtype"] == "float32" and not [k for k in params if k.startswith("overview_")]


def test_bandwidth_never_plots_failed_rows(monkeypatch, tree):
    at = app(monkeypatch, [tree["two_commits"]], "bandwidth")
    at.selectbox(key="bw_workload").set_value("attention").run()
    at.selectbox(key="bw_dtype").set_value("float32").run()
    names = {t.get("name") for t in figures(at)[0]["data"] if t.get("name")}
    # torch:flash is unsupported in float32: never a line
    assert "torch:flash" not in names and "torch" in names
    assert figures(at)[0]["layout"]["xaxis"]["type"] == "log"


def test_bandwidth_draws_each_chosen_run_of_one_gpu_apart(monkeypatch, tree):
    # two H200 runs chosen in the sidebar: each implementation's line is one run's, so the
    # planted triton softmax slowdown of the newer commit shows instead of a zigzag
    at = app(monkeypatch, [tree["two_commits"]], "bandwidth",
             {"run": [fx.make_run("h200", c, t)[0]["run_id"] for c, t in (("aaaaaaa", "2025-06-01T10:00:00Z"),
                                                                         ("bbbbbbb", "2025-06-03T09:30:00Z"))],
              "bw_workload": "softmax", "bw_dtype": "float32"})
    assert not at.exception, at.exception
    lines = [t for t in figures(at)[0]["data"] if t.get("name")]
    names = [t["name"] for t in lines]
    assert len(names) == len(set(names))
    assert {n for n in names if n.startswith("triton [events]")} == {"triton [events] · aaaaaaa",
                                                                   "triton [events] · bbbbbbb"}
    for t in lines:
        assert len(t["customdata"]) == len(fx.SHAPES["softmax"]), t["name"]


def test_filters_read_from_and_written_to_the_url(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "bandwidth", {"dtype": "float16", "gpu": "h200"})
    assert at.multiselect(key="filter_dtype").value == ["float16"]
    assert at.multiselect(key="filter_gpu").value == ["h200"]
    assert at.selectbox(key="bw_dtype").options == ["float16"]
    at.multiselect(key="filter_workload").set_value(["softmax"]).run()
    assert url(at, "workload") == ["softmax"] and url(at, "dtype") == ["float16"]
    at.multiselect(key="filter_impl").set_value(["triton", "cuda"]).run()
    assert url(at, "impl") == ["triton", "cuda"]
    at.multiselect(key="filter_dtype").set_value([]).run()
    assert "dtype" not in at.query_params


def test_url_values_outside_the_loaded_runs_are_ignored(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], params={"gpu": "../../etc/passwd", "path": "/etc",
                                                     "workload": "gelu"})
    assert not at.exception
    assert at.multiselect(key="filter_gpu").value == []
    assert at.multiselect(key="filter_workload").value == ["gelu"]
    assert any("gpu=../../etc/passwd" in t.value for t in at.sidebar.text)
    assert set(at.dataframe[0].value["workload"]) == {"gelu"}


@pytest.mark.parametrize("mode", ["runs", "GPUs", "commits"])
def test_compare_modes(monkeypatch, tree, mode):
    at = app(monkeypatch, [tree["results"]], "compare", {"cmp_suite": "true"})
    at.radio(key="cmp_mode").set_value(mode).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) > 0 and (table["speedup"] > 0).all()
    if mode == "runs":
        # newest H200 run against the older one: the planted triton softmax slowdown shows
        reg = table[table["verdict"] == "regression"]
        assert set(reg["impl"]) == {"triton"} and set(reg["workload"]) == {"softmax"}
        # what `suite compare` decides, with the band it judged against and both clocks
        assert set(reg["suite_verdict"]) == {"slower"}
        assert (reg["band_rel"] > 0).all() and (reg["ratio"] > 1 + reg["band_rel"]).all()
        assert set(table["clock_base"].dropna()) and table["clock_base"].dtype == float
        assert set(table["sm_clock_mhz_base"]) == {1755.0}
    if mode == "GPUs":
        assert at.toggle(key="cmp_sol_GPUs").value is True
    figs = figures(at)
    assert len(figs) == 1 and figs[0]["layout"]["yaxis"]["type"] == "log"


def test_each_script_run_records_its_seconds_once(monkeypatch, tree, tmp_path):
    # the Compare page's widgets are a fragment (ui.page_part); in a full run of the page it
    # records nothing of its own, so a run is one line, named by its page
    times = tmp_path / "times.txt"
    monkeypatch.setenv(ui.TIMES_ENV, str(times))
    at = app(monkeypatch, [tree["results"]], "compare")
    at.radio(key="cmp_mode").set_value("GPUs").run()
    assert not at.exception
    pages = [line.split()[0] for line in times.read_text().splitlines()]
    assert pages == ["overview", "compare", "compare"]
    assert all(float(line.split()[1]) >= 0 for line in times.read_text().splitlines())


def test_compare_warns_about_runs_timed_under_another_l2(monkeypatch, tree, tmp_path):
    import pandas as pd

    from suite import store

    old = pd.read_parquet(tree["new"])
    clean = old.assign(l2=old["l2"].where(old["timer"] != "events", "cold-clean"), commit="ccccccc",
                       timestamp="2025-06-04T09:30:00Z", run_id="clean")
    root = tmp_path / "results"
    for df in (old, clean):
        store.write_atomic(df, store.default_path(root, df["gpu_name"].iloc[0], df["timestamp"].iloc[0],
                                                  df["commit"].iloc[0]))
    at = app(monkeypatch, [root], "compare")
    assert not at.exception
    warned = [w.value for w in at.warning if "not compared" in w.value]
    assert warned and "cold vs cold-clean" in unescape(warned[0])
    assert any("under the same protocol" in i.value for i in at.info)


def test_history_and_fusion_content(monkeypatch, tree):
    at = app(monkeypatch, [tree["two_commits"]], "history")
    trace = figures(at)[0]["data"][0]
    assert len(trace["x"]) == 2
    at = app(monkeypatch, [tree["results"]], "fusion")
    assert any("gemm" in i.value and "nothing to gain from fusion" in i.value for i in at.info)
    spec = figures(at)[0]
    assert spec["data"][-1]["name"] == "as predicted"
    assert "gemm" not in json.dumps([t.get("customdata") for t in spec["data"]])


def test_history_and_compare_leave_out_ok_rows_beyond_the_roof(monkeypatch, tree):
    # the fixture runs' L2-resident gelu cuda row is "ok" at SOL 1.3 (a run older than the
    # suspect status): like every other page, History and Compare never take it as a time
    import base64

    import numpy as np

    case = {"workload": "gelu", "impl": "cuda", "dtype": "bfloat16", "shape": "N=3000017", "timer": "events"}
    at = app(monkeypatch, [tree["two_commits"]], "history", {f"hist_{k}": v for k, v in case.items()})
    assert not at.exception, at.exception
    (fig,) = figures(at)
    y = fig["data"][0]["y"]  # Plotly writes a numeric array as base64 bytes
    y = np.frombuffer(base64.b64decode(y["bdata"]), y["dtype"]) if isinstance(y, dict) else np.array(y, float)
    assert len(y) == 2 and np.isnan(y).all()  # gaps, no points
    bad = at.dataframe[0].value
    assert len(bad) == 2 and set(bad["status"]) == {"suspect"}
    at = app(monkeypatch, [tree["two_commits"]], "compare")
    assert not at.exception, at.exception
    compared, failed = at.dataframe[0].value, at.dataframe[-1].value

    def this(t):
        return t[(t[list(case)] == list(case.values())).all(axis=1)]

    assert this(compared).empty
    assert list(this(failed)[["status_base", "status_cand"]].iloc[0]) == ["suspect", "suspect"]


def test_a_file_without_required_columns_is_named_and_the_rest_is_shown(monkeypatch, tree, tmp_path):
    import pandas as pd

    partial = tmp_path / "partial.parquet"
    pd.read_parquet(tree["h100"]).drop(columns=["gbps", "sol"]).to_parquet(partial)
    at = app(monkeypatch, [tree["two_commits"], partial], "bandwidth")
    assert not at.exception, at.exception
    assert any("could not be read" in w.value for w in at.warning)
    (note,) = [t.value for t in at.text if str(partial) in t.value]
    assert "gbps" in note and "sol" in note
    assert at.multiselect(key="filter_gpu").options == ["h200"]  # its H100 run is not loaded
    assert figures(at) and figures(at)[0]["data"]


def test_case_ranks_the_implementations(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "case",
             {"gpu": "h200", "case_workload": "softmax", "case_dtype": "float32", "case_shape": "M=1823,N=781"})
    assert not at.exception, at.exception
    t = at.dataframe[0].value
    assert list(t["rank"]) == list(range(1, len(t) + 1)) and t["ms"].is_monotonic_increasing
    assert set(t["impl"]) >= {"eager", "torch", "compile", "triton"}
    # ratios are the fastest torch*/compile* row's time over this row's: 1 on that row itself
    assert t.loc[t["impl"] == "torch", "vs_torch"].iloc[0] == pytest.approx(1.0)
    assert (t["unit"] == "GB/s").all()
    assert (t["sm_clock_mhz"] == 1755).all() and (t["energy_j"] == t["power_w"] * t["ms"] * 1e-3).all()
    assert set(t["energy_from"]) == {"power×time"}  # the fixture rows have no energy_j of their own
    cmd = t.loc[t["impl"] == "triton", "command"].iloc[0]
    assert cmd.startswith("python -m suite run --workloads softmax --shape M=1823,N=781 --dtypes float32 "
                          "--impls triton --timer events")


def test_case_names_the_run_of_each_row_when_several_are_chosen(monkeypatch, tree):
    # two H200 runs chosen in the sidebar: each row says its run, its ratios are to its own
    # run's torch, and each run's implementation has its own bar
    runs = {c: fx.make_run("h200", c, t)[0]["run_id"] for c, t in (("aaaaaaa", "2025-06-01T10:00:00Z"),
                                                                  ("bbbbbbb", "2025-06-03T09:30:00Z"))}
    at = app(monkeypatch, [tree["two_commits"]], "case",
             {"run": list(runs.values()), "timer": "events", "case_workload": "softmax",
              "case_dtype": "float32", "case_shape": "M=4096,N=131072"})
    assert not at.exception, at.exception
    t = at.dataframe[0].value
    assert set(t["run"]) == set(runs) and len(t) == len(set(zip(t["impl"], t["run"])))
    for run in runs:
        mine = t[t["run"] == run]
        assert mine.loc[mine["impl"] == "torch", "vs_torch"].iloc[0] == pytest.approx(1.0)
    bars = figures(at)[0]["data"][0]["y"]
    assert len(bars) == len(set(bars)) == len(t)
    # one run: no run column
    at = app(monkeypatch, [tree["two_commits"]], "case", {"run": runs["aaaaaaa"]})
    assert "run" not in at.dataframe[0].value.columns


def test_data_search_filters_and_leads_with_the_answer(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "data_table", {"data_search": "softmax triton"})
    t = at.dataframe[0].value
    assert list(t.columns[:6]) == ["impl", "shape", "ms_median", "gbps", "tflops", "sol"]
    assert len(t) and set(t["impl"]) == {"triton"} and set(t["workload"]) == {"softmax"}


@pytest.fixture(scope="module")
def failed_only(tmp_path_factory):
    """One run in which nothing was measured: every row failed or was skipped."""
    rows = fx.make_run("h200", "ccccccc", "2025-06-05T09:00:00Z", seed=4)
    for r in rows:
        r.update(status="error" if r["impl"] != "torch" else "unsupported", error="RuntimeError: boom",
                 ms_median=None, ms_p20=None, ms_p80=None, ms_min=None, gbps=None, tflops=None, sol=None,
                 samples_ms=None)
    root = tmp_path_factory.mktemp("failed") / "results"
    fx.write_run(rows, root)
    return root


@pytest.mark.parametrize("page", list(PAGES))
def test_a_run_with_no_ok_row_says_so_on_every_page(monkeypatch, failed_only, page):
    at = app(monkeypatch, [failed_only], page)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == [PAGES[page]]
