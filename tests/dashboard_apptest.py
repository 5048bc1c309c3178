"""Driving the dashboard through Streamlit's AppTest, shared by the dashboard tests."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import data

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


def app(monkeypatch, paths, page="overview", params=None) -> AppTest:
    """The app over ``paths``, run once, then switched to ``page`` with ``params`` in the URL."""
    monkeypatch.setenv(data.PATHS_ENV, json.dumps([str(p) for p in paths]))
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    if page != "overview":
        at.switch_page(f"views/{page}.py").run()
    return at


def figures(at: AppTest) -> list[dict]:
    """The Plotly figures on the page, as their JSON specs."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def table(at: AppTest, key: str):
    """The st.dataframe ``key`` on the page (AppTest's element; ``.value`` its data)."""
    return next(el for el in at.dataframe if el.proto.id.endswith(key))


def _select(at: AppTest, element, selection: dict) -> AppTest:
    """Run ``at`` again as if ``selection`` had been made on ``element`` (a chart or
    table with on_select): AppTest has no setter for a selection, so its widget state
    is sent as the browser sends it."""
    from streamlit.proto.WidgetStates_pb2 import WidgetStates

    states = at._tree.get_widget_states()
    ws = WidgetStates()
    ws.widgets.extend(states.widgets)
    state = ws.widgets.add()
    state.id = element.proto.id
    state.string_value = json.dumps({"selection": selection})
    return at._run(ws)


def select_point(at: AppTest, key: str, point: dict) -> AppTest:
    """Run ``at`` again as if ``point`` (Streamlit's selection: customdata and all) had
    been clicked on the Plotly chart ``key``."""
    chart = next(el for el in at.get("plotly_chart") if el.proto.id.endswith(key))
    return _select(at, chart, {"points": [point], "point_indices": [0], "box": [], "lasso": []})


def select_cell(at: AppTest, key: str, row: int, column: str) -> AppTest:
    """Run ``at`` again as if the cell (row position, column name) of the table ``key``
    had been clicked (selection_mode="single-cell")."""
    return _select(at, table(at, key), {"rows": [], "columns": [], "cells": [[row, column]]})
