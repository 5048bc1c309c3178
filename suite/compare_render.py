"""Output of ``python -m suite compare``: a rich table, Markdown, or JSON."""
from __future__ import annotations

import json
import sys

from suite.compare import Options, Result, as_dict

_ORDER = {"broke": 0, "suspect": 0, "slower": 1, "not comparable": 2, "fixed": 3, "faster": 4,
          "gone": 5, "new": 6, "status": 7, "same": 8}
_MARK = {"broke": "REGRESSION", "suspect": "REGRESSION", "slower": "REGRESSION",
         "faster": "improvement", "fixed": "fixed"}


def emit(results: list[Result], opt: Options, fmt: str, code: int, show_all: bool = False,
         out=None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        doc = {"exit_code": code, "threshold": opt.threshold, "floor_us": opt.floor_us,
               "alpha": opt.alpha, "comparisons": [as_dict(r) for r in results]}
        json.dump(doc, out, indent=1, default=_plain)
        out.write("\n")
    elif fmt == "markdown":
        out.write(markdown(results, opt, code))
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


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (_ORDER.get(r["verdict"], 9), r["workload"], r["impl"],
                                       r["dtype"], r["shape"]))


def _columns(result: Result) -> list[str]:
    cols = ["workload", "impl", "dtype", "shape", "timer", "base ms", "cand ms", "speedup"]
    if result.gpus_differ or any(r["base_sol"] is not None for r in result.rows):
        cols += ["base SOL", "cand SOL"]
    return cols + ["p", "verdict"]


def _cells(r: dict, cols: list[str]) -> list[str]:
    values = {
        "workload": r["workload"], "impl": r["impl"], "dtype": r["dtype"], "shape": r["shape"],
        "timer": r["timer"], "base ms": _num(r["base_ms"], ".4g"), "cand ms": _num(r["cand_ms"], ".4g"),
        "speedup": _num(r["speedup"], ".3f") + ("x" if r["speedup"] is not None else ""),
        "base SOL": _num(r["base_sol"], ".3g"), "cand SOL": _num(r["cand_sol"], ".3g"),
        "p": _num(r["p_value"], ".2g"),
        "verdict": _MARK.get(r["verdict"], r["verdict"]) + (f" ({r['reason']})" if r["reason"] else ""),
    }
    return [str(values[c]) for c in cols]


def _heading(result: Result) -> str:
    def side(d):
        what = ", ".join(d["files"][:3]) + (" ..." if len(d["files"]) > 3 else "")
        gpu = ", ".join(d["gpus"]) or "unknown GPU"
        commit = ", ".join(d["commits"][:3]) or "no commit"
        return f"{d['label']} ({what or 'no files'}; {gpu}; {commit})"

    return f"{side(result.base)} -> {side(result.candidate)}"


def _summary(result: Result, code: int) -> str:
    n = len(result.regressions)
    i = len(result.improvements)
    matched = sum(r["speedup"] is not None for r in result.rows)
    fails = bool(n) or (bool(i) and code == 1)  # improvements fail only when asked to
    return (f"{matched} cases compared: {n} regression(s), {i} improvement(s). "
            + ("FAIL" if fails else "PASS"))


ROLLUP_COLS = ["impl", "matched", "geomean speedup", "geomean SOL ratio", "base pass rate",
               "cand pass rate", "regressions", "improvements"]


def _rollup_cells(r: dict) -> list[str]:
    return [r["impl"], str(r["matched"]), _num(r["geomean_speedup"], ".3f"),
            _num(r["geomean_sol_ratio"], ".3f"), _pct(r["base_pass_rate"]),
            _pct(r["cand_pass_rate"]), str(r["regressions"]), str(r["improvements"])]


def _md_table(cols: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in esc]
    return "\n".join(lines) + "\n"


def markdown(results: list[Result], opt: Options, code: int) -> str:
    parts = [f"## Benchmark comparison: {'regression' if code else 'no regression'}\n",
             f"A change counts when it exceeds {opt.threshold:.0%} and {opt.floor_us:g} us and a "
             f"Mann-Whitney U test on the samples gives p < {opt.alpha:g}.\n"]
    for res in results:
        parts.append(f"\n### {_heading(res)}\n\n**{_summary(res, code)}**\n")
        for note in res.notes:
            parts.append(f"\n> {note}\n")
        parts.append("\n" + _md_table(ROLLUP_COLS, [_rollup_cells(r) for r in res.rollup]))
        cols = _columns(res)
        changed = [r for r in _sorted(res.rows) if r["verdict"] != "same"]
        if changed:
            parts.append("\n#### Changes\n\n" + _md_table(cols, [_cells(r, cols) for r in changed]))
        parts.append(f"\n<details><summary>All {len(res.rows)} cases</summary>\n\n"
                     + _md_table(cols, [_cells(r, cols) for r in _sorted(res.rows)])
                     + "\n</details>\n")
    return "".join(parts)


def table(results: list[Result], opt: Options, code: int, show_all: bool, out) -> None:
    from rich.console import Console
    from rich.table import Table

    probe = Console(file=out)
    # Piped output (CI logs, files) is not truncated to an 80-column guess.
    console = Console(file=out, width=max(120, probe.width) if probe.is_terminal else 240)
    style = {"broke": "bold red", "suspect": "bold red", "slower": "red", "faster": "green", "fixed": "green",
             "not comparable": "yellow"}
    for res in results:
        console.print(f"[bold]{_heading(res)}[/bold]", highlight=False)
        for note in res.notes:
            console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
        cols = _columns(res)
        t = Table(*cols, title=None, show_lines=False)
        rows = _sorted(res.rows)
        shown = rows if show_all else [r for r in rows if r["verdict"] != "same"]
        for r in shown:
            t.add_row(*_cells(r, cols), style=style.get(r["verdict"]))
        if shown:
            console.print(t)
        hidden = len(rows) - len(shown)
        if hidden:
            console.print(f"{hidden} unchanged case(s) not listed (--all lists them)")
        roll = Table(*ROLLUP_COLS, title="per implementation")
        for r in res.rollup:
            roll.add_row(*_rollup_cells(r))
        console.print(roll)
        console.print(f"[bold]{_summary(res, code)}[/bold]", highlight=False)
