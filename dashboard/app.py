"""The dashboard's entry: ``streamlit run dashboard/app.py`` (see dashboard/launch.py).

Loads the runs named by the launcher (data.py), draws the sidebar filters,
then runs the chosen page from views/.  Every page reads the same context.

With KERNEL_SUITE_DASHBOARD_PROFILE set to a folder, each script run is
profiled (cProfile) into a file there named by its page and time, for
``python -m pstats``; with KERNEL_SUITE_DASHBOARD_TIMES set to a file, each
script run, and each rerun of a page's fragment alone (ui.page_part), appends
a line "page seconds" to it (scripts/dashboard_scale.py reads it to tell the
server's share of a change from the browser's).
"""
import os
import sys
import time
from pathlib import Path

# streamlit puts this file's folder on sys.path, not the repository root
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import streamlit as st  # noqa: E402

from dashboard import data, ui  # noqa: E402

st.set_page_config(page_title="kernel-suite", layout="wide")

VIEWS = Path(__file__).resolve().parent / "views"
PAGES = [
    st.Page(VIEWS / "overview.py", title="Overview", url_path="overview", default=True),
    st.Page(VIEWS / "case.py", title="Case", url_path="case"),
    st.Page(VIEWS / "bandwidth.py", title="Bandwidth", url_path="bandwidth"),
    st.Page(VIEWS / "roofline.py", title="Roofline", url_path="roofline"),
    st.Page(VIEWS / "fusion.py", title="Fusion", url_path="fusion"),
    st.Page(VIEWS / "profile.py", title="Profile", url_path="profile"),
    st.Page(VIEWS / "compare.py", title="Compare", url_path="compare"),
    st.Page(VIEWS / "history.py", title="History", url_path="history"),
    st.Page(VIEWS / "data_table.py", title="Data", url_path="data"),
]
page = st.navigation(PAGES)


def main() -> None:
    loaded = data.load()
    filters = ui.sidebar(loaded)
    ui.keep_page_params(page.url_path or "overview")
    ui.build_context(loaded, filters)
    ui.in_app_run(page.run)


PROFILE = os.environ.get("KERNEL_SUITE_DASHBOARD_PROFILE")
STARTED = time.perf_counter()
try:
    if PROFILE:
        import cProfile

        profiler = cProfile.Profile()
        try:
            profiler.runcall(main)
        finally:  # st.stop() and reruns end a script run by raising
            profiler.dump_stats(Path(PROFILE) / f"{time.time():.3f}-{page.url_path or 'overview'}.prof")
    else:
        main()
finally:
    ui.record_time(page.url_path or "overview", time.perf_counter() - STARTED)
