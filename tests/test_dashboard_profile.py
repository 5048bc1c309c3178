"""dashboard/charts_profile.py and the energy hover of the roofline, on synthetic rows."""
import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

from dashboard import charts, charts_profile  # noqa: E402


def case_rows():
    base = {"gpu": "h200", "workload": "gemm", "shape": "M=4096,N=4096,K=4096", "dtype": "bfloat16",
            "timer": "events", "status": "ok", "bound": "compute"}
    return pd.DataFrame([
        dict(base, impl="torch", ms_median=0.2, sol=0.9, ncu_ms=0.201, ncu_ratio=1.005, ncu_kernels=1,
             ncu_dram_pct=20.0, ncu_sm_pct=70.0, ncu_tensor_pct=88.0, ncu_occupancy_pct=12.0,
             ncu_l2_hit_pct=45.0, ncu_top_kernel="sm90_xmma_gemm<bf16, 128>(...)", energy_j=0.1,
             gflops_per_j=1374.0, gb_per_j=1.0, ncu_error=None),
        dict(base, impl="triton", ms_median=0.25, sol=0.72, ncu_ms=np.nan, ncu_ratio=np.nan,
             ncu_kernels=np.nan, ncu_dram_pct=np.nan, ncu_sm_pct=np.nan, ncu_tensor_pct=np.nan,
             ncu_occupancy_pct=np.nan, ncu_l2_hit_pct=np.nan, ncu_top_kernel=None, energy_j=0.12,
             gflops_per_j=1145.0, gb_per_j=0.8, ncu_error="ncu not permitted (ERR_NVGPUCTRPERM)"),
        dict(base, impl="eager", dtype="float32", ms_median=1.0, sol=0.3, ncu_ms=np.nan, energy_j=np.nan,
             ncu_error=None),
    ])


def test_breakdown_one_trace_per_impl_with_sol_in_percent():
    d = case_rows().iloc[:2]
    fig = charts_profile.breakdown(d)
    assert [t.name for t in fig.data] == ["torch", "triton"]
    torch = fig.data[0]
    assert list(torch.y) == [b[0] for b in charts_profile.BARS]
    np.testing.assert_allclose(torch.x, [90.0, 20.0, 70.0, 88.0, 12.0, 45.0])
    assert all(math.isnan(v) for v in fig.data[1].x[1:])  # no profile: no bars, SOL still drawn
    assert fig.data[1].x[0] == pytest.approx(72.0)
    assert fig.layout.barmode == "group" and torch.orientation == "h"
    assert torch.marker.color == charts.BACKEND_COLORS["torch"]


def test_the_kernel_name_is_escaped_in_the_hover():
    fig = charts_profile.breakdown(case_rows().iloc[:1])
    note = fig.data[0].customdata[0]
    assert "&lt;bf16, 128&gt;" in note and "<bf16" not in note
    assert "0.201 ms" in note and "1.005" in note


def test_profiled_rows_cases_and_the_table():
    df = case_rows()
    have = charts_profile.profiled(df)
    assert list(have["impl"]) == ["torch", "triton"]  # eager has neither figures nor a note
    cases = charts_profile.cases(df)
    assert len(cases) == 2 and cases[0] == ("h200", "gemm", "M=4096,N=4096,K=4096", "bfloat16", "events")
    one = charts_profile.one_case(df, cases[0])
    t = charts_profile.table(one)
    assert list(t["impl"]) == ["torch", "triton"] and "energy_j" in t.columns and "ncu_error" in t.columns


def test_roofline_hover_carries_energy():
    df = case_rows()
    df["intensity"], df["gbps"], df["tflops"] = 1365.0, 500.0, 600.0
    text = charts.energy_text(df)
    assert text.iloc[0] == "<br>0.1 J a call, 1374 GFLOP/J"
    assert text.iloc[2] == ""
    mem = charts.energy_text(df.assign(bound="memory"))
    assert mem.iloc[1] == "<br>0.12 J a call, 0.8 GB/J"
    fig = charts.roofline_chart(df, 4000.0, {"bfloat16": 800.0})
    assert "J a call" in fig.data[0].customdata[0][8]
    old = df.drop(columns=["energy_j", "gflops_per_j", "gb_per_j"])  # a file from before energy
    assert list(charts.energy_text(old)) == ["", "", ""]


def _profiled_run(rows: list[dict]) -> list[dict]:
    """The fixture run's ok rows with ncu and energy figures; a planted markup kernel name."""
    for i, r in enumerate(rows):
        if r["status"] == "ok":
            r.update(ncu_ms=r["ms_median"], ncu_ratio=1.0, ncu_kernels=1.0, ncu_dram_pct=70.0,
                     ncu_sm_pct=30.0, ncu_tensor_pct=0.0, ncu_occupancy_pct=50.0, ncu_l2_hit_pct=20.0,
                     ncu_top_kernel="**bold** <b>k</b>", energy_j=0.01, gflops_per_j=10.0, gb_per_j=1.0)
    return rows


def test_the_page_draws_the_case_and_renders_no_data_as_markdown(monkeypatch, tmp_path):
    pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
    import fixtures_dashboard as fx
    from dashboard_apptest import app, figures

    path = fx.write_run(_profiled_run(fx.make_run("h200", "ccccccc", "2025-06-05T10:00:00Z", seed=4)),
                        tmp_path / "results")
    at = app(monkeypatch, [path], "profile")
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Profile"]
    figs = figures(at)
    assert len(figs) == 1 and figs[0]["data"][0]["orientation"] == "h"
    assert len(at.dataframe) == 1 and "ncu_top_kernel" in at.dataframe[0].value.columns
    assert not any("bold" in m.value for m in at.markdown)


def test_the_page_says_how_to_record_when_no_row_has_figures(monkeypatch, tmp_path):
    pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
    import fixtures_dashboard as fx
    from dashboard_apptest import app, figures

    path = fx.write_run(fx.make_run("h200", "ddddddd", "2025-06-05T10:00:00Z", seed=5), tmp_path / "r")
    at = app(monkeypatch, [path], "profile")
    assert not at.exception, at.exception
    assert any("--profile ncu" in i.value for i in at.info) and not figures(at)
    assert "--profile ncu" in at.code[0].value


def test_a_link_sets_the_case_and_names_an_unknown_one(monkeypatch, tmp_path):
    pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
    import fixtures_dashboard as fx
    from dashboard_apptest import app

    rows = _profiled_run(fx.make_run("h200", "ccccccc", "2025-06-05T10:00:00Z", seed=4))
    path = fx.write_run(rows, tmp_path / "results")
    from dashboard import data
    frame = data.build([str(path)]).frame
    labels = [charts_profile.label(c) for c in charts_profile.cases(charts_profile.profiled(frame))]
    at = app(monkeypatch, [path], "profile", {"profile_case": labels[3]})
    assert at.selectbox(key="profile_case").value == labels[3]
    assert at.query_params["profile_case"] in (labels[3], [labels[3]])
    at = app(monkeypatch, [path], "profile", {"profile_case": "h200 · nope"})
    assert at.selectbox(key="profile_case").value == labels[0]
    assert any("profile_case=h200 · nope" in t.value for t in at.main.text)


def test_a_newer_run_without_figures_does_not_hide_a_profiled_one(monkeypatch, tmp_path):
    # the default runs (the newest of the most backends) hold no profile, an older run of
    # fewer implementations does: without a run filter the page shows that one, and says so
    pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
    import fixtures_dashboard as fx
    from dashboard_apptest import app, figures

    old = [r for r in _profiled_run(fx.make_run("h200", "ccccccc", "2025-06-05T10:00:00Z", seed=4))
           if r["impl"] in ("torch", "triton")]
    fx.write_run(old, tmp_path / "results")
    fx.write_run(fx.make_run("h200", "ddddddd", "2025-06-06T10:00:00Z", seed=5), tmp_path / "results")
    at = app(monkeypatch, [tmp_path / "results"], "profile")
    assert not at.exception, at.exception
    assert not any("--profile ncu" in i.value for i in at.info)
    assert len(figures(at)) == 1 and set(at.dataframe[0].value["impl"]) <= {"torch", "triton"}
    assert any("ccccccc" in c.value for c in at.caption)
    # a run chosen in the sidebar is what the page shows, profiled or not
    newest = fx.make_run("h200", "ddddddd", "2025-06-06T10:00:00Z")[0]["run_id"]
    at = app(monkeypatch, [tmp_path / "results"], "profile", {"run": newest})
    assert any("--profile ncu" in i.value for i in at.info) and not figures(at)
