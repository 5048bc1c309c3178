"""Values from Parquet files, plugins or the command line, made inert before they are printed.

rich reads ``[...]`` in any string it prints as markup: a stored error text
holding ``[/]`` raises, and ``[link=...]`` prints as a hyperlink.  Markdown (the
comparison posted on a pull request) renders links, images and HTML.  ``rich_text``
and ``md_text`` make such a value print as the characters it holds.  ``figure`` prints a
rate with at least two significant digits, whatever its size.
"""
from __future__ import annotations

import re

from rich.markup import escape

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~#&])")


def rich_text(value) -> str:
    """``value`` as a string that rich prints literally (its markup brackets escaped)."""
    return escape(str(value))


def md_text(value) -> str:
    """``value`` as Markdown that renders as its own characters: no link, image, HTML tag,
    emphasis or table cell break (each Markdown-special character backslash-escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", str(value).replace("\n", " "))


def figure(x: float, spec: str) -> str:
    """``x`` in ``spec``, except that where ``.0f`` or ``.1f`` would keep fewer than two
    significant digits (a CPU's rates: 1.4 GB/s, 0.012 TFLOP/s) it keeps two."""
    decimals = {".0f": 0, ".1f": 1}.get(spec)
    if decimals is not None and 0 < abs(x) < 10 ** (1 - decimals):
        spec = ".2g"
    return format(x, spec)
