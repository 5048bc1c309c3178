"""Case: one workload, shape and dtype on one GPU, its implementations ranked by median time.

The rows are those the sidebar chooses, or one run's (``case_run``, which a click
on a chart's point sets to the point's run; ui.chart)."""
import streamlit as st

from dashboard import analysis, charts, safe, ui

ctx = ui.context()
ui.header(ctx, "Case")
SIDEBAR = "sidebar"
labels = dict(zip(ctx.loaded.runs["run_id"], ctx.loaded.runs["label"]))
run = ui.choice(st.selectbox, "Run", [SIDEBAR] + list(labels), key="case_run",
                format_func=lambda r: "as the sidebar chooses" if r == SIDEBAR else labels.get(r, r))
rows = ctx.rows if run == SIDEBAR else analysis.narrow(ctx.loaded.rows([run]), ctx.filters)
if rows.empty:
    ui.page_notes()
    st.info("This run holds no rows that match the filters in the sidebar.")
    st.stop()

cols = st.columns(4)
gpus = sorted(rows["gpu"].unique())
gpu = ui.choice(cols[0].selectbox, "GPU", gpus, key="case_gpu")
d = rows[rows["gpu"] == gpu]
workload = ui.choice(cols[1].selectbox, "Workload", sorted(d["workload"].unique()), key="case_workload")
d = d[d["workload"] == workload]
dtypes = sorted(d["dtype"].unique())
dtype = ui.choice(cols[2].selectbox, "dtype", dtypes, key="case_dtype",
                  index=dtypes.index("bfloat16") if "bfloat16" in dtypes else 0)
d = d[d["dtype"] == dtype]
shapes = d.drop_duplicates("shape").sort_values("size")["shape"].tolist()
# first view: the largest shape, where the kernels differ most
shape = ui.choice(cols[3].selectbox, "Shape", shapes, key="case_shape", index=len(shapes) - 1)
d = d[d["shape"] == shape]
ui.page_notes()

table = analysis.case_table(d)
if table.empty:
    st.info("No implementation was measured correctly on this case in the chosen runs.")
else:
    best = table.iloc[0]
    st.text(f"Fastest: {safe.clip(best['impl'])}, {best['ms']:.4g} ms, "
            f"{best['rate']:,.1f} {best['unit']}, SOL {best['sol']:.2f}")
    empty = [c for c in ("sm_clock_mhz", "power_w", "energy_j", "per_j") if table[c].isna().all()]
    empty += ["run"] if (table["run"] == "").all() else []
    empty += ["energy_from"] if "energy_j" in empty else []
    per_j = table["per_j_unit"].iloc[0]  # one case: one bound
    ui.table(table.drop(columns=empty + ["per_j_unit"]), hide_index=True, column_config={
        "ms": st.column_config.NumberColumn("ms", format="%.4g"),
        "p20": st.column_config.NumberColumn("p20 ms", format="%.4g"),
        "p80": st.column_config.NumberColumn("p80 ms", format="%.4g"),
        "rate": st.column_config.NumberColumn("rate", format="%.1f"),
        "sol": st.column_config.NumberColumn("SOL", format="%.2f"),
        "vs_torch": st.column_config.NumberColumn("× torch", format="%.2f"),
        "vs_compile": st.column_config.NumberColumn("× compile", format="%.2f"),
        "sm_clock_mhz": st.column_config.NumberColumn("SM MHz", format="%.0f"),
        "power_w": st.column_config.NumberColumn("W", format="%.0f"),
        "energy_j": st.column_config.NumberColumn("J a call", format="%.3g"),
        "energy_from": st.column_config.TextColumn("J from"),
        "per_j": st.column_config.NumberColumn(per_j, format="%.4g"),
        "command": st.column_config.TextColumn("command to reproduce", width="large")})
    st.caption("Ranked by median time; p20 and p80 bound the middle of the samples. Rate is GB/s of "
               "compulsory bytes for a memory-bound case, TFLOP/s for a compute-bound one. × torch and "
               "× compile: the fastest torch* or compile* row's time in the same run over this row's "
               "(> 1: faster). "
               f"J a call: from a back-to-back burst ({analysis.ENERGY_BURST}) where the run measured "
               f"it, else the power while timed × the median ({analysis.ENERGY_ESTIMATE}, an estimate); "
               f"{per_j} is the {'FLOPs' if per_j == 'GFLOP/J' else 'compulsory bytes'} over it.")
    st.code("\n".join(table["command"].head(5)), language="bash")
    ui.plotly(charts.case_bars(table, title=f"{workload} {shape} {dtype}, {gpu}"), key="case_chart")
ui.not_ok_section(d, "this case")
