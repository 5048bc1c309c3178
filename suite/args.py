"""What the verbs share for reading their arguments: the parser, the usage error and list parsing.

A verb's module imports these from here, never from suite.cli, which imports
the verbs' modules by name: the CLI depends on the verbs and not the reverse.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse's own refusals (a missing value, a bad type or choice, a missing positional)
    as one line naming the verb's --help and exit code 2, as a UsageError is; the usage
    block is left to --help.  ``add_subparsers`` makes each verb's parser of this class too."""

    def error(self, message: str):
        self.exit(2, refusal(self.prog, message) + "\n")


def refusal(prog: str, message: str) -> str:
    """The line that refuses a command line of ``prog`` (e.g. python -m suite run)."""
    return f"error: {message} (see {prog} --help)"


def csv_list(text: str | None) -> list[str] | None:
    """A comma-separated option as its non-empty items ([] for an empty one), or None when not given."""
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def choose(given: list[str] | None, valid: list[str], what: str) -> list[str] | None:
    """``given`` in its order, each name once, when every item is in ``valid``, else
    UsageError naming the choices (a name listed twice would run, or match, twice)."""
    if given is None:
        return None
    if not given:  # an option given as "" or ",": refused, not read as no filter at all
        raise UsageError(f"no {what} given (an empty list); choose from {', '.join(valid)}")
    bad = [g for g in given if g not in valid]
    if bad:
        raise UsageError(f"unknown {what} {', '.join(map(repr, bad))}; choose from {', '.join(valid)}")
    return list(dict.fromkeys(given))


def writable_file(path, option: str = "--out", example: str = "run.parquet") -> Path:
    """``path`` as a file that can be written: not a folder, its folder made now (so a bad
    path stops a verb before its work, not when it writes), that folder writable."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{option} {out}: a folder; name the file to write, e.g. {out / example}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot make its folder ({exc.strerror or exc})") from None
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"{option} {out}: its folder {out.parent} is not writable")
    return out
