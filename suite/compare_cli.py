"""``python -m suite compare``: its options, and the verb that compares and prints.

suite.compare does the comparison and suite.compare_render prints it; this
module is the only one that uses both.
"""
from __future__ import annotations

import sys

from suite import compare, compare_render
from suite.args import UsageError

TEST_HELP = ("A change counts only when |ratio of medians - 1| exceeds --threshold, the absolute "
             "change exceeds --floor-us, and a two-sided Mann-Whitney U test on the raw samples "
             "(scipy.stats.mannwhitneyu when scipy is installed, else a built-in normal "
             "approximation with tie correction) gives p < --alpha. Rows with fewer than 3 "
             "samples fall back to requiring disjoint p20-p80 ranges, and rows with neither to "
             "the threshold alone. ok -> incorrect/error is a regression whatever the times, and "
             "so is any candidate row timed faster than its roof allows (status suspect). "
             "When the GPUs differ the verdict is taken on SOL (time over each run's own "
             "roofline bound). Cases timed with a different timer or l2 (L2 eviction) are listed "
             "as not comparable. Exit 0: no regression; 1: a regression; 2: bad input.")


def configure(p) -> None:
    p.description = (p.description or "") + ". " + TEST_HELP
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="BASE CANDIDATE (files, folders or quoted globs); or one set with --by")
    p.add_argument("--by", choices=("gpu", "commit"),
                   help="compare the groups of one set of runs against the first (or --base) group")
    p.add_argument("--base", help="with --by: the group to compare against (GPU name or commit)")
    p.add_argument("--threshold", default="5%",
                   help="smallest change that counts, as 5%% or 0.05 (default 5%%)")
    p.add_argument("--floor-us", type=float, default=1.0,
                   help="smallest absolute change that counts, in microseconds (default 1)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="significance level of the U test (default 0.01)")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    p.add_argument("--all", action="store_true", help="table: list unchanged cases too")
    p.add_argument("--fail-on-improvement", action="store_true",
                   help="exit 1 on a significant improvement too (to force a baseline refresh)")
    p.add_argument("--baseline-for", metavar="RUN",
                   help="print the newest run under PATHS (default results/) on RUN's GPU and "
                        "timer, or nothing with a notice on stderr when there is none; exit 0")


def parse_threshold(text: str) -> float:
    t = str(text).strip()
    try:
        v = float(t.rstrip("%"))
    except ValueError:
        raise UsageError(f"--threshold {text!r}: give a percentage such as 5% or a fraction such as 0.05")
    v = v / 100.0 if t.endswith("%") or v >= 1.0 else v
    if not 0 <= v < 10:
        raise UsageError(f"--threshold {text!r} is out of range")
    return v


def main(args) -> int:
    if args.baseline_for:
        found, what = compare.newest_baseline(args.baseline_for, args.paths or ["results"])
        if found is None:
            print(f"notice: no baseline run for {what} under {', '.join(args.paths or ['results'])}",
                  file=sys.stderr)
        else:
            print(found)
        return 0
    opt = compare.Options(parse_threshold(args.threshold), args.floor_us, args.alpha,
                          args.fail_on_improvement)
    if args.by:
        if not args.paths:
            raise UsageError("--by needs a set of runs (files, folders or globs)")
        pairs = compare.split(compare.load(args.paths, "runs"), args.by, args.base)
    else:
        if len(args.paths) != 2:
            raise UsageError(f"give BASE and CANDIDATE (got {len(args.paths)} paths; quote globs), "
                             "or one set with --by gpu|commit")
        pairs = [(compare.Side("base", compare.load([args.paths[0]], "BASE")),
                  compare.Side("candidate", compare.load([args.paths[1]], "CANDIDATE")))]
    results = [compare.compare(b, c, opt) for b, c in pairs]
    code = compare.exit_code(results, opt)
    compare_render.emit(results, opt, args.format, code, show_all=args.all)
    return code
