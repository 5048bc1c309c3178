"""The sidebar filters, their sync with the URL, and the context every page reads.

The URL's query parameters only ever select among values present in the
loaded runs (run ids, GPU slugs, commits, workload, dtype and implementation
names); anything else is dropped and named in the sidebar.  They never name a
file: the files were fixed by the launcher.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from dashboard import analysis, data
from dashboard.analysis import FILTERS, Filters

LABELS = {"run": "Run", "gpu": "GPU", "commit": "Commit", "workload": "Workload", "dtype": "dtype",
          "impl": "Implementation", "timer": "Timer"}
COLUMN = {"run": "run_id"}
HELP = {"run": "Empty: for each GPU and workload, the newest of its runs with the most implementations "
               "(after the GPU and commit filters)."}
_CTX = "_ksuite_ctx"
_SEEDED = "_ksuite_seeded_from_url"


@dataclass
class Context:
    loaded: data.Loaded
    filters: Filters
    run_ids: list[str]
    rows: pd.DataFrame          # the chosen runs, narrowed by row filters, every status

    @property
    def empty(self) -> bool:
        return self.rows.empty

    def newest_having(self, impl: str) -> pd.DataFrame:
        """The rows, except that without a run filter each (GPU, workload)
        comes from its newest run that holds ``impl`` rows (Fusion: eager),
        so a later run of a few backends does not leave the page empty."""
        f = self.filters
        if f.run:
            return self.rows
        every = self.loaded.runs["run_id"].tolist()
        run_ids = analysis.select_runs(self.loaded.runs, replace(f, run=tuple(every)))
        rows = analysis.newest_per_workload(self.loaded.rows(run_ids), run_ids, having=impl)
        return analysis.narrow(analysis.at_commits(rows, f), f)

    def across_runs(self) -> pd.DataFrame:
        """Rows of every run (for Compare and History), narrowed by all but the run
        and commit filters, whose choice those pages make themselves."""
        f = self.filters
        frame = self.loaded.frame
        if f.gpu:
            frame = frame[frame["gpu"].isin(f.gpu)]
        return analysis.narrow(frame, f)


def _key(name: str) -> str:
    return f"filter_{name}"


def _seed_from_url(options: dict[str, list[str]]) -> list[str]:
    """Once per session, the link's filters become the widgets' values."""
    ignored = []
    for name in FILTERS:
        wanted = st.query_params.get_all(name)
        valid = [v for v in wanted if v in options[name]]
        ignored += [f"{name}={v}" for v in wanted if v not in options[name]]
        st.session_state[_key(name)] = list(dict.fromkeys(valid))
    return ignored


def _write_url(filters: Filters) -> None:
    for name, chosen in filters.as_dict().items():
        if chosen:
            if st.query_params.get_all(name) != list(chosen):
                st.query_params[name] = list(chosen)
        elif name in st.query_params:
            del st.query_params[name]


def sidebar(loaded: data.Loaded) -> Filters:
    options = {n: loaded.options(COLUMN.get(n, n)) for n in FILTERS}
    if not st.session_state.get(_SEEDED):
        st.session_state[_SEEDED] = _seed_from_url(options) or ["-"]
    ignored = [v for v in st.session_state[_SEEDED] if v != "-"]
    labels = dict(zip(loaded.runs["run_id"], loaded.runs["label"]))
    with st.sidebar:
        st.header("Filters")
        for name in FILTERS:
            key = _key(name)
            # a reload may drop values (a file removed): keep only what still exists
            st.session_state[key] = [v for v in st.session_state.get(key, []) if v in options[name]]
            fmt = (lambda r: labels.get(r, r)) if name == "run" else str
            st.multiselect(LABELS[name], options[name], key=key, format_func=fmt,
                           placeholder="all", help=HELP.get(name))
        if ignored:
            st.caption("Ignored from the link (not among the loaded runs): " + ", ".join(ignored))
        st.caption(f"{len(loaded.runs)} runs, {len(loaded.frame):,} rows loaded.")
    filters = Filters(**{n: tuple(st.session_state[_key(n)]) for n in FILTERS})
    _write_url(filters)
    return filters


def build_context(loaded: data.Loaded, filters: Filters) -> Context:
    run_ids = analysis.select_runs(loaded.runs, filters)
    rows = loaded.rows(run_ids)
    if not filters.run:
        rows = analysis.newest_per_workload(rows, run_ids, widest=True)
    rows = analysis.narrow(analysis.at_commits(rows, filters), filters)
    ctx = Context(loaded=loaded, filters=filters, run_ids=run_ids, rows=rows)
    st.session_state[_CTX] = ctx
    return ctx


def context() -> Context:
    """The context app.py built for this run; pages call this first."""
    return st.session_state[_CTX]


def header(ctx: Context, title: str, runs: bool = True) -> None:
    """The page's title, the files that could not be read, which runs are shown;
    then stop with a hint if there is nothing to show."""
    st.title(title)
    if ctx.loaded.problems:
        st.warning("Some paths could not be read; everything else is shown.\n\n"
                   + "\n".join(f"- `{p}`" for p in ctx.loaded.problems))
    chosen = ctx.loaded.runs[ctx.loaded.runs["run_id"].isin(ctx.run_ids)]
    if runs and len(chosen):
        what = "Chosen runs" if ctx.filters.run else "For each GPU and workload, its newest run of the most backends"
        st.caption(f"{what}: " + "; ".join(chosen["label"]))
    if ctx.loaded.frame.empty:
        st.info("No results loaded. Run `python -m suite run` on a GPU machine, then "
                "`python -m suite dashboard [PATHS...]`.")
        st.stop()
    if ctx.empty:
        st.info("No rows match the filters in the sidebar.")
        st.stop()


def not_ok_section(df: pd.DataFrame, what: str = "these rows") -> None:
    """Failed or skipped rows, apart from the plots, with their status."""
    bad = analysis.not_ok(df)
    if len(bad):
        with st.expander(f"{len(bad)} rows of {what} not plotted (incorrect, failed or skipped)"):
            st.dataframe(bad, hide_index=True, width="stretch")
