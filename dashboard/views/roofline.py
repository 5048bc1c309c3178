"""Roofline: arithmetic intensity against achieved TFLOP/s, under the measured roofs."""
import streamlit as st

from dashboard import analysis, charts, safe, ui

ctx = ui.context()
ui.header(ctx, "Roofline")
rows = ctx.rows

gpus = sorted(rows["gpu"].unique())
gpu = ui.choice(st.selectbox, "GPU (each has its own roofs)", gpus, key="roof_gpu") if len(gpus) > 1 else gpus[0]
d = rows[rows["gpu"] == gpu]
good = analysis.kernel_rows(analysis.ok(d))
if good.empty:
    st.info(f"No correct rows on {safe.md(gpu)}.")
else:
    bw, tf = analysis.roofs(good)
    ui.chart(charts.roofline_chart(good, bw, tf, title=f"Roofline, {gpu}"), key="roof_chart")
    st.caption("Intensity is FLOPs per compulsory byte (min_bytes). Symbols: circle float32, "
               "diamond bfloat16, square float16. The slope is the measured copy bandwidth, the "
               "flat roofs the measured matmul rate per math mode (each dtype, and tf32 for float32 "
               "on TF32 tensor cores); they meet at the ridge point. Each row's SOL uses the "
               "bandwidth of its own read:write mix (peak_gbps), which can sit above or below "
               "the copy slope drawn here. A click on a point opens its case.")
ui.not_ok_section(d, gpu)
ui.page_notes()
