"""Pure functions from DataFrames to coloured tables (pandas Styler) for st.dataframe;
no Streamlit, no I/O.

A table instead of a Plotly figure where a table says as much: the browser loads
Plotly's JavaScript only for a page that draws a Plotly chart, and evaluating it
is a large share of a first render, so the default page (the Overview) draws
none.  Streamlit's data grid paints cells as text on a canvas (no Markdown, no
HTML), so names from the rows need no escaping here; the colours are CSS that
these functions write, never text from the rows.  No matplotlib: the colour map
is Plotly's Viridis, sampled in Python.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler
from plotly.colors import sample_colorscale, unlabel_rgb

from dashboard.charts import STATUS_COLORS

SOL_COLORSCALE = "Viridis"   # 0 dark violet, 1 yellow, as the SOL colour bar elsewhere
NO_ROW = "—"                 # the implementation has no row on that case
# the grid sizes a column by its first rows and header only: a longer text further down
# is cut ("unsupp…"); a 14-px grid font is at most ~8 px a character, plus the padding
CHAR_PX, PAD_PX, MAX_PX = 8, 16, 320


def sol_css(values) -> list[str]:
    """CSS for SOL cells: a Viridis background (the value clipped to 0..1), and black
    or white text, whichever reads on it."""
    clipped = [min(max(float(v), 0.0), 1.0) for v in values]
    out = []
    for rgb in sample_colorscale(SOL_COLORSCALE, clipped) if clipped else []:
        r, g, b = unlabel_rgb(rgb)
        light = 0.299 * r + 0.587 * g + 0.114 * b > 140
        out.append(f"background-color: {rgb}; color: {'#000000' if light else '#ffffff'}")
    return out


def _cell(v: float) -> str:
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.0f}"


def sol_table(sol: pd.DataFrame, status: pd.DataFrame) -> Styler:
    """analysis.sol_matrix's (SOL, status) as one table, an implementation a row and
    a workload a column: a value on its Viridis colour, a failed cell its status
    (in its status colour) and "—" where the implementation has no row.  Every cell
    holds its text (the grid shows a missing value as "None" whatever its format),
    so a column sorts as text: values under 10 in order, then the statuses."""
    sol = sol.T
    full = status.T.reindex_like(sol) if not status.empty else pd.DataFrame(index=sol.index, columns=sol.columns)
    full = full.fillna(NO_ROW).where(sol.isna(), "")  # an ok row without a SOL: empty
    text = sol.map(lambda v: _cell(v) if pd.notna(v) else "").where(sol.notna(), full).astype(str)
    text.index.name, text.columns.name = "implementation", None
    css = np.array(full.map(lambda s: f"color: {STATUS_COLORS.get(s, STATUS_COLORS['unavailable'])}"), dtype=object)
    values = sol.to_numpy(dtype=float)
    css[~np.isnan(values)] = sol_css(values[~np.isnan(values)])
    return text.style.apply(lambda frame: pd.DataFrame(css, index=frame.index, columns=frame.columns), axis=None)


def column_widths(text: pd.DataFrame) -> dict[str, int]:
    """Pixels for each column of ``text`` and for its index ("_index", as st.column_config
    names it) that fit the header and the longest cell, at most MAX_PX each."""
    def px(header, values) -> int:
        return min(MAX_PX, CHAR_PX * max([len(str(header))] + [len(str(v)) for v in values]) + PAD_PX)

    return {"_index": px(text.index.name or "", text.index), **{c: px(c, text[c]) for c in text.columns}}
