"""``python -m suite shards PATH...``: is every shard of each sharded sweep there, once?

A sweep run as N shards (``--shard K/N``, one run each: a Slurm array job or a
Kubernetes Indexed Job writing into one folder) is complete when each K from
1 to N is held by exactly one run file.  The shards of one sweep are the runs
with the same commit, the same N and the same options (``run_args`` less the
shard and the seed, which each shard may draw for itself).  A missing shard
would read as a sweep that never covered those cases, a duplicated one as
cases measured twice, so ``compare`` refuses a folder of shards that is not
complete, and this verb names what is wrong before anything is compared.
Exit 0: every sweep complete; 1: a shard missing or duplicated (each named);
2: no readable results, none sharded, or a shard column that is not K/N.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from suite.args import UsageError


@dataclass
class ShardSet:
    """The runs of one sharded sweep: K -> the (run_id, file) pairs that hold it."""

    commit: str
    n: int
    options: str
    held: dict = field(default_factory=dict)

    @property
    def missing(self) -> list[int]:
        return [k for k in range(1, self.n + 1) if k not in self.held]

    @property
    def duplicated(self) -> dict[int, list]:
        return {k: sorted(v) for k, v in sorted(self.held.items()) if len(v) > 1}

    @property
    def complete(self) -> bool:
        return not self.missing and not self.duplicated

    def describe(self) -> str:
        head = f"sweep at commit {self.commit[:7]} in {self.n} shards ({_summary(self.options)})"
        if self.complete:
            return f"{head}: complete, {self.n} files"
        parts = []
        if self.missing:
            parts.append("missing " + ", ".join(f"{k}/{self.n}" for k in self.missing))
        for k, runs in self.duplicated.items():
            parts.append(f"{k}/{self.n} held {len(runs)} times ("
                         + ", ".join(f"run {r} in {src}" for r, src in runs) + ")")
        return f"{head}: " + "; ".join(parts)


def _options(text) -> str:
    """run_args without the shard and the seed, as a key; "" for a file that records none."""
    try:
        data = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        data = {}
    data.pop("shard", None)
    data.pop("seed", None)
    return json.dumps(data, sort_keys=True)


def _summary(options: str) -> str:
    data = json.loads(options) if options else {}
    keys = ("preset", "workloads", "backends", "impls", "dtypes")
    said = [f"{k} {data[k]}" for k in keys if data.get(k)]
    return ", ".join(said) or "options not recorded"


def _parse(spec) -> tuple[int, int] | None:
    try:
        k, n = (int(x) for x in str(spec).split("/"))
    except ValueError:
        return None
    return (k, n) if 1 <= k <= n else None


def shard_sets(df: pd.DataFrame) -> tuple[list[ShardSet], list[str]]:
    """The sharded sweeps among ``df``'s runs, and one line per shard column not K/N."""
    if "shard" not in df.columns:
        return [], []
    rows = df[df["shard"].notna()]
    sets: dict[tuple, ShardSet] = {}
    bad = []
    runs = rows.groupby(["run_id", "source"], sort=True, dropna=False)
    for (run_id, source), g in runs:
        specs = set(g["shard"].astype(str))
        parsed = {_parse(s) for s in specs}
        if len(specs) != 1 or None in parsed:
            bad.append(f"{source}: run {run_id} has shard {', '.join(sorted(specs))}, not one K/N")
            continue
        ((k, n),) = parsed
        commit = str(g["commit"].iloc[0]) if "commit" in g else ""
        options = _options(g["run_args"].iloc[0] if "run_args" in g else None)
        s = sets.setdefault((commit, n, options), ShardSet(commit, n, options))
        s.held.setdefault(k, []).append((str(run_id), str(source)))
    return list(sets.values()), bad


def _is_folder_or_glob(path) -> bool:
    return Path(path).is_dir() or any(ch in str(path) for ch in "*?[")


def refuse_incomplete(df: pd.DataFrame, paths, what: str) -> None:
    """UsageError when ``paths`` name a folder or glob whose shards are incomplete (a file
    named on its own is taken as it is: one shard may be compared on purpose)."""
    if not any(_is_folder_or_glob(p) for p in paths):
        return
    sets, bad = shard_sets(df)
    wrong = [s.describe() for s in sets if not s.complete] + bad
    if wrong:
        raise UsageError(f"{what}: incomplete shards in {', '.join(map(str, paths))}: {wrong[0]}"
                         + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else "")
                         + "; `python -m suite shards` lists them")


def configure(p) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="result files, folders or quoted globs")


def main(args) -> int:
    from suite.store import read_runs

    df, problems = read_runs(args.paths)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if df.empty:
        raise UsageError("no readable results in " + ", ".join(map(str, args.paths)))
    sets, bad = shard_sets(df)
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    if not sets:
        if bad:
            return 2
        raise UsageError(f"no sharded run in {', '.join(map(str, args.paths))} "
                         f"({df['run_id'].nunique()} run(s), none with --shard)")
    for s in sets:
        print(s.describe())
    if bad:
        return 2
    return 0 if all(s.complete for s in sets) else 1
