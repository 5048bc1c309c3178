"""Profile: why each implementation of one case sits where it does (Nsight Compute), and its energy."""
import streamlit as st

from dashboard import charts_profile, safe, ui

ctx = ui.context()
ui.header(ctx, "Profile", runs=False)
# few runs are profiled: without a run filter, each GPU and workload's newest profiled run
rows = ctx.newest_of(charts_profile.profiled)
shown = ctx.loaded.runs[ctx.loaded.runs["run_id"].isin(rows["run_id"].unique())]
if len(shown):
    what = ("Chosen runs" if ctx.filters.run else
            "Newest run with Nsight Compute or energy figures of each GPU and workload")
    st.caption(f"{what}: " + "; ".join(safe.md(x) for x in shown["label"]))
if rows.empty:
    st.info("No row of the chosen runs has Nsight Compute or energy figures. Record them on a GPU "
            "with --profile ncu, for example:")
    st.code("python -m suite run --workloads WORKLOAD --profile ncu", language="bash")
    ui.page_notes()
    st.stop()

# the case's label (plain text, values clipped) is its URL value
cases = {charts_profile.label(c): c for c in charts_profile.cases(rows)}
case = ui.choice(st.selectbox, "Case (GPU · workload · shape · dtype · timer)", list(cases), key="profile_case")
ui.page_notes()
d = charts_profile.one_case(rows, cases[case])
ui.plotly(charts_profile.breakdown(d, title="Speed of light per unit, % of peak"),
          key="profile_chart")
st.caption("SOL is the suite's: the roofline bound over the measured median. The other bars are "
           "Nsight Compute's, per call, duration-weighted over its kernels (--clock-control none, "
           "cold caches). ncu_ratio near 1 says ncu's kernel time agrees with the suite's timer; "
           "energy_j is joules a call over a back-to-back burst (docs/protocol.md).")
st.subheader("Implementations, fastest first")
ui.table(charts_profile.table(d), hide_index=True)
