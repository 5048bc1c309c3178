"""python -m suite VERB ...: one small CLI over the harness.

Each verb lives in the module that does the work, as a ``configure(parser)``
and a ``main(args) -> exit code`` pair, imported only when that verb runs, so
``python -m suite list`` never imports streamlit and ``run`` works on a
machine that has no dashboard packages.
"""
from __future__ import annotations

import argparse
import importlib
import shlex
import sys

from suite.args import Parser, UsageError, refusal

# verb -> (module, configure attr, main attr, one-line help)
VERBS = {
    "run": ("suite.runner", "configure", "main",
            "sweep cases x implementations, check against float64, time, store Parquet"),
    "list": ("suite.listing", "configure", "main",
             "the workloads x implementations matrix, with availability and reasons"),
    "show": ("suite.summary", "configure", "main", "print the summary table of existing runs"),
    "shards": ("suite.shards", "configure", "main",
               "name the missing or duplicated shards of sharded runs; exit 1 if any"),
    "report": ("suite.report", "configure", "main",
               "print Markdown tables of runs (the results documents under docs/ are its output)"),
    "ceilings": ("suite.ceilings", "configure", "main",
                 "measure (or show cached) copy bandwidth and matmul rate of this device"),
    "compare": ("suite.compare_cli", "configure", "main",
                "compare runs (commit vs commit, GPU vs GPU); exit 1 on regression"),
    "ab": ("suite.ab", "configure", "main",
           "time two git refs in alternating rounds on one GPU; exit 1 on regression"),
    "dashboard": ("dashboard.launch", "configure", "main", "serve the Streamlit dashboard on localhost"),
    "import-pytest-benchmark": ("suite.interop", "configure_import", "main_import",
                                "turn saved pytest-benchmark JSON into rows of the suite's schema"),
    "export": ("suite.interop", "configure_export", "main_export",
               "export runs for github-action-benchmark or bencher"),
}


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m suite",
        description="kernel-suite: GPU kernels on the roofline. Each verb has its own --help.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name, (module, configure, _, help_text) in VERBS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == verb:
            getattr(importlib.import_module(module), configure)(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        # every option belongs to a verb: an option's value would otherwise read as the verb
        print(f"error: {_verb_first(argv)}", file=sys.stderr)
        return 2
    verb = argv[0] if argv and not argv[0].startswith("-") else None
    if verb is not None and verb not in VERBS:
        print(f"error: unknown verb {verb!r}; choose from {', '.join(VERBS)}", file=sys.stderr)
        return 2
    try:
        parser = build_parser(verb)
    except ImportError as exc:
        print(f"error: {verb} needs a package that is not installed: {exc}", file=sys.stderr)
        return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named after the verb, whose --help lists its options
        print(refusal(f"{parser.prog} {args.verb}", f"unrecognized arguments: {' '.join(unknown)}"),
              file=sys.stderr)
        return 2
    if args.verb is None:
        parser.print_help()
        return 0
    module, _, main_attr, _ = VERBS[args.verb]
    try:
        return int(getattr(importlib.import_module(module), main_attr)(args) or 0)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _verb_first(argv: list[str]) -> str:
    """What to type instead of options given before the verb."""
    verb = next((a for a in argv if a in VERBS), None)
    if verb is None:
        return f"put the verb first: python -m suite VERB {shlex.join(argv)}; choose from {', '.join(VERBS)}"
    rest = list(argv)
    rest.remove(verb)
    return f"put the verb first: python -m suite {shlex.join([verb, *rest])}"
