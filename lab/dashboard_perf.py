"""How fast the dashboard answers on a large results folder (a script, not a test).

    python3 -m lab.dashboard_perf [--runs 200] [--rows 2000] [--dir FOLDER]

Writes ``runs`` synthetic result files of ``rows`` rows each (two GPUs, many
commits; tests/fixtures_dashboard.py), then, in this fresh process, times
through streamlit's AppTest (the server-side script run, without the browser's
drawing): the Overview's first render, which includes reading every file, and
then filter changes and page switches on the warm cache.
Targets of issue 6: first render under 3 s, a filter change under 1 s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


CPU = []  # process CPU seconds of each timed call: on a busy machine, closer to the idle wall time


def timed(fn) -> float:
    t, c = time.perf_counter(), time.process_time()
    fn()
    CPU.append(time.process_time() - c)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--dir", help="reuse or fill this folder instead of a temporary one")
    args = ap.parse_args(argv)

    folder = Path(args.dir or tempfile.mkdtemp(prefix="dashboard-perf-"))
    try:
        return _bench(folder, args)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)


def _bench(folder: Path, args) -> int:
    import fixtures_dashboard as fx

    if not any(folder.rglob("*.parquet")):
        t = timed(lambda: fx.write_many(folder, args.runs, args.rows))
        print(f"wrote {args.runs} runs x {args.rows} rows to {folder} in {t:.1f} s")

    print(f"load average before timing: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    from dashboard import data

    os.environ[data.PATHS_ENV] = json.dumps([str(folder)])
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    first = timed(at.run)
    assert not at.exception, at.exception
    loaded = data.load()
    print(f"loaded {len(loaded.runs)} runs, {len(loaded.frame):,} rows, {len(loaded.problems)} problems")
    print(f"overview first render (cold cache, reads every file): {first:.2f} s wall, "
          f"{CPU[-1]:.2f} s CPU  [target < 3 s]")

    changes = {
        "dtype = bfloat16": lambda: at.multiselect(key="filter_dtype").set_value(["bfloat16"]).run(),
        "workload = softmax": lambda: at.multiselect(key="filter_workload").set_value(["softmax"]).run(),
        "GPU = h200": lambda: at.multiselect(key="filter_gpu").set_value(["h200"]).run(),
        "pick 5 runs": lambda: at.multiselect(key="filter_run").set_value(
            loaded.runs["run_id"].iloc[:10:2].tolist()).run(),
        "clear all filters": lambda: [at.multiselect(key=f"filter_{n}").set_value([])
                                      for n in ("run", "gpu", "workload", "dtype")] and at.run(),
        "overview rerun (same filters)": lambda: at.run(),
    }
    times = []
    for name, change in changes.items():
        t = timed(change)
        assert not at.exception, (name, at.exception)
        times.append(t)
        print(f"filter change, {name}: {t:.3f} s wall, {CPU[-1]:.3f} s CPU")
    print(f"filter change: median {statistics.median(times):.3f} s, max {max(times):.3f} s  [target < 1 s]")
    for page in ("bandwidth", "roofline", "fusion", "compare", "history", "data_table"):
        t = timed(lambda: at.switch_page(f"views/{page}.py").run())
        assert not at.exception, (page, at.exception)
        print(f"page switch to {page}: {t:.3f} s wall, {CPU[-1]:.3f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
