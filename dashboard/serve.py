"""``python dashboard/serve.py run dashboard/app.py [streamlit options]``: the
Streamlit server, with the results loaded before it answers.

dashboard.launch starts this file instead of ``python -m streamlit``: the runs the
launcher named (data.PATHS_ENV) are read into data.load's process-wide cache
(st.cache_resource) and the page modules' heavy imports are done first, so the
first visitor's page only computes its view (200 runs x 2,000 rows: a ~6 s
load moves before the server's first answer).  A file added later is read on
the next rerun as before (data.fingerprint).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

# run as a file (python dashboard/serve.py): the repository root goes on sys.path
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def warm() -> None:
    start = time.monotonic()
    import pyarrow as pa

    # malloc, not Arrow's mimalloc: after the load (data.build releases the unused
    # pages) mimalloc still holds its temporaries (200 runs x 2,000 rows: ~850 MB
    # resident against ~550 MB)
    pa.set_memory_pool(pa.system_memory_pool())
    import plotly.graph_objects  # noqa: F401
    from dashboard import analysis, charts, charts_profile, data, tables, ui  # noqa: F401
    from suite import compare  # noqa: F401  (Compare's verdicts)
    loaded = data.load()
    for column in ("run_id", "gpu", "commit", "workload", "dtype", "impl", "timer"):
        loaded.options(column)  # the sidebar's choices
    first_use()
    first_view(loaded)
    print(f"kernel-suite dashboard: {len(loaded.frame):,} rows of {len(loaded.runs)} runs loaded "
          f"in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def first_use() -> None:
    """What a process pays once, on the first page otherwise (~1 s on 2 cores): Plotly's
    validators of each trace kind the pages draw, its dataframe adapter (narwhals),
    pandas' Styler and its templates (Compare's shaded table, the Overview's SOL table)."""
    import pandas as pd
    import plotly.graph_objects as go
    import streamlit.delta_generator as dg

    from dashboard import tables

    x = pd.Series([1.0, 2.0])
    fig = go.Figure([go.Scatter(x=x, y=x, customdata=pd.concat([x, x], axis=1)), go.Bar(x=x, y=x)])
    fig.add_hline(y=1.0, annotation_text="a")
    fig.update_layout(title="a").update_xaxes(type="log")
    fig.to_dict()
    pd.DataFrame({"a": x}).style.apply(lambda r: [""] * len(r), axis=1).format({"a": "{:.1f}"}).to_html()
    tables.sol_css([0.5])  # Plotly's colour scales (the Overview's SOL table)
    # Streamlit's once-a-process check for a script started without `streamlit run`
    # walks every frame's source (~0.3 s); this process is `streamlit run`
    dg._use_warning_has_been_displayed = True


def first_view(loaded) -> None:
    """The Overview's tables under no filter, as its page asks for them (ui.Context.of):
    what every visitor sees first, computed once here instead of on the first page."""
    from dashboard import analysis, ui

    if loaded.frame.empty:
        return
    ctx = ui.context_for(loaded, analysis.Filters())
    ctx.of(analysis.best_table)
    dtypes, gpus = ctx.of(analysis.sol_choices)
    if dtypes and gpus:
        runs = ctx.of(analysis.sol_runs, gpus[0])
        ctx.of(analysis.sol_matrix, dtypes[0], gpus[0], runs[0] if runs else None)


def main(argv: list[str]) -> int:
    warm()
    from streamlit.web import cli

    return cli.main(args=argv, prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
