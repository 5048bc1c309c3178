"""Fusion: measured speedup over eager against the bytes model's prediction."""
import streamlit as st

from dashboard import analysis, charts, safe, ui

ctx = ui.context()
ui.header(ctx, "Fusion", runs=False)
rows = ctx.newest_having("eager")
shown = ctx.loaded.runs[ctx.loaded.runs["run_id"].isin(rows["run_id"].unique())]
if len(shown):
    what = "Chosen runs" if ctx.filters.run else "Newest run with eager rows of each GPU and workload"
    st.caption(f"{what}: " + "; ".join(safe.md(x) for x in shown["label"]))

# workload names come from the rows: only fixed text goes to st.info (Markdown), names to st.text
missing = analysis.no_eager(rows)
if "gemm" in missing:
    st.info("**gemm** has no eager implementation: a compute-bound matmul has nothing to gain from "
            "fusion, `a @ b` is already one library call, so there is no unfused chain to compare with.")
others = [wl for wl in missing if wl != "gemm"]
if others:
    st.info("These workloads have no eager rows in the chosen runs to compare with:")
    st.text(safe.plain(others))

ft = analysis.fusion_table(rows)
if ft.empty:
    st.info("No case has both a correct eager row and a correct fused row in the chosen runs.")
else:
    ui.chart(charts.fusion_chart(ft, title="Speedup over eager: measured vs predicted"), key="fusion_chart")
    st.caption("Predicted = eager_bytes / min_bytes: what removing the intermediate HBM traffic "
               "can buy when both run at the bandwidth roof. Points under the dashed line fell "
               "short of it; compute-bound cases (large attention) can beat it, since the "
               "prediction counts bytes only. A click on a point opens its case, in its run.")
    threshold = st.slider("Fell short when reaching less than", 0.1, 1.0, 0.8, 0.05,
                          format="%.2f of the prediction", key="fusion_short", bind="query-params")
    short = ft[ft["reached"] < threshold].sort_values("reached")
    st.subheader(f"Fell short ({len(short)} of {len(ft)})")
    ui.table(short, hide_index=True, column_config={
        c: st.column_config.NumberColumn(c, format="%.2f") for c in ("predicted", "measured", "reached")})
    with st.expander("Every fused case"):
        ui.table(ft, hide_index=True)
ui.not_ok_section(rows, "the chosen runs")
