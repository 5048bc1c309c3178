"""Overview: best implementation per workload and dtype, SOL heatmap; pass rate and environment
in sections that run only while opened (fewer charts and tables for the browser to draw)."""
import streamlit as st

from dashboard import analysis, charts, safe, ui
from suite.roofline import SUSPECT_SOL

ctx = ui.context()
ui.header(ctx, "Overview")
rows = ctx.rows

st.subheader("Best correct implementation, at the largest size")
best = analysis.best_table(rows)
st.caption("Speedups are the best implementation's median time against eager's and against the "
           "fastest PyTorch library op (`torch`, `torch:*`) on the same case and timer.")
st.dataframe(best, hide_index=True, column_config={
    "ms": st.column_config.NumberColumn("ms", format="%.4g"),
    "sol": st.column_config.NumberColumn("SOL", format="%.2f"),
    "vs_eager": st.column_config.NumberColumn("× eager", format="%.2f"),
    "vs_torch": st.column_config.NumberColumn("× torch", format="%.2f")})

sus = analysis.suspects(rows)
if len(sus):
    st.warning(f"{len(sus)} row(s) claim more than {SUSPECT_SOL:.2f} of the roofline "
               "(faster than the measured ceilings allow): a roof, check, timing or bytes-model "
               "problem. They are left out of every speed chart.")
    st.dataframe(sus[["gpu", "workload", "impl", "dtype", "shape", "timer", "ms_median", "sol",
                      "error"]], hide_index=True)

st.subheader("SOL at the largest size")
dtypes = [d for d in ("bfloat16", "float16", "float32") if d in set(rows["dtype"])] or \
    sorted(rows["dtype"].dropna().unique())
gpus = sorted(rows["gpu"].unique())
left, right = st.columns(2)
dtype = ui.choice(left.selectbox, "dtype", dtypes, key="overview_dtype")
gpu = ui.choice(right.selectbox, "GPU", gpus, key="overview_gpu") if len(gpus) > 1 else gpus[0]
sol, status = analysis.sol_matrix(rows, dtype, gpu)
if sol.empty:
    st.info(f"No correct {safe.md(dtype)} rows on {safe.md(gpu)}.")
else:
    st.plotly_chart(charts.sol_heatmap(sol, status, title=f"SOL, {dtype}, {gpu}"), key="overview_heatmap")

# the sections below the heatmap run only while opened (their state in the URL): each
# chart and table the browser draws costs the first render and every filter change
with st.expander("Pass rate", key="overview_show_pass", bind="query-params") as section:
    if section.open:
        counts = analysis.pass_rate(rows)
        st.caption("ok / (ok + incorrect + error); unsupported and unavailable cases were not run.")
        left, right = st.columns([3, 2])
        left.plotly_chart(charts.pass_rate_bars(counts, title="rows per status"), key="overview_pass")
        right.dataframe(counts, hide_index=True, column_config={
            "pass_rate": st.column_config.ProgressColumn("pass rate", min_value=0.0, max_value=1.0,
                                                         format="percent")})
        ui.not_ok_section(rows, "the chosen runs")

with st.expander("Environment", key="overview_show_env", bind="query-params") as section:
    if section.open:
        st.dataframe(analysis.environment(rows), hide_index=True)
        st.caption("Measured ceilings (used in every formula) against the datasheet (shown for reference).")
        st.dataframe(analysis.ceilings(rows), hide_index=True, column_config={
            "gbps_of_datasheet": st.column_config.NumberColumn("GB/s of datasheet", format="percent"),
            "tflops_of_datasheet": st.column_config.NumberColumn("TFLOP/s of datasheet", format="percent")})
ui.page_notes()
