"""What a run file records about its run, so that ``--resume`` finishes it as started.

Every row carries two JSON columns: ``run_args``, the options that choose and
measure the cases (filters, preset, timers, the seed actually used, the timing
protocol, shape arguments, plugins), and ``ceilings``, the roofs its rows are
scored against.  ``--resume FILE`` takes both from the file: the same cases
with the same inputs, scored against the same ceilings, never a second ceiling
measurement in one file.  An option given again on the command line must
agree with the file's; one that does not is a one-line error.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Iterable

from suite.args import UsageError
from suite.ceilings import Ceilings
from suite.workload import is_plugin_path

# run options (argparse dests) that decide which cases run and how they are timed;
# those a version of the runner lacks are skipped
RECORDED = ("device", "preset", "workloads", "impls", "backends", "dtypes", "timer", "seed",
            "l2_flush", "samples", "budget_ms", "settle_ms", "repeat", "shard", "shape", "shapes", "plugin", "profile",
            "energy")


def _plain(value):
    """A JSON-comparable form: paths as text, tuples as lists."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def record(args: argparse.Namespace) -> str:
    """The JSON of ``args``'s recorded options (``run_args``)."""
    return json.dumps({k: _plain(getattr(args, k)) for k in RECORDED if hasattr(args, k)},
                      sort_keys=True)


def ceilings_json(ceil: Ceilings) -> str:
    return json.dumps(asdict(ceil), sort_keys=True)


def _first(rows: Iterable[dict], column: str) -> dict | None:
    """The JSON object of ``column`` in the first row that has one; None where it holds
    something else (not JSON, or JSON that is not an object)."""
    for r in rows:
        text = r.get(column)
        if isinstance(text, str) and text:
            try:
                value = json.loads(text)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value)) if value else "(none)"
    return "(not given)" if value is None else str(value)


def apply(args: argparse.Namespace, rows: list[dict], defaults: dict, path) -> bool:
    """Set ``args``'s recorded options from the file's rows; False when it records none.

    An option left at its default takes the file's value; one given with another
    value than the file's is a UsageError naming both.
    """
    recorded = _first(rows, "run_args")
    if recorded is None:
        return False
    for name, value in recorded.items():
        if not hasattr(args, name):
            continue
        given = getattr(args, name)
        if _plain(given) != _plain(defaults.get(name)) and not _same(name, given, value):
            raise UsageError(f"--resume {path}: the run was started with {_flag(name)} {_shown(value)}; "
                             f"this command says {_flag(name)} {_shown(_plain(given))} (leave it out "
                             f"to finish the run as started)")
        setattr(args, name, value)
    return True


def _same(name: str, given, recorded) -> bool:
    if name == "plugin":  # a file named by another relative path is the same file
        key = lambda p: str(Path(p).resolve()) if is_plugin_path(p) else p  # noqa: E731
        return [key(p) for p in given] == [key(p) for p in recorded]
    if name in ("workloads", "impls", "backends", "dtypes", "timer") and isinstance(given, str):
        return sorted(given.split(",")) == sorted(str(recorded).split(","))
    if isinstance(recorded, float) and isinstance(given, (int, float)):
        return math.isclose(given, recorded)
    return _plain(given) == recorded


def ceilings_by_device(rows: list[dict]) -> dict[int, Ceilings]:
    """Device index -> the ceilings its rows were scored against (a run of --gpus)."""
    out: dict[int, Ceilings] = {}
    for r in rows:
        try:
            index = int(r.get("device_index"))
        except (TypeError, ValueError):
            continue
        text = r.get("ceilings")
        if index in out or not isinstance(text, str) or not text:
            continue
        try:
            out[index] = Ceilings(**json.loads(text))
        except (TypeError, ValueError):
            continue
    return out


def ceilings(rows: list[dict]) -> Ceilings | None:
    """The ceilings the file's rows were scored against, or None for a file that predates them."""
    data = _first(rows, "ceilings")
    try:
        return Ceilings(**data) if data else None
    except TypeError:
        return None
