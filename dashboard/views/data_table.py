"""Data: the filtered rows as a table, with CSV and Parquet downloads."""
import io

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, ui

ctx = ui.context()
ui.header(ctx, "Data")
# what a kernel engineer reads first, then everything else in the store's order
LEAD = ["impl", "shape", "ms_median", "gbps", "tflops", "sol", "workload", "dtype", "gpu", "timer", "status"]
SEARCHED = ["impl", "shape", "workload", "dtype", "gpu", "timer", "status", "config", "error", "commit", "run_id"]
rows = ctx.rows
search = st.text_input("Search (keeps rows whose implementation, shape, workload, dtype, GPU, timer, "
                       "status, config, error, commit or run contains every word)", key="data_search",
                       bind="query-params", max_chars=200)
for word in search.lower().split()[:8]:
    hit = pd.Series(False, index=rows.index)
    for col in [c for c in SEARCHED if c in rows.columns]:
        hit |= rows[col].astype("string").str.lower().str.contains(word, regex=False, na=False)
    rows = rows[hit]
rows = rows[[c for c in LEAD if c in rows.columns] + [c for c in rows.columns if c not in LEAD]]
rows = rows.reset_index(drop=True)
st.caption(f"{len(rows):,} rows, every status. The raw per-sample times (samples_ms) stay in the "
           "Parquet files.")


def _parquet() -> bytes:
    buf = io.BytesIO()
    rows.to_parquet(buf, index=False)
    return buf.getvalue()


left, right = st.columns(2)
# callables: the files are built only when a button is pressed
left.download_button("Download CSV", lambda: rows.to_csv(index=False), "kernel-suite.csv", "text/csv",
                     key="dl_csv")
right.download_button("Download Parquet", _parquet, "kernel-suite.parquet",
                      "application/vnd.apache.parquet", key="dl_parquet")
ui.table(rows, hide_index=True)
ui.plotly(charts.pass_rate_bars(analysis.pass_rate(rows, by="workload"), by="workload",
                                title="rows per workload and status"), key="data_status")
