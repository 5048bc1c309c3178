"""Output of ``python -m suite compare`` and ``python -m suite ab``: a rich table, Markdown, or JSON.

Regressions come first, losses (broke, lost, missing) before slowdowns; then
improvements, what is not comparable, the context (changes of implementations
that are not gated), and cases only one side holds.  Every timed verdict shows what it was
judged against: the band of a run-vs-run comparison, or the 95% interval of
the paired rounds of an A/B run.
"""
from __future__ import annotations

import json
import sys

from suite.compare import Options, Result, as_dict
from suite.plain import md_text, rich_text

_ORDER = {"suspect": 0, "broke": 0, "lost": 1, "missing": 2, "slower": 3, "unsure": 4, "not comparable": 5,
          "fixed": 6, "faster": 7, "gone": 8, "new": 9, "status": 10, "same": 11}


def emit(results: list[Result], opt: Options, fmt: str, code: int, show_all: bool = False,
         out=None, intro: str | None = None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        doc = {"exit_code": code, "threshold": opt.threshold, "floor_us": opt.floor_us,
               "alpha": opt.alpha, "gate": opt.gate, "comparisons": [as_dict(r) for r in results]}
        json.dump(doc, out, indent=1, default=_plain)
        out.write("\n")
    elif fmt == "markdown":
        out.write(markdown(results, opt, code, intro))
    else:
        table(results, opt, code, show_all, out)


def _plain(x):
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def _num(x, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def _pct(x) -> str:
    return "" if x is None else f"{x:.0%}"


def _rank(r: dict) -> tuple:
    tier = (0 if r["regression"] else 1 if r["improvement"] else 2 if r["verdict"] == "not comparable"
            else 3 if r["context"] else 4)
    return (tier, _ORDER.get(r["verdict"], 11), r["workload"], r["impl"], r["dtype"], r["shape"])


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=_rank)


def _columns(result: Result) -> list[str]:
    cols = ["workload", "impl", "dtype", "shape", "timer", "base ms", "cand ms", "speedup"]
    if result.gpus_differ or any(r["base_sol"] is not None for r in result.rows):
        cols += ["base SOL", "cand SOL"]
    if any(r.get("ci") for r in result.rows):
        cols += ["speedup 95% CI", "band"]
    else:
        cols += ["band", "p"]
    return cols + ["verdict"]


def _verdict_text(r: dict) -> str:
    if r["regression"]:
        mark = f"REGRESSION, {r['verdict']}"
    elif r["improvement"]:
        mark = "fixed" if r["verdict"] == "fixed" else "improvement"
    elif r["context"]:
        mark = f"{r['verdict']} (context)"
    else:
        mark = r["verdict"]
    return mark + (f" ({r['reason']})" if r["reason"] else "")


def _band_text(r: dict) -> str:
    if r["band"] is None:
        return ""
    return f"+-{r['band']:.1%}" + (f" ({r['band_source']})" if r.get("band_source") else "")


def _cells(r: dict, cols: list[str], safe=rich_text) -> list[str]:
    """A row's cells, its values from the runs made inert by ``safe`` (rich or Markdown)."""
    ci = r.get("ci")
    values = {
        "workload": safe(r["workload"]), "impl": safe(r["impl"]), "dtype": safe(r["dtype"]),
        "shape": safe(r["shape"]), "timer": safe(r["timer"]),
        "base ms": _num(r["base_ms"], ".4g"), "cand ms": _num(r["cand_ms"], ".4g"),
        "speedup": _num(r["speedup"], ".3f") + ("x" if r["speedup"] is not None else ""),
        "base SOL": _num(r["base_sol"], ".3g"), "cand SOL": _num(r["cand_sol"], ".3g"),
        "speedup 95% CI": f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "",
        "band": safe(_band_text(r)), "p": _num(r["p_value"], ".2g"), "verdict": safe(_verdict_text(r)),
    }
    return [str(values[c]) for c in cols]


def _heading(result: Result) -> str:
    def side(d):
        what = ", ".join(d["files"][:3]) + (" ..." if len(d["files"]) > 3 else "")
        gpu = ", ".join(d["gpus"]) or "unknown GPU"
        commit = ", ".join(d["commits"][:3]) or "no commit"
        return f"{d['label']} ({what or 'files not kept'}; {gpu}; {commit})"

    return f"{side(result.base)} -> {side(result.candidate)}"


def summary(result: Result, code: int) -> str:
    n = len(result.regressions)
    losses = sum(r["verdict"] in ("broke", "lost", "missing") for r in result.regressions)
    i = len(result.improvements)
    ctx = sum(r["context"] for r in result.rows)
    fails = bool(n) or (bool(i) and code == 1)  # improvements fail only when asked to
    return (f"{result.compared} cases compared: {n} regression(s)"
            + (f" ({losses} lost)" if losses else "") + f", {i} improvement(s)"
            + (f", {ctx} context change(s) not gated" if ctx else "") + ". "
            + ("FAIL" if fails else "PASS"))


ROLLUP_COLS = ["impl", "matched", "geomean speedup", "geomean SOL ratio", "base pass rate",
               "cand pass rate", "regressions", "improvements", "gated"]


def _rollup_cells(r: dict, safe=rich_text) -> list[str]:
    return [safe(r["impl"]), str(r["matched"]), _num(r["geomean_speedup"], ".3f"),
            _num(r["geomean_sol_ratio"], ".3f"), _pct(r["base_pass_rate"]),
            _pct(r["cand_pass_rate"]), str(r["regressions"]), str(r["improvements"]),
            "yes" if r["gated"] else "context"]


def _md_table(cols: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of cells already made safe by md_text ("|" included)."""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def default_intro(opt: Options) -> str:
    gated = "every implementation" if opt.gate == "all" else "our own implementations (triton, cuda, plugins)"
    return (f"A change counts when it lies outside its band (the widest of {opt.threshold:.0%}, three "
            f"standard errors of the case's between-run spread, and its samples' spread) and a "
            f"Mann-Whitney U test on the samples gives p < {opt.alpha:g}. Gated: {gated}.\n")


def markdown(results: list[Result], opt: Options, code: int, intro: str | None = None) -> str:
    parts = [f"## Benchmark comparison: {'regression' if code == 1 else 'no regression'}\n",
             intro or default_intro(opt)]
    for res in results:
        parts.append(f"\n### {md_text(_heading(res))}\n\n**{md_text(summary(res, code))}**\n")
        for note in res.notes:
            parts.append(f"\n> {md_text(note)}\n")
        parts.append("\n" + _md_table(ROLLUP_COLS, [_rollup_cells(r, md_text) for r in res.rollup]))
        cols = _columns(res)
        changed = [r for r in _sorted(res.rows) if r["verdict"] != "same"]
        if changed:
            parts.append("\n#### Changes\n\n" + _md_table(cols, [_cells(r, cols, md_text) for r in changed]))
        parts.append(f"\n<details><summary>All {len(res.rows)} cases</summary>\n\n"
                     + _md_table(cols, [_cells(r, cols, md_text) for r in _sorted(res.rows)])
                     + "\n</details>\n")
    return "".join(parts)


def table(results: list[Result], opt: Options, code: int, show_all: bool, out) -> None:
    from rich.console import Console
    from rich.table import Table

    probe = Console(file=out)
    # Piped output (CI logs, files) is not truncated to an 80-column guess.
    console = Console(file=out, width=max(120, probe.width) if probe.is_terminal else 240)
    style = {"suspect": "bold red", "broke": "bold red", "lost": "bold red", "missing": "bold red", "slower": "red",
             "faster": "green", "fixed": "green", "not comparable": "yellow", "unsure": "yellow"}
    for res in results:
        console.print(f"[bold]{rich_text(_heading(res))}[/bold]", highlight=False)
        for note in res.notes:
            console.print(f"[yellow]note:[/yellow] {rich_text(note)}", highlight=False)
        cols = _columns(res)
        t = Table(*cols, title=None, show_lines=False)
        rows = _sorted(res.rows)
        shown = rows if show_all else [r for r in rows if r["verdict"] != "same"]
        for r in shown:
            t.add_row(*_cells(r, cols), style=None if r["context"] else style.get(r["verdict"]))
        if shown:
            console.print(t)
        hidden = len(rows) - len(shown)
        if hidden:
            console.print(f"{hidden} unchanged case(s) not listed (--all lists them)")
        roll = Table(*ROLLUP_COLS, title="per implementation")
        for r in res.rollup:
            roll.add_row(*_rollup_cells(r))
        console.print(roll)
        console.print(f"[bold]{rich_text(summary(res, code))}[/bold]", highlight=False)
