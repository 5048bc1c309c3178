"""dashboard/charts.py: trace counts, axis types, and lines at the right values."""
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

from dashboard import charts  # noqa: E402
from suite import roofline  # noqa: E402


def rows(series=("triton", "eager"), sizes=(1e3, 1e5, 1e7)):
    out = []
    for s in series:
        for i, n in enumerate(sizes):
            ms = 1e-3 * (i + 1)
            out.append({"series": s, "impl": s, "size": n, "shape": f"N={int(n)}", "ms_median": ms,
                        "ms_p20": ms * 0.9, "ms_p80": ms * 1.2, "min_bytes": 8.0 * n, "flops": 10.0 * n,
                        "gbps": 8.0 * n / ms / 1e6, "tflops": 10.0 * n / ms / 1e9, "sol": 0.5,
                        "intensity": 10.0 / 8.0, "dtype": "bfloat16" if i else "float32",
                        "workload": "gelu", "timer": "events"})
    return pd.DataFrame(out)


def test_bandwidth_traces_band_log_x_and_ceiling():
    df = rows()
    fig = charts.bandwidth(df, "gbps", {"copy": 4210.0})
    assert len(fig.data) == 2 * 2
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type != "log"
    band, line = fig.data[:2]
    g = df[df["series"] == "triton"].sort_values("size")
    n = len(g)
    np.testing.assert_allclose(line.y, g["gbps"])
    # one closed outline: the p20 edge left to right, then the p80 edge back
    np.testing.assert_allclose(band.x, np.concatenate([g["size"], g["size"][::-1]]))
    np.testing.assert_allclose(band.y[:n], g["min_bytes"] / (g["ms_p20"] * 1e-3) / 1e9)
    np.testing.assert_allclose(band.y[n:], (g["min_bytes"] / (g["ms_p80"] * 1e-3) / 1e9)[::-1])
    assert band.fill == "toself" and not band.showlegend and band.legendgroup == line.name == "triton"
    assert [s.y0 for s in fig.layout.shapes] == [4210.0]


def test_bandwidth_points_only_when_shapes_share_a_size():
    df = rows(sizes=(1e3, 1e3, 1e5))
    fig = charts.bandwidth(df, "gbps", lines=False)
    assert len(fig.data) == 2 and {t.mode for t in fig.data} == {"markers"}
    g = df[df["series"] == "triton"]
    np.testing.assert_allclose(fig.data[0].y, g["gbps"])
    np.testing.assert_allclose(fig.data[0].error_y.array,
                               g["min_bytes"] / (g["ms_p20"] * 1e-3) / 1e9 - g["gbps"])


def test_bandwidth_in_tflops_uses_flops():
    df = rows(series=("torch",))
    fig = charts.bandwidth(df, "tflops", {"bf16": 740.0, "missing": None})
    np.testing.assert_allclose(fig.data[1].y, df["tflops"])
    assert [s.y0 for s in fig.layout.shapes] == [740.0]
    assert "TFLOP/s" in fig.layout.yaxis.title.text


def test_roofline_traces_roofs_and_ridge():
    df = rows(series=("triton", "eager", "cuda"))
    fig = charts.roofline_chart(df, 4000.0, {"bfloat16": 800.0, "float32": 50.0})
    assert len(fig.data) == 3 + 2 + 1
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    triton = fig.data[0]
    assert list(triton.marker.symbol) == ["circle", "diamond", "diamond"]
    roof16 = fig.data[3]
    ridge = roofline.ridge_point(4000.0, 800.0)
    assert roof16.x[1] == pytest.approx(ridge) == pytest.approx(200.0)
    assert roof16.y[1] == roof16.y[2] == 800.0
    assert roof16.y[0] == pytest.approx(4000.0 * roof16.x[0] / 1e3)  # on the bandwidth slope
    assert list(fig.data[-1].x) == pytest.approx([200.0, 12.5])
    assert list(fig.data[-1].y) == [800.0, 50.0]


def test_roofline_without_ceilings_has_points_only():
    fig = charts.roofline_chart(rows(series=("triton",)), float("nan"), {})
    assert len(fig.data) == 1


def test_pass_rate_bars_one_trace_per_status():
    counts = pd.DataFrame({"impl": ["a", "b"], "ok": [3, 1], "incorrect": [0, 2], "error": [1, 0],
                           "unsupported": [0, 0], "unavailable": [0, 1], "pass_rate": [0.75, 1 / 3]})
    fig = charts.pass_rate_bars(counts)
    assert [t.name for t in fig.data] == ["ok", "incorrect", "error", "unsupported", "unavailable"]
    assert list(fig.data[1].y) == [0, 2] and fig.layout.barmode == "stack"


def test_best_speedups_two_bars_per_workload_and_a_line_at_one():
    best = pd.DataFrame({"gpu": "h200", "workload": ["gelu", "<b>x</b>"], "dtype": "bfloat16",
                         "timer": "events", "shape": ["N=8", "N=4"], "best": ["triton", "<i>c</i>"],
                         "ms": [1.0, 2.0], "sol": [0.8, 0.5], "vs_eager": [3.0, 0.5], "vs_torch": [1.5, np.nan]})
    fig = charts.best_speedups(best, title="bfloat16 on h200")
    assert [t.name for t in fig.data] == ["× eager", "× torch"] and fig.layout.barmode == "group"
    assert list(fig.data[0].x) == ["gelu", "&lt;b&gt;x&lt;/b&gt;"] and list(fig.data[0].y) == [3.0, 0.5]
    assert fig.layout.yaxis.type == "log" and [s.y0 for s in fig.layout.shapes] == [1]
    assert "<i>" not in str(fig.to_dict()) and "&lt;i&gt;c" in str(fig.data[0].customdata)
    two_timers = charts.best_speedups(best.assign(timer=["events", "graph"]))
    assert list(two_timers.data[1].x) == ["gelu [events]", "&lt;b&gt;x&lt;/b&gt; [graph]"]


def test_fusion_chart_diagonal_and_log_axes():
    ft = pd.DataFrame({"impl": ["triton", "cuda", "triton"], "predicted": [5.5, 5.5, 2.0],
                       "measured": [5.0, 3.0, 2.1], "reached": [0.9, 0.55, 1.05],
                       "workload": ["gelu"] * 3, "shape": ["N=1"] * 3, "dtype": ["float32"] * 3})
    fig = charts.fusion_chart(ft)
    assert len(fig.data) == 2 + 1
    diag = fig.data[-1]
    assert list(diag.x) == list(diag.y) and diag.x[0] < 2.0 and diag.x[1] > 5.5
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_fusion_chart_names_each_workloads_symbol_in_its_legend():
    # the key of the symbols is a legend entry per workload, not a title that the
    # chart's width cuts off after a few workloads
    workloads = ["attention", "gelu", "residual_layernorm_gelu", "softmax", "<b>w</b>"]
    ft = pd.DataFrame({"impl": ["triton"] * 5, "predicted": [2.0, 5.5, 3.0, 4.0, 6.0],
                       "measured": [2.0, 5.0, 3.0, 3.5, 6.0], "reached": [1.0, 0.9, 1.0, 0.88, 1.0],
                       "workload": workloads, "shape": ["N=1"] * 5, "dtype": ["float32"] * 5})
    fig = charts.fusion_chart(ft, title="Speedup over eager")
    assert fig.layout.title.text == "Speedup over eager"
    key = {t.name: t.marker.symbol for t in fig.data if t.legendgroup == "workload"}
    assert set(key) == {"attention", "gelu", "residual_layernorm_gelu", "softmax", "&lt;b&gt;w&lt;/b&gt;"}
    drawn = dict(zip(fig.data[0].customdata[:, 0], fig.data[0].marker.symbol))
    assert all(key[w] == symbol for w, symbol in drawn.items())
    assert fig.data[-1].name == "as predicted"
    many = charts.fusion_chart(pd.concat([ft.assign(impl=f"impl{i}") for i in range(12)]))
    assert many.layout.height >= 30 * (12 + 5 + 1) + 100  # the whole legend, no scroll bar
    one = charts.fusion_chart(ft.iloc[:1])  # one workload: no key
    assert not [t for t in one.data if t.legendgroup == "workload"]


def test_compare_scatter_threshold_lines():
    t = pd.DataFrame({"size": [1, 10, 100], "speedup": [0.8, 1.0, 1.3],
                      "verdict": ["regression", "same", "improvement"], "workload": ["w"] * 3,
                      "impl": ["i"] * 3, "dtype": ["d"] * 3, "shape": ["s"] * 3})
    fig = charts.compare_scatter(t, 0.1)
    assert [tr.name for tr in fig.data] == ["regression", "improvement", "same"]
    assert sorted(s.y0 for s in fig.layout.shapes) == pytest.approx([1 / 1.1, 1.0, 1.1])
    assert fig.layout.xaxis.type == "log"


def test_history_chart_one_line_per_gpu_with_commit_ticks():
    h = pd.DataFrame({"gpu": ["h200", "h200", "h100"], "commit": ["aaaaaaaaa", "bbbbbbbbb", "aaaaaaaaa"],
                      "time": pd.to_datetime(["2025-01-01", "2025-01-02", "2025-01-01"], utc=True),
                      "order": [0, 1, 0], "sol": [0.5, np.nan, 0.4], "status": ["ok", "error", "ok"]})
    fig = charts.history_chart(h, "sol")
    assert [t.name for t in fig.data] == ["h100", "h200"]
    assert list(fig.layout.xaxis.ticktext) == ["aaaaaaa", "bbbbbbb"]
    by_date = charts.history_chart(h, "sol", by_date=True)
    assert by_date.layout.xaxis.tickmode is None
    per_l2 = charts.history_chart(h.assign(l2=["cold-flush", "cold-clean", "cold-clean"]), "sol")
    assert [t.name for t in per_l2.data] == ["h100 · cold-clean", "h200 · cold-clean", "h200 · cold-flush"]


def test_colors_are_stable_per_backend():
    assert charts.color("triton") == charts.color("triton [graph] · h100") == charts.BACKEND_COLORS["triton"]
    seen = ["torch:flash", "torch:cudnn"]
    assert charts.color("torch:flash", seen) != charts.color("torch:cudnn", seen)


def test_hover_names_the_card_state_where_it_was_recorded():
    df = rows(series=("cuda",))
    df["sm_clock_mhz"] = [1980.0, 1712.4, np.nan]
    df["power_w"] = [310.0, np.nan, np.nan]
    df["clock_limits"] = ["", "power cap", None]
    assert list(charts.card_text(df)) == ["<br>SM 1980 MHz, 310 W", "<br>SM 1712 MHz (power cap)", ""]
    assert list(charts.card_text(rows(series=("cuda",)))) == ["", "", ""]  # files from before the columns
    line = charts.bandwidth(df, "gbps").data[-1]
    assert "%{customdata[3]}" in line.hovertemplate
    assert [c[3] for c in line.customdata] == list(charts.card_text(df))
    pts = charts.roofline_chart(df, 4000.0, {"float32": 60.0}).data[0]
    assert "%{customdata[8]}" in pts.hovertemplate and pts.customdata[1][8] == "<br>SM 1712 MHz (power cap)"


def test_fusion_splits_workloads_and_names_stay_inert():
    import fixtures_dashboard as fx

    from dashboard import analysis
    from suite import store

    df = store.to_frame(fx.make_run(seed=4)).assign(gpu="h200")
    df.loc[df["impl"] == "triton", "impl"] = "<a href='http://evil'>t</a>"
    fig = charts.fusion_chart(analysis.fusion_table(df)).to_dict()
    shapes = {w: s for t in fig["data"] if t.get("customdata") is not None
              for (w, *_), s in zip(t["customdata"], t["marker"]["symbol"])}
    assert len(set(shapes.values())) == len(shapes) > 1  # one symbol per workload
    text = str(fig)
    assert "<a href" not in text and "&lt;a href" in text


def _log_axes(fig):
    return [(name, ax) for name, ax in (("x", fig.layout.xaxis), ("y", fig.layout.yaxis)) if ax.type == "log"]


def _readable(fig):
    """Each log axis of ``fig`` carries its own ticks: at most charts.LOG_TICKS, each labelled
    as a plain number, neighbours at least a twentieth of the axis's span apart (15 px on a
    300-px axis: more than a label's height), so no two labels overlap."""
    for name, ax in _log_axes(fig):
        vals, text = list(ax.tickvals or ()), list(ax.ticktext or ())
        assert 2 <= len(vals) <= charts.LOG_TICKS and len(text) == len(vals), (name, vals)
        assert all("e" not in t.lower() and t[-1].isdigit() for t in text), (name, text)
        assert [float(t.replace(",", "")) for t in text] == pytest.approx(vals)
        logs = np.log10(vals)
        assert (np.diff(logs) >= (logs[-1] - logs[0]) / 20).all(), (name, text)


def test_log_axes_label_plain_numbers_that_do_not_overlap():
    # a short span (the committed runs' fusion speedups, 0.46 to 98): 1, 2 and 5 of each
    # decade, not every digit (0.7 0.8 0.9 1 overlapped)
    ft = pd.DataFrame({"impl": ["triton", "cuda", "triton"], "predicted": [0.47, 5.5, 62.0],
                       "measured": [0.46, 3.0, 97.5], "reached": [0.9, 0.55, 1.05],
                       "workload": ["gelu"] * 3, "shape": ["N=1"] * 3, "dtype": ["float32"] * 3})
    fig = charts.fusion_chart(ft)
    _readable(fig)
    assert list(fig.layout.yaxis.ticktext) == ["0.5", "1", "2", "5", "10", "20", "50", "100"]
    # large sizes as 1,000,000, not 1e+6; speedups within a fraction of one evenly spaced
    t = pd.DataFrame({"size": [1e3, 1e6, 3.5e7, 2e9], "speedup": [0.81, 1.0, 1.1, 1.27],
                      "verdict": ["regression", "same", "same", "improvement"], "workload": ["w"] * 4,
                      "impl": ["i"] * 4, "dtype": ["d"] * 4, "shape": ["s"] * 4})
    fig = charts.compare_scatter(t, 0.05)
    _readable(fig)
    assert "1,000,000" in fig.layout.xaxis.ticktext and "1,000,000,000" in fig.layout.xaxis.ticktext
    assert list(fig.layout.yaxis.ticktext) == ["0.8", "1", "1.2"]
    _readable(charts.bandwidth(rows(sizes=(5e4, 1e6, 3.5e7, 2.7e8)), "gbps"))
    _readable(charts.roofline_chart(rows(series=("triton",)), 4000.0, {"bfloat16": 800.0, "float32": 50.0}))
    # any span, from a few percent to twelve decades
    rng = np.random.default_rng(0)
    for lo, decades in zip(10 ** rng.uniform(-4, 8, 300), rng.uniform(0.02, 12, 300)):
        hi = lo * 10 ** decades
        vals = charts.log_ticks(lo, hi)
        assert 2 <= len(vals) <= charts.LOG_TICKS and all(lo <= v <= hi for v in vals), (lo, hi, vals)
        logs = np.log10(vals)
        assert (np.diff(logs) >= np.log10(hi / lo) / 20).all(), (lo, hi, vals)
        assert [float(charts.plain(v).replace(",", "")) for v in vals] == pytest.approx(vals)
