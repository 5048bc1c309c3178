"""``python -m suite compare``: its options, and the verb that compares and prints.

suite.compare does the comparison and suite.compare_render prints it; this
module is the only one that uses both (with suite.ab, which prints alike).
"""
from __future__ import annotations

import pandas as pd

from suite import compare, compare_render
from suite.shards import refuse_incomplete
from suite.args import UsageError
from suite.compare_stats import BAND_Z, PRIOR_SIGMA

TEST_HELP = (
    "A time change counts when it lies outside the case's band and a two-sided Mann-Whitney U "
    "test on the samples gives p < --alpha. The band is the widest of --threshold, "
    f"{BAND_Z:g} standard errors of the log ratio from the case's between-run spread (its runs on "
    "either side, its earlier runs on the same GPU and protocol under --history, and a prior of "
    "--run-spread that this evidence outweighs), and half the p20-p80 width of its samples (the "
    "floor of short kernels); each verdict shows its band. Our own implementations (triton, cuda, "
    "plugins) are gated; eager, torch and compile are reported as context (--gate all gates "
    "them too). Losses are regressions: ok -> incorrect, error, unsupported or unavailable, and "
    "an ok case with no candidate row although the candidate's sweep (its workloads, backends, "
    "shapes and dtypes) covers it. When the GPUs differ the verdict is taken on SOL. Cases timed "
    "with a different timer or l2 are not comparable. Exit 0: no regression; 1: a regression; "
    "2: bad input (a folder or glob of shards with one missing or held twice, for one), or no "
    "case to compare.")


def configure(p) -> None:
    p.description = (p.description or "") + ". " + TEST_HELP
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="BASE CANDIDATE (files, folders or quoted globs); one set with --by; "
                        "CANDIDATE alone with --baselines")
    p.add_argument("--by", choices=("gpu", "commit"),
                   help="compare the groups of one set of runs against the first (or --base) group")
    p.add_argument("--base", help="with --by: the group to compare against (GPU name or commit)")
    p.add_argument("--baselines", metavar="ROOT",
                   help="the base of each case is the newest row of the same case, GPU and "
                        "protocol among the runs under ROOT (e.g. results/); ROOT is the history too")
    p.add_argument("--history", action="append", default=[], metavar="PATH",
                   help="earlier runs (files, folders, globs; repeatable) whose rows of a case on the "
                        "same GPU and l2 estimate its between-run spread")
    p.add_argument("--threshold", default="5%",
                   help="smallest change that counts, as 5%% or 0.05 (default 5%%)")
    p.add_argument("--run-spread", default=f"{PRIOR_SIGMA:.0%}",
                   help="between-run spread of one run's median assumed where a case has no "
                        f"evidence, as 2%% or 0.02 (default {PRIOR_SIGMA * 100:.0f}%%)")
    p.add_argument("--floor-us", type=float, default=0.0,
                   help="an absolute floor in microseconds on top of the band (default 0: the "
                        "samples' spread sets the floor)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="significance level of the U test (default 0.01)")
    p.add_argument("--gate", choices=("own", "all"), default="own",
                   help="own (default): regressions of triton, cuda and plugins fail; all: of "
                        "eager, torch and compile too")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                   help="table (default): rich tables for a terminal; markdown: a pull-request "
                        "comment, stored text escaped; json: every verdict with its numbers, for scripts")
    p.add_argument("--all", action="store_true", help="table: list unchanged cases too")
    p.add_argument("--fail-on-improvement", action="store_true",
                   help="exit 1 on a significant improvement too (to force a baseline refresh)")


def parse_fraction(text: str, what: str = "--threshold") -> float:
    t = str(text).strip()
    try:
        v = float(t.rstrip("%"))
    except ValueError:
        raise UsageError(f"{what} {text!r}: give a percentage such as 5% or a fraction such as 0.05")
    v = v / 100.0 if t.endswith("%") or v >= 1.0 else v
    if not 0 <= v < 10:
        raise UsageError(f"{what} {text!r} is out of range")
    return v


def parse_threshold(text: str) -> float:
    return parse_fraction(text, "--threshold")


def options(args) -> compare.Options:
    if not 0 < args.alpha < 1:  # NaN too
        raise UsageError(f"--alpha {args.alpha:g}: expected a significance level between 0 and 1, e.g. 0.01")
    if not args.floor_us >= 0 or args.floor_us == float("inf"):
        raise UsageError(f"--floor-us {args.floor_us:g}: expected 0 or more microseconds")
    return compare.Options(parse_threshold(args.threshold), args.floor_us, args.alpha,
                           args.fail_on_improvement, args.gate,
                           parse_fraction(args.run_spread, "--run-spread"))


def _whole(paths, what: str) -> pd.DataFrame:
    """The runs under ``paths``; a folder or glob of shards must hold each shard once."""
    df = compare.load(paths, what)
    refuse_incomplete(df, paths, what)
    return df


def main(args) -> int:
    opt = options(args)
    if args.base and not args.by:
        raise UsageError(f"--base {args.base} names the group that --by compares against; give --by gpu "
                         "or --by commit with one set of runs, or BASE CANDIDATE without --base")
    history = None
    if args.baselines:
        if args.by or len(args.paths) != 1:
            raise UsageError(f"--baselines ROOT takes one CANDIDATE (got {len(args.paths)} paths)"
                             + (" and no --by" if args.by else ""))
        stored = compare.load([args.baselines], f"--baselines {args.baselines}")
        cand = compare.Side("candidate", _whole(args.paths, "CANDIDATE"))
        pairs = [(compare.per_case_base(cand.frame, stored, args.baselines), cand)]
        history = stored
    elif args.by:
        if not args.paths:
            raise UsageError("--by needs a set of runs (files, folders or globs)")
        pairs = compare.split(_whole(args.paths, "runs"), args.by, args.base)
    else:
        if len(args.paths) != 2:
            raise UsageError(f"give BASE and CANDIDATE (got {len(args.paths)} paths; quote globs), "
                             "one set with --by gpu|commit, or CANDIDATE with --baselines ROOT")
        pairs = [(compare.Side("base", _whole([args.paths[0]], "BASE")),
                  compare.Side("candidate", _whole([args.paths[1]], "CANDIDATE")))]
    if args.history:
        more = compare.load(args.history, "--history")
        history = more if history is None else pd.concat([history, more], ignore_index=True)
    results = [compare.compare(b, c, opt, history) for b, c in pairs]
    code = compare.exit_code(results, opt)
    compare_render.emit(results, opt, args.format, code, show_all=args.all)
    return code
