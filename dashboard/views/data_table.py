"""Data: the filtered rows as a table, with CSV and Parquet downloads."""
import io

import streamlit as st

from dashboard import analysis, charts, ui

ctx = ui.context()
ui.header(ctx, "Data")
rows = ctx.rows.reset_index(drop=True)
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
st.dataframe(rows, hide_index=True)
st.plotly_chart(charts.pass_rate_bars(analysis.pass_rate(rows, by="workload"), by="workload",
                                      title="rows per workload and status"), key="data_status")
