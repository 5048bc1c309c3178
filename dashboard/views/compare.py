"""Compare: a base and a candidate (two runs, two GPUs or two commits), case by case."""
import numpy as np
import streamlit as st

from dashboard import analysis, charts, safe, ui

SHADED = 300
NUMBER_FORMATS = {"ms_median_base": "%.4g", "ms_median_cand": "%.4g", "sol_base": "%.3f", "sol_cand": "%.3f",
                  "speedup": "%.3f", "ratio": "%.3f", "band_rel": "%.3f", "clock_base": "%.0f",
                  "clock_cand": "%.0f", "sm_clock_mhz_base": "%.0f", "sm_clock_mhz_cand": "%.0f"}


def _judged(mode, base, cand, threshold, filters, b, c):
    """analysis.judged of the sides' rows ``b`` and ``c`` (those of ``base`` and ``cand`` under
    ``filters``), kept for the session: suite.compare takes seconds on large sides."""
    memo = st.session_state.setdefault("_cmp_judged", {})
    k = (mode, base, cand, threshold, filters)
    if k not in memo:
        memo.clear()
        # the rows the table compares: each side's newest row of every case
        memo[k] = analysis.judged(analysis.latest_per_key(b, analysis.ROW_KEY),
                                  analysis.latest_per_key(c, analysis.ROW_KEY), threshold)
    return memo[k]


ctx = ui.context()
ui.header(ctx, "Compare", runs=False)


# the page's widgets rerun this part alone (ui.page_part): a change of the sides, the mode or
# the threshold sends neither the sidebar nor the title again
@ui.page_part("compare")
def compare_view() -> None:
    ctx = ui.context()
    runs = ctx.loaded.runs
    f = ctx.filters

    mode = ui.choice(st.radio, "Compare", ["runs", "GPUs", "commits"], horizontal=True, key="cmp_mode",
                     format_func=lambda m: f"two {m}")
    if mode == "runs":
        options = runs["run_id"].tolist()
        labels = dict(zip(runs["run_id"], runs["label"]))
        column, key = "run_id", analysis.ROW_KEY
    elif mode == "GPUs":
        options = list(dict.fromkeys(runs["gpu"]))
        labels = {g: g for g in options}
        column, key = "gpu", analysis.ROW_KEY
    else:
        options = ctx.loaded.options("commit")  # newest run first, every commit a run measured at
        labels = {c: c[:12] for c in options}
        column, key = "commit", analysis.ROW_KEY + ["gpu"]
    # only what analysis.compare reads (and suite.compare, for the verdicts it would give),
    # taken before any row mask: a mask over every column of 400k rows costs ~0.4 s
    need = [c_ for c_ in dict.fromkeys(key + ["gpu", column, "size", "ms_median", "sol", "status", "timestamp", "l2",
                                              "ms_p20", "ms_p80", "bound_ms", "error", "gpu_name", "run_id", "commit",
                                              "dirty", "sm_clock_mhz", "ms_median_repeat", "source", "device"])
            if c_ in ctx.loaded.frame.columns]
    # the GPU filter would hide one side of two GPUs; the row filters still apply
    frame = analysis.narrow(ctx.loaded.frame[need], f) if mode == "GPUs" else ctx.across_runs(need)

    if len(options) < 2:
        st.info(f"Comparing {mode} needs at least two; the loaded results have {len(options)}.")
        st.stop()
    st.caption("The sidebar's workload, dtype, implementation and timer filters apply; each side "
               "takes the newest row of every case. Speedup > 1: the candidate is faster.")
    left, right = st.columns(2)
    # first view: the newest option against the newest older one measuring a case in common
    # on the same GPU (presets differ; a resumed run's two commits cover different workloads)
    cand_at, base_at = analysis.default_pair(frame, column, options, list(dict.fromkeys(key + ["gpu"])))
    base = ui.choice(left.selectbox, "Base", options, index=base_at, format_func=labels.get, key=f"cmp_base_{mode}")
    cand = ui.choice(right.selectbox, "Candidate", options, index=cand_at, format_func=labels.get,
                     key=f"cmp_cand_{mode}")
    ui.page_notes()
    values = frame[column].to_numpy()
    b, c = frame[values == base], frame[values == cand]
    differ = set(b["gpu"].unique()) != set(c["gpu"].unique())
    left, right = st.columns(2)
    threshold = left.number_input("Threshold (%)", 0.0, 100.0, 5.0, 0.5, key="cmp_threshold",
                                  bind="query-params") / 100
    use_sol = right.toggle("Compare SOL instead of time", value=differ, key=f"cmp_sol_{mode}", bind="query-params",
                           help="Across different GPUs, the fraction of each GPU's own roofline is "
                                "the fair comparison; raw time mostly measures the hardware.")
    if base == cand:
        st.warning("Base and candidate are the same.")
    cmp = analysis.compare(b, c, key, "sol" if use_sol else "time", threshold)
    t = cmp.table
    counts = t["verdict"].value_counts()
    cols = st.columns(4)
    cols[0].metric("cases matched", len(t))
    cols[1].metric("regressions", int(counts.get("regression", 0)))
    cols[2].metric("improvements", int(counts.get("improvement", 0)))
    cols[3].metric("geomean speedup", f"{analysis.geomean(t['speedup']):.3f}x" if len(t) else "—")
    if cmp.only_base or cmp.only_cand:
        st.caption(f"Unmatched cases: {cmp.only_base} only in base, {cmp.only_cand} only in candidate.")
    other = cmp.other_l2
    if other is not None and len(other):
        pairs = safe.listing(sorted({f"{b_} vs {c_}" for b_, c_ in zip(other["l2_base"], other["l2_cand"])}))
        st.warning(f"{len(other)} case(s) not compared: their `l2` differs ({pairs}), that is, L2 was "
                   "evicted differently before their samples, which moves mid-size times by up to a tenth. "
                   "Runs made with the same `--l2-flush` compare.")
    if t.empty:
        st.info("No case was measured correctly on both sides under the same protocol: pick another "
                "base or candidate.")
    else:
        label = "SOL ratio (candidate / base)" if use_sol else "speedup (base ms / candidate ms)"
        ui.plotly(charts.compare_scatter(t, threshold, label, title=label), key="cmp_chart")
        # suite.compare judges case by case in Python (~2 ms a case on 2 cores): on by default for small sides
        judge = mode != "commits" and st.toggle(
            "Judge each case as `suite compare` does (its band and verdict)", value=len(t) <= 200,
            key="cmp_suite", bind="query-params", help="suite.compare takes about 2 ms per case.")
        if judge:  # a side of several GPUs (commits) is not one suite compare
            judged = _judged(mode, base, cand, threshold, f, b, c)
            t = t.merge(judged.rename(columns={"verdict": "suite_verdict", "band": "band_rel"}),
                        on=analysis.ROW_KEY, how="left")
            st.caption("suite_verdict, ratio, band_rel and reason are what `python -m suite compare` decides "
                       "on these two sides (suite.compare): a case moved when its ratio leaves 1 ± band_rel, "
                       "the band widened by the case's own run-to-run spread and sample floor; clock_base and "
                       "clock_cand are each side's SM clock while timed (MHz). Without the raw samples the "
                       "dashboard tests significance by p20-p80 overlap where the CLI uses a Mann-Whitney test.")
        shades = {"regression": "background-color: rgba(214,39,40,0.25)",
                  "improvement": "background-color: rgba(44,160,44,0.25)", "same": ""}
        # a Styler lays out every cell in Python (~2 s for 1,600 cases): rows shaded by verdict
        # up to SHADED cases, past that the verdict column alone says it
        if len(t) > SHADED:
            ui.table(t, hide_index=True, column_config={
                c: st.column_config.NumberColumn(c, format=f) for c, f in NUMBER_FORMATS.items()})
        else:
            styled = t.style.apply(lambda r: [shades[r["verdict"]]] * len(r), axis=1).format(
                {"ms_median_base": "{:.4g}", "ms_median_cand": "{:.4g}", "sol_base": "{:.3f}",
                 "sol_cand": "{:.3f}", "speedup": "{:.3f}", "ratio": "{:.3f}", "band_rel": "±{:.1%}",
                 "clock_base": "{:.0f}", "clock_cand": "{:.0f}", "sm_clock_mhz_base": "{:.0f}",
                 "sm_clock_mhz_cand": "{:.0f}"}, na_rep="—")
            ui.table(styled, hide_index=True)
    if len(cmp.failed):
        st.subheader("Not compared: not ok on one side or both")
        ui.table(cmp.failed, hide_index=True)


compare_view()
