"""A click on a chart's point opens the Case view on that point's case (ui.chart),
through AppTest: the selection is sent as the browser sends it
(dashboard_apptest.select_point); the browser test clicks a real point."""
import html

import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

import fixtures_dashboard as fx  # noqa: E402
from dashboard import charts  # noqa: E402
from dashboard_apptest import app, figures, select_point  # noqa: E402

CHARTS = {"bandwidth": "bw_chart", "roofline": "roof_chart", "fusion": "fusion_chart", "history": "hist_chart"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return fx.write_fixture_tree(tmp_path_factory.mktemp("click"))


def a_point(at, index: int = -1) -> dict:
    """A point of the page's first chart that carries a case, as Streamlit reports a selection."""
    trace = next(t for t in figures(at)[0]["data"] if charts.case_of({"customdata": (t.get("customdata") or [0])[0]}))
    return {"curve_number": 0, "point_number": index, "point_index": index, "customdata": trace["customdata"][index]}


@pytest.mark.parametrize("page", list(CHARTS))
def test_a_click_on_a_point_opens_its_case(monkeypatch, tree, page):
    at = app(monkeypatch, [tree["results"]], page, {"gpu": "h200"})
    point = a_point(at, 0)
    case = {c: html.unescape(v) for c, v in zip(charts.CASE, point["customdata"][-len(charts.CASE):])}
    at = select_point(at, CHARTS[page], point)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Case"]
    chosen = {s.key: s.value for s in at.selectbox}
    assert chosen == {"case_gpu": case["gpu"], "case_workload": case["workload"], "case_dtype": case["dtype"],
                      "case_shape": case["shape"], "case_run": case["run_id"]}
    # the link names the case, keeps the sidebar's filter, and drops the chart page's choices
    params = dict(at.query_params)
    assert params["case_shape"] == case["shape"] and params["gpu"] == "h200"
    assert not [k for k in params if k.startswith(("bw_", "roof_", "fusion_", "hist_"))]
    assert len(at.dataframe[0].value) > 0  # the case's implementations, ranked
    assert not [t.value for t in at.sidebar.text if "Ignored" in t.value]


def test_history_opens_the_case_in_the_run_of_the_point(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "history", {"gpu": "h200"})
    first, last = a_point(at, 0), a_point(at, -1)
    assert first["customdata"][-1] != last["customdata"][-1]  # two commits, two runs
    at = select_point(at, "hist_chart", first)
    assert at.selectbox(key="case_run").value == first["customdata"][-1]
    commit = at.selectbox(key="case_run").format_func(first["customdata"][-1])
    assert first["customdata"][0] in commit  # the run's label names the point's commit


def test_a_point_without_a_case_stays_on_its_page(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "roofline", {"gpu": "h200"})
    at = select_point(at, "roof_chart", {"curve_number": 9, "point_number": 0, "x": 1, "y": 1})
    assert not at.exception and [t.value for t in at.title] == ["Roofline"]


def test_a_case_not_among_the_rows_is_named_as_text(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "bandwidth")
    point = a_point(at, 0)
    point["customdata"] = point["customdata"][:-4] + ["[x](http://evil.example)", "<b>f</b>", "N=1", "nope"]
    at = select_point(at, "bw_chart", point)
    assert not at.exception and [t.value for t in at.title] == ["Case"]
    notes = " ".join(t.value for t in at.text)
    assert "case_workload=[x](http://evil.example)" in notes and "case_dtype=<b>f</b>" in notes


def test_case_of_reads_back_escaped_names():
    import pandas as pd

    g = pd.DataFrame({"gpu": ["h200"], "workload": ["<b>w</b>"], "dtype": ["bfloat16"], "shape": ["N=1"],
                      "run_id": ["r&1"], "x": [1.0]})
    custom = charts._custom(charts._text_safe(g), ["x"])
    assert "<b>" not in str(custom.tolist())
    assert charts.case_of({"customdata": list(custom[0])}) == {
        "gpu": "h200", "workload": "<b>w</b>", "dtype": "bfloat16", "shape": "N=1", "run_id": "r&1"}
    assert charts.case_of({"customdata": [1.0, "a"]}) is None and charts.case_of({}) is None
