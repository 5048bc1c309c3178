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
