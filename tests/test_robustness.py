"""suite.robustness on a synthetic run: SOL for memory-bound workloads, the ratio
to the workload's reference backend for compute-bound ones, worst case named."""
import io
import math
from types import SimpleNamespace

import pandas as pd

from suite.robustness import print_robustness, robustness

WORKLOADS = {"mem": SimpleNamespace(bound="memory", reference_backend=None),
             "mm": SimpleNamespace(bound="compute", reference_backend="lib")}


def row(workload, impl, shape, ms, sol=math.nan, status="ok", dtype="bfloat16"):
    return dict(workload=workload, impl=impl, dtype=dtype, timer="events", shape=shape, ms_median=ms,
                sol=sol, status=status)


def run():
    return pd.DataFrame([
        row("mem", "fast", "N=7", 1.0, sol=0.9), row("mem", "fast", "N=9", 1.0, sol=0.4),
        row("mem", "fast", "N=11", 1.0, sol=0.9, status="incorrect"),
        row("mm", "lib", "M=1", 2.0), row("mm", "lib:alt", "M=1", 1.0),  # the reference: best of lib*
        row("mm", "lib", "M=3", 4.0),
        row("mm", "mine", "M=1", 2.0), row("mm", "mine", "M=3", 2.0),
        row("mm", "mine", "M=5", 1.0),  # no reference row at M=5: counted, not scored
    ])


def test_memory_bound_rows_are_scored_on_sol_and_only_ok_rows_count():
    r = robustness(run(), WORKLOADS).set_index(["workload", "impl"])
    fast = r.loc[("mem", "fast")]
    assert fast["ok"] == 2 and fast["score"] == "SOL"
    assert math.isclose(fast["geomean"], math.sqrt(0.9 * 0.4)) and fast["worst"] == 0.4
    assert fast["worst_shape"] == "N=9"


def test_compute_bound_rows_are_scored_against_the_best_of_the_reference_backend():
    r = robustness(run(), WORKLOADS).set_index(["workload", "impl"])
    mine = r.loc[("mm", "mine")]
    assert mine["ok"] == 3 and mine["scored"] == 2 and mine["score"] == "x lib"
    # M=1: best of lib, lib:alt is 1.0 ms, mine 2.0 -> 0.5; M=3: 4.0 / 2.0 -> 2.0
    assert mine["worst"] == 0.5 and mine["worst_shape"] == "M=1" and math.isclose(mine["geomean"], 1.0)
    assert r.loc[("mm", "lib:alt")]["worst"] == 1.0 and r.loc[("mm", "lib")]["worst"] == 0.5


def test_an_unknown_workload_falls_back_to_sol_and_the_table_prints():
    df = run()
    r = robustness(df, {})
    assert set(r["score"]) == {"SOL"} and r.set_index("impl").loc["mine", "scored"] == 0
    out = io.StringIO()
    print_robustness(df, WORKLOADS, file=out)
    assert "x lib" in out.getvalue() and "N=9" in out.getvalue()
