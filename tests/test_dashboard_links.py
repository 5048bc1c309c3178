"""Links and hostile values, through AppTest: a URL sets every page's choices;
nothing from a URL or a results file is rendered as Markdown or HTML.

Markdown bodies (captions, alerts, titles, labels) must not hold a link,
image or tag formed from the input, and Plotly specs must not hold a tag
(Plotly renders ``<a href>`` in names and hover text).
"""
import json
import re
import time

import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

import fixtures_dashboard as fx  # noqa: E402
from dashboard_apptest import app, figures  # noqa: E402
from suite import store  # noqa: E402

LINK = "[Open the fixed results](http://evil.example/x)"
IMAGE = "![x](http://evil.example/beacon.png)"
SCRIPT = "<script>alert(1)</script>"
IMG_TAG = '<img src="http://evil.example/i.png">'
HOSTILE = {"workload": LINK, "gpu": IMAGE, "impl": SCRIPT, "dtype": IMG_TAG, "commit": "A" * 100_000,
           "run": "../../../etc/passwd", "bw_workload": LINK, "cmp_mode": IMAGE, "profile_case": LINK}
# what Markdown would turn into a link, image, autolink or tag (an escaped "\\<" shows as "<")
FORMED = re.compile(r"\]\(|(?<!\\)<(script|img|a )|http://evil")


def markdown_bodies(at) -> list[str]:
    """Every string Streamlit renders as Markdown on the page and in the sidebar."""
    out = []
    for kind in ("markdown", "caption", "warning", "info", "error", "success", "title", "header",
                 "subheader", "expander"):
        for el in at.get(kind):
            out.append(str(getattr(el, "label", None) or getattr(el.proto, "body", "") or el.value))
    for kind in ("selectbox", "multiselect", "radio", "toggle", "number_input", "slider"):
        out += [str(el.label) for el in at.get(kind)]
    return out


def assert_inert(at) -> None:
    assert not at.exception, at.exception
    for body in markdown_bodies(at):
        assert not FORMED.search(body), body[:300]
        assert len(body) < 5_000, f"a {len(body)}-character Markdown body"
    spec = json.dumps(figures(at))
    for tag in ("<script", "<img", "<a "):
        assert tag not in spec


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("links")
    paths = fx.write_fixture_tree(root)
    rows = fx.make_run("h200", "ccccccc", "2025-06-05T09:30:00Z", seed=5)
    for r in rows:
        if r["workload"] == "softmax":
            r["impl"] = "[evil](http://evil.example/x)" if r["impl"] == "triton" else r["impl"]
            r["error"] = IMG_TAG + " " + SCRIPT
            r["config"] = LINK
        if r["status"] == "ok":  # Profile's figures, with markup where the rows carry text
            r.update(ncu_ms=r["ms_median"], ncu_ratio=1.0, ncu_kernels=2.0, ncu_dram_pct=60.0,
                     ncu_sm_pct=40.0, ncu_top_kernel=SCRIPT + LINK + "k" * 500, ncu_error=IMAGE,
                     energy_j=0.01, energy_w=500.0, gflops_per_j=10.0, gb_per_j=1.0)
        r["shape"] = r["shape"] + IMG_TAG if r["workload"] == "softmax" else r["shape"]
        r["commit"] = "<a href='http://evil.example'>c</a>"
    hostile = root / "hostile"
    df = store.to_frame(rows)
    store.write_atomic(df, hostile / "h200" / "hostile.parquet")
    return {**paths, "hostile": hostile}


@pytest.mark.parametrize("page", ["overview", "bandwidth", "compare", "history", "data_table", "case",
                                  "profile"])
def test_hostile_link_is_named_as_plain_text(monkeypatch, tree, page):
    # Profile needs rows with its figures to reach its own choice: the hostile run has them
    paths = [tree["hostile"], tree["results"]] if page == "profile" else [tree["results"]]
    at = app(monkeypatch, paths, page, HOSTILE)
    assert_inert(at)
    assert any("Ignored from the link" in c.value for c in at.sidebar.caption)
    notes = " ".join(t.value for t in at.text)
    assert "[Open the fixed results](http://evil" in notes  # shown as it was, as plain text
    assert "AAAA" in notes and "A" * 200 not in notes  # clipped, not echoed whole
    if page == "profile":
        assert "profile_case=[Open the fixed results]" in notes and figures(at)


@pytest.mark.parametrize("page", ["overview", "bandwidth", "roofline", "fusion", "compare", "history",
                                  "data_table", "case", "profile"])
def test_hostile_rows_are_shown_as_plain_text(monkeypatch, tree, page):
    at = app(monkeypatch, [tree["hostile"], tree["results"]], page)
    assert_inert(at)
    if page == "profile":  # the hostile run's figures are drawn, its names escaped
        spec = json.dumps(figures(at))
        assert "&lt;script&gt;" in spec and "k" * 100 not in spec


@pytest.mark.parametrize("many", [2_000, 900])
def test_many_parameters_stay_fast(monkeypatch, tree, many):
    params = {f"p{i}": f"../{i}" for i in range(many)}
    params["workload"] = [f"w{i}" for i in range(many)]
    start = time.monotonic()
    at = app(monkeypatch, [tree["results"]], "overview", params)
    assert time.monotonic() - start < 30  # a run takes ~2 s here: the parameters add little
    assert_inert(at)
    assert at.multiselect(key="filter_workload").value == []


def test_a_link_sets_every_page_choice(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "bandwidth",
             {"bw_workload": "softmax", "bw_dtype": "float32", "bw_metric_softmax": "tflops"})
    assert at.selectbox(key="bw_workload").value == "softmax"
    assert at.selectbox(key="bw_dtype").value == "float32"
    assert at.radio(key="bw_metric_softmax").value == "tflops"
    at = app(monkeypatch, [tree["results"]], "compare",
             {"cmp_mode": "GPUs", "cmp_base_GPUs": "h100-80gb-hbm3", "cmp_cand_GPUs": "h200",
              "cmp_threshold": "7.5", "cmp_sol_GPUs": "false"})
    assert at.radio(key="cmp_mode").value == "GPUs"
    assert at.selectbox(key="cmp_base_GPUs").value == "h100-80gb-hbm3"
    assert at.selectbox(key="cmp_cand_GPUs").value == "h200"
    assert at.number_input(key="cmp_threshold").value == 7.5
    assert at.toggle(key="cmp_sol_GPUs").value is False
    at = app(monkeypatch, [tree["results"]], "history",
             {"hist_workload": "gemm", "hist_impl": "nope", "hist_metric": "sol", "hist_x": "date"})
    assert at.selectbox(key="hist_workload").value == "gemm"
    assert at.selectbox(key="hist_metric").value == "sol"
    assert at.radio(key="hist_x").value == "date"
    assert any("hist_impl=nope" in t.value for t in at.main.text)
    at = app(monkeypatch, [tree["results"]], "overview", {"overview_dtype": "float16"})
    assert at.selectbox(key="overview_dtype").value == "float16"


def test_a_change_is_written_to_the_link(monkeypatch, tree):
    at = app(monkeypatch, [tree["results"]], "history")
    at.selectbox(key="hist_metric").set_value("gbps").run()
    assert at.query_params["hist_metric"] in ("gbps", ["gbps"])
