"""dashboard/tables.py: the SOL table's text and colours, as Streamlit reads a Styler."""
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")
pytest.importorskip("jinja2", reason="pandas' Styler needs jinja2 (scripts/setup.sh dev)")

from dashboard import charts, tables  # noqa: E402


def styles(styler) -> dict[tuple[int, int], dict[str, str]]:
    """{(row, column): {CSS property: value}}, from the Styler's computed styles (what
    Streamlit sends the browser: streamlit.elements.lib.pandas_styler_utils)."""
    styler._compute()
    out = {}
    for rule in styler._translate(False, False)["cellstyle"]:
        for sel in rule["selectors"]:
            row, col = sel.removeprefix("row").split("_col")
            out[int(row), int(col)] = dict(rule["props"])
    return out


def matrix():
    """analysis.sol_matrix's shape: workload x implementation, SOL and status."""
    idx = ["gelu", "softmax"]
    sol = pd.DataFrame({"triton": [0.8, np.nan], "cuda": [12.5, np.nan], "eager": [0.05, np.nan]}, index=idx)
    status = pd.DataFrame({"triton": ["", "error"], "cuda": ["", np.nan], "eager": ["", "unsupported"]},
                          index=idx)
    return sol, status


def test_sol_table_text_an_implementation_a_row():
    styler = tables.sol_table(*matrix())
    text = styler.data
    assert list(text.index) == ["triton", "cuda", "eager"] and list(text.columns) == ["gelu", "softmax"]
    assert text.index.name == "implementation"
    assert text.loc["triton"].tolist() == ["0.80", "error"]
    assert text.loc["cuda"].tolist() == ["12", tables.NO_ROW]  # no row at all: a dash
    assert text.loc["eager"].tolist() == ["0.05", "unsupported"]
    # text, never a missing value: the grid would show "None" for it
    assert text.map(lambda v: isinstance(v, str) and v != "").all().all()


def test_sol_table_colours_values_by_viridis_and_failures_by_status():
    css = styles(tables.sol_table(*matrix()))
    # triton/gelu 0.8: Viridis at 0.8 (a light green), dark text
    assert css[0, 0] == {"background-color": "rgb(124, 209, 79)", "color": "#000000"}
    # cuda/gelu 12.5: clipped to 1 (Viridis' yellow)
    assert css[1, 0]["background-color"] == "rgb(253, 231, 37)"
    # eager/gelu 0.05: near Viridis' dark violet, white text
    assert css[2, 0]["color"] == "#ffffff" and css[2, 0]["background-color"] == "rgb(70, 19, 100)"
    # a failure: its status colour, no background
    assert css[0, 1] == {"color": charts.STATUS_COLORS["error"]}
    assert css[2, 1] == {"color": charts.STATUS_COLORS["unsupported"]}
    assert "background-color" not in css[1, 1]


def test_sol_table_without_statuses():
    sol, _ = matrix()
    text = tables.sol_table(sol.iloc[:1], pd.DataFrame()).data
    assert text.loc["triton", "gelu"] == "0.80"


def test_column_widths_fit_the_longest_text_of_any_row():
    """The grid sizes a column by its first rows: a status in the last row must widen it."""
    text = pd.DataFrame({"gemm": ["0.99"] * 13 + ["unsupported"], "a_long_workload_name": ["0.5"] * 14},
                        index=pd.Index(["t"] * 13 + ["triton:persistent"], name="implementation"))
    widths = tables.column_widths(text)
    assert widths["gemm"] == tables.CHAR_PX * len("unsupported") + tables.PAD_PX
    assert widths["a_long_workload_name"] == tables.CHAR_PX * len("a_long_workload_name") + tables.PAD_PX
    assert widths["_index"] == tables.CHAR_PX * len("triton:persistent") + tables.PAD_PX
    assert tables.column_widths(pd.DataFrame({"x" * 500: ["1"]}))["x" * 500] == tables.MAX_PX
