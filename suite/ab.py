"""``python -m suite ab BASE_REF CAND_REF [run options]``: two commits, one GPU, alternating rounds.

A run-vs-run comparison across days or machines must allow for their drift
(compare_stats); timing both commits in the same session on the same GPU
removes it instead:

1. Both refs are checked out into temporary worktrees (``git worktree add
   --detach``), removed at the end.  Each side runs its own tree's
   ``python -m suite run`` with the given run options, so each is timed by its
   own harness and implementations.
2. Warm-up: each side runs once first.  Compilation, autotuning and extension
   builds land in the on-disk caches, and every output is checked against
   float64; these rows count for status, not for time.
3. Rounds: both sides run in each round, the first side alternating (AB, BA,
   AB, ...), so that a drift of the GPU within the session (clocks, heat) falls
   on both sides alike.  Both runs of a round use the round's seed: the same
   inputs.  A round yields one median per case per side.
4. Per case, the log ratios candidate / base of the rounds where both are ok give
   the geometric-mean ratio and its t interval (compare_stats.paired), for two
   statistics of each round's samples: the median, and the fast end (their 10th
   percentile).  Each interval is taken at 1 - 5% / (statistics x looks), a look being
   each time the case can be judged (after --rounds, then after every extra round up to
   --max-rounds), so that identical code is called slower or faster in at most 5% of
   cases, however many rounds it took (_level).  A regression when an interval lies wholly above 1 + threshold
   and neither lies wholly below 1 / (1 + threshold), an improvement the other
   way round, the same when both lie wholly inside the band.  The fast end is
   there for kernels at the GPU's power limit: within a run their samples slow
   down as the limiter lowers the clock, so the median moves from round to round
   by more than a small loss, while the first, faster samples repeat closely.
5. Extra rounds: a gated case whose interval still crosses an edge of the band
   is timed again, in more alternating rounds of only such cases (their
   shapes in a --shapes file), until every one is decided or --max-rounds is
   reached; one still undecided then is ``unsure``, listed with its interval
   but not failing the gate.  A noisy case gets the rounds it needs, and the
   rest of the sweep is not run again for it.  Losses are regressions as in compare: ok -> not ok in any
   run, or no row where the base has one (both sides ran the same sweep).
   What is gated follows compare: our own implementations by default.

A change to the harness itself (timing, L2 eviction) shows as a change of every
case, PyTorch's own implementations included.  Exit codes as compare's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from suite import compare, compare_render, store
from suite.args import Parser, UsageError
from suite.compare_stats import paired

SIDES = ("base", "cand")
# run options ab sets itself, per side and round
OWN_RUN_OPTIONS = ("--out", "--resume", "--seed", "--reuse-ceilings", "--no-progress")
MEDIAN, FAST = 1, 2  # the statistics of a round's case in _keyed's tuples
FAST_Q = 0.10  # the fast end of a round's samples
CONFIDENCE = 0.95  # of a case's verdict, over both statistics and every look (_level)


def _own_options(p: argparse.ArgumentParser, suppress: bool = False) -> None:
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)  # noqa: E731
    p.add_argument("--rounds", type=int, default=d(5), help="timed rounds after the warm-up (default 5)")
    p.add_argument("--max-rounds", type=int, default=d(None),
                   help="rounds at most: extra ones time only the gated cases whose interval still "
                        "crosses +-threshold (default twice --rounds; --rounds itself: no extra rounds)")
    p.add_argument("--threshold", default=d("2%"),
                   help="smallest change that counts, as 2%% or 0.02 (default 2%%)")
    p.add_argument("--gate", choices=("own", "all"), default=d("own"),
                   help="own (default): regressions of triton, cuda and plugins fail; all: every "
                        "implementation's")
    p.add_argument("--fail-on-improvement", action="store_true", default=d(False),
                   help="exit 1 on a significant improvement too (to force a baseline refresh)")
    p.add_argument("--seed", type=int, default=d(None), help="seed of the warm-up; round r uses seed + r")
    p.add_argument("--base-env", action="append", default=d([]), metavar="NAME=VALUE",
                   help="environment for the base's runs only (repeatable)")
    p.add_argument("--cand-env", action="append", default=d([]), metavar="NAME=VALUE",
                   help="environment for the candidate's runs only (repeatable): A/B of a setting "
                        "on one commit, or a test plugin's factor")
    p.add_argument("--out", type=Path, default=d(None), metavar="DIR",
                   help="keep the runs' Parquet files and logs in DIR (default: a temporary folder)")
    p.add_argument("--repo", type=Path, default=d(None), help="the git repository (default: the one here)")
    p.add_argument("--format", choices=("table", "markdown", "json"), default=d("table"),
                   help="table (default): rich tables for a terminal; markdown: a pull-request "
                        "comment, stored text escaped; json: every verdict with its numbers, for scripts")
    p.add_argument("--all", action="store_true", default=d(False), help="table: list unchanged cases too")


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ((p.description or "") + ". Both refs are checked out into temporary worktrees; "
                     "after one warm-up run each, they run in alternating rounds (AB, BA, ...) "
                     "with the same seed per round, each with its own code. A case changes when "
                     "its paired-round time ratio lies wholly outside +-threshold at 95% "
                     "confidence; losses (ok -> not ok, a row gone) are regressions. Exit 0: no "
                     "regression; 1: a regression; 2: bad input or nothing comparable.")
    p.add_argument("base_ref", metavar="BASE_REF", help="the base: a commit, branch or tag of --repo")
    p.add_argument("cand_ref", metavar="CAND_REF",
                   help="the candidate: a commit, branch or tag (the same ref with --cand-env: a setting's A/B)")
    _own_options(p)
    rest = p.add_argument("run_args", nargs=argparse.REMAINDER, metavar="RUN OPTIONS",
                          help="options of `python -m suite run` (--workloads, --impls, --preset, "
                               "...), the same for both sides; none: run's defaults")
    rest.required = False  # argparse marks a remainder required; it may be empty


def split_args(args) -> tuple[argparse.Namespace, list[str]]:
    """ab's own options may follow the refs, among the run options: pick them out."""
    own = Parser(prog="python -m suite ab", add_help=False, allow_abbrev=False)
    _own_options(own, suppress=True)
    given, rest = own.parse_known_args(args.run_args)
    merged = {**vars(args), **vars(given)}
    for name in ("base_env", "cand_env"):  # given before the refs and after them
        merged[name] = list(getattr(args, name, []) or []) + list(getattr(given, name, []))
    return argparse.Namespace(**merged), rest


def check_run_args(run_args: list[str]) -> None:
    from suite import runner
    from suite.workload import FUZZ

    for a in run_args:
        if a.split("=", 1)[0] in OWN_RUN_OPTIONS:
            raise UsageError(f"ab sets {a.split('=', 1)[0]} of each run itself; leave it out")
    p = argparse.ArgumentParser(prog="python -m suite ab ... RUN OPTIONS", add_help=False,
                                exit_on_error=False)
    runner.configure(p)
    try:
        parsed, unknown = p.parse_known_args(run_args)
    except argparse.ArgumentError as exc:
        raise UsageError(f"run options: {exc}") from None
    if unknown:
        raise UsageError(f"not an option of `suite run` nor of `suite ab`: {' '.join(unknown)}")
    if parsed.preset == FUZZ:
        raise UsageError(f"--preset {FUZZ} draws its shapes from the seed, which ab changes every "
                         "round; name the shapes instead (--shape, or --shapes FILE)")


def _env_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"{what} {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


# ---------------------------------------------------------------- git
def _git(repo: Path, *argv: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
    if r.returncode != 0:
        raise UsageError(f"git {' '.join(argv)}: {(r.stderr.strip().splitlines() or ['failed'])[-1]}")
    return r.stdout.strip()


def resolve(repo: Path, ref: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise UsageError(f"{ref!r} is not a commit of the repository at {repo}")
    return r.stdout.strip()


def uncommitted_warning(repo: Path, shas: dict[str, str]) -> str | None:
    """A warning where a ref is the commit checked out and tracked files differ from it:
    each side runs a worktree of its commit, which holds none of those changes."""
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    if head not in shas.values() or not _git(repo, "status", "--porcelain", "--untracked-files=no"):
        return None
    return (f"ab: warning: {repo} has uncommitted changes; they are not part of the refs, "
            "which are timed as committed")


class Worktrees:
    """Detached worktrees under one temporary folder, all removed by ``close``."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.root = Path(tempfile.mkdtemp(prefix="ksuite-ab-"))
        self.paths: list[Path] = []

    def add(self, name: str, sha: str) -> Path:
        path = self.root / name
        _git(self.repo, "worktree", "add", "--detach", str(path), sha)
        self.paths.append(path)
        return path

    def close(self) -> None:
        for path in self.paths:  # each one's own entry only: other worktrees are not ours
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force", str(path)],
                           capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------- rounds
def schedule(rounds: int) -> list[tuple[int, str]]:
    """(round, side) in running order: the warm-up (round 0), then AB, BA, AB, ..."""
    order = [(0, "base"), (0, "cand")]
    for r in range(1, rounds + 1):
        order += [(r, s) for s in (SIDES if r % 2 else SIDES[::-1])]
    return order


@dataclass
class SideRun:
    rc: int
    frame: pd.DataFrame | None
    seconds: float
    log: Path
    tail: str = ""  # the log's last line, kept for the report after the log is gone
    only: frozenset | None = None  # an extra round's cases (ROW_KEY tuples); None: the whole sweep


def run_side(tree: Path, out: Path, run_args: list[str], seed: int, env: dict) -> SideRun:
    """One ``python -m suite run`` of a side's own tree; its rows (None if it wrote none)."""
    cmd = [sys.executable, "-m", "suite", "run", *run_args, "--out", str(out), "--seed", str(seed),
           "--reuse-ceilings", "--no-progress"]
    log = out.with_suffix(".log")
    t0 = time.monotonic()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    try:
        frame = store.read_file(out) if out.exists() else None
    except store.StoreError:
        frame = None
    return SideRun(rc, frame, time.monotonic() - t0, log, _tail(log))


def side_env(tree: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KSUITE_COMMIT", "KSUITE_DIRTY")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def orchestrate(trees: dict[str, Path], run_args: list[str], rounds: int, seed: int,
                envs: dict[str, dict], out_dir: Path, labels: dict[str, str],
                runner: Callable[..., SideRun] = run_side) -> dict[str, list[SideRun | None]]:
    """Every run of the schedule; a base that cannot run its warm-up is bad input."""
    runs: dict[str, list[SideRun | None]] = {s: [None] * (rounds + 1) for s in SIDES}
    for r, side in schedule(rounds):
        if r > 0 and runs["cand"][0].frame is None:
            break  # the candidate ran nothing: the warm-up already says all there is
        out = out_dir / f"{r:02d}-{side}.parquet"
        done = runs[side][r] = runner(trees[side], out, run_args, seed + r, envs[side])
        what = "warm-up" if r == 0 else f"round {r}/{rounds}"
        rows = 0 if done.frame is None else len(done.frame)
        ok = 0 if done.frame is None else int((done.frame["status"] == "ok").sum())
        print(f"ab: {what} {labels[side]}: {rows} rows ({ok} ok) in {done.seconds:.0f} s"
              + (f", exit {done.rc}: {done.tail}" if done.rc else ""), file=sys.stderr)
        if r == 0 and side == "base" and (done.frame is None or done.frame.empty):
            raise UsageError(f"{labels['base']} wrote no rows (exit {done.rc}): {done.tail}")
    return runs


# the run options that say what is swept; an extra round replaces them with its own cases
_SWEEP_OPTIONS = ("preset", "shape", "shapes", "workloads", "impls", "backends", "dtypes")


def extra_round_args(run_args: list[str], keys: list[tuple], shapes_file: Path) -> list[str]:
    """``suite run`` options that time only the cases ``keys`` (ROW_KEY tuples),
    under the protocol of ``run_args``: their shapes and dtypes per workload
    go to ``shapes_file`` (TOML), their implementations to --impls; every
    option but those that choose the sweep is kept as given."""
    from suite import runner

    p = argparse.ArgumentParser(add_help=False)
    runner.configure(p)
    given = vars(p.parse_known_args(run_args)[0])
    lines = []
    by_case: dict[tuple, set] = {}
    for wl, _impl, dtype, shape, _timer in keys:
        by_case.setdefault((wl, shape), set()).add(dtype)
    for (wl, shape), dtypes in sorted(by_case.items()):
        lines.append(f"[[{wl}]]")
        lines += [f"{k} = {int(v)}" for k, v in (kv.split("=", 1) for kv in shape.split(","))]
        lines.append("dtypes = [" + ", ".join(f'"{d}"' for d in sorted(dtypes)) + "]")
        lines.append("")
    shapes_file.write_text("\n".join(lines))
    kept = []
    for action in p._actions:
        if not action.option_strings or action.dest in _SWEEP_OPTIONS or action.dest == "help":
            continue
        value, flag = given.get(action.dest), action.option_strings[0]
        if value is None or value is False or value == [] or value == action.default:
            continue
        if value is True:
            kept.append(flag)
        elif isinstance(value, list):
            for v in value:
                kept += [flag, str(v)]
        else:
            kept += [flag, str(value)]
    return kept + ["--shapes", str(shapes_file), "--impls", ",".join(sorted({k[1] for k in keys}))]


def undecided(runs: dict[str, list[SideRun | None]], opt: compare.Options, looks: int = 1) -> list[tuple]:
    """The gated cases ok on both sides whose verdict is still unsure (see _combine)."""
    band = math.log1p(opt.threshold)
    keyed = {s: [_keyed(r.frame, r.only) if r is not None else {} for r in runs[s]] for s in SIDES}
    out = []
    for key in sorted(set().union(*keyed["base"], *keyed["cand"])):
        if not opt.gated(key[1]) or len(_pairs(keyed, key)) < 2:
            continue
        if _decide(keyed, key, band, looks) == "unsure":
            out.append(key)
    return out


def extra_rounds(trees: dict[str, Path], run_args: list[str], runs: dict[str, list[SideRun | None]],
                 max_rounds: int, seed: int, envs: dict[str, dict], out_dir: Path, labels: dict[str, str],
                 opt: compare.Options, runner: Callable[..., SideRun] = run_side) -> None:
    """Append rounds of the undecided cases to ``runs`` until none is left or
    ``max_rounds`` rounds are done, the first side alternating as before."""
    looks = _looks(len(runs["base"]) - 1, max_rounds)
    while len(runs["base"]) - 1 < max_rounds:
        keys = undecided(runs, opt, looks)
        if not keys:
            return
        r = len(runs["base"])
        shapes = out_dir / f"{r:02d}-undecided.toml"
        args = extra_round_args(run_args, keys, shapes)
        print(f"ab: round {r}/{max_rounds}: {len(keys)} undecided case(s) again", file=sys.stderr)
        for side in (SIDES if r % 2 else SIDES[::-1]):
            done = runner(trees[side], out_dir / f"{r:02d}-{side}.parquet", args, seed + r, envs[side])
            done.only = frozenset(keys)
            runs[side].append(done)
            rows = 0 if done.frame is None else len(done.frame)
            print(f"ab: round {r}/{max_rounds} {labels[side]}: {rows} rows in {done.seconds:.0f} s"
                  + (f", exit {done.rc}: {done.tail}" if done.rc else ""), file=sys.stderr)


def _tail(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"


# ---------------------------------------------------------------- verdicts
def fast_end(samples) -> float:
    """The FAST_Q quantile of a row's samples (nan where it kept none)."""
    try:
        x = np.asarray(samples, dtype=float)
    except (TypeError, ValueError):
        return math.nan
    if x.ndim != 1:
        return math.nan
    x = x[np.isfinite(x) & (x > 0)]
    return float(np.quantile(x, FAST_Q)) if len(x) else math.nan


def _keyed(frame: pd.DataFrame | None, only: frozenset | None = None) -> dict[tuple, tuple[str, float, float]]:
    """ROW_KEY tuple -> (status, ms_median, fast end) of a run's rows (of ``only``'s cases, where
    given); the fast end is the FAST_Q quantile of the row's samples, nan without them."""
    if frame is None:
        return {}
    f = frame.copy()
    for col in store.ROW_KEY:
        f[col] = f[col].fillna("").astype(str)
    samples = f["samples_ms"] if "samples_ms" in f.columns else [None] * len(f)
    out = {tuple(k): (str(s), float(m) if m == m else math.nan, fast_end(x) if x is not None else math.nan)
           for k, s, m, x in zip(zip(*(f[c] for c in store.ROW_KEY)), f["status"].fillna("error"),
                                 pd.to_numeric(f["ms_median"], errors="coerce"), samples)}
    return out if only is None else {k: v for k, v in out.items() if k in only}


def _status(runs: list[tuple[dict, frozenset | None]], key: tuple) -> str | None:
    """The side's worst status of the key over the runs meant to time it (an extra
    round only its own cases); "missing" where one of them lacks it."""
    seen = [run.get(key, ("missing", math.nan))[0] for run, only in runs if only is None or key in only]
    if all(s == "missing" for s in seen):
        return None
    rank = {**compare._STATUS_RANK, "missing": -1}
    return min(seen, key=lambda s: rank.get(s, 0))


def _settle_ms(frame: pd.DataFrame) -> float:
    """The --settle-ms of the runs behind ``frame`` (their run_args; 0 where none is recorded)."""
    if "run_args" not in frame.columns:
        return 0.0
    values = []
    for text in frame["run_args"].dropna().unique():
        try:
            values.append(float(json.loads(text).get("settle_ms") or 0.0))
        except (ValueError, TypeError, AttributeError):
            values.append(0.0)
    return min(values, default=0.0)


def power_note(frames: dict[str, pd.DataFrame]) -> list[str]:
    """A note where cases ran at the GPU's power limit with no settle before their samples:
    each then starts at the clock the cases before it left, which moves from round to round
    (docs/protocol.md, --settle-ms)."""
    if any(_settle_ms(f) > 0 for f in frames.values() if len(f)):
        return []
    capped = set()
    for f in frames.values():
        if len(f) and "clock_limits" in f.columns:
            hit = f[f["clock_limits"].fillna("").astype(str).str.contains("power", regex=False)]
            capped.update(zip(hit["workload"], hit["shape"], hit["dtype"]))
    if not capped:
        return []
    return [f"{len(capped)} case(s) ran at the GPU's power limit (clock_limits) with no --settle-ms: "
            "each started its samples at the clock the cases before it left, which moves from round "
            "to round; --settle-ms 300 makes the rounds comparable (docs/protocol.md)"]


def verdicts(runs: dict[str, list[SideRun | None]], opt: compare.Options, labels: dict[str, str],
             shas: dict[str, str], envs: dict[str, dict] | None = None, kept: bool = False,
             looks: int = 1) -> compare.Result:
    """``envs``: each side's extra environment (--base-env, --cand-env), for the notes;
    ``kept``: the runs' files stay (--out DIR), so the headings name them; ``looks``: how
    often a case could have been judged (1 + the extra rounds --max-rounds allowed), see _level."""
    keyed = {s: [_keyed(r.frame, r.only) if r is not None else {} for r in runs[s]] for s in SIDES}
    # A base run that wrote nothing is left out; a candidate's counts: it lost every row.
    done = {"base": [(k, r.only) for k, r in zip(keyed["base"], runs["base"])
                     if r is not None and r.frame is not None],
            "cand": [(k, r.only) for k, r in zip(keyed["cand"], runs["cand"]) if r is not None]}
    keys = sorted(set().union(*keyed["base"], *keyed["cand"]))
    band = math.log1p(opt.threshold)
    rows = []
    for key in keys:
        bs, cs = _status(done["base"], key), _status(done["cand"], key)
        row = _row(key, bs, cs, opt)
        if bs == "ok" and cs == "ok":
            row = _paired(row, keyed, key, band, opt, looks)
        else:
            row = _status_verdict(row, bs, cs)
        rows.append(row)
    frames = {s: pd.concat([r.frame for r in runs[s] if r is not None and r.frame is not None]
                           or [pd.DataFrame(columns=store.COLUMNS)], ignore_index=True) for s in SIDES}
    extra = sum(r is not None and r.only is not None for r in runs["cand"])
    notes = [f"{sum(r is not None and r.only is None for r in runs['cand']) - 1} round(s) after a "
             "warm-up, the first side alternating (AB, BA, ...); one seed per round for both sides",
             f"each verdict holds at {CONFIDENCE:.0%}: its median's and fast end's intervals are "
             f"{_level(looks, 2):.2%} ones ({_level(looks, 1):.2%} without samples), as it was "
             f"judged up to {looks} time(s)"]
    if extra:
        notes.append(f"{extra} extra round(s) of only the cases whose interval crossed "
                     f"+-{opt.threshold:.1%}")
    unsure = [r for r in rows if r["verdict"] == "unsure"]
    if unsure:
        notes.append(f"{len(unsure)} gated case(s) unsure: their interval still crosses "
                     f"+-{opt.threshold:.1%} after every round (listed; not a failure)")
    envs = envs or {}
    if shas["base"] == shas["cand"] and envs.get("base", {}) == envs.get("cand", {}):
        notes.append("both refs are the same commit: an A/A run, whose every change is noise")
    elif shas["base"] == shas["cand"]:
        notes.append("both refs are the same commit; the sides differ in their environment only: "
                     + "; ".join(f"{s} " + " ".join(f"{k}={v}" for k, v in envs.get(s, {}).items())
                                 for s in SIDES if envs.get(s)))
    failed = [f"{labels[s]} round {i}: exit {r.rc} ({r.tail})" for s in SIDES
              for i, r in enumerate(runs[s]) if r is not None and r.rc]
    notes += [f"run failed: {f}" for f in failed]
    notes += power_note(frames)
    notes += compare.environment_notes(frames["base"], frames["cand"], rows)
    if not any(r["ratio"] is not None or r["verdict"] in compare.LOSSES + ("fixed", "status")
               for r in rows):
        raise UsageError(f"nothing comparable: no case was ok on both sides in two or more rounds "
                         f"({len(keys)} cases seen)")
    cases = {s: pd.DataFrame([{"impl": k[1], "status": _status(done[s], k)} for k in keys],
                             columns=["impl", "status"]) for s in SIDES}
    base = _describe(labels["base"], frames["base"], shas["base"], kept)
    cand = _describe(labels["cand"], frames["cand"], shas["cand"], kept)
    return compare.Result(base, cand, False, notes, rows, compare.rollup(rows, cases["base"], cases["cand"]))


def _describe(label: str, frame: pd.DataFrame, sha: str, kept: bool) -> dict:
    gpus = sorted({str(g) for g in frame["gpu_name"].dropna()}) if len(frame) else []
    # a temporary folder's files are gone by the time the heading is printed
    files = sorted({Path(s).name for s in frame["source"].dropna()}) if kept and "source" in frame else []
    return {"label": label, "files": files, "gpus": gpus, "commits": [sha[:7]], "rows": int(len(frame)),
            "dirty": False}


def _row(key: tuple, bs: str | None, cs: str | None, opt: compare.Options) -> dict:
    row = dict(zip(store.ROW_KEY, key))
    row.update(base_status=bs, cand_status=cs, base_ms=None, cand_ms=None, base_sol=None,
               cand_sol=None, speedup=None, sol_ratio=None, ratio=None, band=None,
               band_source=None, ci=None, p_value=None, test=None, basis=None, reason="",
               regression=False, improvement=False, context=False, gated=opt.gated(key[1]),
               rounds=0)
    return row


def _status_verdict(row: dict, bs: str | None, cs: str | None) -> dict:
    gated = row["gated"]

    def flag(verdict: str, reason: str, bad: bool) -> dict:
        return {**row, "verdict": verdict, "reason": reason, "regression": bad and gated,
                "improvement": not bad and gated, "context": not gated}

    if bs is None:
        return {**row, "verdict": "new", "reason": "only in candidate"}
    if bs == "ok" and cs in (None, "missing"):
        return flag("missing", "no candidate row in " + ("any run" if cs is None else "some runs"), True)
    if cs is None or cs == "missing":
        return {**row, "verdict": "gone", "reason": f"{bs} in base, no candidate row"}
    if bs == "ok" and cs in compare.BAD_STATUS:
        return flag("broke", f"ok -> {cs}", True)
    if bs == "ok" and cs in compare.GONE_STATUS:
        return flag("lost", f"ok -> {cs}", True)
    if bs in compare.BAD_STATUS and cs == "ok":
        return flag("fixed", f"{bs} -> ok", False)
    if bs == cs:
        return {**row, "verdict": "same", "reason": f"{bs} in both"}
    return {**row, "verdict": "status", "reason": f"{bs} -> {cs}"}


def _pairs(keyed: dict, key: tuple, stat: int = MEDIAN) -> list[tuple[float, float]]:
    """(base, candidate) of ``stat`` (MEDIAN or FAST) in every timed round (the warm-up left
    out) where both are ok."""
    pairs = []
    for b, c in zip(keyed["base"][1:], keyed["cand"][1:]):
        b, c = b.get(key, ("missing", math.nan, math.nan)), c.get(key, ("missing", math.nan, math.nan))
        if b[0] == c[0] == "ok" and b[stat] > 0 and c[stat] > 0:
            pairs.append((b[stat], c[stat]))
    return pairs


def _judge(p, band: float) -> str:
    """One statistic's paired interval against the band: slower, faster, inside, or crosses."""
    if p.n < 2:
        return "crosses"
    if math.log(p.lo) > band:
        return "slower"
    if math.log(p.hi) < -band:
        return "faster"
    return "inside" if math.log(p.hi) <= band and math.log(p.lo) >= -band else "crosses"


def _combine(median: str, fast: str | None) -> str:
    """The case's verdict from its statistics' judgements (fast None: no samples kept):
    slower or faster where one statistic is and none says the opposite, the same where
    every one lies inside the band, else unsure (either crosses, or they disagree)."""
    seen = [median] + ([fast] if fast else [])
    for v, other in (("slower", "faster"), ("faster", "slower")):
        if v in seen and other not in seen:
            return v
    return "same" if all(j == "inside" for j in seen) else "unsure"


def _looks(rounds: int, max_rounds: int) -> int:
    """How often a case may be judged: after the ``rounds`` first rounds, then after
    each extra round up to ``max_rounds``."""
    return max_rounds - rounds + 1


def _level(looks: int, statistics: int) -> float:
    """The confidence of each interval that makes a case's verdict a CONFIDENCE one.

    A verdict says slower when either statistic's interval clears the band, and a case
    still unsure is judged again after each extra round until one does: each interval at
    95% would let identical code through as slower or faster far more often than 5% of
    the time on a noisy machine.  Bonferroni over the statistics and the looks bounds it."""
    return 1.0 - (1.0 - CONFIDENCE) / (max(looks, 1) * statistics)


def _stats(keyed: dict, key: tuple, looks: int = 1):
    """The median's and the fast end's paired intervals (the latter None where fewer than
    two rounds kept samples), each at _level."""
    fast_logs = [math.log(mc / mb) for mb, mc in _pairs(keyed, key, FAST)]
    level = _level(looks, 2 if len(fast_logs) >= 2 else 1)
    med = paired([math.log(mc / mb) for mb, mc in _pairs(keyed, key, MEDIAN)], level)
    fast = paired(fast_logs, level)
    return med, (fast if fast.n >= 2 else None)


def _decide(keyed: dict, key: tuple, band: float, looks: int = 1) -> str:
    med, fast = _stats(keyed, key, looks)
    return _combine(_judge(med, band), _judge(fast, band) if fast else None)


def _ci_text(p) -> str:
    return f"x{p.ratio:.4f}, time CI {p.lo:.4f}-{p.hi:.4f}"


def _paired(row: dict, keyed: dict, key: tuple, band: float, opt: compare.Options,
            looks: int = 1) -> dict:
    pairs = _pairs(keyed, key)
    p, fast = _stats(keyed, key, looks)
    row.update(rounds=p.n, band=opt.threshold, band_source="threshold", test="paired rounds")
    if p.n < 2:
        return {**row, "verdict": "same", "reason": f"{p.n} paired round(s): too few to judge"}
    med = lambda xs: float(pd.Series(xs).median())  # noqa: E731
    row.update(base_ms=med([b for b, _ in pairs]), cand_ms=med([c for _, c in pairs]),
               ratio=p.ratio, speedup=1.0 / p.ratio, ci=[1.0 / p.hi, 1.0 / p.lo])
    if fast:
        row.update(fast_ratio=fast.ratio, fast_ci=[1.0 / fast.hi, 1.0 / fast.lo])
    jm, jf = _judge(p, band), (_judge(fast, band) if fast else None)
    verdict = _combine(jm, jf)
    # which statistic decided, where the median alone did not
    by = "" if not fast or jf == jm else (
        f"; fast end (p{FAST_Q * 100:.0f} of each round's samples) {jf}: {_ci_text(fast)}; median {jm}")
    gated = row["gated"]
    if verdict in ("slower", "faster"):
        slower = verdict == "slower"
        return {**row, "verdict": verdict, "regression": slower and gated,
                "improvement": not slower and gated, "context": not gated,
                "reason": f"{p.n} rounds{by}"}
    if verdict == "same" or not gated:
        why = (f"within +-{opt.threshold:.1%}" if verdict == "same" else
               f"inconclusive: the interval crosses +-{opt.threshold:.1%}")
        return {**row, "verdict": "same", "reason": f"{why}; {p.n} rounds{by}"}
    return {**row, "verdict": "unsure",
            "reason": f"the interval crosses +-{opt.threshold:.1%} after {p.n} rounds{by}"}


# ---------------------------------------------------------------- the verb
@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (a cancelled CI job, timeout(1)) raises SystemExit(143) instead of ending the
    process on the spot, so that the side's run in flight is killed (subprocess.run does that
    on any exception) and the worktrees are removed, as after Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(args) -> int:
    from suite.compare_cli import parse_fraction

    args, run_args = split_args(args)
    if args.rounds < 2:
        raise UsageError(f"--rounds {args.rounds}: at least 2 rounds are needed for an interval")
    max_rounds = 2 * args.rounds if args.max_rounds is None else args.max_rounds
    if max_rounds < args.rounds:
        raise UsageError(f"--max-rounds {max_rounds} is below --rounds {args.rounds}")
    opt = compare.Options(threshold=parse_fraction(args.threshold), gate=args.gate,
                          fail_on_improvement=args.fail_on_improvement)
    check_run_args(run_args)
    envs = {"base": _env_pairs(args.base_env, "--base-env"), "cand": _env_pairs(args.cand_env, "--cand-env")}
    repo = Path(_git(args.repo or Path.cwd(), "rev-parse", "--show-toplevel"))
    refs = {"base": args.base_ref, "cand": args.cand_ref}
    shas = {s: resolve(repo, ref) for s, ref in refs.items()}
    labels = {s: f"{s} {refs[s]} ({shas[s][:7]})" for s in SIDES}
    warning = uncommitted_warning(repo, shas)
    if warning:
        print(warning, file=sys.stderr)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**30)
    trees = Worktrees(repo)
    out_dir = args.out or trees.root / "runs"  # the temporary one goes with the worktrees
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with _terminate_as_exit():
            paths = {s: trees.add(s, shas[s]) for s in SIDES}
            side_envs = {s: side_env(paths[s], envs[s]) for s in SIDES}
            runs = orchestrate(paths, run_args, args.rounds, seed, side_envs, out_dir, labels)
            if runs["cand"][0] is not None and runs["cand"][0].frame is not None:
                extra_rounds(paths, run_args, runs, max_rounds, seed, side_envs, out_dir, labels, opt)
    finally:
        trees.close()
    looks = _looks(args.rounds, max_rounds)
    result = verdicts(runs, opt, labels, shas, envs, kept=args.out is not None, looks=looks)
    code = compare.exit_code([result], opt)
    intro = (f"A/B on one GPU: {labels['base']} vs {labels['cand']}, {args.rounds} rounds after a "
             f"warm-up. A case changes when its paired-round time ratio lies wholly outside "
             f"+-{opt.threshold:.1%} at {CONFIDENCE:.0%} confidence. Gated: "
             + ("every implementation" if opt.gate == "all" else
                "our own implementations (triton, cuda, plugins)") + ".\n")
    compare_render.emit([result], opt, args.format, code, show_all=args.all, intro=intro)
    return code
