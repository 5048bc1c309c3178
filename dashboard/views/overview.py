"""Overview: best implementation per workload and dtype, the SOL matrix; pass rate and environment
in sections that run only while opened (fewer charts and tables for the browser to draw).

The SOL matrix is a coloured table (dashboard.tables), not a Plotly chart: the browser loads
and evaluates Plotly's JavaScript only for a page that shows a Plotly chart.  The one chart
drawn by default, the best implementations' speedups, comes last and, in a session whose
browser has no Plotly yet, after the rest is drawn (ui.after_first_render): the first render
does not wait for Plotly, and the first chart page the visitor opens finds it loaded."""
import streamlit as st

from dashboard import analysis, charts, safe, tables, ui
from suite.roofline import SUSPECT_SOL

ctx = ui.context()
ui.header(ctx, "Overview")
rows = ctx.rows

st.subheader("Best correct implementation, at the largest size")
best = ctx.of(analysis.best_table)
several = (best["run"] != "").any()
st.caption("Speedups are the best implementation's median time against eager's and against the "
           "fastest PyTorch library op (`torch`, `torch:*`) on the same case and timer"
           + (", in the same run: each chosen run of a GPU has its own rows, named in the run column." if several else "."))
ui.table(best.drop(columns=["run_id"] if several else ["run", "run_id"]), hide_index=True, column_config={
    "ms": st.column_config.NumberColumn("ms", format="%.4g"),
    "sol": st.column_config.NumberColumn("SOL", format="%.2f"),
    "vs_eager": st.column_config.NumberColumn("× eager", format="%.2f"),
    "vs_torch": st.column_config.NumberColumn("× torch", format="%.2f")})

sus = analysis.suspects(rows)
if len(sus):
    st.warning(f"{len(sus)} row(s) claim more than {SUSPECT_SOL:.2f} of the roofline "
               "(faster than the measured ceilings allow): a roof, check, timing or bytes-model "
               "problem. They are left out of every speed chart.")
    ui.table(sus[["gpu", "workload", "impl", "dtype", "shape", "timer", "ms_median", "sol",
                      "error"]], hide_index=True)

st.subheader("SOL at the largest size")
dtypes, gpus = ctx.of(analysis.sol_choices)
left, mid, right = st.columns(3)
dtype = ui.choice(left.selectbox, "dtype", dtypes, key="overview_dtype")
gpu = ui.choice(mid.selectbox, "GPU", gpus, key="overview_gpu") if len(gpus) > 1 else gpus[0]
# several chosen runs of this GPU: the matrix shows one at a time, its ratios all of one run
runs = ctx.of(analysis.sol_runs, gpu)
labels = dict(zip(ctx.loaded.runs["run_id"], ctx.loaded.runs["label"]))
run = ui.choice(right.selectbox, "Run", runs, key="overview_run", format_func=lambda r: labels.get(r, r)) \
    if runs else None
sol, status = ctx.of(analysis.sol_matrix, dtype, gpu, run)
if sol.empty:
    st.info(f"No correct {safe.md(dtype)} rows on {safe.md(gpu)}.")
else:
    st.caption(f"SOL of each implementation (row) on each workload (column), {safe.md(dtype)} on "
               f"{safe.md(gpu)}{', in the chosen run' if run else ''}: 1 is the roofline; a failed case "
               "shows its status, — no row. A click on a cell opens its case.")
    table = tables.sol_table(sol, status)
    event = ui.table(table, key="overview_sol", width="content", height="content",
                         column_config={c: st.column_config.TextColumn(width=w)
                                        for c, w in tables.column_widths(table.data).items()},
                         on_select="rerun", selection_mode="single-cell")
    cells = event.selection.get("cells", []) if event else []
    shapes = analysis.sol_shapes(rows, dtype, gpu, run) if cells else {}
    if cells and cells[0][1] in shapes:  # (row, workload); every implementation is on the Case view
        ui.open_case({"gpu": gpu, "workload": cells[0][1], "dtype": dtype, "shape": shapes[cells[0][1]],
                      **({"run_id": run} if run else {})})

# the sections below the SOL matrix run only while opened (their state in the URL): each
# chart and table the browser draws costs the first render and every filter change
with st.expander("Pass rate", key="overview_show_pass", bind="query-params") as section:
    if section.open:
        counts = analysis.pass_rate(rows)
        st.caption("ok / (ok + incorrect + error); unsupported and unavailable cases were not run.")
        left, right = st.columns([3, 2])
        with left:
            ui.plotly(charts.pass_rate_bars(counts, title="rows per status"), key="overview_pass")
        ui.table(counts, right, hide_index=True, column_config={
            "pass_rate": st.column_config.ProgressColumn("pass rate", min_value=0.0, max_value=1.0,
                                                         format="percent")})
        ui.not_ok_section(rows, "the chosen runs")

with st.expander("Environment", key="overview_show_env", bind="query-params") as section:
    if section.open:
        ui.table(analysis.environment(rows), hide_index=True)
        st.caption("Measured ceilings (used in every formula) against the datasheet (shown for reference).")
        ui.table(analysis.ceilings(rows), hide_index=True, column_config={
            "gbps_of_datasheet": st.column_config.NumberColumn("GB/s of datasheet", format="percent"),
            "tflops_of_datasheet": st.column_config.NumberColumn("TFLOP/s of datasheet", format="percent")})


def speedups() -> None:
    chosen = best[(best["dtype"] == dtype) & (best["gpu"] == gpu)]
    if run:
        chosen = chosen[chosen["run_id"] == run]
    if len(chosen):
        st.subheader("Speedup of the best implementation at the largest size")
        st.caption("The first table's × eager and × torch on the SOL matrix's dtype and GPU; above the "
                   "dashed line the best implementation is the faster.")
        title = f"{dtype} on {gpu}" + (f", {chosen['run'].iloc[0]}" if run else "")
        ui.plotly(charts.best_speedups(chosen, title=title), key="overview_speedup")


# last, and drawn once the rest is (ui.after_first_render): the session's first Plotly
# chart, so that the browser loads Plotly's JavaScript while the visitor reads
ui.after_first_render(speedups)
ui.page_notes()
