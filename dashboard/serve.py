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

    # malloc, not Arrow's mimalloc: mimalloc keeps the pages of the load's
    # temporaries (200 runs x 2,000 rows: ~850 MB resident against ~550 MB)
    pa.set_memory_pool(pa.system_memory_pool())
    import plotly.graph_objects  # noqa: F401
    from dashboard import analysis, charts, charts_profile, data, ui  # noqa: F401
    from suite import compare  # noqa: F401  (Compare's verdicts)
    loaded = data.load()
    for column in ("run_id", "gpu", "commit", "workload", "dtype", "impl", "timer"):
        loaded.options(column)  # the sidebar's choices
    print(f"kernel-suite dashboard: {len(loaded.frame):,} rows of {len(loaded.runs)} runs loaded "
          f"in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    warm()
    from streamlit.web import cli

    return cli.main(args=argv, prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
