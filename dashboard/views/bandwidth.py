"""Bandwidth: achieved GB/s (memory bound) or TFLOP/s (compute bound) against size."""
import streamlit as st

from dashboard import analysis, charts, safe, ui
from suite import store

# the columns this page reads (its chart, roofs, shape families and failed rows): each row
# mask below then takes these alone, not every column of the store
COLUMNS = ["workload", "impl", "backend", "dtype", "shape", *store.SHAPE_COLUMNS, "size", "timer", "gpu", "run_id", "commit", "timestamp",
           "status", "device", "error", "rel_err", "tol", "bound", "ms_median", "ms_p20", "ms_p80", "sol", "gbps", "tflops",
           "flops", "min_bytes", "peak_gbps", "copy_gbps", "peak_tflops", "math", "ceilings", "sm_clock_mhz",
           "power_w", "clock_limits"]

ctx = ui.context()
ui.header(ctx, "Bandwidth")


# the page's widgets rerun this part alone (ui.page_part): a change of the workload, dtype,
# shape family or metric sends neither the sidebar nor the title again
@ui.page_part("bandwidth")
def bandwidth_view() -> None:
    ctx = ui.context()
    rows = analysis.only(ctx.rows, COLUMNS)

    left, mid, right = st.columns(3)
    workload = ui.choice(left.selectbox, "Workload", sorted(rows["workload"].unique()), key="bw_workload")
    d = rows[rows["workload"] == workload]
    dtypes = sorted(d["dtype"].unique())
    dtype = ui.choice(mid.selectbox, "dtype", dtypes, key="bw_dtype",
                      index=dtypes.index("bfloat16") if "bfloat16" in dtypes else 0)
    d = d[d["dtype"] == dtype]
    # shapes of one size (causal or not, same B*H*S*D) would zigzag on one line: draw one
    # family of shapes at a time where one shape key separates them, else points only
    lines, family = True, ""
    if analysis.shares_sizes(d):
        key = analysis.family_key(d)
        if key:
            values = sorted(d[key].dropna().unique().tolist())
            most = d.drop_duplicates("shape")[key].value_counts().idxmax()
            label = key.removeprefix("shape_")
            value = ui.choice(left.selectbox, f"Shapes with {label} =", values, index=values.index(most),
                              key=f"bw_family_{workload}")
            d, family = d[d[key] == value], f", {label}={value}"
        else:
            lines = False
    good = analysis.ok(d)
    # the limiter of the largest case decides the default metric; either can be chosen
    top = good.sort_values("size").tail(1)
    compute = bool(len(top)) and str(top["bound"].iloc[0]) == "compute"
    metric = ui.choice(right.radio, "Metric", ["gbps", "tflops"], index=1 if compute else 0, horizontal=True,
                       format_func=lambda m: charts.METRICS[m][0], key=f"bw_metric_{workload}")

    if good.empty:
        st.info(f"No correct {safe.md(workload)} {safe.md(dtype)} rows in the chosen runs.")
    else:
        good = analysis.with_series(good)
        ceilings = {}
        for gpu, g in good.groupby("gpu"):
            gb, gt = analysis.roofs(g)
            name = f"{gpu} measured copy" if metric == "gbps" else f"{gpu} measured {dtype} matmul"
            ceilings[name] = gb if metric == "gbps" else gt.get(dtype)
        ui.chart(charts.bandwidth(good, metric, ceilings, title=f"{workload}, {dtype}{family}", lines=lines),
                 key="bw_chart")
        spread = ("Lines are medians; the band spans" if lines else
                  "Several shapes share a size here, so points are not joined (hover names the shape); "
                  "points are medians, bars span")
        st.caption(f"{spread} the 20th to 80th percentile of the samples; a click on a point opens its case. "
                   "GB/s counts the compulsory bytes of a fully fused kernel (min_bytes), so an "
                   "unfused chain that moves more shows less than the traffic it really made.")
    ui.not_ok_section(d, f"{workload} {dtype}")
    ui.page_notes()


bandwidth_view()
