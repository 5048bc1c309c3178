"""The sidebar filters, their sync with the URL, and the context every page reads.

The URL's query parameters only ever select among values present in the
loaded runs (run ids, GPU slugs, commits, workload, dtype and implementation
names); anything else is dropped and named in the sidebar, as plain text and
clipped (dashboard.safe).  They never name a file: the files were fixed by the
launcher.  Each page's own choices (Bandwidth's unit, Compare's sides, ...) are
widgets bound to the URL through :func:`choice`, so a link reproduces the view.
Streamlit itself drops a query string of more than 1,000 fields or 512 KiB;
here at most ``MAX_VALUES`` values of one parameter are read.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, data, safe
from dashboard.analysis import FILTERS, Filters

LABELS = {"run": "Run", "gpu": "GPU", "commit": "Commit", "workload": "Workload", "dtype": "dtype",
          "impl": "Implementation", "timer": "Timer"}
COLUMN = {"run": "run_id"}
HELP = {"run": "Empty: for each GPU and workload, the newest of its runs with the most implementations "
               "(after the GPU and commit filters)."}
_CTX = "_ksuite_ctx"
_SEEDED = "_ksuite_seeded_from_url"
_IGNORED = "_ksuite_ignored_on_page"
_VISITED = "_ksuite_visited"
MAX_VALUES = 64      # values of one filter read from a link (a filter lists at most this many)
MAX_CHARS = 512      # longer values cannot name a loaded run, GPU, commit or case
_PLOTLY = "_ksuite_plotly"               # a Plotly chart was sent to this session's browser, or is due
_IN_APP_RUN = "_ksuite_in_app_run"       # app.py is running the page (not a fragment alone)
TIMES_ENV = "KERNEL_SUITE_DASHBOARD_TIMES"  # a file each script run appends "page seconds" to
_IN_PAGE_RUN = "_ksuite_in_page_run"     # after_first_render's fragment is called by the page's run
DEFER_S = 1.5        # after_first_render's wait: longer than the Overview's draw after its elements arrive
MISSING = "—"        # a table's missing value (the grid's own is the word "None")


@dataclass
class Context:
    loaded: data.Loaded
    filters: Filters
    run_ids: list[str]
    rows: pd.DataFrame          # the chosen runs, narrowed by row filters, every status

    @property
    def empty(self) -> bool:
        return self.rows.empty

    def of(self, fn, *args):
        """``fn(self.rows, *args)``, computed once per load, filters and args and shared by
        every session (data.Loaded.shared): for a function of those alone, whose result no
        caller modifies."""
        return self.loaded.shared((fn.__module__, fn.__qualname__, self.filters, *args),
                                  lambda: fn(self.rows, *args))

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

    def newest_of(self, keep) -> pd.DataFrame:
        """``keep(rows)`` of the chosen runs; without a run filter, of every run the GPU and
        commit filters allow, each (GPU, workload) from its newest run that has such rows
        (Profile: the few runs with Nsight Compute or energy figures).  Shared like :meth:`of`."""
        f = self.filters
        if f.run:
            return self.of(keep)

        def compute():
            every = self.loaded.runs["run_id"].tolist()
            run_ids = analysis.select_runs(self.loaded.runs, replace(f, run=tuple(every)))
            rows = keep(analysis.narrow(analysis.at_commits(self.loaded.rows(run_ids), f), f))
            return analysis.newest_per_workload(rows, run_ids)

        return self.loaded.shared(("newest_of", keep.__module__, keep.__qualname__, f), compute)

    def across_runs(self, columns: list[str] | None = None) -> pd.DataFrame:
        """Rows of every run (for Compare and History), narrowed by all but the run
        and commit filters, whose choice those pages make themselves; only
        ``columns`` where given (taken first: every row mask then costs less)."""
        f = self.filters
        frame = self.loaded.frame if columns is None else self.loaded.frame[columns]
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
        known = set(options[name])
        valid = [v for v in wanted[:MAX_VALUES] if len(v) <= MAX_CHARS and v in known]
        ignored += [f"{name}={v}" for v in wanted[:MAX_VALUES] if not (len(v) <= MAX_CHARS and v in known)]
        ignored += [f"{name}: {len(wanted) - MAX_VALUES} more values"] if len(wanted) > MAX_VALUES else []
        st.session_state[_key(name)] = list(dict.fromkeys(valid))
    return ignored


def ignored_note(values: list[str]) -> None:
    """Name values a link held that select nothing: clipped, escaped, at most a few."""
    if values:
        st.caption("Ignored from the link (not among the loaded runs):")
        st.text(safe.plain(values))


def choice(widget, label: str, options: list, key: str, index: int = 0, **kw):
    """``widget`` (st.selectbox, st.radio, or one on a column) kept in the URL
    parameter ``key`` as the option itself (not its label): a link sets it, a
    change rewrites the link.  A link's value that is not among ``options`` is
    named on the page (:func:`page_notes`), then replaced."""
    if key not in st.session_state:
        wanted = st.query_params.get_all(key)[:1]
        if wanted:
            at = next((i for i, o in enumerate(options) if str(o) == wanted[0]), None)
            if at is None:
                st.session_state.setdefault(_IGNORED, []).append(f"{key}={wanted[0][:MAX_CHARS]}")
            else:
                index = at
    value = widget(label, options, index=index, key=key, **kw)
    if value is not None and st.query_params.get_all(key) != [str(value)]:
        st.query_params[key] = str(value)
    return value


# each page's URL parameters start with its prefix; another page's are dropped on arrival
PAGE_PARAMS = {"overview": "overview_", "bandwidth": "bw_", "roofline": "roof_", "fusion": "fusion_",
               "compare": "cmp_", "history": "hist_", "data": "data_", "case": "case_",
               "profile": "profile_"}


CASE_PAGE = Path(__file__).resolve().parent / "views" / "case.py"
# the Case view's URL parameters, by the column of charts.CASE each is read from
CASE_PARAMS = {"gpu": "case_gpu", "workload": "case_workload", "dtype": "case_dtype", "shape": "case_shape",
               "run_id": "case_run"}


def chart(fig, key: str) -> None:
    """``fig`` drawn with its points clickable: a click on a point that carries a
    case (charts.case_of) opens the Case view on it (:func:`open_case`)."""
    event = plotly(fig, key=key, on_select="rerun", selection_mode="points")
    points = event.get("selection", {}).get("points", []) if event else []
    cases = [c for c in map(charts.case_of, points[:MAX_VALUES]) if c]
    if cases:
        open_case(cases[0])


def plotly(fig, key: str, **kw):
    """st.plotly_chart, noting that this session's browser is being sent a Plotly chart (and so
    loads Plotly's JavaScript): :func:`after_first_render` then draws without waiting."""
    st.session_state[_PLOTLY] = True
    return st.plotly_chart(fig, key=key, **kw)


def after_first_render(draw) -> None:
    """Run ``draw`` (a Plotly chart through :func:`plotly`, last on the page) in this page run once
    this session's browser holds Plotly; until then, DEFER_S seconds after this run's elements
    reached the browser, in a rerun of the page.

    Streamlit's frontend loads Plotly's JavaScript (a 4.7 MB chunk, whose evaluation is a large
    share of a chart page's first draw on a 2-core machine) when it first draws a Plotly chart.
    A page without one (the Overview, whose SOL matrix is a table) draws sooner, but then the
    session's first chart page pays that load on a page change; a chart drawn after the page's
    main content loads it while the visitor reads.  The wait is a fragment's timer (st.fragment's
    run_every), the only way Streamlit offers to run later without an action of the visitor's.
    It starts when this run's messages reach the browser; an action before it fires drops it (a
    rerun of the page starts it again), and an action just after it fires waits for Plotly's
    load.  When it fires, the page reruns in full, and that run draws the chart and starts no timer (the
    frontend drops fragments' timers on every full run): one rerun per session, no timer left."""
    if st.session_state.get(_PLOTLY):
        draw()
        return
    st.session_state[_IN_PAGE_RUN] = True
    try:
        _wait_then_rerun()
    finally:
        st.session_state[_IN_PAGE_RUN] = False


@st.fragment(run_every=DEFER_S)
def _wait_then_rerun() -> None:
    """Nothing in the page's run; in the fragment's own run (its timer fired), the page's rerun."""
    if not st.session_state.get(_IN_PAGE_RUN):
        st.session_state[_PLOTLY] = True
        st.rerun()


def record_time(page: str, seconds: float) -> None:
    """Append "page seconds" to the file TIMES_ENV names, if it does (scripts/dashboard_scale.py
    reads it to tell the server's share of a change from the browser's)."""
    path = os.environ.get(TIMES_ENV)
    if path:
        with open(path, "a") as out:
            out.write(f"{page} {seconds:.3f}\n")


def in_app_run(run) -> None:
    """``run()`` (app.py's page run), noting that fragments called in it are part of it."""
    st.session_state[_IN_APP_RUN] = True
    try:
        run()
    finally:
        st.session_state[_IN_APP_RUN] = False


def page_part(page: str):
    """Decorator: the page's widgets and what they change, as a fragment (st.fragment).  A
    change of one of its widgets reruns this function alone: the sidebar, the data's load
    check and the rest of the page are neither computed nor sent again, so the browser
    redraws only this part.  A sidebar change or a page change reruns the whole page, this
    part with it.  Its own reruns' seconds are recorded as the page's (:func:`record_time`)."""
    def wrap(fn):
        @st.fragment
        def part() -> None:
            if st.session_state.get(_IN_APP_RUN):
                fn()
                return
            start = time.perf_counter()
            try:
                fn()
            finally:
                record_time(page, time.perf_counter() - start)
        return part
    return wrap


def open_case(case: dict[str, str]) -> None:
    """Switch to the Case view on ``case`` (charts.CASE's columns): the sidebar's
    filters stay in the URL, the Case view's own parameters are set to the case.
    The values come from the loaded rows and go only into the URL, where the Case
    view's selectboxes read them as options (a value it does not offer is named
    as ignored, as plain text)."""
    params = {name: st.query_params.get_all(name) for name in FILTERS if st.query_params.get_all(name)}
    params.update({CASE_PARAMS[c]: str(v)[:MAX_CHARS] for c, v in case.items() if c in CASE_PARAMS})
    for key in CASE_PARAMS.values():  # the link's values, not a former visit's, choose
        st.session_state.pop(key, None)
    st.switch_page(CASE_PAGE, query_params=params)


def keep_page_params(url_path: str) -> None:
    """Drop the URL parameters of pages other than ``url_path``'s (a link reproduces
    the page it was copied on, not the one visited before).  The session's first
    run keeps them all: it is the page the link named."""
    if not st.session_state.get(_VISITED):
        st.session_state[_VISITED] = True
        return
    others = tuple(p for page, p in PAGE_PARAMS.items() if page != url_path)
    for name in [k for k in list(st.query_params)[:2000] if k.startswith(others)]:
        del st.query_params[name]


def page_notes() -> None:
    """What :func:`choice` dropped from the link on this page."""
    ignored_note(st.session_state.pop(_IGNORED, []))


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
        ignored_note(ignored)
        st.caption(f"{len(loaded.runs)} runs, {len(loaded.frame):,} rows loaded.")
    filters = Filters(**{n: tuple(st.session_state[_key(n)]) for n in FILTERS})
    _write_url(filters)
    return filters


# what chosen_rows reads to choose the rows (analysis.newest_per_workload, narrow, at_commits)
KEYS = ["run_id", "gpu", "workload", "impl", "dtype", "timer", "commit"]


def chosen_rows(loaded: data.Loaded, filters: Filters) -> tuple[list[str], pd.DataFrame]:
    """The runs and rows the filters choose (shared: computed once per load and filters)."""
    def compute():
        run_ids = analysis.select_runs(loaded.runs, filters)
        # the choice is made on the columns it reads, then every column is taken once
        rows = loaded.rows(run_ids, KEYS)
        if not filters.run:
            rows = analysis.newest_per_workload(rows, run_ids, widest=True)
        return run_ids, loaded.at(analysis.narrow(analysis.at_commits(rows, filters), filters).index)

    return loaded.shared(("rows", filters), compute)


def context_for(loaded: data.Loaded, filters: Filters) -> Context:
    """The context of these filters (outside a session too: dashboard/serve.py)."""
    run_ids, rows = chosen_rows(loaded, filters)
    return Context(loaded=loaded, filters=filters, run_ids=list(run_ids), rows=rows)


def build_context(loaded: data.Loaded, filters: Filters) -> Context:
    ctx = context_for(loaded, filters)
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
        # paths and reader messages are shown as plain text, never as Markdown
        st.warning("Some paths could not be read; everything else is shown.")
        st.text("\n".join(ctx.loaded.problems))
    chosen = ctx.loaded.runs[ctx.loaded.runs["run_id"].isin(ctx.run_ids)]
    if runs and len(chosen):
        what = "Chosen runs" if ctx.filters.run else "For each GPU and workload, its newest run of the most backends"
        st.caption(f"{what}: " + "; ".join(safe.md(x) for x in chosen["label"]))
    if ctx.loaded.frame.empty:
        st.info("No results loaded. Run `python -m suite run` on a GPU machine, then "
                "`python -m suite dashboard [PATHS...]`.")
        st.stop()
    if ctx.empty:
        st.info("No rows match the filters in the sidebar.")
        st.stop()


def table(data, container=None, **kw):
    """``st.dataframe`` (``container``'s where given) showing a missing value as MISSING: the
    grid's default, the word "None", reads as a value in a numeric column."""
    return (container or st).dataframe(data, placeholder=MISSING, **kw)


def not_ok_section(df: pd.DataFrame, what: str = "these rows") -> None:
    """Failed or skipped rows, apart from the plots, with their status."""
    bad = analysis.not_ok(df)
    if len(bad):
        with st.expander(f"{len(bad)} rows of {safe.md(what)} not plotted (incorrect, failed or skipped)"):
            table(bad, hide_index=True, width="stretch")
