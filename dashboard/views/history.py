"""History: one case's metric over commits, per GPU."""
import streamlit as st

from dashboard import analysis, charts, ui

ctx = ui.context()
ui.header(ctx, "History", runs=False)
frame = ctx.across_runs()
if frame.empty:
    st.info("No rows match the filters in the sidebar.")
    st.stop()
st.caption("Every loaded run (the run and commit filters do not apply here); the newest run of "
           "each commit and GPU.")

NAMES = ["workload", "impl", "dtype", "shape", "timer"]
# first view: the case measured at the most commits (most runs measure few cases twice)
richest = analysis.richest_case(frame, NAMES)
cols = st.columns(5)
case = {}
d = frame
for level, (col, name) in enumerate(zip(cols, NAMES)):
    if name == "shape":
        values = d.drop_duplicates("shape").sort_values("size")["shape"].tolist()
    else:
        values = sorted(d[name].dropna().unique())
    best = richest.index[0][level] if len(richest) else None
    case[name] = ui.choice(col.selectbox, name, values, key=f"hist_{name}",
                           index=values.index(best) if best in values else 0)
    d = d[d[name] == case[name]]
    richest = richest[richest.index.get_level_values(level) == case[name]]
left, right = st.columns(2)
metric = ui.choice(left.selectbox, "Metric", ["ms_median", "gbps", "tflops", "sol"], key="hist_metric")
by_date = ui.choice(right.radio, "x axis", ["commit order", "date"], horizontal=True, key="hist_x") == "date"
h = analysis.history(frame, case, metric)
# each point names its case and run, so a click opens the Case view on that commit's run
h_case = h.assign(**{k: case[k] for k in ("workload", "dtype", "shape")})
ui.chart(charts.history_chart(h_case, metric, by_date, title=" · ".join(map(str, case.values()))), key="hist_chart")
st.caption("A click on a point opens the case in that run.")
bad = h[h["status"] != "ok"]
if len(bad):
    st.caption("Runs where this case was not ok (gaps in the line):")
    ui.table(bad[["gpu", "commit", "status", "run_id"]], hide_index=True)
with st.expander("Values"):
    ui.table(h, hide_index=True)
ui.page_notes()
