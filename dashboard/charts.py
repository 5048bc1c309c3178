"""Pure functions from DataFrames to Plotly figures; no Streamlit, no I/O.

Callers pass only rows with status "ok" where a figure plots speed (see
analysis.ok); the functions do not filter, so what is drawn is exactly what
was given.  Units follow suite.roofline: ms, GB/s, TFLOP/s, FLOP/byte.

Plotly renders tags in titles, trace names, tick labels and hover text, so
every name taken from the rows is HTML-escaped first (dashboard.safe.html).
"""
from __future__ import annotations

import html as _html
import math
from decimal import Decimal

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import analysis, safe
from suite import roofline

# One colour per backend, the same in every figure; variants share their backend's.
BACKEND_COLORS = {"eager": "#7f7f7f", "torch": "#1f77b4", "compile": "#9467bd",
                  "triton": "#2ca02c", "cuda": "#d62728"}
# enough for the variants of one real run (the H200 quick preset has eight) to differ
EXTRA_COLORS = ["#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#393b79", "#637939",
                "#ad494a", "#6b6ecf", "#e7ba52", "#31a354", "#843c39"]
DTYPE_SYMBOLS = {"float32": "circle", "bfloat16": "diamond", "float16": "square"}
STATUS_COLORS = {"ok": "#2ca02c", "incorrect": "#d62728", "error": "#ff7f0e",
                 "suspect": "#9467bd", "unsupported": "#c7c7c7", "unavailable": "#8c8c8c"}
VERDICT_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "same": "#7f7f7f"}
METRICS = {"gbps": ("GB/s", "min_bytes"), "tflops": ("TFLOP/s", "flops")}
# the rows' text columns a figure may show (names, hover text, ticks)
TEXT = ("impl", "series", "workload", "shape", "dtype", "timer", "gpu", "commit", "status", "config",
        "verdict", "l2", "run_id", "clock_limits")


def _text_safe(df: pd.DataFrame) -> pd.DataFrame:
    return safe.html_columns(df, TEXT)


# A point's case, the last entries of its customdata after CASE_TAG, so that a click
# can open the Case view (dashboard.ui.chart).  Escaped like every name (no tag in a
# figure's spec) and unescaped by case_of; never put in a hover template.
CASE = ("gpu", "workload", "dtype", "shape", "run_id")
CASE_TAG = "case:"


def _custom(g: pd.DataFrame, shown: list) -> np.ndarray:
    """customdata of ``g``'s points: the ``shown`` columns or Series (what the hover
    text names, by index), then CASE_TAG and the CASE columns where ``g`` holds them all."""
    cols = [g[c] if isinstance(c, str) else c for c in shown]
    if all(c in g.columns for c in CASE):
        cols += [pd.Series(CASE_TAG, index=g.index)] + [g[c] for c in CASE]
    return np.stack([np.asarray(c, dtype=object) for c in cols], axis=-1)


def case_of(point: dict) -> dict[str, str] | None:
    """The case a selected point (Streamlit's selection: a dict with ``customdata``)
    stands for, as {CASE column: value}, or None for a point that carries none (a roof,
    a ceiling, the y = x line)."""
    data = point.get("customdata") if isinstance(point, dict) else None
    n = len(CASE)
    if not isinstance(data, list) or len(data) < n + 1 or data[-n - 1] != CASE_TAG:
        return None
    values = data[-n:]
    if not all(isinstance(v, str) for v in values):
        return None
    return {c: _html.unescape(v) for c, v in zip(CASE, values)}


def color(name: str, seen=()) -> str:
    """A stable colour per implementation: its backend's, else one by order of appearance.

    ``name`` may carry a suffix after a space (" [graph]", " · h100"): it shares the colour.
    """
    impl = str(name).split(" ")[0]
    if impl in BACKEND_COLORS:
        return BACKEND_COLORS[impl]
    others = [n for n in dict.fromkeys(str(s).split(" ")[0] for s in seen) if n not in BACKEND_COLORS]
    return EXTRA_COLORS[(others.index(impl) if impl in others else 0) % len(EXTRA_COLORS)]


DASHES = ["solid", "dash", "dot", "dashdot"]
# one marker per GPU (Bandwidth) or per workload (Fusion), by order of appearance
SYMBOLS = ["circle", "diamond", "square", "triangle-up", "x", "star", "cross", "pentagon"]


def _symbols(values: pd.Series) -> list[str]:
    order = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return [SYMBOLS[order[v] % len(SYMBOLS)] for v in values]


def _dash(name: str, names: list[str]) -> str:
    """Series of one implementation (several timers or GPUs) differ by dash."""
    impl = str(name).split(" ")[0]
    same = [n for n in names if str(n).split(" ")[0] == impl]
    return DASHES[same.index(name) % len(DASHES)]


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def card_text(df: pd.DataFrame) -> pd.Series:
    """What the card did while a row was timed, for hover text: "<br>SM 1755 MHz, 690 W
    (power cap)", or "" where the row has no clock (CPU rows, files from before it was recorded)."""
    def one(clock, watts, limits) -> str:
        if clock is None or not math.isfinite(clock):
            return ""
        text = f"<br>SM {clock:.0f} MHz"
        if watts is not None and math.isfinite(watts):
            text += f", {watts:.0f} W"
        return text + (f" ({limits})" if isinstance(limits, str) and limits else "")

    cols = [df[c] if c in df.columns else pd.Series([None] * len(df), index=df.index)
            for c in ("sm_clock_mhz", "power_w", "clock_limits")]
    return pd.Series([one(*(None if pd.isna(v) else v for v in vals)) for vals in zip(*cols)],
                     index=df.index, dtype=object)


def energy_text(df: pd.DataFrame) -> pd.Series:
    """Joules a call for hover text: "<br>0.0123 J a call, 85.1 GFLOP/J" (GB/J for a memory-bound
    row), or "" where the row has none (CPU rows, files from before energy was recorded)."""
    def one(j, gflops, gb, bound) -> str:
        if j is None or not math.isfinite(j):
            return ""
        per, unit = (gflops, "GFLOP/J") if bound == "compute" else (gb, "GB/J")
        rate = f", {per:.4g} {unit}" if per is not None and math.isfinite(per) else ""
        return f"<br>{j:.4g} J a call{rate}"

    cols = [pd.to_numeric(df[c], errors="coerce") if c in df.columns else pd.Series([None] * len(df), index=df.index)
            for c in ("energy_j", "gflops_per_j", "gb_per_j")]
    bound = df["bound"] if "bound" in df.columns else pd.Series([None] * len(df), index=df.index)
    return pd.Series([one(*(None if pd.isna(v) else v for v in vals[:3]), vals[3])
                      for vals in zip(*cols, bound)], index=df.index, dtype=object)


def _hlines(fig: go.Figure, lines: list[dict]) -> go.Figure:
    """Horizontal lines across the plot, as fig.add_hline draws them (a shape over the x
    domain, and a label above its left end where a line has ``text``), added in one layout
    update: add_hline costs ~10 ms a line.  Each of ``lines``: ``y``, ``color``, and
    optionally ``dash`` and ``text``."""
    shapes, notes = list(fig.layout.shapes), list(fig.layout.annotations)
    for ln in lines:
        style = {"color": ln["color"], **({"dash": ln["dash"]} if ln.get("dash") else {})}
        shapes.append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=ln["y"], y1=ln["y"], line=style))
        if ln.get("text"):
            notes.append(dict(text=ln["text"], showarrow=False, xref="x domain", x=0, xanchor="left",
                              yref="y", y=ln["y"], yanchor="bottom"))
    return fig.update_layout(shapes=shapes, annotations=notes)


# A log axis labels at most this many ticks, each a plain number (log_ticks)
LOG_TICKS = 8


def log_ticks(lo: float, hi: float, most: int = LOG_TICKS) -> list[float]:
    """Tick values for a log axis spanning [lo, hi]: 1, 2 and 5 times each power of ten
    where at most ``most`` of them fall inside, else powers of ten (each one, or every
    second, third, ...); where fewer than three of 1, 2 and 5 fall inside (a span under
    half a decade or so), evenly spaced values a round step apart (0.7, 0.8, 0.9).
    Empty for a range that is not positive and finite."""
    if not (0 < lo <= hi and math.isfinite(hi)):
        return []
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def inside(values) -> list[float]:
        return [v for v in values if lo <= v <= hi]

    ticks = inside(float(f"{m}e{e}") for e in range(a, b + 1) for m in (1, 2, 5))
    if len(ticks) >= 3:
        every = 1
        while len(ticks) > most:
            ticks = inside(float(f"1e{e}") for e in range(a, b + 1) if e % every == 0)
            every += 1
        return ticks
    for e in range(b, a - 3, -1):   # the largest round step that leaves three ticks
        for m in (5, 2, 1):
            step = float(f"{m}e{e}")
            ticks = inside(float(f"{n * m}e{e}") for n in range(math.ceil(lo / step), math.floor(hi / step) + 1))
            if len(ticks) >= 3:
                return ticks
    return ticks


def plain(value: float) -> str:
    """A tick's label: 0.05, 2, 1,000,000 (no exponent, no SI prefix, thousands separated)."""
    return format(Decimal(repr(float(value))).normalize(), ",f")


def _extent(fig: go.Figure, axis: str) -> tuple[float, float] | None:
    """The smallest and largest positive value ``fig`` draws on ``axis`` ("x" or "y"):
    its traces' points and its horizontal lines (_hlines)."""
    parts = [np.asarray(getattr(t, axis), dtype=float).ravel() for t in fig.data if getattr(t, axis) is not None]
    if axis == "y":
        parts.append(np.array([s.y0 for s in fig.layout.shapes if s.yref == "y"], dtype=float))
    values = np.concatenate(parts) if parts else np.array([])
    values = values[np.isfinite(values) & (values > 0)]
    return (float(values.min()), float(values.max())) if len(values) else None


def _layout(fig: go.Figure, title: str, x: str, y: str, logx=False, logy=False) -> go.Figure:
    fig.update_layout(title=safe.html(title), xaxis_title=x, yaxis_title=y, legend_title_text="",
                      margin=dict(l=60, r=20, t=50, b=50), hovermode="closest")
    # plain numbers on every axis (0.01, 1, 100), the unit in the title: no SI
    # prefixes ("10n" TFLOP/s) and no "2x10^5".  A log axis gets its ticks from
    # log_ticks: Plotly's own label every digit of a decade over a short span
    # (0.7 0.8 0.9 1, overlapping), or only its first digit.
    for axis, log, update in (("x", logx, fig.update_xaxes), ("y", logy, fig.update_yaxes)):
        update(exponentformat="none", separatethousands=True)
        if not log:
            continue
        update(type="log")
        extent = _extent(fig, axis)
        if extent:
            # Plotly pads a log axis past the data: ticks in that margin are drawn too
            pad = 10 ** (0.05 * max(math.log10(extent[1] / extent[0]), 0.2))
            ticks = log_ticks(extent[0] / pad, extent[1] * pad)
            update(tickmode="array", tickvals=ticks, ticktext=[plain(v) for v in ticks])
    return fig


def bandwidth(df: pd.DataFrame, metric: str = "gbps", ceilings: dict[str, float] | None = None,
              title: str = "", lines: bool = True) -> go.Figure:
    """Achieved ``metric`` against problem size (log x), one line per ``series``,
    with its p20-p80 band, and a dashed line per measured ceiling.

    Two traces per series: the band as one closed outline, then the line.
    ``lines=False`` (several shapes share a size): one trace of points per
    series, the p20-p80 spread as error bars.
    """
    unit, work = METRICS[metric]
    # the columns drawn, taken first: each series' rows are then a cheap slice
    used = ["series", "size", *CASE, metric, work, "ms_p20", "ms_p80", "ms_median", "sol",
            "sm_clock_mhz", "power_w", "clock_limits"]
    df = _text_safe(analysis.only(df, used))
    fig = go.Figure()
    names = list(dict.fromkeys(df["series"])) if len(df) else []
    # one sort for all series (each group keeps the order), every column turned into a plain
    # array once, and each series a slice of those arrays: per-series frames cost a take per
    # column and series, most of this page's server time at scale
    df = df.sort_values(["size", "shape"], kind="stable") if len(df) else df
    at = df.groupby("series", sort=False).indices if len(df) else {}
    scale = 1e9 if metric == "gbps" else 1e12
    sizes = df["size"].to_numpy(dtype=float)
    his = (df[work] / (df["ms_p20"] * 1e-3) / scale).to_numpy(dtype=float)
    los = (df[work] / (df["ms_p80"] * 1e-3) / scale).to_numpy(dtype=float)
    mids = df[metric].to_numpy(dtype=float)
    customs = _custom(df, ["shape", "ms_median", "sol", card_text(df)]) if len(df) else None
    gpus = df["gpu"].to_numpy(dtype=object) if "gpu" in df.columns else None
    for name in names:
        rows = at[name]
        c = color(name, names)
        size, hi, lo, mid, custom = sizes[rows], his[rows], los[rows], mids[rows], customs[rows]
        hover = (f"%{{customdata[0]}}<br>%{{y:.1f}} {unit}<br>%{{customdata[1]:.4g}} ms"
                 "<br>SOL %{customdata[2]:.2f}%{customdata[3]}<extra>" + name + "</extra>")
        if not lines:
            fig.add_trace(go.Scatter(
                x=size, y=mid, mode="markers", name=name,
                marker=dict(color=c, size=8, symbol=_symbols(gpus[rows]) if gpus is not None else None),
                error_y=dict(type="data", array=hi - mid, arrayminus=mid - lo, thickness=1, width=3),
                customdata=custom, hovertemplate=hover))
            continue
        # the band as one closed outline: the upper edge left to right, the lower back
        fig.add_trace(go.Scatter(x=np.concatenate([size, size[::-1]]), y=np.concatenate([hi, lo[::-1]]),
                                 mode="lines", line=dict(width=0, color=c), fill="toself",
                                 fillcolor=_rgba(c, 0.18), legendgroup=name, showlegend=False,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=size, y=mid, mode="lines+markers", name=name, legendgroup=name,
            line=dict(color=c, dash=_dash(name, names)), customdata=custom, hovertemplate=hover))
    _hlines(fig, [{"y": value, "dash": "dash", "color": "#444", "text": f"{label}: {value:,.0f} {unit}"}
                  for label, value in (ceilings or {}).items() if value and math.isfinite(value)])
    return _layout(fig, title, "problem size (elements)", f"achieved {unit}", logx=True)


def roofline_chart(df: pd.DataFrame, peak_gbps: float, peak_tflops: dict[str, float],
                   title: str = "") -> go.Figure:
    """Log-log intensity vs achieved TFLOP/s: one trace per implementation (symbol
    by dtype), then one roof per math mode (dtype, or tf32: bandwidth slope, then
    its compute ceiling), then one trace marking the ridge points."""
    df = _text_safe(df)
    fig = go.Figure()
    names = list(dict.fromkeys(df["impl"])) if len(df) else []
    for name in names:
        g = df[df["impl"] == name]
        custom = _custom(g, ["workload", "shape", "dtype", "ms_median", "gbps", "tflops", "sol", "timer",
                             card_text(g) + energy_text(g)])
        fig.add_trace(go.Scatter(
            x=g["intensity"], y=g["tflops"], mode="markers", name=name,
            marker=dict(color=color(name, names), size=9, line=dict(width=0.5, color="#222"),
                        symbol=[DTYPE_SYMBOLS.get(d, "x") for d in g["dtype"]]),
            customdata=custom,
            hovertemplate="%{customdata[0]} %{customdata[1]} %{customdata[2]}<br>"
                          "%{customdata[3]:.4g} ms (%{customdata[7]})<br>%{customdata[4]:,.0f} GB/s"
                          "<br>%{customdata[5]:.2f} TFLOP/s<br>SOL %{customdata[6]:.2f}%{customdata[8]}"
                          "<extra>" + name + "</extra>"))
    ridges = {d: roofline.ridge_point(peak_gbps, tf) for d, tf in peak_tflops.items()
              if tf and math.isfinite(tf) and peak_gbps and math.isfinite(peak_gbps)}
    xs = list(df["intensity"].dropna()) if len(df) else []
    xs = [x for x in xs if x > 0 and math.isfinite(x)] + list(ridges.values())
    if ridges:
        lo, hi = min(xs) / 3, max(xs) * 3
        for d, r in ridges.items():
            tf = peak_tflops[d]
            fig.add_trace(go.Scatter(
                x=[lo, r, hi], y=[peak_gbps * lo / 1e3, tf, tf], mode="lines",
                name=f"roof {d}: {peak_gbps:,.0f} GB/s, {tf:,.0f} TFLOP/s, ridge {r:.0f}",
                line=dict(color="#444", dash="dash" if d != "float32" else "dot", width=1.5),
                hovertemplate=f"roof {d}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=list(ridges.values()), y=[peak_tflops[d] for d in ridges], mode="markers",
            name="ridge points", marker=dict(color="#000", size=8, symbol="x"),
            text=[f"ridge {d}: {r:.0f} FLOP/byte" for d, r in ridges.items()],
            hovertemplate="%{text}<extra></extra>"))
    return _layout(fig, title, "arithmetic intensity (FLOP/byte)", "achieved TFLOP/s",
                   logx=True, logy=True)


def pass_rate_bars(counts: pd.DataFrame, title: str = "", by: str = "impl") -> go.Figure:
    """Stacked rows per status for each implementation, or ``by`` (one trace per status)."""
    fig = go.Figure()
    for status, c in STATUS_COLORS.items():
        if status in counts.columns:
            fig.add_trace(go.Bar(x=counts[by].map(safe.html), y=counts[status], name=status, marker_color=c))
    fig.update_layout(barmode="stack")
    return _layout(fig, title, "implementation" if by == "impl" else by, "rows")


def best_speedups(best: pd.DataFrame, title: str = "") -> go.Figure:
    """The best implementation's speedup over eager and over the fastest torch op per
    workload (analysis.best_table's ``vs_eager`` and ``vs_torch``): grouped bars on a log
    axis, a dashed line at 1, the implementation and shape in the hover text.  A workload
    measured with several timers has a bar per timer."""
    b = safe.html_columns(best, TEXT + ("best",))   # "best": an implementation's name
    x = b["workload"] + (" [" + b["timer"] + "]" if b["timer"].nunique() > 1 else "")
    fig = go.Figure()
    for col, name in (("vs_eager", "× eager"), ("vs_torch", "× torch")):
        fig.add_trace(go.Bar(x=x, y=b[col], name=name, marker_color=BACKEND_COLORS[name[2:]],
                             customdata=_custom(b, ["best", "shape"]),
                             hovertemplate="%{x}: %{customdata[0]} at %{customdata[1]}<br>%{y:.2f}"
                                           "<extra>" + name + "</extra>"))
    fig.update_layout(barmode="group")
    _hlines(fig, [{"y": 1, "dash": "dash", "color": "#444"}])
    return _layout(fig, title, "workload", "speedup", logy=True)


def fusion_chart(ft: pd.DataFrame, title: str = "") -> go.Figure:
    """Measured speedup over eager against predicted (eager_bytes / min_bytes),
    log-log, one trace per implementation (colour) with one symbol per workload
    (a legend entry each, where there are several), then the y = x line of a
    prediction met."""
    ft = _text_safe(ft)
    fig = go.Figure()
    names = list(dict.fromkeys(ft["impl"])) if len(ft) else []
    workloads = sorted(set(ft["workload"])) if len(ft) else []
    for name in names:
        g = ft[ft["impl"] == name]
        fig.add_trace(go.Scatter(
            x=g["predicted"], y=g["measured"], mode="markers", name=name,
            marker=dict(color=color(name, names), size=9,
                        symbol=[SYMBOLS[workloads.index(w) % len(SYMBOLS)] for w in g["workload"]]),
            customdata=_custom(g, ["workload", "shape", "dtype", "reached"]),
            hovertemplate="%{customdata[0]} %{customdata[1]} %{customdata[2]}<br>predicted %{x:.2f}x"
                          "<br>measured %{y:.2f}x (%{customdata[3]:.0%} of it)<extra>" + name + "</extra>"))
    vals = pd.concat([ft["predicted"], ft["measured"]]) if len(ft) else pd.Series([1.0])
    vals = vals[(vals > 0) & np.isfinite(vals)]
    lo, hi = (float(vals.min()) / 1.5, float(vals.max()) * 1.5) if len(vals) else (0.5, 2.0)
    if len(workloads) > 1:  # the symbols' key: a legend entry per workload, nothing drawn
        for i, w in enumerate(workloads):
            fig.add_trace(go.Scatter(
                x=[None], y=[None], mode="markers", name=w, legendgroup="workload",
                legendgrouptitle_text="workload" if i == 0 else None, hoverinfo="skip",
                marker=dict(color="#888", size=9, symbol=SYMBOLS[i % len(SYMBOLS)])))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="as predicted",
                             line=dict(color="#444", dash="dash")))
    # tall enough for the whole legend, implementations and key, without its scroll bar
    fig.update_layout(height=max(450, 30 * (len(names) + len(workloads) + 3) + 100))
    return _layout(fig, title, "predicted speedup (eager bytes / fused bytes)",
                   "measured speedup over eager", logx=True, logy=True)


def compare_scatter(table: pd.DataFrame, threshold: float, label: str = "speedup",
                    title: str = "") -> go.Figure:
    """Candidate vs base per case against size; one trace per verdict, and lines at
    1 and at the two thresholds."""
    table = _text_safe(table)
    fig = go.Figure()
    for verdict, c in VERDICT_COLORS.items():
        g = table[table["verdict"] == verdict]
        if g.empty:
            continue
        fig.add_trace(go.Scatter(
            x=g["size"], y=g["speedup"], mode="markers", name=verdict, marker=dict(color=c, size=8),
            customdata=np.stack([g["workload"], g["impl"], g["dtype"], g["shape"]], axis=-1),
            hovertemplate="%{customdata[0]} · %{customdata[1]} %{customdata[2]}<br>%{customdata[3]}"
                          "<br>%{y:.3f}x<extra></extra>"))
    _hlines(fig, [{"y": 1.0, "color": "#444"}] + [{"y": y, "dash": "dot", "color": "#999"}
                                                  for y in (1 + threshold, 1 / (1 + threshold))])
    return _layout(fig, title, "problem size (elements)", label, logx=True, logy=True)


def history_chart(h: pd.DataFrame, metric: str, by_date: bool = False, title: str = "") -> go.Figure:
    """``metric`` over commits, one line per GPU (and per ``l2`` where ``h`` holds
    more than one, named "gpu · l2"); failed runs leave a gap."""
    h = _text_safe(h)
    fig = go.Figure()
    l2s = h["l2"] if "l2" in h.columns else pd.Series("-", index=h.index)
    several = l2s.nunique() > 1
    for (gpu, l2), g in h.assign(_l2=l2s).groupby(["gpu", "_l2"], sort=True):
        name = f"{gpu} · {l2}" if several else str(gpu)
        fig.add_trace(go.Scatter(
            x=g["time"] if by_date else g["order"], y=g[metric], mode="lines+markers", name=name,
            customdata=_custom(g, ["commit", "status"]),
            hovertemplate="%{customdata[0]} (%{customdata[1]})<br>%{y:.4g}<extra>" + name + "</extra>"))
    if not by_date and len(h):
        order = h.drop_duplicates("order").sort_values("order")
        fig.update_xaxes(tickmode="array", tickvals=order["order"].tolist(),
                         ticktext=order["commit"].str[:7].tolist())
    return _layout(fig, title, "date" if by_date else "commit (in order of first run)", metric)


def case_bars(table: pd.DataFrame, title: str = "") -> go.Figure:
    """One case's implementations (analysis.case_table), fastest on top: median ms as a
    bar, p20-p80 as its error bar, coloured by backend; a bar per run where rows name one."""
    t = _text_safe(table).iloc[::-1]
    names = list(dict.fromkeys(t["impl"]))
    label = t["impl"] + np.where(t["timer"].nunique() > 1, " [" + t["timer"] + "]", "")
    if "run" in t.columns:
        label = label + np.where(t["run"] != "", " · " + t["run"].astype(str), "")
    fig = go.Figure(go.Bar(
        x=t["ms"], y=label, orientation="h", marker_color=[color(n, names) for n in t["impl"]],
        error_x=dict(type="data", array=(t["p80"] - t["ms"]).to_numpy(), arrayminus=(t["ms"] - t["p20"]).to_numpy()),
        customdata=np.stack([t["rate"], t["unit"], t["sol"]], axis=-1),
        hovertemplate="%{x:.4g} ms<br>%{customdata[0]:,.1f} %{customdata[1]}<br>SOL %{customdata[2]:.2f}"
                      "<extra>%{y}</extra>"))
    fig.update_xaxes(tickformat="~g", exponentformat="none")
    fig.update_layout(height=max(250, 28 * len(t) + 100), showlegend=False)
    return _layout(fig, title, "median ms (bars: p20 to p80)", "")
